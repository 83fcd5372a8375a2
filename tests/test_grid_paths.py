"""The compiled block passes against the NumPy path, over the learner × budget × kernel grid.

For every combination the oracle is the NumPy path (``streamk.accel.core`` switched off, as
``STREAMK_NO_ACCEL=1`` does) learning the same stream one event at a time with
``learn_one``: the compiled ``learn_many`` must make the same predictions after every block
and end with the same support set (rows, ids, coefficients to rounding) and the same
policy state. :data:`streamk.learners.fastpass.COUNTS` says which path a combination took:
a combination with a compiled pass must take it, one without must fall back (and agree).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamk import (
    RBF,
    Forgetron,
    KernelAdatron,
    KernelPerceptron,
    Laplacian,
    Linear,
    MarginPerceptron,
    Merge,
    Normalized,
    OnlineRanker,
    Polynomial,
    Product,
    Projectron,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    Scaled,
    Sum,
    accel,
)
from streamk.kernels import Kernel
from streamk.learners import fastpass

pytestmark = pytest.mark.skipif(accel.core is None, reason="the compiled core is not built")


class Cubic(Kernel):
    """A user's own kernel: no program describes it (streamk/kernels/program.py), so the
    per-event core declines it and the block passes take its columns from the Gram."""

    def _gram(self, A, B, a_sq, b_sq):
        return (0.3 * (A @ B.T) + 1.0) ** 3

    def diag(self, A):
        return (0.3 * np.einsum("ij,ij->i", A, A) + 1.0) ** 3


KERNELS = {
    "rbf": lambda: RBF(gamma=0.4),
    "rbf-auto": lambda: RBF(gamma="auto"),
    "laplacian": lambda: Laplacian(gamma=0.3),
    "poly": lambda: Polynomial(degree=2, scale=0.2, offset=1.0),
    "linear": lambda: Linear(),
    "scaled-laplacian": lambda: Scaled(Laplacian(gamma=0.3), 2.0),
    "sum": lambda: Sum(RBF(gamma=0.4), Linear()),
    "product": lambda: Product(RBF(gamma=0.2), Polynomial(degree=2, scale=0.1)),
    "normalized-poly": lambda: Normalized(Polynomial(degree=3, scale=0.3)),
    "own": lambda: Cubic(),
}
#: name -> (factory, whether a compiled pass exists for it)
POLICIES = {
    "unbounded": (lambda: None, True),
    "oldest": (lambda: RemoveOldest(40), True),
    "random": (lambda: RemoveRandom(40, seed=3), True),
    "forgetron": (lambda: Forgetron(40), True),
    "projectron": (lambda: Projectron(40), False),
    "merge": (lambda: Merge(40), False),
    "smallest": (lambda: RemoveSmallest(40), True),
}
LEARNERS = {
    "perceptron": lambda k, b: KernelPerceptron(kernel=k, budget=b),
    "margin": lambda k, b: MarginPerceptron(kernel=k, budget=b, margin=0.5),
    "ranker": lambda k, b: OnlineRanker(kernel=k, ranks=(0, 1, 2, 3, 4), budget=b),
}
#: combinations: the per-event core runs them as programs, learn_many included
PROGRAM_KERNELS = {"sum", "product", "normalized-poly"}
GRAM_KERNELS = {"own"}  # columns from the block's Gram matrix
#: kernels whose compiled learn_many runs untracked (fastpass.perceptron_rows/ranker_rows):
#: computed in C, and (the perceptrons) no float32 hint pass of their own
UNTRACKED_KERNELS = {"laplacian", "poly", "linear", "scaled-laplacian"}


def event_core_takes(kernel: str, policy: str) -> bool:
    """Whether ``learn_many``'s per-event core (``EventPass.learn_rows``) learns the rows no
    block pass takes: every vector kernel but a user's own (the combinations as programs,
    streamk/kernels/program.py), every policy, Merge with a plain RBF kernel only."""
    if kernel in GRAM_KERNELS:
        return False
    return policy != "merge" or kernel.startswith("rbf")


def _stream(n: int, classes: int, seed: int = 0) -> tuple[pd.DataFrame, list]:
    """A noisy non-linear stream (many mistakes, so the budget fills and turns over);
    ``classes=5``: ranks 0-4, the score cut at its quintiles."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 4))
    score = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(n)
    if classes == 2:
        y = (score > 0).tolist()
    elif classes == 5:
        y = np.searchsorted(np.quantile(score, [0.2, 0.4, 0.6, 0.8]), score).tolist()
    else:  # a third class appears only after the first 300 rows, inside a block
        y = np.digitize(score, [-0.5, 0.5]).tolist()
        y = [min(c, 1) if i < 300 else c for i, c in enumerate(y)]
    return pd.DataFrame(X, columns=["a", "b", "c", "d"]), y


