"""A worker evicted from its group (a batch outlasted ``max_poll_interval_ms``) learns each
event once (docs/operations.md, "worker evicted").

The real ``streamk run`` reads a real topic; once, after the batch holding offset 1,220,
it takes 8 s (tests/helpers/slow_at_offset.py) against a 3 s poll interval. The group
evicts it, its partition is *lost* (not revoked, nothing committed), and it rejoins and
gets the partition again at the last commit (offset 1,000). Its model had learned up to
1,250: before the fix it kept those 250 events and learned them again (2,650 events in a
model of a 2,400-event stream, 57 of 300 probe predictions off the plain learner's). Now
the model returns to its last snapshot when the partition is lost. Oracle: the plain
perceptron fed the stream once, in-process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from streamk_run import run_args
from test_engine_crash import REFERENCE_ARGS, make_events, produce, reference

from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N, SLOW_AT, SLOW_S = 2400, 1220, 8.0
SLOW = Path(__file__).parent / "helpers" / "slow_at_offset.py"
SLOW_COMMIT = Path(__file__).parent / "helpers" / "slow_before_commit.py"


def _worker(broker, topic, events, store, transport) -> list[str]:
    """``events`` on ``topic``, and the ``streamk run`` arguments of the worker under test:
    the plain perceptron (the oracle's), warnings shown (they are part of what is checked)."""
    produce(broker.bootstrap_servers, topic, events)
    args = run_args(
        broker.bootstrap_servers,
        topic,
        f"{topic}-group",
        store,
        snapshot_every=500,
        snapshot_seconds=0,
        max_records=50,
        stop_when_idle=8.0,
        transport=transport,
        **REFERENCE_ARGS,
    )
    return [a for a in args if a != "--quiet"]


@pytest.mark.parametrize("transport", ["kafka-python", "confluent"])
def test_an_evicted_worker_learns_each_event_once(kafka_broker, topic_name, tmp_path, transport):
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    events = make_events(N, seed=21)
    store = tmp_path / "snapshots"
    args = _worker(kafka_broker, topic_name, events, store, transport)
    proc = subprocess.run(
        [sys.executable, str(SLOW), str(SLOW_AT), str(SLOW_S), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "lost (this worker was evicted" in proc.stderr, proc.stderr[-3000:]
    assert "the 250 records read since are read again" in proc.stderr
    assert "lost the connection" not in proc.stderr  # an eviction is not an outage
    snap = SnapshotStore(store).latest("model")
    assert snap.offsets == {topic_name: {0: N}}
    assert snap.model.n_learned == N  # 2,650 before: the 250 learned twice
    assert snap.metrics["evictions_total"] == 1
    ref = reference(events)
    for x, _ in make_events(300, seed=99):
        assert snap.model.predict_proba_one(x) == pytest.approx(ref.predict_proba_one(x), abs=1e-9)


@pytest.mark.parametrize("transport", ["kafka-python", "confluent"])
def test_a_commit_refused_after_a_durable_snapshot_is_counted_and_loses_nothing(
    kafka_broker, topic_name, tmp_path, transport
):
    """The worker stalls between its second snapshot and its commit (8 s against a 3 s poll
    interval), so the group evicts it and the broker refuses the commit. The snapshot holds
    the offsets: every event is learned once. The failure was counted in
    ``streamk_snapshots_written`` as a completed checkpoint (snapshot + commit), so the
    operations guide's alert for failing commits could never fire; it is now
    ``streamk_commit_failures_total``."""
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    events = make_events(N, seed=22)
    store = tmp_path / "snapshots"
    args = _worker(kafka_broker, topic_name, events, store, transport)
    proc = subprocess.run(
        [sys.executable, str(SLOW_COMMIT), "2", str(SLOW_S), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "offset commit failed after snapshot seq 2" in proc.stderr, proc.stderr[-3000:]
    snap = SnapshotStore(store).latest("model")
    assert snap.metrics["commit_failures_total"] >= 1
    assert snap.model.n_learned == N  # the snapshot's offsets held: nothing learned twice
    ref = reference(events)
    for x, _ in make_events(300, seed=99):
        assert snap.model.predict_proba_one(x) == pytest.approx(ref.predict_proba_one(x), abs=1e-9)
