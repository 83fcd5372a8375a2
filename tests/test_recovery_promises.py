"""Two restarts of the runbook on a real broker: a lost newest snapshot, a deleted model
directory (docs/operations.md, "The contract", "Metrics to watch", "How to start over").

Real ``streamk run`` processes on the session's broker; the store is damaged between runs
the way an operator would (a file deleted, a directory removed). The oracles: the events
the test produced, and a plain perceptron fed exactly the events the model should hold.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from kafka import KafkaProducer
from streamk_run import run_args
from test_engine_crash import REFERENCE_ARGS, make_events, produce, reference

from streamk.engine.events import encode_event
from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def run(bootstrap: str, topic: str, store, **settings) -> subprocess.CompletedProcess:
    """``streamk run`` until the topic is drained (then 2 s idle), with its stderr."""
    args = run_args(
        bootstrap,
        topic,
        f"{topic}-group",
        store,
        snapshot_every=500,
        snapshot_seconds=0,
        max_records=100,
        stop_when_idle=2,
        **{**REFERENCE_ARGS, **settings},
    )
    args = [a for a in args if a != "--quiet"]  # the WARNING lines are part of the check
    cmd = [sys.executable, "-m", "streamk.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def assert_holds(snap, topic: str, events, end: int) -> None:
    """``snap`` covers the topic up to ``end`` and is the plain perceptron of ``events``."""
    assert snap.offsets == {topic: {0: end}}
    assert snap.model.n_learned == len(events)
    ref = reference(events)
    for x, _ in events[::13]:
        assert snap.model.predict_proba_one(x) == pytest.approx(ref.predict_proba_one(x), abs=1e-9)


def test_a_lost_newest_snapshot_is_counted_as_a_rewind_and_learned_again(
    kafka_broker, topic_name, tmp_path
):
    """docs/operations.md, "Metrics to watch": "`streamk_rewinds_total` | counter |
    partitions resumed before a commit of this model's: a newer snapshot of it was lost
    (damaged, deleted), so the events after the one restored are learned again"; and "The
    contract": "a commit by **our** model ... that is ahead of the restored snapshot means a
    newer snapshot of ours was lost ...: the events in between ... are **learned again**,
    with a WARNING line saying so".

    1,500 events, a snapshot every 500 (seq 3 at 1,500, committed). seq 3 is deleted; the
    next run restores seq 2, says events 1000..1499 are learned again, counts one rewind
    (in the snapshot's metrics, the registry ``/metrics`` exports) and ends with each
    event learned once."""
    n, bootstrap, store = 1500, kafka_broker.bootstrap_servers, tmp_path / "snapshots"
    events = make_events(n, seed=31)
    produce(bootstrap, topic_name, events)
    first = run(bootstrap, topic_name, store)
    assert first.returncode == 0, first.stderr[-3000:]
    newest = SnapshotStore(store).latest("model")
    assert newest.seq == 3 and newest.metrics["rewinds_total"] == 0
    (store / "model" / f"{3:012d}.snapshot").unlink()  # lost: deleted by mistake
    second = run(bootstrap, topic_name, store)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "restored seq 2" in second.stderr
    (warning,) = [line for line in second.stderr.splitlines() if "is ahead of" in line]
    assert "WARNING" in warning and "our commit at 1500" in warning
    assert "events 1000..1499 are learned again" in warning
    snap = SnapshotStore(store).latest("model")
    assert snap.seq == 3 and snap.metrics["rewinds_total"] == 1  # (the lost seq is reused)
    assert_holds(snap, topic_name, events, n)


def test_a_deleted_model_directory_resumes_at_the_commit_with_an_empty_model(
    kafka_broker, topic_name, tmp_path
):
    """docs/operations.md, "How to start over": "To **start a fresh model from now** (forget
    the past, do not replay), delete only the model directories (`<snapshot_dir>/<model_name>`,
    its `.store-id` with it): the engines resume at the committed offsets with empty models."

    A run learns 1,000 events and commits; the model directory is removed and 600 more
    events arrive. The next run starts a fresh model at offset 1,000: it holds exactly the
    600 new events, as a perceptron fed only those would."""
    first_n, more, bootstrap = 1000, 600, kafka_broker.bootstrap_servers
    store = tmp_path / "snapshots"
    events = make_events(first_n + more, seed=32)
    produce(bootstrap, topic_name, events[:first_n])
    first = run(bootstrap, topic_name, store)
    assert first.returncode == 0, first.stderr[-3000:]
    assert SnapshotStore(store).latest("model").offsets == {topic_name: {0: first_n}}
    shutil.rmtree(store / "model")  # .store-id and .commits.json with it
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i, (x, y) in enumerate(events[first_n:], start=first_n):
        producer.send(topic_name, encode_event(x, y=y, id=i))
    producer.flush()
    producer.close()
    second = run(bootstrap, topic_name, store)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "starting a fresh model" in second.stderr
    assert_holds(SnapshotStore(store).latest("model"), topic_name, events[first_n:], first_n + more)
