"""Exactly-once model state under kill -9 and rebalances, with real processes and a real broker."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from kafka import KafkaProducer
from streamk_run import run_args

from streamk import RBF, KernelPerceptron, RemoveOldest
from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event
from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N = 2400


def make_events(n: int, seed: int = 3) -> list[tuple[dict, bool]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.sin(X[:, 0] * 2) + X[:, 1] * X[:, 2] > 0
    return [
        ({f"f{j}": float(v) for j, v in enumerate(row)}, bool(label)) for row, label in zip(X, y)
    ]


def produce(bootstrap: str, topic: str, events, partitions: int = 1) -> None:
    create_topic(bootstrap, topic, partitions=partitions)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i, (x, y) in enumerate(events):
        producer.send(topic, encode_event(x, y=y, id=i), partition=i % partitions)
    producer.flush()
    producer.close()


#: ``streamk run`` settings of the learner :func:`reference` is (the plain perceptron, no
#: standardising): the oracle of every test that runs it
REFERENCE_ARGS = {
    "model_name": "model",
    "learner": "perceptron",
    "kernel": "rbf:0.5",
    "budget": 80,
    "scale": "none",
}


def engine_cmd(bootstrap, topic, group, snapshot_dir, idle=4.0):
    return [sys.executable, "-m", "streamk.cli"] + run_args(
        bootstrap,
        topic,
        group,
        snapshot_dir,
        snapshot_every=150,
        max_records=50,
        stop_when_idle=idle,
        **REFERENCE_ARGS,
    )


@pytest.fixture
def spawn():
    """Start engine processes; any still running when the test ends is killed."""
    children: list[subprocess.Popen] = []

    def start(cmd):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        children.append(proc)
        return proc

    yield start
    for proc in children:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def reference(events):
    model = KernelPerceptron(kernel=RBF(0.5), budget=RemoveOldest(80))
    for x, y in events:
        model.learn_one(x, y)
    return model


def test_kill_minus_nine_at_random_points_learns_each_event_exactly_once(
    kafka_broker, topic_name, tmp_path, spawn
):
    events = make_events(N)
    produce(kafka_broker.bootstrap_servers, topic_name, events)
    snapshots = tmp_path / "snapshots"
    rng = random.Random(11)
    kills = 0
    for attempt in range(8):
        proc = spawn(engine_cmd(kafka_broker.bootstrap_servers, topic_name, "crashy", snapshots))
        # Kill at a random point (the group join alone takes ~3 s, the stream ~1-2 s more);
        # the last attempt runs to the end (drained, then stop_when_idle after it).
        limit = rng.uniform(3.5, 6.5) if attempt < 7 else 120
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            kills += 1
            continue
        assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]
        break
    else:
        pytest.fail("the engine never drained the topic")
    assert kills >= 1, "no kill happened; the test proved nothing"
    snap = SnapshotStore(snapshots).latest("model")
    assert snap.offsets == {topic_name: {0: N}}
    assert snap.model.n_learned == N  # not one event learned twice, not one skipped
    ref = reference(events)
    for x, _ in events[:100]:
        assert snap.model.predict_proba_one(x) == pytest.approx(ref.predict_proba_one(x), abs=1e-9)


def test_two_engines_in_one_group_cover_every_event_once_through_a_restart(
    kafka_broker, topic_name, tmp_path, spawn
):
    events = make_events(N, seed=5)
    produce(kafka_broker.bootstrap_servers, topic_name, events, partitions=4)
    b = kafka_broker.bootstrap_servers
    dir_a, dir_b = tmp_path / "a", tmp_path / "b"
    a = spawn(engine_cmd(b, topic_name, "pair", dir_a, idle=8.0))
    second = spawn(engine_cmd(b, topic_name, "pair", dir_b, idle=8.0))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (dir_b / "model").exists():
        time.sleep(0.2)  # wait (bounded) for B's first snapshot: it is mid-stream
    second.send_signal(signal.SIGTERM)  # a clean stop: snapshot, commit, exit 0
    assert second.wait(timeout=60) == 0, second.stderr.read().decode()[-2000:]
    restarted = spawn(engine_cmd(b, topic_name, "pair", dir_b, idle=8.0))
    assert a.wait(timeout=180) == 0, a.stderr.read().decode()[-2000:]
    assert restarted.wait(timeout=180) == 0, restarted.stderr.read().decode()[-2000:]
    snap_a = SnapshotStore(dir_a).latest("model")
    snap_b = SnapshotStore(dir_b).latest("model")
    learned = (snap_a.model.n_learned if snap_a else 0) + (snap_b.model.n_learned if snap_b else 0)
    assert learned == N  # no overlap (would exceed N) and no gap (would fall short)
    ends = {}
    for snap in (snap_a, snap_b):
        if snap is not None:
            for p, off in snap.offsets.get(topic_name, {}).items():
                ends[p] = max(ends.get(p, 0), off)
    assert ends == {p: N // 4 for p in range(4)}
