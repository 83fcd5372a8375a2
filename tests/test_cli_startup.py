"""What the commands say at start-up, and that a second demo run learns again.

Each test runs the real ``streamk`` entry point in a subprocess (issue 13: a fallback,
rewind or fresh start is never silent; issue 13 item 6: a second ``streamk demo`` in
the same directory used to learn 0 events and report accuracy 0.0000 with exit 0).
"""

from __future__ import annotations

import json
import random

import pytest
from streamk_run import streamk

from streamk.sources.replay import write_log


def _log(path, n=300, seed=3):
    rng = random.Random(seed)
    events = []
    for i in range(n):
        x = {"a": rng.uniform(-1, 1), "b": rng.uniform(-1, 1)}
        events.append({"x": x, "y": x["a"] * x["b"] > 0, "id": i})
    write_log(path, events)


def test_replay_says_fresh_then_restored(tmp_path):
    log = tmp_path / "events.jsonl"
    _log(log)
    snaps = tmp_path / "snaps"
    first = streamk("replay", str(log), "--snapshot-dir", str(snaps), "--json")
    assert first.returncode == 0, first.stderr
    assert "no snapshot in" in first.stderr and "starting a fresh model" in first.stderr
    from streamk import accel

    assert f"engine     {accel.describe()}" in first.stderr  # compiled core on, or why not
    seq = json.loads(first.stdout)["seq"]
    second = streamk("replay", str(log), "--snapshot-dir", str(snaps), "--json")
    assert second.returncode == 0, second.stderr
    # scale = auto standardises a classifier's features: the wrapper and the learner
    assert f"restored seq {seq} (StandardScaledClassifier(KernelPerceptron))" in second.stderr
    assert "offsets 0:300" in second.stderr
    assert json.loads(second.stdout)["learned"] == 0


@pytest.mark.kafka
@pytest.mark.slow
def test_second_demo_in_the_same_directory_learns_every_event_again(tmp_path):
    runs = []
    for _ in range(2):
        out = streamk("demo", "--dir", str(tmp_path), "--n", "500", "--json")
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout))
    first, second = runs
    assert first["learned"] > 0
    assert second["learned"] == first["learned"]
    assert second["records"] == first["records"] == first["produced"]


def test_a_configured_learner_that_differs_from_the_snapshot_is_named(tmp_path):
    """Issue 19: ``--learner svr`` on a store holding a perceptron silently resumed it."""
    log = tmp_path / "events.jsonl"
    _log(log)
    snaps = tmp_path / "snaps"
    assert streamk("replay", str(log), "--snapshot-dir", str(snaps)).returncode == 0
    other = streamk("replay", str(log), "--snapshot-dir", str(snaps), "--budget", "40")
    assert other.returncode == 0, other.stderr
    assert "WARNING" in other.stderr and "but the snapshot holds" in other.stderr
    assert "budget=RemoveOldest(40)" in other.stderr  # what was asked for
    same = streamk("replay", str(log), "--snapshot-dir", str(snaps))
    assert "but the snapshot holds" not in same.stderr


def test_turning_consolidation_on_for_a_standardised_model_names_the_remedy(tmp_path):
    """A model the defaults standardise (``scale = auto`` without consolidation) cannot be
    consolidated (its window would hold raw rows); ``--consolidate-every`` on its store
    ended in ``Consolidated wraps a streamk kernel learner, got StandardScaledClassifier``.
    It is a start-up error naming the two ways on, and the snapshot is left as it was."""
    log = tmp_path / "events.jsonl"
    _log(log)
    snaps = tmp_path / "snaps"
    first = streamk("replay", str(log), "--snapshot-dir", str(snaps), "--json")
    assert first.returncode == 0, first.stderr
    files = sorted(p.name for p in (snaps / "model").iterdir())
    again = streamk(
        "replay", str(log), "--snapshot-dir", str(snaps), "--consolidate-every", "50", "--json"
    )
    assert again.returncode == 2, again.stderr
    assert "holds a model that standardises its features" in again.stderr
    assert "Keep consolidate_every = 0" in again.stderr and "another model_name" in again.stderr
    assert "Traceback" not in again.stderr
    assert sorted(p.name for p in (snaps / "model").iterdir()) == files


@pytest.mark.parametrize("where", ["below-proc", "below-a-file"])
def test_a_snapshot_dir_that_cannot_be_made_is_a_start_up_error(tmp_path, where):
    """Found at start-up, naming the key; before, ``replay`` said only ``[Errno 2] No
    such file or directory`` and ``run`` failed at the first assignment with a traceback
    ending in the client's "User rebalance callback throws an error"."""
    log = tmp_path / "events.jsonl"
    _log(log)
    (tmp_path / "file").write_text("")
    bad = "/proc/streamk-no-such-dir" if where == "below-proc" else str(tmp_path / "file" / "x")
    done = streamk("replay", str(log), "--snapshot-dir", bad)
    assert done.returncode == 2, done.stderr
    assert f"snapshot_dir = '{bad}' is not a directory streamk can write" in done.stderr
    assert "--snapshot-dir" in done.stderr and "fresh model" not in done.stderr


@pytest.mark.kafka
def test_run_with_a_snapshot_dir_that_cannot_be_made_stops_before_joining(kafka_broker, topic_name):
    from streamk_run import run_args

    from streamk.cli.broker import create_topic

    create_topic(kafka_broker.bootstrap_servers, topic_name, partitions=1)
    bad = "/proc/streamk-no-such-dir"
    args = run_args(kafka_broker.bootstrap_servers, topic_name, f"{topic_name}-g", bad)
    done = streamk(*args)
    assert done.returncode == 2, done.stderr
    assert f"snapshot_dir = '{bad}' is not a directory streamk can write" in done.stderr
    assert "Traceback" not in done.stderr and "rebalance callback" not in done.stderr


def test_a_regression_log_fed_to_the_default_classifier_is_dead_lettered_not_learned(tmp_path):
    """``streamk replay`` of a Friedman log with the defaults (a classifier) learned every
    target as a class: 300 events, 299 support vectors, rolling metric 0, exit 0, at 15
    events/s by 3,000 events. Each fractional label is now refused with the remedy (a
    dead letter: the stream goes on), and ``--learner svr`` learns them all."""
    from river.datasets import synth

    from streamk.engine.deadletter import read_dead_letters

    events = [
        {"x": x, "y": y, "id": i} for i, (x, y) in enumerate(synth.Friedman(seed=1).take(300))
    ]
    log = tmp_path / "friedman.jsonl"
    write_log(log, events)
    dead = tmp_path / "dead"
    done = streamk(
        "replay", str(log), "--snapshot-dir", str(tmp_path / "a"), "--dead-letter-dir", str(dead),
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["learned"] == 0 and summary["dead_lettered"] == 300
    letters = [letter for path in dead.iterdir() for letter in read_dead_letters(path)]
    assert sorted(letter.offset for letter in letters) == list(range(300))
    assert all("not a real number" in letter.reason for letter in letters)
    assert all("learner = svr" in letter.reason for letter in letters)
    svr = streamk(
        "replay", str(log), "--snapshot-dir", str(tmp_path / "b"), "--learner", "svr", "--json"
    )
    assert svr.returncode == 0, svr.stderr
    assert json.loads(svr.stdout)["learned"] == 300
