"""What the engine does with an event its model refuses, on every path of a run.

Found by feeding the engine what ``tests/test_huge_values.py`` feeds the learners: an
unlabelled event with a value too large for the kernels stopped the engine (the scoring
path let the learner's ``InvalidInput`` out); a river pipeline whose learner refused a
labelled block had its scaler learn the whole run twice (the retry started at the run's
first event: the pipeline cannot say how far the block got); a river anomaly detector,
which scores with ``score_one``, failed mid-run with ``AttributeError``. Oracles: the same
model fed the same events one at a time in process; the dead-letter file; the predictions
file.
"""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
from river import anomaly, datasets, preprocessing, tree

from streamk import KernelPerceptron
from streamk.engine import Engine, EngineConfig
from streamk.engine.deadletter import DeadLetterFile, read_dead_letters
from streamk.errors import ConfigError, InvalidInput
from streamk.sinks import FilePredictionSink, read_predictions
from streamk.sources.iterable import IterableSource
from streamk.sources.replay import ReplaySource, write_log

BANANAS = list(itertools.islice(datasets.Bananas(), 400))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def huge(x: dict) -> dict:
    return {k: 1e200 for k in x}


def _run(tmp_path, events, factory, proba=False):
    log = tmp_path / "events.jsonl"
    write_log(log, events)
    with DeadLetterFile(tmp_path / "dead.jsonl") as dead:
        engine = Engine(
            ReplaySource(log),
            factory,
            predictions=FilePredictionSink(tmp_path / "predictions.jsonl"),
            dead_letters=dead,
            config=EngineConfig(max_records=64, publish_proba=proba),
        )
        result = engine.run()
    engine.predictions.close()
    letters = list(read_dead_letters(tmp_path / "dead.jsonl"))
    return engine, result, letters, list(read_predictions(tmp_path / "predictions.jsonl"))


@pytest.mark.parametrize("proba", [False, True])
def test_an_unlabelled_event_the_model_refuses_is_dead_lettered_and_the_rest_scored(
    tmp_path, proba
):
    train, score = BANANAS[:300], [x for x, _ in BANANAS[300:400]]
    bad = {10, 11, 63, 99}  # two side by side, one mid-run, and the stream's last
    events = [{"x": x, "y": y} for x, y in train] + [
        {"x": huge(x) if i in bad else x, "id": i} for i, x in enumerate(score)
    ]
    engine, result, letters, written = _run(
        tmp_path, events, lambda: KernelPerceptron(budget=60), proba
    )
    assert result.learned == 300 and result.scored == 100 - len(bad)
    assert sorted(letter.offset for letter in letters) == sorted(300 + i for i in bad)
    assert {letter.code for letter in letters} == {"rejected_by_model"}
    oracle = KernelPerceptron(budget=60)
    for x, y in train:
        oracle.learn_one(x, y)
    kept = [i for i in range(100) if i not in bad]
    assert [r["id"] for r in written] == kept
    assert [r["prediction"] for r in written] == [oracle.predict_one(score[i]) for i in kept]
    assert [r["offset"] for r in written] == [300 + i for i in kept]
    if proba:
        for r, i in zip(written, kept):
            want = {json.dumps(k): v for k, v in oracle.predict_proba_one(score[i]).items()}
            assert r["proba"] == pytest.approx(want)
    with pytest.raises(InvalidInput):
        oracle.predict_one(huge(score[0]))


