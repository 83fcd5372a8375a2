"""The resweeping adatron's whole event in the compiled per-event core, against the NumPy path.

``KernelAdatron(resweeps >= 1)``'s ``learn_one``, ``learn_many`` and ``learn_predict_many``
run the event's kernel row, first step, insert (the kept Gram matrix maintained as
``SupportSet`` maintains it, through each policy's removal, replacement or merge), the
resweeps (``_adatron_pass.pxi``, the pass ``streamk/learners/_dual.pyx`` runs too) and the
dead vectors' removal in one call (``EventPass._resweep``). The oracle is the NumPy path
(``streamk.accel.core`` switched off, as ``STREAMK_NO_ACCEL=1`` does) learning the same
stream with ``predict_one`` then ``learn_one`` on every event. The core computes each pass's
``F = G @ coef`` itself, which NumPy's product matches only to rounding, so the promise is:
the same predictions (before every event and on a probe after each block), the same support
ids, counters and classes, coefficients and the Gram matrix within ``rtol=1e-9,
atol=1e-12``. The Projectron, whose projections the core does not follow in a kept Gram
matrix, declines and runs the NumPy path (the core's resweep count stays 0).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from model_state import assert_policy_states_close, learn_block

from streamk import accel
from streamk.learners import KernelAdatron, eventpass
from tests.test_grid_paths import KERNELS, POLICIES, _stream

pytestmark = pytest.mark.skipif(
    not eventpass.available(), reason="the compiled per-event core is not built here"
)

#: Events per stream: ``_stream``'s third class arrives at row 300, inside the second block.
N = 420
BLOCKS = [(0, 140), (140, N)]
EVENT_KERNELS = ["rbf", "rbf-auto", "laplacian", "poly", "linear", "sum", "product"]
EVENT_POLICIES = ["unbounded", "oldest", "random", "smallest", "forgetron", "merge", "projectron"]
RTOL, ATOL = 1e-9, 1e-12

GRID = [
    (kernel, policy, classes)
    for kernel in EVENT_KERNELS
    for policy in EVENT_POLICIES
    for classes in (2, 3)
    if not (policy == "merge" and not kernel.startswith("rbf"))  # Merge takes RBF only
]


def _make(kernel: str, policy: str, resweeps: int = 1) -> KernelAdatron:
    return KernelAdatron(KERNELS[kernel](), C=1.0, resweeps=resweeps, budget=POLICIES[policy][0]())


def _data(classes: int) -> tuple[pd.DataFrame, list, pd.DataFrame]:
    X, y = _stream(N, classes, seed=4)
    return X, y, X.iloc[::19]


@functools.cache
def _oracle(kernel: str, policy: str, classes: int):
    """The NumPy path: ``predict_one`` then ``learn_one`` on each event; the model, what it
    said before each event and its predictions on the probe after each block."""
    X, y, probe = _data(classes)
    rows = X.to_dict(orient="records")
    core, accel.core = accel.core, None
    try:
        model = _make(kernel, policy)
        said, probed = [], []
        for a, b in BLOCKS:
            for x, label in zip(rows[a:b], y[a:b]):
                said.append(model.predict_one(x))
                model.learn_one(x, label)
            probed.append(model.predict_many(probe).tolist())
    finally:
        accel.core = core
    return model, said, probed


def _compiled(kernel: str, policy: str, classes: int, how: str):
    """The compiled path by ``how``: the model, what it said before each event (``None``
    for ``learn_many``) and its probe predictions after each block."""
    X, y, probe = _data(classes)
    model = _make(kernel, policy)
    said: list = []
    probed = []
    for a, b in BLOCKS:
        said += learn_block(model, X, y, a, b, f"learn_{how}")
        probed.append(model.predict_many(probe).tolist())
    return model, said if how != "many" else None, probed


def _same_model(fast: KernelAdatron, slow: KernelAdatron) -> None:
    """The same support set (ids, counters, classes; rows, coefficients and the kept Gram
    matrix to rounding) and the same policy state."""
    sf, ss = fast._support, slow._support
    assert sf.n == ss.n and sf.next_id == ss.next_id
    assert fast.n_updates == slow.n_updates and fast._n_learned == slow._n_learned
    np.testing.assert_array_equal(sf.ids, ss.ids)
    assert fast.state()["sv_class"] == slow.state()["sv_class"]
    np.testing.assert_allclose(sf.X, ss.X, rtol=RTOL, atol=ATOL)  # Merge builds rows
    np.testing.assert_allclose(sf.coef, ss.coef, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sf.gram_matrix, ss.gram_matrix, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sf.kdiag, ss.kdiag, rtol=RTOL, atol=ATOL)
    assert_policy_states_close(fast, slow)


@pytest.mark.parametrize("how", ["one", "many", "predict_many"])
@pytest.mark.parametrize(("kernel", "policy", "classes"), GRID)
def test_event_resweeps_equal_the_numpy_path(kernel, policy, classes, how):
    """Every policy × kernel × binary / a third class mid-stream × learn_one (after
    predict_one) / learn_many / learn_predict_many: the NumPy path's predictions and model
    (coefficients to rounding), the whole event in the core wherever it applies."""
    slow, slow_said, slow_probed = _oracle(kernel, policy, classes)
    fast, said, probed = _compiled(kernel, policy, classes, how)
    if said is not None:
        assert said == slow_said
    assert probed == slow_probed
    _same_model(fast, slow)
    ran = fast._event.resweep_events
    if policy == "projectron":
        assert ran == 0, "the core resweeps under the Projectron: it must decline"
    else:
        assert ran > N // 2, f"the core resweeped {ran} of {N} events"


@pytest.mark.parametrize("policy", [p for p in EVENT_POLICIES if p != "projectron"])
@pytest.mark.parametrize("classes", [2, 3])
def test_a_restored_snapshot_continues_as_the_uninterrupted_model(policy, classes):
    """``state()`` / ``from_state()`` mid-stream, then the rest of the stream: the model
    that learned it uninterrupted, bit for bit (the kept Gram matrix and the diagonal are in
    the snapshot; the core re-takes the classes and the age order from them)."""
    X, y, probe = _data(classes)
    whole = _make("rbf", policy, resweeps=2)
    half = _make("rbf", policy, resweeps=2)
    whole.learn_many(X.iloc[:200], y[:200])
    half.learn_many(X.iloc[:200], y[:200])
    restored = KernelAdatron.from_state(half.state())
    whole.learn_many(X.iloc[200:], y[200:])
    rows = X.iloc[200:].to_dict(orient="records")
    for x, label in zip(rows, y[200:]):
        restored.learn_one(x, label)
    assert restored._event.resweep_events > 100
    np.testing.assert_array_equal(restored.support_.ids, whole.support_.ids)
    np.testing.assert_array_equal(restored.support_.coef, whole.support_.coef)
    np.testing.assert_array_equal(restored._support.gram_matrix, whole._support.gram_matrix)
    assert restored.state()["sv_class"] == whole.state()["sv_class"]
    assert restored.predict_many(probe).tolist() == whole.predict_many(probe).tolist()


@pytest.mark.parametrize("resweeps", [2, 3])
@pytest.mark.parametrize("norm", [1, 2])
def test_more_passes_and_the_two_norm_equal_the_numpy_path(resweeps, norm):
    """Several passes an event and the 2-norm's diagonal shift (no box), remove-oldest
    turning over, three classes: the NumPy path's model and predictions."""
    X, y, probe = _data(3)

    def make():
        return KernelAdatron(KERNELS["rbf"](), C=0.5, norm=norm, resweeps=resweeps, budget=40)

    core, accel.core = accel.core, None
    try:
        slow = make()
        slow.learn_many(X, y)
        want = slow.predict_many(probe).tolist()
    finally:
        accel.core = core
    fast = make()
    fast.learn_many(X, y)
    assert fast._event.resweep_events > N // 2
    assert fast.predict_many(probe).tolist() == want
    _same_model(fast, slow)
