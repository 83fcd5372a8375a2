"""SIGINT (Ctrl-C) stops ``streamk run`` as SIGTERM does: finish the batch, snapshot, commit,
exit 0 (docs/operations.md). SIGTERM is held by tests/test_engine_crash.py and
tests/test_kafka_faults.py; this is the other signal, on a real process and broker.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from http_probe import free_port, http_get, metric_samples
from kafka import KafkaConsumer, TopicPartition
from streamk_run import run_args
from test_engine_crash import REFERENCE_ARGS, make_events, produce, reference

from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N = 1200


def test_sigint_finishes_the_batch_snapshots_and_commits(kafka_broker, topic_name, tmp_path):
    """docs/operations.md, "Under the hood: one checkpoint": "A checkpoint runs when a
    snapshot is due ..., and on shutdown (SIGTERM, SIGINT, end of a replay)."

    ``streamk run`` with every periodic snapshot off (``snapshot_every = 0``,
    ``snapshot_seconds = 0``) drains the topic; SIGINT then must be the one checkpoint:
    exit 0, the signal said on stderr, snapshot seq 1 covering all N events (each learned
    once, as the plain perceptron learns them) and the group's offset committed at N."""
    bootstrap = kafka_broker.bootstrap_servers
    events = make_events(N, seed=12)
    produce(bootstrap, topic_name, events)
    store, port, group = tmp_path / "snapshots", free_port(), f"{topic_name}-group"
    args = run_args(
        bootstrap,
        topic_name,
        group,
        store,
        snapshot_every=0,
        snapshot_seconds=0,
        max_records=100,
        metrics_port=port,
        **REFERENCE_ARGS,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamk.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:  # until every event was read (bounded)
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the engine never read the whole topic"
            try:
                status, body = http_get(port, "/metrics")
            except OSError:
                status = 0
            if status == 200 and metric_samples(body)["streamk_events_in"] == N:
                break
            time.sleep(0.2)
        assert not list(store.glob("*/*.snapshot"))  # the checkpoint below is SIGINT's
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-3000:]
    assert "SIGINT: finishing the batch, snapshotting" in err
    assert "Traceback" not in err and "interrupted" not in err
    snap = SnapshotStore(store).latest("model")
    assert snap.seq == 1 and snap.meta.get("reason") == "shutdown"
    assert snap.offsets == {topic_name: {0: N}}
    assert snap.model.n_learned == N
    ref = reference(events)
    for x, _ in events[:100]:
        assert snap.model.predict_proba_one(x) == pytest.approx(ref.predict_proba_one(x), abs=1e-9)
    journal = json.loads((store / "model" / ".commits.json").read_text())
    assert journal == {topic_name: {"0": [N]}}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    try:
        assert consumer.committed(TopicPartition(topic_name, 0)) == N
    finally:
        consumer.close()
