"""The resweeping adatron's kept Gram matrix through the ``gamma="auto"`` warm-up, compiled
against the NumPy path.

``KernelAdatron(resweeps >= 1)`` keeps ``K(S, S)``; each of the warm-up's ~29 width changes
rebuilds it. On the NumPy path ``SupportSet.set_kernel`` does (``compiled.support_gram``, a
new array copied in); in the per-event core a plain RBF's is rebuilt in C inside the kept
buffer with the same steps (``EventPass._gram_rewidth``), other kernels still take
``set_kernel``. The oracle is the NumPy path (``accel.core = None``): the same predictions,
support ids and counters, coefficients and Gram matrix to rounding (the core's passes sum
``G[i] @ coef`` in their own order: ``tests/test_event_resweeps.py``), for every budget
policy × kernel (``"auto"`` widths, a width-free kernel, a sum run as a program) × binary /
a third class mid-warm-up × ``learn_one`` / ``learn_many`` / ``learn_predict_many``, over
blocks cut inside the warm-up; a snapshot taken mid-warm-up, restored and continued, gives
the uninterrupted model bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk import accel
from streamk.learners import KernelAdatron, eventpass
from streamk.learners.support import SupportSet
from tests.test_event_resweeps import _same_model
from tests.test_warmup_rewidth import KERNELS, POLICIES, _learn, _stream, cases, learned_alike

pytestmark = pytest.mark.skipif(
    not eventpass.available(), reason="the compiled per-event core is not built here"
)

METHODS = ("learn_one", "learn_many", "learn_predict_many")


def _make(policy: str, kernel: str, resweeps: int = 1) -> KernelAdatron:
    return KernelAdatron(KERNELS[kernel](), C=1.0, resweeps=resweeps, budget=POLICIES[policy]())


def _same(fast: KernelAdatron, slow: KernelAdatron) -> None:
    """The same model as ``tests/test_event_resweeps.py`` holds the two paths to (support
    set, kept Gram matrix, policy state), and the same width, to the bit."""
    _same_model(fast, slow)
    assert fast.kernel_ == slow.kernel_


#: as in tests/test_warmup_rewidth.py, and at e3fd344 before this path (the Projectron, whose
#: resweeps the core declines, and a sum, a program: neither runs it): the compiled
#: Projectron's coefficients drift up to 6e-8 relative from NumPy's on a near-singular set
_KNOWN = {("projectron-big", "sum-auto", 3, m) for m in METHODS}


@pytest.mark.parametrize(("policy", "kernel", "classes", "method"), cases(_KNOWN))
def test_the_warm_up_with_a_kept_gram_equals_numpy(policy, kernel, classes, method):
    _same(*learned_alike(lambda: _make(policy, kernel), classes, method))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("policy", ["unbounded", "oldest", "random", "merge"])
def test_the_core_rebuilds_the_gram_at_the_width_changes(policy, method, monkeypatch):
    """Under a plain RBF the warm-up's Gram rebuilds run in the core: ``set_kernel`` is
    left to the first rows (before the core binds) and the rows it hands back (a new
    label), where the NumPy path calls it at every width change."""
    calls: list[int] = []
    set_kernel = SupportSet.set_kernel

    def counted(self, kernel):
        calls.append(self.n)
        return set_kernel(self, kernel)

    X, y = _stream(2)
    monkeypatch.setattr(SupportSet, "set_kernel", counted)
    core, accel.core = accel.core, None
    try:
        _learn(_make(policy, "rbf-auto"), X, y, method, [(0, 230)])
    finally:
        accel.core = core
    numpy_calls = len(calls)
    calls.clear()
    fast = _make(policy, "rbf-auto")
    _learn(fast, X, y, method, [(0, 230)])
    assert not fast._warming_up
    assert numpy_calls >= 25  # every width change rebuilds K(S, S) on the NumPy path
    assert len(calls) <= 4, calls


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("policy", ["unbounded", "oldest", "smallest", "merge"])
@pytest.mark.parametrize("cut", [5, 95, 131])
def test_a_snapshot_mid_warm_up_continues_as_the_uninterrupted_model(policy, cut, method):
    X, y = _stream(3)
    whole = _make(policy, "rbf-auto", resweeps=2)
    said = _learn(whole, X, y, method, [(0, cut), (cut, 320)])
    first = _make(policy, "rbf-auto", resweeps=2)
    said_first = _learn(first, X, y, method, [(0, cut)])
    assert first._warming_up
    resumed = KernelAdatron.from_state(first.state())
    said_rest = _learn(resumed, X, y, method, [(cut, 320)])
    probe = len(X.iloc[::17])
    assert said_first[: len(said_first) - probe] + said_rest == said
    assert resumed._event.resweep_events > 100
    np.testing.assert_array_equal(resumed.support_.ids, whole.support_.ids)
    np.testing.assert_array_equal(resumed.support_.coef, whole.support_.coef)
    np.testing.assert_array_equal(resumed._support.gram_matrix, whole._support.gram_matrix)
    assert resumed.kernel_ == whole.kernel_
    assert resumed.state()["sv_class"] == whole.state()["sv_class"]
