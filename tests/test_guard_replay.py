"""``streamk replay`` with consolidation and its guard, stopped and resumed, with a poison
event: the published predictions are those of the configured model fed the good events one
at a time in process, and the snapshot serves the lineage that model serves.

The stream is a 50-feature Hyperplane, where the batch solutions predict worse than the
on-line learner, so the guard switches to its unconsolidated copy: the predictions after
the switch come from the copy, and a restart that lost the guard's state would not give
them. Real entry point, real snapshot files.
"""

from __future__ import annotations

import json

from river.datasets import synth
from streamk_run import streamk

from streamk.engine.config import load_config
from streamk.engine.runner import model_factory
from streamk.snapshot import SnapshotStore
from streamk.sources.replay import write_log

SETTINGS = {
    "budget": 100,
    "consolidate_every": 300,
    "consolidate_window": 300,
    "consolidate_guard": 200,
}
POISON = 777


def _events(n: int = 2400) -> list[dict]:
    """Every 5th event unlabelled (its prediction is published); one poison event."""
    events = []
    for i, (x, y) in enumerate(synth.Hyperplane(seed=42, n_features=50).take(n)):
        if i == POISON:
            x = {k: 1e200 for k in x}
        events.append({"x": x, "id": i} if i % 5 == 0 else {"x": x, "y": y, "id": i})
    return events


def _one_at_a_time(events: list[dict]) -> tuple[dict, object]:
    """The configured model fed the events one at a time; the poison event skipped."""
    model = model_factory(load_config(overrides=SETTINGS))()
    published = {}
    for e in events:
        if e["id"] == POISON:
            continue
        if "y" in e:
            model.predict_one(e["x"])
            model.learn_one(e["x"], e["y"])
        else:
            published[e["id"]] = model.predict_one(e["x"])
    return published, model


def test_a_guarded_replay_stopped_and_resumed_publishes_the_one_at_a_time_predictions(
    tmp_path,
):
    events = _events()
    log = tmp_path / "events.jsonl"
    write_log(log, events)
    preds, snaps = tmp_path / "preds.jsonl", tmp_path / "snaps"
    args = [
        "--budget", "100", "--consolidate-every", "300", "--consolidate-window", "300",
        "--consolidate-guard", "200", "--max-records", "64", "--snapshot-every", "256",
        "--snapshot-dir", str(snaps), "--predictions-file", str(preds), "--json",
    ]  # fmt: skip
    first = streamk("replay", str(log), *args, "--max-events", "1100")
    assert first.returncode == 0, first.stderr
    second = streamk("replay", str(log), *args)
    assert second.returncode == 0, second.stderr
    assert json.loads(first.stdout)["dead_lettered"] == 1  # the poison event, in the first
    assert json.loads(second.stdout)["dead_lettered"] == 0
    published = {}
    for line in preds.read_text().splitlines():  # at-least-once: the last word per id
        record = json.loads(line)
        published[record["id"]] = record["prediction"]
    expected, model = _one_at_a_time(events)
    assert published == expected
    assert model.serving == "online" and model.n_consolidations > 0
    snapshot = SnapshotStore(snaps).latest(load_config(overrides=SETTINGS)["model_name"])
    assert snapshot.model.serving == "online"
    assert (
        snapshot.model.n_learned
        == model.n_learned
        == sum("y" in e for e in events) - ("y" in events[POISON])
    )
    shown = streamk("snapshot", "show", str(snaps / "model"), "--json")
    assert json.loads(shown.stdout)["serving"] == "online"
