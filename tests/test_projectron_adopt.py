"""The Projectron's record of the set its ``P`` inverts, kept by the per-event compiled path.

After each compiled insert the policy must name the set ``P`` now inverts (its ids and the
kernel's spec), as ``Projectron.insert`` leaves them on the NumPy path. The per-event path
(streamk/learners/_event.pyx) writes the two ids a removal changes into the policy's ids
array in place instead of calling ``adopt`` (an ids copy and ``to_spec`` per insert), and
``_remember`` recomputes the spec only for a new kernel object. Here, event for event, the
policy's ids, spec and state match the NumPy path's, and the in-place write did run.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk import KernelNovelty, KernelPerceptron, OnlineSVR
from streamk.budget import Projectron
from streamk.kernels import RBF, Laplacian
from streamk.learners import eventpass
from tests.test_eventpass import _learn, stream, value_stream

pytestmark = pytest.mark.skipif(
    not eventpass.available(), reason="streamk.learners._event is not built"
)

LEARNERS = {
    "perceptron": (lambda k: KernelPerceptron(kernel=k, budget=Projectron(30, eta=0.05)), stream),
    "svr": (lambda k: OnlineSVR(kernel=k, budget=Projectron(30, eta=0.05)), value_stream),
    "novelty": (lambda k: KernelNovelty(kernel=k, budget=Projectron(30, eta=0.05)), value_stream),
}
KERNELS = {
    "rbf": lambda: RBF(0.3),
    "rbf-auto": lambda: RBF("auto"),
    "laplacian": lambda: Laplacian(0.3),
}


def assert_same_record(fast, slow) -> None:
    """The policies name the same set: ids (the fast one also the set's own) and spec."""
    pf, ps = fast._policy, slow._policy
    np.testing.assert_array_equal(pf._ids, ps._ids)
    np.testing.assert_array_equal(pf._ids, fast.support_.ids)
    assert pf._kspec == ps._kspec  # (behind the set's kernel until an insert, alike)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_the_policy_names_the_set_p_inverts_event_for_event(learner, kernel):
    make, events_of = LEARNERS[learner]
    fast, slow = make(KERNELS[kernel]()), make(KERNELS[kernel]())
    slow._event = None  # the NumPy path only
    in_place = 0
    for x, y in events_of(500, 4, 5):
        before, turned = fast._policy._ids, fast.support_.next_id
        _learn(fast, x, y)
        _learn(slow, x, y)
        assert_same_record(fast, slow)
        if fast._policy._ids is before and fast.support_.next_id > turned:
            in_place += 1  # a removal's ids written into the same array
    assert in_place > 20, in_place  # the compiled path's in-place record ran
    pf, ps = fast._policy.state(), slow._policy.state()
    np.testing.assert_array_equal(pf["ids"], ps["ids"])
    assert pf["kernel"] == ps["kernel"]


def test_a_policy_record_replaced_between_events_is_taken_again():
    """A policy whose ids array was replaced (``load_state`` of its own state) is adopted
    afresh by the next compiled insert, not written through the old array."""
    fast = KernelPerceptron(kernel=RBF(0.3), budget=Projectron(20, eta=0.05))
    slow = KernelPerceptron(kernel=RBF(0.3), budget=Projectron(20, eta=0.05))
    slow._event = None
    for i, (x, y) in enumerate(stream(400, 4, 8)):
        if i % 37 == 0:
            for m in (fast, slow):
                m._policy.load_state(m._policy.state())
        _learn(fast, x, y)
        _learn(slow, x, y)
        assert_same_record(fast, slow)
    assert fast.support_.next_id > 40
