"""On-line feature standardisation as a snapshot-able wrapper (issue 19: `scale = "standard"`).

Oracle: river's ``StandardScaler() | learner`` pipeline, run side by side.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pandas as pd
import pytest
from river import datasets, preprocessing
from river.datasets import synth

from streamk import KernelPerceptron, OnlineSVR
from streamk.errors import ConfigError
from streamk.learners.scaling import (
    StandardScaledClassifier,
    StandardScaledRegressor,
    standard_scaled,
)
from streamk.snapshot import dumps, loads


def _streams():
    return [
        (lambda: KernelPerceptron(budget=80), lambda: synth.Agrawal(seed=3).take(600)),
        (lambda: OnlineSVR(budget=80), lambda: itertools.islice(datasets.TrumpApproval(), 600)),
    ]


@pytest.mark.parametrize("make, stream", _streams(), ids=["perceptron", "svr"])
def test_wrapper_predicts_exactly_as_rivers_standard_scaler_pipeline(make, stream):
    ours, river_pipe = standard_scaled(make()), preprocessing.StandardScaler() | make()
    for x, y in stream():
        assert ours.predict_one(x) == river_pipe.predict_one(x)
        ours.learn_one(x, y)
        river_pipe.learn_one(x, y)
    assert ours.n_support == river_pipe[-1].n_support > 0


@pytest.mark.parametrize("make, stream", _streams(), ids=["perceptron", "svr"])
def test_blocks_learn_the_same_model_as_events(make, stream):
    events = list(stream())
    one, many, both = standard_scaled(make()), standard_scaled(make()), standard_scaled(make())
    expected = []
    for x, y in events:
        expected.append(one.predict_one(x))
        one.learn_one(x, y)
    got = []
    for start in range(0, len(events), 97):
        block = events[start : start + 97]
        X = pd.DataFrame([x for x, _ in block])
        ys = [y for _, y in block]
        many.learn_many(X, pd.Series(ys, dtype=object))
        got += both.learn_predict_many(X, ys)
    assert got == expected
    probe = pd.DataFrame([x for x, _ in events[:50]])
    assert one.predict_many(probe).tolist() == pytest.approx(many.predict_many(probe).tolist())
    # a list of dicts is a block too (its ``index`` method was once taken for an index)
    listed = one.predict_many([x for x, _ in events[:50]])
    assert listed.index.tolist() == list(range(50))
    assert listed.tolist() == pytest.approx([one.predict_one(x) for x, _ in events[:50]])
    np.testing.assert_allclose(one.model.support_.coef, many.model.support_.coef, atol=1e-9)


@pytest.mark.parametrize("make, stream", _streams(), ids=["perceptron", "svr"])
def test_snapshot_keeps_the_scalers_statistics(make, stream):
    events = list(stream())
    model = standard_scaled(make())
    for x, y in events[:400]:
        model.learn_one(x, y)
    snap = loads(dumps(model))
    loaded = snap.model
    assert type(loaded) is type(model)
    assert loaded.scaler_.means == model.scaler_.means
    for x, y in events[400:]:
        assert loaded.predict_one(x) == model.predict_one(x)
        loaded.learn_one(x, y)
        model.learn_one(x, y)


@pytest.mark.parametrize("cls", [StandardScaledClassifier, StandardScaledRegressor])
def test_river_check_estimator(cls, river_checks):
    params = next(cls._unit_test_params())
    assert river_checks(cls(**params)) > 10


def test_only_classifiers_and_regressors_are_wrapped():
    from streamk import KernelNovelty

    with pytest.raises(ConfigError):
        standard_scaled(KernelNovelty())
    with pytest.raises(ConfigError):
        StandardScaledClassifier(preprocessing.StandardScaler())


@pytest.mark.parametrize("stop_at", [137, 451])
def test_engine_restart_restores_the_scaler_with_the_model(tmp_path, stop_at):
    """What ``scale = "standard"`` wires: the engine snapshots the scaler with the learner."""
    from streamk.engine import Engine, EngineConfig
    from streamk.snapshot import SnapshotStore
    from streamk.sources.iterable import IterableSource

    data = list(synth.Agrawal(seed=5).take(600))

    def factory():
        return standard_scaled(KernelPerceptron(budget=60))

    store = SnapshotStore(tmp_path / "snaps")
    source = lambda: IterableSource(lambda: iter(data), name="agrawal")  # noqa: E731
    first = Engine(
        source(),
        factory,
        store=store,
        config=EngineConfig(max_records=50, snapshot_every=100, max_events=stop_at),
    )
    assert first.run().records == stop_at
    latest = store.latest("model")
    assert type(latest.model) is StandardScaledClassifier
    assert latest.model.scaler_.counts["salary"] == latest.model.n_learned > 0
    second = Engine(source(), factory, store=store, config=EngineConfig(max_records=50))
    assert second.run().records == len(data) - stop_at
    reference = preprocessing.StandardScaler() | KernelPerceptron(budget=60)
    for x, y in data:
        reference.learn_one(x, y)
    for x, _ in data[:60]:
        assert second.model.predict_proba_one(x) == pytest.approx(
            reference.predict_proba_one(x), abs=1e-9
        )


def test_consolidation_refuses_a_scaled_learner_with_a_clear_error():
    # the consolidation window holds raw rows: solving on them would mix scales
    from streamk.consolidation import Consolidated

    with pytest.raises(ConfigError, match="kernel learner"):
        Consolidated(standard_scaled(KernelPerceptron(budget=50)), every=100)


BAD_EVENTS = [  # (x, y) that the wrapped learner refuses
    ({"a": float("nan"), "b": 1.0}, True),
    ({"a": float("inf"), "b": 1.0}, True),
    ({"a": "x", "b": 1.0}, True),
    ({"a": 1.0, "b": 1.0}, [1]),
    ({"a": 1.0, "b": 1.0}, float("nan")),
    ({"a": 1e200, "b": 1.0}, True),  # finite, but its square overflows the variance
    ({"a": 10**400, "b": 1.0}, True),  # beyond any float
]


def _events(n: int = 300) -> list[tuple[dict, bool]]:
    rng = np.random.default_rng(1)
    X = rng.normal(loc=(5.0, -3.0), scale=(10.0, 0.1), size=(n, 2))
    return [({"a": a, "b": b}, bool(a + 50.0 * (b + 3.0) > 5.0)) for a, b in X.tolist()]


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize("bad", BAD_EVENTS, ids=lambda e: repr(e)[:40])
def test_a_refused_event_leaves_the_statistics_as_they_were(bad):
    """Before: the statistics learned the event before the learner refused it, so one NaN
    made every later event NaN (and refused); every event after it was lost. Oracle: the
    same wrapper fed the good events only, and river's pipeline fed them."""
    from streamk.errors import InvalidInput

    ours, clean = (
        standard_scaled(KernelPerceptron(budget=80)),
        standard_scaled(KernelPerceptron(budget=80)),
    )
    river_pipe = preprocessing.StandardScaler() | KernelPerceptron(budget=80)
    for i, (x, y) in enumerate(_events()):
        if i in (3, 150):
            before = pickle.dumps(ours.state())
            with pytest.raises(InvalidInput):
                ours.learn_one(*bad)
            assert pickle.dumps(ours.state()) == before
        ours.learn_one(x, y)
        clean.learn_one(x, y)
        river_pipe.learn_one(x, y)
    assert ours.scaler_.state() == clean.scaler_.state()
    probe = [x for x, _ in _events(40)]
    assert [ours.predict_one(x) for x in probe] == [river_pipe.predict_one(x) for x in probe]


