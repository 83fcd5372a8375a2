"""One log, one answer with the default on-line standardisation (``scale = "auto"``).

``streamk replay`` of a log whose events gain a feature mid-stream (mid-run), in runs of 1
and of 64 records (the engine hands each run to the model as one block): the published
predictions and the snapshot's model are the same, and they are those of the configured
model fed one event at a time in process (``predict_one``, then ``learn_one`` for a
labelled event; river's ``StandardScaler() | learner`` order; an unlabelled event, alone
between labelled ones, is scored as the engine scores a run: ``predict_many``). Real entry
point, real snapshot files.
"""

from __future__ import annotations

import json
import pickle
import random

import pandas as pd
import pytest
from streamk_run import streamk

from streamk.engine.config import load_config
from streamk.engine.runner import model_factory
from streamk.snapshot import SnapshotStore, dumps, loads
from streamk.sources.replay import write_log


def _events(learner: str, n: int = 600, seed: int = 3) -> list[dict]:
    """Two features in very different units, a third from event 250 on; every 6th
    event unlabelled (its prediction is published). The SVR's targets are real numbers,
    so a prediction differs wherever any bit of the model does."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        x = {"a": rng.gauss(0.0, 1.0), "b": rng.gauss(500.0, 200.0)}
        if i >= 250:
            x["c"] = rng.gauss(3.0, 0.5)
        event = {"x": x, "id": i}
        if i % 6:
            score = x["a"] * (x["b"] - 500.0) / 200.0 + x.get("c", 0.0)
            event["y"] = score if learner == "svr" else score > 0
        events.append(event)
    return events


def _one_at_a_time(settings: dict, events: list[dict]) -> tuple[dict, bytes]:
    """The configured model (scale auto: standardised) fed one event at a time."""
    model = model_factory(load_config(overrides=settings))()
    published = {}
    for e in events:
        if "y" in e:
            model.predict_one(e["x"])
            model.learn_one(e["x"], e["y"])
        else:  # the engine scores an unlabelled run with predict_many (here: of one row)
            published[e["id"]] = model.predict_many(pd.DataFrame([e["x"]])).tolist()[0]
    return published, pickle.dumps(loads(dumps(model)).model.state())  # (the codec's types)


@pytest.mark.parametrize("learner", ["perceptron", "svr"])
@pytest.mark.parametrize("max_records", [1, 64])
def test_a_replay_is_one_answer_whatever_the_run_size(tmp_path, max_records, learner):
    settings = {"learner": learner, "budget": 80}
    events = _events(learner)
    log = tmp_path / "events.jsonl"
    write_log(log, events)
    preds, snaps = tmp_path / "preds.jsonl", tmp_path / "snaps"
    args = ["--learner", learner, "--budget", str(settings["budget"])]
    args += ["--max-records", str(max_records), "--snapshot-dir", str(snaps)]
    done = streamk("replay", str(log), *args, "--predictions-file", str(preds), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["learned"] == sum("y" in e for e in events)
    published = {
        json.loads(line)["id"]: json.loads(line)["prediction"]
        for line in preds.read_text().splitlines()
    }
    expected, state = _one_at_a_time(settings, events)
    assert published == expected
    snapshot = SnapshotStore(snaps).latest(load_config(overrides=settings)["model_name"])
    assert type(snapshot.model).__name__.startswith("StandardScaled")
    assert pickle.dumps(snapshot.model.state()) == state