def _learn_one_numpy(model, X: pd.DataFrame, y: list, blocks: list, probe: pd.DataFrame):
    """The oracle: NumPy path, one event at a time; predictions on ``probe`` per block."""
    core = accel.core
    accel.core = None
    try:
        rows = X.to_dict(orient="records")
        preds = []
        for a, b in blocks:
            for x, label in zip(rows[a:b], y[a:b]):
                model.learn_one(x, label)
            preds.append(model.predict_many(probe).tolist())
    finally:
        accel.core = core
    return preds


def _prequential_numpy(model, X: pd.DataFrame, y: list) -> list:
    """The oracle of test-then-train: ``predict_one`` then ``learn_one`` on each event, on
    the NumPy path; the predictions."""
    core, accel.core = accel.core, None
    try:
        said = []
        for x, label in zip(X.to_dict(orient="records"), y):
            said.append(model.predict_one(x))
            model.learn_one(x, label)
    finally:
        accel.core = core
    return said


def _same_support(fast, slow) -> None:
    """The same vectors and ids, rows and coefficients to rounding (Merge builds rows; the
    Forgetron's shrink cancels in the 9th digit): what every learner's model shares."""
    sf, ss = fast.support_, slow.support_
    assert sf.n == ss.n
    np.testing.assert_array_equal(sf.ids, ss.ids)
    np.testing.assert_allclose(sf.X, ss.X, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sf.coef, ss.coef, rtol=1e-7, atol=1e-12)


