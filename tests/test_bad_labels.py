"""A label that cannot be a class or a rank is refused before anything is learned.

Before: ``KernelPerceptron().learn_one(x, [1])`` raised ``TypeError`` after the label
coder had recorded the list, and every later ``learn_one`` raised it again (one bad event
in an iterable source dead-lettered every event after it); each NaN label became one more
class (one more coefficient column), and the ranker took NaN and ``None`` as new ranks.
The oracle for "nothing changed": the same learner fed only the good events.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from streamk import KernelAdatron, KernelPerceptron, MarginPerceptron, OnlineRanker, RemoveOldest
from streamk.engine import Engine, EngineConfig
from streamk.errors import InvalidInput
from streamk.sources.iterable import IterableSource

LEARNERS = {
    "perceptron": lambda: KernelPerceptron(budget=RemoveOldest(40)),
    "margin": lambda: MarginPerceptron(budget=RemoveOldest(40)),
    "adatron": lambda: KernelAdatron(budget=RemoveOldest(40)),
    "ranker": lambda: OnlineRanker(budget=RemoveOldest(40)),
}
BAD = [[1], {"a": 1}, float("nan"), np.float64("nan"), None]


def _stream(n: int, learner: str) -> list[tuple[dict, object]]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    score = X[:, 0] + np.sin(2 * X[:, 1])
    y = np.digitize(score, [-1.0, 0.0, 1.0]).tolist() if learner == "ranker" else score > 0
    return [(dict(zip("abc", row)), label) for row, label in zip(X.tolist(), list(y))]


def _state(model) -> bytes:
    return pickle.dumps(model.state())


@pytest.mark.parametrize("bad", BAD, ids=repr)
@pytest.mark.parametrize("learner", list(LEARNERS))
def test_learn_one_refuses_a_bad_label_and_changes_nothing(learner, bad):
    data = _stream(300, learner)
    model, clean = LEARNERS[learner](), LEARNERS[learner]()
    for i, (x, y) in enumerate(data):
        if i in (5, 150):  # before the classes are all known, and after
            before = _state(model)
            with pytest.raises(InvalidInput):
                model.learn_one(x, bad)
            assert _state(model) == before
        model.learn_one(x, y)
        clean.learn_one(x, y)
    assert _state(model) == _state(clean)


@pytest.mark.parametrize("method", ["learn_many", "learn_predict_many"])
@pytest.mark.parametrize("bad", BAD, ids=repr)
@pytest.mark.parametrize("learner", list(LEARNERS))
def test_a_block_with_a_bad_label_is_refused_whole(learner, bad, method):
    data = _stream(300, learner)
    model = LEARNERS[learner]()
    model.learn_many(pd.DataFrame([x for x, _ in data[:200]]), [y for _, y in data[:200]])
    before = _state(model)
    labels = [y for _, y in data[200:]]
    labels[37] = bad
    with pytest.raises(InvalidInput):
        getattr(model, method)(pd.DataFrame([x for x, _ in data[200:]]), labels)
    assert _state(model) == before


@pytest.mark.parametrize("learner", list(LEARNERS))
def test_the_engine_dead_letters_the_bad_events_only(learner):
    """Through the engine (an iterable source, whose events are not decoded): each bad
    event is a dead letter and every other event is learned, as without them."""
    data = _stream(400, learner)
    bad_at = {60: [1], 61: float("nan"), 250: {"a": 1}}
    fed = [(x, bad_at.get(i, y)) for i, (x, y) in enumerate(data)]
    engine = Engine(
        IterableSource(fed, name="labels"), LEARNERS[learner], config=EngineConfig(max_records=50)
    )
    result = engine.run()
    assert result.records == len(data)
    assert result.learned == len(data) - len(bad_at)
    clean = LEARNERS[learner]()
    for i, (x, y) in enumerate(data):
        if i not in bad_at:
            clean.learn_one(x, y)
    queries = [x for x, _ in data[:60]]
    assert [engine.model.predict_one(x) for x in queries] == [clean.predict_one(x) for x in queries]


#: Fractional labels: every distinct one became a class (a regression stream fed to a
#: classifier: one coefficient column per event, 15 events/s, accuracy 0, no word said).
FRACTIONAL = [0.5, np.float64(2.25), float("inf")]
CLASSIFIERS = [name for name in LEARNERS if name != "ranker"]  # a rank may be 2.5


@pytest.mark.parametrize("bad", FRACTIONAL, ids=repr)
@pytest.mark.parametrize("learner", CLASSIFIERS)
def test_a_classifier_refuses_a_fractional_label_and_changes_nothing(learner, bad):
    test_learn_one_refuses_a_bad_label_and_changes_nothing(learner, bad)
    with pytest.raises(InvalidInput, match="learner = svr"):
        LEARNERS[learner]().learn_one({"a": 1.0}, bad)


@pytest.mark.parametrize("method", ["learn_many", "learn_predict_many"])
@pytest.mark.parametrize("learner", CLASSIFIERS)
def test_a_block_with_a_fractional_label_is_refused_whole(learner, method):
    test_a_block_with_a_bad_label_is_refused_whole(learner, 0.5, method)
    data = _stream(50, learner)
    model = LEARNERS[learner]()
    y = np.array([float(label) for _, label in data])
    y[7] = 1.5  # a float block's labels are checked as one array
    with pytest.raises(InvalidInput, match=r"got 1\.5 "):
        getattr(model, method)(pd.DataFrame([x for x, _ in data]), pd.Series(y))
    assert model.n_learned == 0


@pytest.mark.parametrize("learner", CLASSIFIERS)
def test_whole_number_floats_are_still_classes(learner):
    """``1.0`` and ``0.0`` are the classes ``True``/``1`` and ``False``/``0`` (Python's
    equality): a float-labelled stream learns the boolean one's model."""
    data = _stream(300, learner)
    floats, bools = LEARNERS[learner](), LEARNERS[learner]()
    for x, y in data:
        floats.learn_one(x, float(y))
        bools.learn_one(x, y)
    queries = [x for x, _ in data[:100]]
    assert [bool(floats.predict_one(x)) for x in queries] == [bools.predict_one(x) for x in queries]
