"""Damaged snapshot stores through the real ``streamk run`` entry point (issue 13).

The in-process matrix (tests/test_fault_matrix.py) covers every fault; here a subset runs
as an operator meets it: ``streamk run`` processes on the local broker, a damaged store
between them, and what the command prints (the WARNING lines, the restored snapshot,
the all-corrupt stop naming the command to run, exit codes).
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from streamk_run import run_args
from test_fault_matrix import EVENTS, MODEL, N, _corrupt, _newest_files

from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event
from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def run(bootstrap, topic, store, **settings):
    args = run_args(
        bootstrap,
        topic,
        "cli-faults",
        store,
        model_name=MODEL,
        snapshot_every=500,
        max_records=500,
        budget=300,
        consolidate_every=700,
        consolidate_window=300,
        **settings,
    )
    cmd = [sys.executable, "-m", "streamk.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.fixture
def topic(kafka_broker):
    from kafka import KafkaProducer

    name = f"cli-faults-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap_servers, name, partitions=1)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, acks="all")
    for i, (x, y) in enumerate(EVENTS):
        producer.send(name, encode_event(x, y=y, id=i))
    producer.flush()
    producer.close()
    return name


def _learned(store):
    model = SnapshotStore(store).latest(MODEL).model
    return getattr(model, "_wrapped_model", model).n_learned


def test_truncated_newest_snapshot_is_relearned_and_said(kafka_broker, topic, tmp_path):
    b, store = kafka_broker.bootstrap_servers, tmp_path / "store"
    first = run(b, topic, store, max_events=2000)
    assert first.returncode == 0, first.stderr[-2000:]
    (newest,) = _newest_files(store, 1)
    newest.write_bytes(newest.read_bytes()[:100])
    second = run(b, topic, store, stop_when_idle=2)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "WARNING" in second.stderr and newest.name in second.stderr
    assert "learned again" in second.stderr
    assert "restored seq" in second.stderr
    assert second.stderr.startswith(f"connecting to {b} (topic {topic!r}")  # said first
    assert _learned(store) == N


def test_all_corrupt_store_stops_with_the_remedy_then_starts_fresh(kafka_broker, topic, tmp_path):
    b, store = kafka_broker.bootstrap_servers, tmp_path / "store"
    assert run(b, topic, store, max_events=2000).returncode == 0
    for path in _newest_files(store, 100):
        _corrupt(path)
    stopped = run(b, topic, store, stop_when_idle=2)
    assert stopped.returncode == 2
    assert "streamk snapshot reset" in stopped.stderr
    reset = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "snapshot", "reset", "--dir", str(store)]
        + ["--model", MODEL],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reset.returncode == 0, reset.stderr
    fresh = run(b, topic, store, stop_when_idle=2)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert "starting a fresh model" in fresh.stderr
    assert _learned(store) == N  # the fresh model learned the whole stream, once