def _same_model(fast, slow) -> None:
    sf, ss = fast.support_, slow.support_
    assert sf.n == ss.n
    assert fast.n_mistakes == slow.n_mistakes
    np.testing.assert_array_equal(sf.ids, ss.ids)
    np.testing.assert_allclose(sf.X, ss.X, rtol=1e-9, atol=1e-12)  # Merge builds rows
    # The Forgetron's shrink factor solves a quadratic whose coefficient a = |c|^2 - 2 c.f
    # cancels: sums taken in another order move phi, and the coefficients, in the 9th digit.
    rtol = 1e-7 if type(fast._policy) is Forgetron else 1e-9
    np.testing.assert_allclose(sf.coef, ss.coef, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(sf.kdiag, ss.kdiag, rtol=1e-12)
    if hasattr(fast, "thresholds_"):  # the ranker's
        np.testing.assert_array_equal(fast.thresholds_, slow.thresholds_)
    pf, ps = fast._policy.state(), slow._policy.state()
    assert pf.keys() == ps.keys()
    for key in pf:
        if isinstance(pf[key], (float, np.ndarray)):  # the Forgetron's Q, Projectron's inverse
            np.testing.assert_allclose(pf[key], ps[key], rtol=1e-7, atol=1e-9)
        else:
            assert pf[key] == ps[key]


CASES = [
    (learner, kernel, policy, classes)
    for learner in sorted(LEARNERS)
    for kernel in sorted(KERNELS)
    for policy in sorted(POLICIES)
    for classes in ((5,) if learner == "ranker" else (2, 3))  # ranks 0-4; two, three classes
]


@pytest.mark.parametrize(("learner", "kernel", "policy", "classes"), CASES)
def test_compiled_learn_many_equals_numpy_learn_one(learner, kernel, policy, classes):
    make_policy, compiled = POLICIES[policy]
    if kernel in PROGRAM_KERNELS:
        compiled = False  # no block pass: learn_many loops the per-event core instead
    if policy == "forgetron" and kernel in GRAM_KERNELS:
        compiled = False  # its removal needs k(x_r, S): falls back
    # the Projectron's and Merge's own runs (streamk.budget.compiled.margin_run, merge_run)
    # for the perceptrons, the per-event core for the rest
    compiled = compiled or event_core_takes(kernel, policy)
    if policy == "merge" and not kernel.startswith("rbf"):
        pytest.skip("Merge takes an RBF kernel only (ConfigError otherwise)")
    slow_kernel = kernel in GRAM_KERNELS | PROGRAM_KERNELS
    if classes == 3 and policy in ("projectron", "merge", "smallest") and slow_kernel:
        pytest.skip("covered by the binary stream; slow on the NumPy path")
    X, y = _stream(900, classes)
    probe = X.iloc[::37]
    blocks = [(0, 250), (250, 520), (520, 900)]
    fast = LEARNERS[learner](KERNELS[kernel](), make_policy())
    fastpass.COUNTS.clear()
    fast_preds = []
    for a, b in blocks:
        fast.learn_many(X.iloc[a:b], y[a:b])
        fast_preds.append(fast.predict_many(probe).tolist())
    took, untracked = fastpass.COUNTS["compiled"], fastpass.COUNTS["untracked"]
    slow = LEARNERS[learner](KERNELS[kernel](), make_policy())
    slow_preds = _learn_one_numpy(slow, X, y, blocks, probe)
    assert fast_preds == slow_preds
    _same_model(fast, slow)
    if compiled:
        assert took > 0, "this combination has a compiled pass but did not take it"
        # (a Projectron under a low-rank kernel projects every row once it spans the space)
        low_rank = policy == "projectron" and kernel in ("poly", "linear", "normalized-poly")
        if make_policy() is not None and not low_rank:
            assert fast.n_support == 40  # the budget was reached and turned over
    else:
        assert took == 0, "this combination has no compiled pass: it must fall back"
    # (the ranker's plain RBF takes the hint pass only from ranking.HINTS_FROM vectors on:
    # these sets of 40 go untracked; tests/test_ranker_hints.py covers the hints)
    rows_pass = kernel in UNTRACKED_KERNELS or (learner == "ranker" and kernel.startswith("rbf"))
    # Merge acts only on a full set: until it could fill, the unbounded set's passes learn
    # (KernelLearner._until_full), here for the ranker, whose ranks are known ahead (the
    # perceptrons' first block has new classes, and fills the set; see
    # tests/test_warm_event_rows.py), at a fixed width (a warm-up fills it too)
    filling = policy == "merge" and learner == "ranker" and kernel != "rbf-auto"
    if compiled and rows_pass and (policy not in ("projectron", "merge") or filling):
        assert untracked > 0, "this combination has an untracked pass but did not take it"
    elif policy != "merge":
        assert untracked == 0, "a Gram-matrix kernel or RBF perceptron went untracked"


def test_remove_random_draws_the_same_slots_as_its_insert():
    """The compiled pass takes remove-random's slots from ``peek_slots``: they are exactly the
    draws ``insert`` makes on a full set, and ``skip_slots`` consumes them."""
    a, b = RemoveRandom(50, seed=11), RemoveRandom(50, seed=11)
    peeked = a.peek_slots(500)
    assert peeked.tolist() == a.peek_slots(500).tolist()  # peeking consumes nothing
    drawn = [int(b._rng.integers(50)) for _ in range(500)]
    assert peeked.tolist() == drawn
    a.skip_slots(500)
    assert a.state() == b.state()


@pytest.mark.parametrize("learner", [KernelPerceptron, MarginPerceptron])
@pytest.mark.parametrize("policy", ["unbounded", "oldest", "random", "forgetron", "projectron"])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "sum"])
def test_compiled_learn_predict_many_is_prequential(kernel, policy, learner):
    """Test-then-train on blocks says what ``predict_one`` said before each row was learned,
    on every compiled combination (oracle: NumPy, one event at a time). The margin
    perceptron shares the perceptron's pass (a row it skips is above its margin, so right)
    and takes the Projectron's own compiled run."""
    X, y = _stream(900, 3)
    fast = learner(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())
    got = [p for a, b in ((0, 400), (400, 900)) for p in fast.learn_predict_many(X[a:b], y[a:b])]
    slow = learner(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())
    want = _prequential_numpy(slow, X, y)
    assert got == want
    _same_model(fast, slow)


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("policy", ["unbounded", "oldest", "forgetron", "projectron", "merge"])
@pytest.mark.parametrize("kernel", ["rbf", "rbf-auto", "laplacian", "sum"])
def test_the_adatrons_learn_predict_many_is_prequential(kernel, policy, classes):
    """``KernelAdatron.learn_predict_many`` (the per-event core's loop over the block, with
    its predictions) says what ``predict_one`` said before each row and ends with the
    model of the NumPy path one event at a time; a third class appearing inside a block
    (``classes=3``) takes the NumPy path for its row, and ``gamma="auto"``'s warm-up the
    generic loop."""
    if policy == "merge" and not kernel.startswith("rbf"):
        pytest.skip("Merge takes an RBF kernel only (ConfigError otherwise)")
    X, y = _stream(900, classes)

    def make():
        return KernelAdatron(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())

    fast = make()
    blocks = ((0, 150), (150, 400), (400, 900))
    got = [p for a, b in blocks for p in fast.learn_predict_many(X[a:b], y[a:b])]
    slow = make()
    want = _prequential_numpy(slow, X, y)
    assert got == want
    _same_support(fast, slow)
    assert fast.n_updates == slow.n_updates and fast.classes_ == slow.classes_
    sf, ss = fast.support_, slow.support_
    np.testing.assert_array_equal(fast._cls.align(sf.ids), slow._cls.align(ss.ids))
    if policy != "unbounded":
        assert sf.next_id > 60  # the budget filled and turned over


