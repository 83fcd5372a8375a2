"""Scale-out with real processes on the local broker: 3 ``streamk run`` workers, 1 merger.

A 6-partition labelled topic; three workers in one group, each with its own model name and
file store, one shared snapshot topic; ``streamk merge --once`` after they drain. Oracles:
the events produced (every event in exactly one worker's durable snapshot: the learned
counts sum to N and the offsets reach each partition's end) and held-out labels (the merged
model is at least as accurate as the best worker).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaProducer
from river import datasets

from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event
from streamk.snapshot import SnapshotReader, SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = str(Path(__file__).resolve().parents[1])
PARTITIONS, N, HELD_OUT = 6, 3000, 1000
WORKERS = ("w0", "w1", "w2")


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "streamk.cli", *args]


def test_three_workers_and_a_merger_learn_each_event_once_and_merge_no_worse(
    kafka_broker, topic_name, tmp_path
):
    b = kafka_broker.bootstrap_servers
    events, snapshots = topic_name, f"{topic_name}-snapshots"
    data = list(datasets.Bananas().take(N + HELD_OUT))
    train, held_out = data[:N], data[N:]
    create_topic(b, events, partitions=PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=b, acks="all")
    for i, (x, y) in enumerate(train):
        producer.send(events, encode_event(x, y=y, id=i), partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    ends = {str(p): len(range(p, N, PARTITIONS)) for p in range(PARTITIONS)}

    env = {**os.environ, "PYTHONPATH": ROOT}
    common = [
        "--bootstrap-servers", b, "--topic", events, "--snapshot-topic", snapshots,
        "--learner", "perceptron", "--kernel", "rbf", "--budget", "200", "--scale", "none",
        "--max-poll-interval-ms", "3000", "--session-timeout-ms", "3000",
        "--heartbeat-interval-ms", "500", "--poll-timeout", "0.2",
    ]  # fmt: skip
    workers = [
        subprocess.Popen(
            cli(
                "run",
                *common,
                "--group",
                f"{topic_name}-g",
                "--model-name",
                name,
                "--snapshot-dir",
                str(tmp_path / name),
                "--snapshot-every",
                "200",
                "--max-records",
                "100",
                "--stop-when-idle",
                "6",
                "--quiet",
            ),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        for name in WORKERS
    ]
    try:
        for proc in workers:
            assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()[-3000:]
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    snaps = {name: SnapshotStore(tmp_path / name).latest(name) for name in WORKERS}
    assert all(s is not None for s in snaps.values()), "a worker wrote no snapshot"
    learned = {name: s.model.n_learned for name, s in snaps.items()}
    assert sum(learned.values()) == N, learned  # no overlap (more) and no gap (fewer)
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
    contributing = {n for n, c in learned.items() if c > 0}
    assert {s["name"]: s["seq"] for s in merged.meta["sources"]} == {
        n: snaps[n].seq for n in contributing
    }
    assert sum(s["n_learned"] for s in merged.meta["sources"]) == N

    # A restarted merger with an empty volume: the topic says what was published; the workers
    # are unchanged, so it publishes nothing.
    again = subprocess.run(
        cli("merge", *common, "--snapshot-dir", str(tmp_path / "fresh"), "--once", "--json"),
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["published"] == 0
    assert SnapshotReader(b, snapshots).latest("merged", timeout=30).seq == merged.seq

    def accuracy(model) -> float:
        return sum(model.predict_one(x) == y for x, y in held_out) / len(held_out)

    worker_acc = {n: accuracy(snaps[n].model) for n in contributing}
    merged_acc = accuracy(merged.model)
    print(f"learned {learned}; accuracy workers {worker_acc}, merged {merged_acc:.4f}")
    assert len(contributing) >= 2, f"the group did not spread the partitions: {learned}"
    assert merged_acc >= max(worker_acc.values())
