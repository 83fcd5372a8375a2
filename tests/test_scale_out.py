"""Scale-out with real processes on the local broker: 3 ``streamk run`` workers, 1 merger,
1 scorer.

A 6-partition labelled topic; three workers in one group, each with its own model name and
file store, one shared snapshot topic. One worker is killed by a real ``kill -9`` mid-stream
(at its second offset commit: its snapshot is durable, the commit is lost) and restarted;
``streamk merge --once`` runs after they drain. Two streams: Bananas then SEA (the feature
space changes mid-stream) and a d = 20 drifting hyperplane. Oracles: the events produced
(every event in exactly one worker's durable snapshot: the learned counts sum to N and the
offsets reach each partition's end) and held-out labels: the merged model is within 1 point of
the best worker and of one learner of the same configuration that learned the whole stream in
order (in process: the learner an engine would build); 1 point on 1,000 held-out events is
about 1.7 standard errors: which partitions a worker ends with depends on the kill's timing, and
a worker can match the merge by chance. Then a ``streamk score`` process scores the held-out
events from an unlabelled topic with the merged model: every event gets exactly the merged
model's ``predict_one``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaProducer
from river import datasets
from river.datasets import synth

from streamk.cli.broker import create_topic
from streamk.engine.config import load_config
from streamk.engine.events import encode_event
from streamk.engine.runner import model_factory
from streamk.snapshot import SnapshotReader, SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = str(Path(__file__).resolve().parents[1])
PARTITIONS = 6
WORKERS = ("w0", "w1", "w2")
KILLED = "w1"  # killed at its KILL_AT-th offset commit, then restarted
KILL_AT = 2
KILL_HELPER = str(Path(__file__).resolve().parent / "helpers" / "kill_at_commit.py")
#: the workers' learner, as flags and as config keys (the in-process oracle builds the same)
LEARNER = {"learner": "perceptron", "kernel": "rbf", "budget": 200, "scale": "none"}


def _plain(pairs) -> list[tuple[dict, bool]]:
    return [({str(k): float(v) for k, v in x.items()}, bool(y)) for x, y in pairs]


def bananas_then_sea() -> tuple[list, list]:
    """1,500 Bananas, then 2,500 SEA (3 other features); held out: the next 1,000 SEA."""
    sea = _plain(synth.SEA(variant=0, seed=1).take(3500))
    return _plain(datasets.Bananas().take(1500)) + sea[:2500], sea[2500:]


def hyperplane20() -> tuple[list, list]:
    """A d = 20 hyperplane drifting in 5 features; 4,000 to learn, the next 1,000 held out."""
    hyp = _plain(
        synth.Hyperplane(
            seed=1, n_features=20, n_drift_features=5, mag_change=0.001, noise_percentage=0.05
        ).take(5000)
    )
    return hyp[:4000], hyp[4000:]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "streamk.cli", *args]


def accuracy(model, held_out) -> float:
    return sum(model.predict_one(x) == y for x, y in held_out) / len(held_out)


@pytest.mark.parametrize("stream", [bananas_then_sea, hyperplane20], ids=lambda f: f.__name__)
def test_three_workers_one_killed_and_a_merger_learn_each_event_once_and_merge_no_worse(
    kafka_broker, topic_name, tmp_path, stream
):
    b = kafka_broker.bootstrap_servers
    events, snapshots = topic_name, f"{topic_name}-snapshots"
    train, held_out = stream()
    n = len(train)
    create_topic(b, events, partitions=PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=b, acks="all")
    for i, (x, y) in enumerate(train):
        producer.send(events, encode_event(x, y=y, id=i), partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    ends = {str(p): len(range(p, n, PARTITIONS)) for p in range(PARTITIONS)}

    env = {**os.environ, "PYTHONPATH": ROOT}
    common = [
        "--bootstrap-servers", b, "--topic", events, "--snapshot-topic", snapshots,
        "--group", f"{topic_name}-g",  # the merger's too: it merges its group's workers
        *(a for k, v in LEARNER.items() for a in ("--" + k, str(v))),
        "--max-poll-interval-ms", "3000", "--session-timeout-ms", "3000",
        "--heartbeat-interval-ms", "500", "--poll-timeout", "0.2",
    ]  # fmt: skip

    def worker(name: str, killed: bool = False) -> subprocess.Popen:
        args = [
            "run", *common, "--model-name", name,
            "--snapshot-dir", str(tmp_path / name), "--snapshot-every", "200",
            "--max-records", "100", "--stop-when-idle", "10", "--quiet",
        ]  # fmt: skip
        head = [sys.executable, KILL_HELPER, str(KILL_AT)] if killed else cli()
        return subprocess.Popen(
            [*head, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    workers = {name: worker(name, killed=name == KILLED) for name in WORKERS}
    try:
        # the kill: a real SIGKILL mid-stream, then the same worker (name, store) again
        assert workers[KILLED].wait(timeout=120) == -signal.SIGKILL, (
            "the worker was not killed mid-stream: "
            + workers[KILLED].stderr.read().decode()[-3000:]
        )
        workers[KILLED] = worker(KILLED)
        for proc in workers.values():
            assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()[-3000:]
    finally:
        for proc in workers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    snaps = {name: SnapshotStore(tmp_path / name).latest(name) for name in WORKERS}
    assert all(s is not None for s in snaps.values()), "a worker wrote no snapshot"
    learned = {name: s.model.n_learned for name, s in snaps.items()}
    assert sum(learned.values()) == n, learned  # no overlap (more) and no gap (fewer)
    reach = {str(p): 0 for p in range(PARTITIONS)}
    for s in snaps.values():
        for p, o in s.offsets.get(events, {}).items():
            reach[str(p)] = max(reach[str(p)], o)
    assert reach == ends

    done = subprocess.run(
        cli("merge", *common, "--snapshot-dir", str(tmp_path / "merger"), "--once", "--json"),
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["published"] == 1
    merged = SnapshotReader(b, snapshots).latest("merged", timeout=30)
    assert merged is not None and merged.offsets == {}
    contributing = {name for name, c in learned.items() if c > 0}
    assert {s["name"]: s["seq"] for s in merged.meta["sources"]} == {
        name: snaps[name].seq for name in contributing
    }
    assert sum(s["n_learned"] for s in merged.meta["sources"]) == n

    # A restarted merger with an empty volume: the topic says what was published; the workers
    # are unchanged, so it publishes nothing.
    again = subprocess.run(
        cli("merge", *common, "--snapshot-dir", str(tmp_path / "fresh"), "--once", "--json"),
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["published"] == 0
    assert SnapshotReader(b, snapshots).latest("merged", timeout=30).seq == merged.seq

    one = model_factory(load_config(None, LEARNER, environ={}))()
    for x, y in train:
        one.learn_one(x, y)
    worker_acc = {name: accuracy(snaps[name].model, held_out) for name in contributing}
    merged_acc, one_acc = accuracy(merged.model, held_out), accuracy(one, held_out)
    print(f"learned {learned}; accuracy workers {worker_acc}, merged {merged_acc:.4f}, "
          f"one learner {one_acc:.4f}")  # fmt: skip
    assert len(contributing) >= 2, f"the group did not spread the partitions: {learned}"
    assert merged_acc >= max(worker_acc.values()) - 0.01
    assert merged_acc >= one_acc - 0.01

    # The scorer: unlabelled held-out events in, the merged model's predictions out.
    requests, preds = f"{topic_name}-req", tmp_path / "predictions.jsonl"
    create_topic(b, requests, partitions=2)
    producer = KafkaProducer(bootstrap_servers=b, acks="all")
    for i, (x, _) in enumerate(held_out):
        producer.send(requests, encode_event(x, id=i), partition=i % 2)
    producer.flush()
    producer.close()
    scored = subprocess.run(
        cli("score", "--bootstrap-servers", b, "--score-topic", requests,
            "--score-group", f"{topic_name}-s", "--snapshot-topic", snapshots,
            "--snapshot-dir", str(tmp_path / "scorer"), "--predictions-file", str(preds),
            "--max-poll-interval-ms", "3000", "--session-timeout-ms", "3000",
            "--heartbeat-interval-ms", "500", "--poll-timeout", "0.2",
            "--stop-when-idle", "6", "--json", "--quiet"),
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr[-3000:]
    got = [json.loads(line) for line in preds.read_text().splitlines()]
    assert sorted(p["id"] for p in got) == list(range(len(held_out)))
    assert {p["model_seq"] for p in got} == {merged.seq}
    for p in got:
        assert p["prediction"] == merged.model.predict_one(held_out[p["id"]][0])
