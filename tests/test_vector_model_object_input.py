"""A model on vectors given a string or a tree refuses it with ``InvalidInput``.

Before, ``FeatureIndex.row`` called ``x.values()`` on whatever came, and a string or a
tree raised ``AttributeError: 'str' object has no attribute 'values'`` from every
learner's ``learn_one`` and ``predict_one``. The refusal must name what the model takes,
leave the model as it was (the oracle: a model that never saw the event), and on the
engine's path the event still goes to the dead letters while the stream goes on.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamk import RBF, KernelAdatron, KernelNovelty, KernelPerceptron, OnlineRanker, OnlineSVR
from streamk.engine import Engine, EngineConfig
from streamk.errors import InvalidInput
from streamk.snapshot import dumps
from streamk.sources.replay import ReplaySource, write_log

MAKERS = {
    "perceptron": (lambda: KernelPerceptron(kernel=RBF(0.5)), lambda i: i % 2 == 0),
    "adatron": (lambda: KernelAdatron(kernel=RBF(0.5)), lambda i: i % 2 == 0),
    "svr": (lambda: OnlineSVR(kernel=RBF(0.5)), lambda i: float(i)),
    "ranker": (lambda: OnlineRanker(kernel=RBF(0.5), ranks=[1, 2]), lambda i: 1 + i % 2),
    "novelty": (lambda: KernelNovelty(kernel=RBF(0.5)), None),
}
NOT_DICTS = ["hello", ["a", ["b"]], ("a", ("b",)), 3.5, None]


def _learn(model: Any, x: Any, label: Any, i: int) -> None:
    if label is None:
        model.learn_one(x)
    else:
        model.learn_one(x, label(i))


@pytest.mark.parametrize("x", NOT_DICTS, ids=repr)
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_string_or_tree_is_refused_and_changes_nothing(name, x):
    make, label = MAKERS[name]
    model, oracle = make(), make()
    events = [{"a": float(i), "b": 1.0} for i in range(6)]
    for i, e in enumerate(events[:3]):
        _learn(model, e, label, i)
        _learn(oracle, e, label, i)
    before = dumps(model, created_at=0.0)
    with pytest.raises(InvalidInput, match="takes a dict of numeric features"):
        model.predict_one(x)
    with pytest.raises(InvalidInput, match="takes a dict of numeric features"):
        _learn(model, x, label, 0)  # label(0): one the model knows already
    with pytest.raises(InvalidInput, match="takes a dict of numeric features"):
        model.predict_many([events[0], x])
    assert dumps(model, created_at=0.0) == before
    for i, e in enumerate(events[3:], start=3):
        _learn(model, e, label, i)
        _learn(oracle, e, label, i)
    assert np.array_equal(model.support_.X, oracle.support_.X)
    assert np.array_equal(model.support_.coef, oracle.support_.coef)
    probe = {"a": 2.5, "b": 0.5}
    assert model.predict_one(probe) == oracle.predict_one(probe)


def test_the_engine_dead_letters_a_string_for_a_vector_model():
    events: list[dict[str, Any]] = [
        {"x": {"a": float(i % 5), "b": 1.0}, "y": i % 2 == 0} for i in range(40)
    ]
    events[20:20] = [{"x": "hello", "y": True}, {"x": ["a", ["b"]], "y": False}]
    log = Path(tempfile.mkdtemp()) / "events.jsonl"
    write_log(log, events)
    engine = Engine(
        ReplaySource(log),
        lambda: KernelPerceptron(kernel=RBF(0.5)),
        config=EngineConfig(snapshot_every=None, snapshot_seconds=None),
    )
    result = engine.run()
    assert (result.learned, result.dead_lettered) == (40, 2)
