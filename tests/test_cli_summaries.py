"""What the engine commands' summaries say when there is nothing to say, and when they say it.

- the rolling metric before any event is no value (`-`, JSON null), not 0.0: for regression
  0.0 would read as a perfect MAE (RollingScore.get);
- `--plot` into a directory that cannot take the curve stops before anything is learned;
- `--quiet` silences progress only: `score` and `merge` print their summary like the others.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from river.datasets import synth
from streamk_run import streamk

from streamk.engine.metrics import RollingScore
from streamk.sources.replay import write_log


def _rows(stdout: str) -> dict[str, str]:
    """A text summary's ``key  value`` lines as a dict."""
    return {k: v.strip() for k, v in (line.split(None, 1) for line in stdout.splitlines() if line)}


# -- no value before the first event ---------------------------------------------------------------


@pytest.mark.parametrize("regression", [True, False])
def test_rolling_score_has_no_value_before_the_first_event(regression):
    score = RollingScore(4, regression)
    assert score.get() is None
    ys, ps = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1.5, 2.0, 1.0, 4.0, 5.0, 3.0]
    score.update_many(ys, ps)
    window = list(zip(ys, ps))[-4:]  # the oracle: the mean over the last 4, written out
    if regression:
        want = sum(abs(y - p) for y, p in window) / 4
    else:
        want = sum(y == p for y, p in window) / 4
    assert score.get() == pytest.approx(want)


def test_a_resumed_replay_with_nothing_new_shows_no_rolling_metric(tmp_path):
    log = tmp_path / "friedman.jsonl"
    write_log(log, [{"x": x, "y": y} for x, y in synth.Friedman(seed=42).take(300)])
    args = ["replay", str(log), "--learner", "svr", "--snapshot-dir", str(tmp_path / "s")]
    first = streamk(*args, "--quiet")
    assert first.returncode == 0, first.stderr
    assert _rows(first.stdout)["learned"] == "300"
    assert float(_rows(first.stdout)["rolling_metric"]) > 0  # an MAE, learned
    again = streamk(*args, "--quiet")
    assert again.returncode == 0, again.stderr
    rows = _rows(again.stdout)
    assert rows["learned"] == "0" and rows["rolling_metric"] == "-"
    out = json.loads(streamk(*args, "--quiet", "--json").stdout)
    assert out["learned"] == 0 and out["rolling_metric"] is None


# -- --plot is checked before learning -------------------------------------------------------------


def _log(tmp_path: Path) -> Path:
    log = tmp_path / "events.jsonl"
    X = np.random.default_rng(3).normal(size=(200, 2))
    write_log(log, [{"x": {"a": float(a), "b": float(b)}, "y": bool(a > 0)} for a, b in X])
    return log


@pytest.mark.parametrize("where", ["nodir/c.png", "."], ids=["missing directory", "a directory"])
def test_an_unwritable_plot_path_stops_before_learning(tmp_path, where):
    snapshots = tmp_path / "s"
    run = streamk(
        "replay", str(_log(tmp_path)), "--plot", where, "--snapshot-dir", str(snapshots),
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("streamk: error: --plot ")
    assert not snapshots.exists()  # nothing learned, nothing snapshotted: the rerun has it all
    assert not any(tmp_path.glob("**/*.png"))


# -- --quiet keeps the summary ---------------------------------------------------------------------


def test_merge_quiet_prints_its_summary(tmp_path):
    args = ["merge", "--snapshot-dir", str(tmp_path / "s"), "--topic", "events", "--once"]
    loud, quiet = streamk(*args), streamk(*args, "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert _rows(quiet.stdout)["passes"] == "1" and _rows(quiet.stdout)["merge_name"] == "merged"
    assert quiet.stdout == loud.stdout


def test_score_quiet_prints_its_summary(kafka_broker, topic_name, tmp_path):
    from kafka import KafkaProducer

    from streamk import KernelPerceptron
    from streamk.cli.broker import create_topic
    from streamk.engine.events import encode_event
    from streamk.snapshot import SnapshotPublisher, dumps

    b = kafka_broker.bootstrap_servers
    requests, snapshots = f"{topic_name}-req", f"{topic_name}-snap"
    create_topic(b, requests, partitions=1)
    model = KernelPerceptron()
    for i in range(20):
        model.learn_one({"a": float(i - 10)}, i >= 10)
    with SnapshotPublisher(b, snapshots) as pub:
        pub.publish("merged", dumps(model, {}, 0, role="merge", sources=[]))
    producer = KafkaProducer(bootstrap_servers=b, acks="all")
    for i in range(30):
        producer.send(requests, encode_event({"a": float(i - 15)}, id=i))
    producer.flush()
    producer.close()
    run = streamk(
        "score", "--bootstrap-servers", b, "--score-topic", requests,
        "--score-group", f"{topic_name}-g", "--snapshot-topic", snapshots,
        "--snapshot-dir", str(tmp_path / "unused"),
        "--predictions-file", str(tmp_path / "p.jsonl"), "--max-poll-interval-ms", "3000",
        "--session-timeout-ms", "3000", "--heartbeat-interval-ms", "500",
        "--poll-timeout", "0.2", "--stop-when-idle", "3", "--quiet",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    rows = _rows(run.stdout)
    assert rows["records"] == "30" and rows["scored"] == "30" and rows["model"] == "merged"
