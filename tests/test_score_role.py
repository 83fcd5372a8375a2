"""``streamk score``: a real scorer process on the local broker follows the merged model.

Oracle: each prediction against ``predict_one`` of the model whose seq it carries (models
built and kept here, published to the snapshot topic by hand); coverage by offsets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from kafka import KafkaProducer

from streamk import RBF, KernelPerceptron
from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event
from streamk.snapshot import SnapshotPublisher, dumps

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = str(Path(__file__).resolve().parents[1])


def events(n: int, seed: int) -> list[dict]:
    X = np.random.default_rng(seed).normal(size=(n, 2))
    return [{"a": float(r[0]), "b": float(r[1])} for r in X]


def trained(seed: int, flip: bool) -> KernelPerceptron:
    model = KernelPerceptron(kernel=RBF(0.5))
    for x in events(300, seed):
        model.learn_one(x, (x["a"] > 0) != flip)
    return model


def read_predictions(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def wait_until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_scorer_publishes_every_event_and_hot_swaps_to_a_new_merge(
    kafka_broker, topic_name, tmp_path
):
    b = kafka_broker.bootstrap_servers
    requests, snapshots = f"{topic_name}-req", f"{topic_name}-snap"
    create_topic(b, requests, partitions=2)
    models = {0: trained(1, flip=False), 1: trained(2, flip=True)}  # they disagree everywhere
    with SnapshotPublisher(b, snapshots) as pub:
        pub.publish("merged", dumps(models[0], {}, 0, role="merge", sources=[]))
        preds = tmp_path / "preds.jsonl"
        env = {**os.environ, "PYTHONPATH": ROOT}
        cmd = [
            sys.executable, "-m", "streamk.cli", "score", "--bootstrap-servers", b,
            "--score-topic", requests, "--score-group", f"{topic_name}-g",
            "--snapshot-topic", snapshots, "--snapshot-dir", str(tmp_path / "unused"),
            "--predictions-file", str(preds), "--max-poll-interval-ms", "3000",
            "--session-timeout-ms", "3000", "--heartbeat-interval-ms", "500",
            "--poll-timeout", "0.2", "--stop-when-idle", "6", "--json", "--quiet",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            producer = KafkaProducer(bootstrap_servers=b, acks="all")
            xs = events(400, seed=9)
            sent = 0

            def send(k: int) -> None:
                nonlocal sent
                for i in range(sent, sent + k):
                    producer.send(requests, encode_event(xs[i], id=i), partition=i % 2)
                producer.flush()
                sent += k

            send(100)
            wait_until(lambda: len(read_predictions(preds)) >= 100, 60, "first predictions")
            pub.publish("merged", dumps(models[1], {}, 1, role="merge", sources=[]))
            # the swap is asynchronous: feed small batches until seq 1 scores (bounded)
            while not any(p["model_seq"] == 1 for p in read_predictions(preds)):
                assert sent < 350, "the scorer never swapped to seq 1"
                send(10)
                wait_until(lambda: len(read_predictions(preds)) >= sent, 60, "predictions")
            send(400 - sent)
            out, err = proc.communicate(timeout=120)
            producer.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err.decode()[-3000:]
    summary = json.loads(out)
    assert summary["model_seqs"] == [0, 1] and summary["dead_lettered"] == 0
    # the rate while records flowed: the 6 s of stop_when_idle at the end are not in it
    # (they were: 400 events over the whole run read as a slow scorer)
    assert 0 < summary["busy_seconds"] <= summary["seconds"] - 6
    assert summary["events_per_second"] > summary["scored"] / (summary["seconds"] - 6)
    got = read_predictions(preds)
    assert {p["id"] for p in got} == set(range(400))  # every event scored (at least once)
    for p in got:
        assert p["prediction"] == models[p["model_seq"]].predict_one(xs[p["id"]])
    for part in (0, 1):  # a partition's events are scored by seq 0, then seq 1: never back
        seqs = [p["model_seq"] for p in sorted(got, key=lambda p: p["offset"])
                if p["partition"] == part]  # fmt: skip
        assert seqs == sorted(seqs)
