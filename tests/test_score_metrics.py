"""``streamk score --metrics-port``: a real scorer process serves its metrics endpoint.

It accepted the flag (and a shared streamk.toml's ``metrics_port``) and served nothing.
Oracle: the events sent by hand (good ones and undecodable ones) against the counters read
over HTTP from the running process.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from http_probe import free_port, http_get, metric_samples
from kafka import KafkaProducer

from streamk import RBF, KernelPerceptron
from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event
from streamk.snapshot import SnapshotPublisher, dumps

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = str(Path(__file__).resolve().parents[1])


def test_the_scorer_serves_events_scored_and_dead_lettered(kafka_broker, topic_name, tmp_path):
    b = kafka_broker.bootstrap_servers
    requests, snapshots = f"{topic_name}-req", f"{topic_name}-snap"
    create_topic(b, requests, partitions=1)
    model = KernelPerceptron(kernel=RBF(0.5))
    for i in range(50):
        model.learn_one({"a": i / 50 - 0.5}, i % 2 == 0)
    port = free_port()
    with SnapshotPublisher(b, snapshots) as pub:
        pub.publish("merged", dumps(model, {}, 3, role="merge", sources=[]))
        cmd = [
            sys.executable, "-m", "streamk.cli", "score", "--bootstrap-servers", b,
            "--score-topic", requests, "--score-group", f"{topic_name}-g",
            "--snapshot-topic", snapshots, "--snapshot-dir", str(tmp_path / "unused"),
            "--predictions-file", str(tmp_path / "p.jsonl"), "--metrics-port", str(port),
            "--max-poll-interval-ms", "3000", "--session-timeout-ms", "3000",
            "--heartbeat-interval-ms", "500", "--poll-timeout", "0.2", "--json", "--quiet",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": ROOT}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            producer = KafkaProducer(bootstrap_servers=b, acks="all")
            for i in range(40):
                producer.send(requests, encode_event({"a": i / 40}, id=i))
            for _ in range(3):
                producer.send(requests, b"{not json")
            producer.flush()
            producer.close()
            deadline, got = time.monotonic() + 90, {}
            done = ("streamk_events_scored", "streamk_events_dead_lettered")
            while sum(got.get(k, 0) for k in done) < 43:  # counted after the batch is scored
                assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
                assert time.monotonic() < deadline, f"metrics never counted the events: {got}"
                time.sleep(0.3)
                try:
                    got = metric_samples(http_get(port, "/metrics")[1])
                except OSError:
                    continue
            assert got["streamk_events_in"] == 43
            assert got["streamk_events_scored"] == 40
            assert got["streamk_events_dead_lettered"] == 3
            assert got["streamk_model_seq"] == 3
            assert "streamk_events_learned" not in got  # a scorer never learns
            text = http_get(port, "/metrics")[1]
            assert 'streamk_dead_letter_reasons_total{reason="' in text
            assert http_get(port, "/healthz")[0] == 200 and http_get(port, "/ready")[0] == 200
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err.decode()[-3000:]
    assert json.loads(out)["dead_letter_reasons"] == {"undecodable": 3}
    assert err.decode().count("dead letter at") == 3  # no destination: each of the first five
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