@pytest.mark.parametrize("kernel", ["rbf", "rbf-auto"])
@pytest.mark.parametrize("learner", [KernelPerceptron, MarginPerceptron])
def test_compiled_merge_run_is_prequential_and_merges(learner, kernel, monkeypatch):
    """Test-then-train on blocks under a Merge budget (its compiled run,
    :func:`streamk.budget.compiled.merge_run`) says what ``predict_one`` said before each
    row, and ends with the model of the NumPy path one event at a time with the NumPy merge
    (``streamk.budget.compiled`` switched off too); the run made the merges."""
    from streamk.budget import compiled

    X, y = _stream(900, 3)
    fast = learner(kernel=KERNELS[kernel](), budget=Merge(40))
    fastpass.COUNTS.clear()
    got = [p for a, b in ((0, 400), (400, 900)) for p in fast.learn_predict_many(X[a:b], y[a:b])]
    assert fastpass.COUNTS["compiled"] > 0
    slow = learner(kernel=KERNELS[kernel](), budget=Merge(40))
    monkeypatch.setattr(compiled, "policies", None)
    monkeypatch.setattr(accel, "core", None)
    want = []
    for x, label in zip(X.to_dict(orient="records"), y):
        want.append(slow.predict_one(x))
        slow.learn_one(x, label)
    assert got == want
    _same_model(fast, slow)
    assert fast.n_support == 40 and fast.support_.next_id > 200  # merged over and over
