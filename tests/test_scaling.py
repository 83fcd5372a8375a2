"""On-line feature standardisation as a snapshot-able wrapper (issue 19: `scale = "standard"`).

Oracle: river's ``StandardScaler() | learner`` pipeline, run side by side.
"""

from __future__ import annotations

import itertools

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