def test_a_river_pipeline_s_refused_block_is_learned_once(tmp_path):
    """``StandardScaler() | KernelPerceptron()``: a NaN label is refused by the learner after
    the scaler learned the block; each event must reach the scaler once, as one event at a
    time does (river's pipeline lets the scaler learn the refused event too)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    data = [(dict(zip("abc", row)), bool(row[0] > 0)) for row in X.tolist()]
    data[120] = (data[120][0], float("nan"))

    def make():
        return preprocessing.StandardScaler() | KernelPerceptron(budget=60)

    # an iterable source hands the NaN label over as it is (a JSON log's decoder refuses it)
    engine = Engine(
        IterableSource(lambda: iter(data), name="s"), make, config=EngineConfig(max_records=64)
    )
    result = engine.run()
    assert result.learned == 299 and result.dead_lettered == 1
    assert result.metrics["dead_letter_reasons"] == {"rejected_by_model": 1}
    oracle = make()
    for x, y in data:
        try:
            oracle.learn_one(x, y)
        except InvalidInput:
            pass
    model = engine.model
    assert dict(model["StandardScaler"].counts) == dict(oracle["StandardScaler"].counts)
    assert dict(model["StandardScaler"].counts) == {"a": 300, "b": 300, "c": 300}
    probe = [dict(zip("abc", row)) for row in rng.normal(size=(100, 3)).tolist()]
    assert [model.predict_one(x) for x in probe] == [oracle.predict_one(x) for x in probe]


@pytest.mark.parametrize("proba", [False, True])
def test_a_river_model_without_block_methods_scores_event_by_event(tmp_path, proba):
    train, score = BANANAS[:300], [x for x, _ in BANANAS[300:400]]
    events = [{"x": x, "y": y} for x, y in train] + [{"x": x, "id": i} for i, x in enumerate(score)]
    engine, result, letters, written = _run(
        tmp_path, events, lambda: tree.HoeffdingTreeClassifier(grace_period=50), proba
    )
    assert result.learned == 300 and result.scored == 100 and not letters
    oracle = tree.HoeffdingTreeClassifier(grace_period=50)
    for x, y in train:
        oracle.learn_one(x, y)
    assert [r["prediction"] for r in written] == [oracle.predict_one(x) for x in score]
    if proba:
        want = [{json.dumps(k): v for k, v in oracle.predict_proba_one(x).items()} for x in score]
        assert [r["proba"] for r in written] == want


def test_a_model_the_engine_cannot_run_is_refused_at_start(tmp_path):
    events = [{"x": x} for x, _ in BANANAS[:50]]
    log = tmp_path / "events.jsonl"
    write_log(log, events)
    engine = Engine(ReplaySource(log), lambda: anomaly.HalfSpaceTrees(seed=1))
    with pytest.raises(ConfigError, match="HalfSpaceTrees has no predict_one.*KernelNovelty"):
        engine.run()


def test_the_scorer_dead_letters_an_event_the_merged_model_refuses(tmp_path):
    """``streamk score``'s loop: a poison event used to stop the scorer, and a restart would
    read the same batch again (it commits after publishing): it could never get past it."""
    from streamk.engine.config import load_config
    from streamk.merge.serve import Scorer
    from streamk.snapshot import SnapshotStore, dumps

    model = KernelPerceptron(budget=60)
    for x, y in BANANAS[:300]:
        model.learn_one(x, y)
    SnapshotStore(tmp_path / "snaps").save(dumps(model, {}, 0, role="merge", sources=[]), "merged")
    score = [x for x, _ in BANANAS[300:400]]
    bad = {5, 6, 70}
    log = tmp_path / "requests.jsonl"
    write_log(log, [{"x": huge(x) if i in bad else x, "id": i} for i, x in enumerate(score)])
    config = load_config(
        None,
        {
            "snapshot_dir": str(tmp_path / "snaps"),
            "merge_name": "merged",
            "predictions_file": str(tmp_path / "predictions.jsonl"),
            "dead_letter_dir": str(tmp_path / "dead"),
            "poll_timeout": 0.1,
            "stop_when_idle": 1.0,
            "max_records": 32,
        },
        environ={},
    )
    result = Scorer(config, source=ReplaySource(log)).run()
    assert result.scored == 100 - len(bad) and result.dead_lettered == len(bad)
    letters = list(read_dead_letters(tmp_path / "dead" / "dead-letters.jsonl"))
    assert sorted(letter.offset for letter in letters) == sorted(bad)
    assert {letter.code for letter in letters} == {"rejected_by_model"}
    written = list(read_predictions(tmp_path / "predictions.jsonl"))
    kept = [i for i in range(100) if i not in bad]
    assert [r["id"] for r in written] == kept
    assert [r["prediction"] for r in written] == [model.predict_one(score[i]) for i in kept]


def test_weights_are_checked_and_said_to_be_unused(tmp_path, caplog):
    """The user guide's promise about ``w``: an event with a weight is learned once, as if
    its weight were 1 (oracle: the learner fed the events without weights), a WARNING says
    so once, and a weight that is not a positive number is a dead letter."""
    from streamk.engine import runs

    runs._weights_ignored.cache_clear()
    events = [{"x": x, "y": y, "w": 2.5 if i % 3 else 1} for i, (x, y) in enumerate(BANANAS[:300])]
    events[40]["w"] = -1.0
    log = tmp_path / "events.jsonl"
    write_log(log, events)
    models = []
    with caplog.at_level("WARNING", logger="streamk.engine"):
        engine = Engine(
            ReplaySource(log),
            lambda: models.append(KernelPerceptron(budget=60)) or models[-1],
            config=EngineConfig(max_records=64),
        )
        result = engine.run()
    assert result.learned == 299 and result.dead_lettered == 1
    assert caplog.text.count("events carry weights ('w')") == 1
    oracle = KernelPerceptron(budget=60)
    for i, (x, y) in enumerate(BANANAS[:300]):
        if i != 40:
            oracle.learn_one(x, y)
    probe = [x for x, _ in BANANAS[300:400]]
    assert [models[-1].predict_one(x) for x in probe] == [oracle.predict_one(x) for x in probe]


def test_probabilities_of_a_model_without_them_are_refused_at_start(tmp_path):
    from river import linear_model

    log = tmp_path / "events.jsonl"
    write_log(log, [{"x": x, "y": float(y)} for x, y in BANANAS[:50]])
    engine = Engine(
        ReplaySource(log),
        linear_model.LinearRegression,
        predictions=FilePredictionSink(tmp_path / "predictions.jsonl"),
        config=EngineConfig(publish_proba=True),
    )
    with pytest.raises(ConfigError, match="publish_proba needs a classifier's probabilities"):
        engine.run()
