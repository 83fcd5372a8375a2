"""A run the consolidated model refuses mid-way is retried one event at a time from the
refused event: every other event affects the model exactly once (docs/operations.md, poison
messages; restart with consolidation on)."""

from __future__ import annotations

import itertools
import warnings

import pytest
from river import datasets

from streamk.consolidation import Consolidated
from streamk.engine import Engine, EngineConfig
from streamk.learners import KernelPerceptron
from streamk.sources.iterable import IterableSource

BANANAS = list(itertools.islice(datasets.Bananas(), 500))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("guard", [0, 500])
@pytest.mark.parametrize("bad_at", [0, 120, 299])
def test_a_refused_event_in_a_run_is_dead_lettered_and_the_rest_learned_once(guard, bad_at):
    """A run the consolidated model refuses mid-way (a value too large for the kernels) is
    retried one event at a time from the refused one: the wrapper says how many it learned
    (``n_learned``). Without it the engine learned the events before the refused one twice
    (419 events in a model that was sent 299). Oracle: the same model fed the other events
    one at a time, in process."""
    data = list(BANANAS[:300])
    x, y = data[bad_at]
    data[bad_at] = ({k: 1e200 for k in x}, y)

    def make():
        return Consolidated(KernelPerceptron(budget=60), every=50, window_size=100, guard=guard)

    models = []
    engine = Engine(
        IterableSource(lambda: iter(data), name="bananas"),
        lambda: models.append(make()) or models[-1],
        config=EngineConfig(snapshot_every=0),
    )
    assert engine.run().learned == 299
    model, oracle = models[-1], make()
    for i, (x, y) in enumerate(data):
        if i != bad_at:
            oracle.learn_one(x, y)
    assert model.n_learned == model.consolidator_.n_seen == oracle.n_learned == 299
    assert model.n_consolidations == oracle.n_consolidations > 0
    probe = [x for x, _ in BANANAS[300:500]]
    assert [model.predict_one(x) for x in probe] == [oracle.predict_one(x) for x in probe]
    assert engine.metrics.get("events_dead_lettered") == 1