@pytest.mark.parametrize("method", ["learn_many", "learn_predict_many"])
def test_a_refused_block_leaves_the_statistics_as_they_were(method):
    from streamk.errors import InvalidInput

    events = _events()
    model = standard_scaled(KernelPerceptron(budget=80))
    model.learn_many(pd.DataFrame([x for x, _ in events[:100]]), [y for _, y in events[:100]])
    X = pd.DataFrame([x for x, _ in events[100:200]])
    labels = [y for _, y in events[100:200]]
    before = model.scaler_.state()
    with pytest.raises(InvalidInput):
        getattr(model, method)(X, labels[:-1])  # one label short: refused, never truncated
    assert model.scaler_.state() == before
    if method == "learn_many":  # a bad label: the whole block refused
        with pytest.raises(InvalidInput):
            model.learn_many(X, labels[:50] + [float("nan")] + labels[51:])
        assert model.scaler_.state() == before and model.n_learned == 100


def test_a_none_feature_is_absent_for_the_statistics_too():
    """The learners read ``None`` as an absent feature; so does the wrapper (it raised
    ``TypeError``)."""
    a, b = (
        standard_scaled(KernelPerceptron(budget=80)),
        standard_scaled(KernelPerceptron(budget=80)),
    )
    for i, (x, y) in enumerate(_events()):
        a.learn_one({**x, "c": None} if i % 3 else x, y)
        b.learn_one(x, y)
    assert a.scaler_.state() == b.scaler_.state()
    probe = [x for x, _ in _events(40)]
    assert [a.predict_one({**x, "c": None}) for x in probe] == [b.predict_one(x) for x in probe]


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_the_engine_loses_only_the_refused_events_of_a_scaled_learner():
    """An iterable source's events are not decoded: an infinity, a string or a list label
    reaches the wrapper. Exactly those events are dead letters; the model is the one fed
    the rest (before, the statistics learned each refused event: an infinity made every
    later value NaN, and every later event was refused)."""
    from streamk.engine import Engine, EngineConfig
    from streamk.sources.iterable import IterableSource

    events = _events(400)
    bad = {120: ({"a": np.inf, "b": 1.0}, True), 121: ({"a": "x", "b": 1.0}, True)}
    bad[300] = (events[300][0], [1])
    bad[333] = ({"a": 1e200, "b": 1.0}, True)  # (its square would make the variance inf)
    fed = [bad.get(i, event) for i, event in enumerate(events)]
    engine = Engine(
        IterableSource(fed, name="scaled"),
        lambda: standard_scaled(KernelPerceptron(budget=80)),
        config=EngineConfig(max_records=50),
    )
    result = engine.run()
    assert result.learned == len(events) - len(bad)
    clean = standard_scaled(KernelPerceptron(budget=80))
    for i, (x, y) in enumerate(events):
        if i not in bad:
            clean.learn_one(x, y)
    assert engine.model.scaler_.state() == clean.scaler_.state()
    probe = [x for x, _ in _events(40)]
    assert [engine.model.predict_one(x) for x in probe] == [clean.predict_one(x) for x in probe]
