"""The compiled per-event path records the adatron's classes and the SVR's targets itself
(streamk/learners/_event.pyx, ``_record``) and settles them where it records: their memory
stays bounded by the budget, as when ``learn_one`` settled after every event, and the values
read back are the NumPy path's."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from streamk import KernelAdatron, OnlineSVR, RemoveOldest
from streamk.errors import InvalidInput
from streamk.kernels import RBF
from streamk.learners import _slotdata, eventpass
from tests.test_eventpass import POLICIES, run_value_pair, stream, value_stream

pytestmark = pytest.mark.skipif(not eventpass.available(), reason="compiled path not built")

LEARNERS = {
    "adatron": (lambda b: KernelAdatron(kernel=RBF(0.3), budget=b, C=1.0), "_cls", stream),
    "svr": (lambda b: OnlineSVR(kernel=RBF(0.3), budget=b, C=2.0), "_targets", value_stream),
}


def test_the_compiled_path_keeps_the_slack_of_slotdata():
    assert _slotdata.SETTLE_SLACK == 64  # the copy in _event.pyx


@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_recorded_values_stay_bounded_on_the_compiled_path(learner):
    make, attr, events_of = LEARNERS[learner]
    model = make(RemoveOldest(10))
    held = []
    events = events_of(1500, 3, 5)
    compiled = 0
    for x, y in events:
        compiled += model._event.learn(model, x, y) or model.learn_one(x, y) or 0
        slots = getattr(model, attr)
        held.append(len(slots.pending) + slots._ids.shape[0])
        assert len(slots.pending) <= model.support_.n + _slotdata.SETTLE_SLACK
    assert compiled > 1400  # all but the first events on the compiled path
    assert model.n_updates > 300  # far more records than the bound holds
    assert max(held) < 4 * (10 + _slotdata.SETTLE_SLACK)  # not the stream's length


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_recorded_values_match_the_numpy_path(learner, policy):
    make, attr, events_of = LEARNERS[learner]
    fast, slow, asked_fast, asked_slow = run_value_pair(
        lambda: make(POLICIES[policy]()), events_of(600, 4, 8)
    )
    if learner == "adatron":  # labels (None before the first)
        assert asked_fast == asked_slow
    else:
        np.testing.assert_allclose(asked_fast, asked_slow, rtol=1e-9, atol=1e-9)
    ids = fast.support_.ids
    np.testing.assert_array_equal(getattr(fast, attr).align(ids), getattr(slow, attr).align(ids))
    assert fast.n_updates == slow.n_updates


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_the_svr_declines_a_target_that_is_not_finite_and_learn_one_refuses_it(bad):
    model = OnlineSVR(kernel=RBF(0.3), budget=20)
    events = value_stream(60, 3, 4)
    for x, y in events:
        model.learn_one(x, y)
    before = pickle.dumps(model.state())
    x = events[0][0]
    assert not model._event.learn(model, x, bad)
    with pytest.raises(InvalidInput, match="finite"):
        model.learn_one(x, bad)
    assert pickle.dumps(model.state()) == before


@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_buffers_replaced_by_growth_are_the_ones_written(learner):
    """The compiled path knows its views are stale by ``support.version`` alone: growing
    the buffers moves it, and the next event lands in the new ones."""
    make, _, events_of = LEARNERS[learner]
    model = make(None)
    events = events_of(200, 3, 6)
    for x, y in events[:100]:
        model.learn_one(x, y)
    S = model.support_
    old_X, version = S._X, S.version
    S.reserve(S.capacity + 50, S._X.shape[1] + 3)
    assert S._X is not old_X and S.version > version
    n = S.n
    for x, y in events[100:]:
        assert model._event.learn(model, x, y)
        if S.n > n:
            break
    else:
        pytest.fail("no event joined the set")
    np.testing.assert_array_equal(S.X[n, :3], [x[k] for k in sorted(x)])


@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_recording_allocates_nothing_the_garbage_collector_tracks(learner):
    """``_record`` keeps the ids and the values in two lists, not a list of pairs: a pair
    is a tuple the collector tracks, and one an update set off its collections (a full one
    costs ~0.1 s in a process holding a few hundred thousand objects, landing on some
    event). Unbounded, nothing is folded, so every pair would still be alive."""
    import gc

    make, attr, events_of = LEARNERS[learner]
    model = make(None)
    events = events_of(700, 3, 5)
    for x, y in events[:300]:  # gamma="auto"'s warm-up and the binding
        model.learn_one(x, y)
    before_n, before = model.n_updates, getattr(model, attr)
    was = gc.isenabled()
    gc.disable()
    try:
        start = gc.get_count()[0]
        for x, y in events[300:]:
            assert model._event.learn(model, x, y)
        grown = gc.get_count()[0] - start
    finally:
        if was:
            gc.enable()
    assert getattr(model, attr) is before and model.n_updates - before_n > 100
    assert len(before.pending) == len(before.pending_values) > 100  # none folded
    assert grown < 20, grown
