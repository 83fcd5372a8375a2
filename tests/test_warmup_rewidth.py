"""The ``gamma="auto"`` warm-up's kernel changes on the compiled path against the NumPy path.

During the first :data:`~streamk.learners.base.AUTO_WINDOW` learned rows the kernel's width
is re-estimated some thirty times. Each change re-binds the per-event core
(``_event.pyx``'s ``_fold_warm``) and, under a Projectron, rebuilds its ``P = K(S, S)^-1``
for the new width: for a plain RBF in C inside the core (``_projectron_rewidth``), with the
compiled rebuild's steps, instead of ``Projectron.prepare``. The NumPy path (``accel.core =
None``) is the oracle: the same prequential predictions, support ids, coefficients to
rounding and policy state, for every budget policy × kernel (``"auto"`` widths, a kernel
without a width, a sum run as a program) × binary / multiclass × ``learn_one`` /
``learn_many`` / ``learn_predict_many``; and a snapshot taken mid-warm-up, restored and
continued, gives the uninterrupted model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamk import (
    Forgetron,
    KernelPerceptron,
    Laplacian,
    Linear,
    Merge,
    Polynomial,
    Product,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    Sum,
    accel,
)
from streamk.budget import Projectron
from streamk.budget.projectron import KEEP_FROM
from streamk.kernels import RBF
from tests.model_state import learn_block
from tests.test_event_rows import needs_core

pytestmark = needs_core

KERNELS = {
    "rbf-auto": lambda: RBF(gamma="auto"),
    "laplacian-auto": lambda: Laplacian(gamma="auto"),
    "poly": lambda: Polynomial(degree=2, scale=0.2, offset=1.0),
    "linear": lambda: Linear(),
    "sum-auto": lambda: Sum(RBF(gamma="auto"), Linear()),
    "product": lambda: Product(RBF(gamma=0.5), Polynomial(degree=2, scale=0.2, offset=1.0)),
}
POLICIES = {
    "unbounded": lambda: None,
    "oldest": lambda: RemoveOldest(25),
    "random": lambda: RemoveRandom(25, seed=3),
    "smallest": lambda: RemoveSmallest(25),
    "forgetron": lambda: Forgetron(25),
    "projectron": lambda: Projectron(25),
    "projectron-big": lambda: Projectron(400),  # P grows through the warm-up, never full
    "merge": lambda: Merge(25),
}
METHODS = ("learn_one", "learn_many", "learn_predict_many")
CASES = [
    (policy, kernel, classes, method)
    for policy in sorted(POLICIES)
    for kernel in sorted(KERNELS)
    for classes in (2, 3)
    for method in METHODS
    if not (policy == "merge" and kernel != "rbf-auto")  # Merge: RBF only
]
#: blocks that cut the warm-up between and at its re-estimates (rows 1-10, then tens)
BLOCKS = [(0, 7), (7, 95), (95, 230), (230, 320)]


def _stream(classes: int, n: int = 320, seed: int = 5) -> tuple[pd.DataFrame, list]:
    """A noisy non-linear stream off the origin (the width moves much in the warm-up);
    with 3 classes the third appears inside a block, mid-warm-up."""
    rng = np.random.default_rng(seed)
    X = rng.normal(0.5, 1.5, size=(n, 5)) * np.array([1.0, 3.0, 0.5, 1.0, 2.0])
    score = np.sin(X[:, 0]) + 0.3 * X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(n)
    if classes == 2:
        y = (score > 0).tolist()
    else:
        codes = np.digitize(score, [-0.4, 0.6])
        y = [int(c) if i >= 120 else min(int(c), 1) for i, c in enumerate(codes)]
    return pd.DataFrame(X, columns=list("abcde")), y


def _learn(model, X: pd.DataFrame, y: list, method: str, blocks=BLOCKS) -> list:
    """The blocks by ``method`` (``learn_one``: row by row, predicting each first), then
    the answers on a probe."""
    said = [p for a, b in blocks for p in learn_block(model, X, y, a, b, method)]
    said.extend(model.predict_many(X.iloc[::17]).tolist())
    return said


def _same(fast, slow) -> None:
    """The same support set (ids; rows and coefficients to rounding: 1e-9 of the largest
    coefficient, as the Projectron's updates add up terms of that size), counters, width and
    policy state."""
    a, b = fast.support_, slow.support_
    assert a.n == b.n and a.next_id == b.next_id
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_allclose(a.X, b.X, rtol=1e-9, atol=1e-12)  # Merge builds rows
    scale = float(np.abs(b.coef).max(initial=1.0))
    rtol = 1e-7 if type(fast._policy) is Forgetron else 1e-9  # (tests/test_event_rows.py)
    np.testing.assert_allclose(a.coef, b.coef, rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(a.kdiag, b.kdiag, rtol=1e-12)
    assert fast.kernel_ == slow.kernel_  # the same width, to the bit
    for name in ("n_learned", "n_mistakes", "classes_"):
        assert getattr(fast, name) == getattr(slow, name), name
    pf, ps = fast._policy.state(), slow._policy.state()
    assert pf.keys() == ps.keys()
    for key in pf:  # remove-random's generator exactly; Q, Projectron's inverse to rounding
        if isinstance(pf[key], (float, np.ndarray)):  # (of its largest entry: P = K^-1 of a
            big = float(np.abs(ps[key]).max(initial=1.0))  # set near-singular in places)
            np.testing.assert_allclose(pf[key], ps[key], rtol=1e-7, atol=1e-7 * big)
        else:
            assert pf[key] == ps[key], key


def _make(policy: str, kernel: str) -> KernelPerceptron:
    return KernelPerceptron(kernel=KERNELS[kernel](), budget=POLICIES[policy]())


def learned_alike(make, classes: int, method: str) -> tuple:
    """``make()``'s model given the stream by ``method`` on the compiled path and on the
    NumPy path (the oracle, ``accel.core = None``): asserts the two said the same and
    returns both models, compiled first."""
    X, y = _stream(classes)
    fast = make()
    said = _learn(fast, X, y, method)
    core, accel.core = accel.core, None
    try:
        slow = make()
        said_slow = _learn(slow, X, y, method)
    finally:
        accel.core = core
    assert said == said_slow
    return fast, slow


#: also at e4bddca, before the warm-up's rebuilds moved into the core (not this path: a sum
#: is a program, its P is rebuilt by ``prepare``): the compiled Projectron's coefficients
#: drift up to 8e-8 relative from NumPy's on this 112-vector set, near-singular in places
_KNOWN = {("projectron-big", "sum-auto", 3, m) for m in ("learn_many", "learn_predict_many")}


def cases(known: set) -> list:
    """:data:`CASES`, those in ``known`` marked as a strict expected failure."""
    drift = pytest.mark.xfail(strict=True, reason="known drift")
    return [pytest.param(*c, marks=drift) if c in known else c for c in CASES]


@pytest.mark.parametrize(("policy", "kernel", "classes", "method"), cases(_KNOWN))
def test_the_warm_up_on_the_compiled_path_equals_numpy(policy, kernel, classes, method):
    _same(*learned_alike(lambda: _make(policy, kernel), classes, method))


@pytest.mark.parametrize("method", ["learn_one", "learn_many"])
def test_the_projectron_rebuilds_p_inside_the_core_in_the_warm_up(method, monkeypatch):
    """Under a plain RBF the warm-up's rebuilds of ``P`` for a set below ``KEEP_FROM``
    vectors run in the core: ``prepare``'s rebuild (``Projectron._rebuild``) is left to the
    first rows (``P`` allocated), to those the core hands back (a new label) and to the
    sets whose dots the policy keeps between rebuilds. (``learn_predict_many`` learns the
    warm-up run by run through ``compiled.margin_run``, which calls ``prepare``.)"""
    calls = []
    rebuild = Projectron._rebuild

    def counted(self, support, rows=0):
        calls.append(support.n)
        return rebuild(self, support, rows)

    X, y = _stream(2)
    monkeypatch.setattr(Projectron, "_rebuild", counted)
    core, accel.core = accel.core, None
    try:
        _learn(_make("projectron-big", "rbf-auto"), X, y, method, [(0, 200)])
    finally:
        accel.core = core
    small = [n for n in calls if n < KEEP_FROM]
    calls.clear()
    _learn(_make("projectron-big", "rbf-auto"), X, y, method, [(0, 200)])
    assert len(small) >= 12  # the warm-up rebuilds P again and again on the NumPy path
    assert len([n for n in calls if n < KEEP_FROM]) <= 4, calls
    assert any(n >= KEEP_FROM for n in calls)  # those rebuilds keep prepare's kept dots


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("policy", ["projectron", "projectron-big", "oldest", "merge"])
@pytest.mark.parametrize("cut", [5, 95, 131])
def test_a_snapshot_mid_warm_up_continues_as_the_uninterrupted_model(policy, cut, method):
    X, y = _stream(2)
    whole = _make(policy, "rbf-auto")
    said = _learn(whole, X, y, method, [(0, cut), (cut, 320)])
    first = _make(policy, "rbf-auto")
    said_first = _learn(first, X, y, method, [(0, cut)])
    assert first._warming_up
    resumed = KernelPerceptron.from_state(first.state())
    said_rest = _learn(resumed, X, y, method, [(cut, 320)])
    probe = len(X.iloc[::17])
    assert said_first[: len(said_first) - probe] + said_rest == said
    _same(resumed, whole)
