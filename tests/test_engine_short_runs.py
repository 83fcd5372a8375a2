"""A stream that interleaves labelled events and events to score: short runs, event by event.

The engine cuts each batch into runs of one kind (labelled or to score). Where the two
kinds alternate every event or few, each run is one event, and building its frames cost
about 300 µs an event (a 60,000-event replay ran at 1,500 events/s); a run shorter than
``BLOCK_MIN`` now goes event by event. The oracle is river's test-then-train written
plainly: each event predicted by the model that has learned every labelled event before
it, then learned if labelled, with the model the engine's configuration builds.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from river import metrics, utils

from streamk.engine.config import load_config
from streamk.engine.loop import EngineConfig
from streamk.engine.runner import model_factory
from streamk.engine.runs import BLOCK_MIN
from streamk.sinks import read_predictions
from tests.streamk_run import streamk


def _interleaved_log(path: Path, regression: bool, seed: int = 3) -> list[dict]:
    """Runs of every length from 1 to past ``BLOCK_MIN``, alternating kinds (random labels:
    many mistakes, so the support set changes all the time)."""
    rng = random.Random(seed)
    lengths = [1] * 40 + [2, 3, 5, BLOCK_MIN - 1, BLOCK_MIN, BLOCK_MIN + 1, 3 * BLOCK_MIN, 1, 1]
    events, labelled = [], True
    for length in lengths * 3:
        for _ in range(length):
            event = {"x": {"a": rng.gauss(0, 1), "b": rng.gauss(0, 1)}, "id": f"e-{len(events)}"}
            if labelled:
                event["y"] = rng.gauss(0, 1) if regression else rng.random() < 0.5
            events.append(event)
        labelled = not labelled
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return events


def _oracle(events: list[dict], overrides: dict, regression: bool) -> tuple[dict, float]:
    """Each unlabelled event's prediction under plain per-event test-then-train, and the
    rolling metric of the labelled events' predictions (river's ``Rolling``)."""
    config = load_config(overrides=overrides, environ={})
    model = model_factory(config)()
    metric = metrics.MAE if regression else metrics.Accuracy
    score = utils.Rolling(metric, window_size=EngineConfig().rolling_window)  # the CLI's
    out = {}
    for event in events:
        prediction = model.predict_one(event["x"])
        if "y" in event:
            model.learn_one(event["x"], event["y"])
            if prediction is not None:  # (a classifier with no class yet) not scored
                score.update(event["y"], prediction)
        else:
            out[event["id"]] = prediction
    return out, score.get()


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_an_interleaved_stream_is_learned_and_scored_as_test_then_train(tmp_path, task):
    regression = task == "regression"
    log = tmp_path / "events.jsonl"
    events = _interleaved_log(log, regression)
    learner = ["--learner", "svr"] if regression else []
    predictions = tmp_path / "p.jsonl"
    done = streamk(
        "replay", str(log), "--snapshot-dir", str(tmp_path / "s"), "--predictions-file",
        str(predictions), "--json", "--quiet", *learner,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    n_labelled = sum("y" in e for e in events)
    assert summary["learned"] == n_labelled and summary["dead_lettered"] == 0
    assert summary["scored"] == len(events) - n_labelled
    got = {r["id"]: r["prediction"] for r in read_predictions(predictions)}
    want, rolling = _oracle(events, {"learner": "svr"} if regression else {}, regression)
    assert summary["rolling_metric"] == pytest.approx(rolling, rel=1e-9)
    assert list(got) == list(want)  # every event to score, once, in stream order
    if regression:
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    else:
        assert got == want
