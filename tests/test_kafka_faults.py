"""Kafka transports under faults, on real brokers: commit metadata, offsets past the end,
a 20-second network cut, and a clean exit of the confluent transport.

Each test uses its own topic (and, for the cut, its own tansu behind a TCP proxy that
the broker advertises, so every client connection goes through the proxy). Every
loop is bounded in count and time; drained means "every offset counted", never an
end offset (tansu 0.6 reports those wrongly, design §8).
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer
from streamk_run import recreate_topic

from streamk import KernelPerceptron
from streamk.cli.broker import QUICK_GROUP_CONFIG, LocalBroker, create_topic, free_port
from streamk.engine.events import encode_event
from streamk.errors import SnapshotError
from streamk.snapshot import SnapshotStore, dumps
from streamk.snapshot.kafka import SnapshotPublisher, SnapshotReader
from streamk.sources.base import Committed, Record, Source
from streamk.sources.kafka import CommitFailedError, KafkaSource
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.kafka

DEADLINE_S = 180.0  # room for a machine running other tests beside these
CUT_S = 20.0


@pytest.fixture(params=["kafka-python", "confluent"])
def make_source(request: pytest.FixtureRequest) -> type[Source]:
    """Each transport behind the same Source interface (confluent-kafka is optional)."""
    if request.param == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
        from streamk.sources.kafka_confluent import ConfluentKafkaSource

        return ConfluentKafkaSource
    return KafkaSource


@pytest.fixture
def proxied() -> Iterator[tuple[TcpProxy, LocalBroker]]:
    """A tansu of our own that advertises a TCP proxy's port: all traffic crosses it."""
    proxy = TcpProxy()
    port = free_port()
    proxy.upstream_port = port
    broker = LocalBroker(port, advertised_port=proxy.port)
    try:
        yield proxy, broker
    finally:
        broker.stop()
        proxy.close()


def _produce(bootstrap: str, topic: str, n: int, partitions: int, batch: int = 10) -> None:
    """Events ``id = 0..n-1`` round-robin over partitions, flushed every ``batch`` sends
    (so a partition's log holds several multi-record batches, as in production)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    try:
        futures = []
        for i in range(n):
            event = encode_event(x=[float(i)], y=i % 2, id=i)
            futures.append(producer.send(topic, event, partition=i % partitions))
            if (i + 1) % batch == 0:
                producer.flush(timeout=30)
        producer.flush(timeout=30)
        for f in futures:
            f.get(timeout=0)
    finally:
        producer.close(timeout=5)


def _drain(source: Source, n: int) -> list[Record]:
    out: list[Record] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(out) < n:
        assert time.monotonic() < deadline, f"got {len(out)} of {n} records before the deadline"
        out.extend(source.poll(500, 0.2))
    return out


# -- commit metadata ------------------------------------------------------------------------
def test_commit_carries_metadata_and_committed_returns_its_shape(proxied, make_source):
    proxy, broker = proxied
    topic, group = f"meta-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    _produce(broker.bootstrap_servers, topic, 30, 2)
    bootstrap = f"127.0.0.1:{proxy.port}"
    meta = json.dumps({"model": f"m-{uuid.uuid4().hex[:6]}", "seq": 7}, separators=(",", ":"))
    source = make_source(bootstrap, topic, group, partitions=[0, 1])
    try:
        assert source.committed([0, 1]) == {}
        _drain(source, 30)
        source.commit({0: 15, 1: 9}, metadata=meta)
        got = source.committed([0, 1])
    finally:
        source.close()
    assert set(got) == {0, 1}
    assert all(isinstance(c, Committed) for c in got.values())
    assert (got[0].offset, got[1].offset) == (15, 9)
    # the metadata went out in the OffsetCommit request, byte for byte ...
    assert meta.encode() in bytes(proxy.sent)
    # ... and comes back where the broker keeps it; tansu 0.6 returns null (-> "")
    assert {c.metadata for c in got.values()} <= {meta, ""}
    other = make_source(bootstrap, topic, group, partitions=[0, 1])
    try:
        again = other.committed([0, 1])
    finally:
        other.close()
    assert {p: c.offset for p, c in again.items()} == {0: 15, 1: 9}


def test_commit_without_metadata_sends_the_configured_default(proxied, make_source):
    proxy, broker = proxied
    topic, group = f"meta-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, partitions=1)
    _produce(broker.bootstrap_servers, topic, 5, 1)
    marker = f"default-{uuid.uuid4().hex}"
    source = make_source(
        f"127.0.0.1:{proxy.port}", topic, group, partitions=[0], commit_metadata=marker
    )
    try:
        _drain(source, 5)
        source.commit({0: 5})
        assert source.committed([0])[0].offset == 5
    finally:
        source.close()
    assert marker.encode() in bytes(proxy.sent)


# -- offsets past the end -------------------------------------------------------------------
def test_beyond_end_is_detected_on_a_fresh_topic(kafka_broker, topic_name, make_source):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=2)
    _produce(bootstrap, topic_name, 60, 2)  # 30 per partition, in batches of 5
    source = make_source(bootstrap, topic_name, f"g-{topic_name}", partitions=[0, 1])
    try:
        seen = source.poll(1, 0.5)  # assignment in place (confluent assigns on first poll)
        # at or before the true end (30): valid, whatever end offset tansu reports
        assert source.beyond_end({0: 30, 1: 29}) == {}
        assert source.beyond_end({0: 0, 1: 1}) == {}
        # past it: reported with the partition's first offset
        assert source.beyond_end({0: 31, 1: 30}) == {0: 0}
        assert source.beyond_end({0: 500, 1: 31}) == {0: 0, 1: 0}
        # the source still reads normally afterwards
        seen += _drain(source, 60 - len(seen))
        assert sorted(r.offset for r in seen if r.partition == 0) == list(range(30))
    finally:
        source.close()


def test_beyond_end_after_the_topic_is_recreated(kafka_broker, topic_name, make_source):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    _produce(bootstrap, topic_name, 40, 1)
    group = f"g-{topic_name}"
    first = make_source(bootstrap, topic_name, group, partitions=[0])
    try:
        assert len({r.offset for r in _drain(first, 40)}) == 40
        first.commit({0: 40})
    finally:
        first.close()
    recreate_topic(bootstrap, topic_name)
    _produce(bootstrap, topic_name, 12, 1)
    second = make_source(bootstrap, topic_name, group, partitions=[0])
    try:
        second.poll(1, 0.5)
        assert second.beyond_end({0: 40}) == {0: 0}  # the old snapshot's offset
        assert second.beyond_end({0: 12}) == {}
    finally:
        second.close()


# -- a 20-second network cut ----------------------------------------------------------------
class _Follower:
    """What the engine does with a source: seek to its own positions on every assignment."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.read: dict[int, int] = {}
        self.assigned: list[list[int]] = []
        source.on_rebalance(self._assigned, lambda parts: None)
        if hasattr(source, "on_lost"):
            source.on_lost(lambda parts: None)

    def _assigned(self, parts: list[int]) -> None:
        self.assigned.append(parts)
        for p in parts:
            self.source.seek(p, self.read.get(p, 0))

    def poll(self) -> list[Record]:
        got = self.source.poll(100, 0.2)
        for r in got:
            self.read[r.partition] = r.offset + 1
        return got


@pytest.mark.timeout(300)  # it takes 25-30 s; a poll blocked past the deadline fails sooner
def test_a_network_cut_is_ridden_out(proxied, make_source, caplog):
    # confluent: a commit left waiting on the cut link once blocked every later poll (the
    # client lets one call at a time in), so the link was never restored; pinned by
    # tests/test_confluent_commit_cut.py
    proxy, broker = proxied
    topic, group = f"cut-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    n = 4000
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    _produce(broker.bootstrap_servers, topic, n, 2, batch=200)
    caplog.set_level(logging.WARNING, logger="streamk.sources")
    source = make_source(
        f"127.0.0.1:{proxy.port}", topic, group, consumer_config=dict(QUICK_GROUP_CONFIG)
    )
    follower = _Follower(source)
    records: list[Record] = []
    commit_errors: list[Exception] = []
    cut_at = restored_at = None
    deadline = time.monotonic() + DEADLINE_S + CUT_S
    try:
        while len({(r.partition, r.offset) for r in records}) < n:
            assert time.monotonic() < deadline, f"{len(records)} of {n} before the deadline"
            records.extend(follower.poll())  # must never raise
            if cut_at is None and len(records) >= n // 4:
                proxy.cut()
                cut_at = time.monotonic()
                try:  # the engine commits after each snapshot; mid-outage it must fail cleanly
                    source.commit(dict(follower.read))
                except CommitFailedError as exc:
                    commit_errors.append(exc)
            if cut_at is not None and restored_at is None:
                if time.monotonic() - cut_at >= CUT_S:
                    assert not source.connected  # the outage was noticed while it lasted
                    proxy.restore()
                    restored_at = time.monotonic()
        time_after = time.monotonic() + 3  # the link is declared up again (bounded)
        while not source.connected and time.monotonic() < time_after:
            records.extend(follower.poll())
    finally:
        source.close()
    assert restored_at is not None
    offsets = [(r.partition, r.offset) for r in records]
    assert len(offsets) == len(set(offsets)) == n  # every record exactly once
    for p in (0, 1):
        assert sorted(o for q, o in offsets if q == p) == list(range(n // 2))
    assert len(commit_errors) == 1
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("streamk.sources")]
    changes = [m for m in lines if m.startswith(("lost the connection", "connection to"))]
    kinds = ["lost" if m.startswith("lost") else "restored" for m in changes]
    assert kinds and kinds == ["lost", "restored"] * (len(kinds) // 2), changes
    assert source.outages == source.reconnects == len(kinds) // 2 >= 1
    assert source.connected


def test_confluent_close_during_a_cut_returns_within_its_bound(proxied):
    """An operator stopping a worker mid-outage: with a commit left waiting on the cut link,
    ``close()`` returns within its bound (``timeout_s`` for the waiting commit, then for the
    close) and says so, where librdkafka's close alone waits as long as the coordinator is
    unreachable. (Run on a thread here, so a hang fails the test instead of the suite.)"""
    pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    from streamk.sources.kafka_confluent import ConfluentKafkaSource

    proxy, broker = proxied
    topic, group = f"close-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    _produce(broker.bootstrap_servers, topic, 100, 2)
    source = ConfluentKafkaSource(
        f"127.0.0.1:{proxy.port}",
        topic,
        group,
        consumer_config=dict(QUICK_GROUP_CONFIG),
        timeout_s=2.0,
    )
    got = _drain(source, 100)
    proxy.cut()
    with pytest.raises(CommitFailedError):  # the link is cut: no answer within timeout_s
        source.commit({r.partition: r.offset + 1 for r in got})
    closer = threading.Thread(target=source.close, daemon=True)
    started = time.monotonic()
    closer.start()
    closer.join(30.0)
    took = time.monotonic() - started
    proxy.restore()
    assert not closer.is_alive(), "close() hung on the cut link"
    assert took < 2 * source.timeout_s + 5.0, took
    # the close left behind finishes once the link is back: librdkafka's consumer is gone
    # (else it would go on reconnecting to the broker the fixture is about to stop)
    for left in [t for t in threading.enumerate() if t.name == "streamk-close"]:
        left.join(60.0)
        assert not left.is_alive(), "the close left behind did not finish with the link back"


# -- confluent transport: a clean exit ------------------------------------------------------
@pytest.mark.parametrize("how", ["stop-when-idle", "sigterm"])
def test_confluent_run_ends_with_exit_0_and_its_summary(kafka_broker, topic_name, tmp_path, how):
    pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    _produce(bootstrap, topic_name, 50, 1)
    snaps = tmp_path / "snaps"
    cmd = [
        *(sys.executable, "-m", "streamk.cli", "run", "--bootstrap-servers", bootstrap),
        *("--topic", topic_name, "--group", f"g-{topic_name}", "--transport", "confluent"),
        *("--snapshot-dir", str(snaps), "--snapshot-every", "25", "--learner", "perceptron"),
        *("--max-poll-interval-ms", "3000", "--session-timeout-ms", "3000"),
        *("--heartbeat-interval-ms", "500", "--quiet", "--json"),
    ]
    if how == "stop-when-idle":
        cmd += ["--stop-when-idle", "5"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if how == "sigterm":  # once all 50 are snapshotted (bounded), ask it to stop
            store = SnapshotStore(snaps)
            deadline = time.monotonic() + DEADLINE_S
            while True:
                snap = store.latest("model") if snaps.exists() else None
                if snap is not None and snap.offsets.get(topic_name) == {0: 50}:
                    break
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]
    summary = json.loads(out)
    assert summary["records"] == summary["learned"] == 50  # idle counts from the assignment
    assert "Traceback" not in err


# -- the snapshot publisher through a cut ---------------------------------------------------
def _snapshot(seq: int) -> bytes:
    model = KernelPerceptron()
    for i in range(40):
        model.learn_one({"a": float(i % 7), "b": float(i % 3)}, i % 2 == 0)
    return dumps(model, offsets={"events": {0: 40 * seq}}, seq=seq)


def test_publisher_rides_out_a_20_s_cut(proxied, caplog):
    proxy, _ = proxied
    topic = f"snaps-{uuid.uuid4().hex[:8]}"
    bootstrap = f"127.0.0.1:{proxy.port}"
    caplog.set_level(logging.WARNING, logger="streamk.snapshot.kafka")
    with SnapshotPublisher(bootstrap, topic, timeout=40) as pub:
        assert pub.publish("m", _snapshot(1)).seq == 1
        proxy.cut()
        restore = threading.Timer(20.0, proxy.restore)  # the outage lasts 20 s
        restore.start()
        try:
            assert pub.publish("m", _snapshot(2)).seq == 2  # rides it out
        finally:
            restore.join()
    snap = SnapshotReader(bootstrap, topic).latest("m", timeout=20)
    assert snap is not None and snap.seq == 2 and snap.offsets == {"events": {0: 80}}
    # kafka-python's producer holds the parts and reconnects by itself here; the
    # publisher's own retry (one WARNING) covers errors raised before its deadline
    retries = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) <= 1


def test_publisher_gives_up_at_its_deadline(proxied):
    proxy, _ = proxied
    topic = f"snaps-{uuid.uuid4().hex[:8]}"
    pub = SnapshotPublisher(f"127.0.0.1:{proxy.port}", topic, timeout=5)
    try:
        pub.publish("m", _snapshot(1))
        proxy.cut()
        with pytest.raises(SnapshotError, match="not published"):
            pub.publish("m", _snapshot(2))
    finally:
        proxy.restore()
        pub.close(timeout=5)


# -- the engine through a 20-second cut (real process) --------------------------------------
@pytest.mark.parametrize("transport", ["kafka-python", "confluent"])
def test_streamk_run_rides_out_a_20_s_cut(proxied, tmp_path, transport):
    """``streamk run`` behind the proxy: half the stream, a 20 s cut, the other half.

    The engine must stay up, learn every event exactly once, and end like an
    uninterrupted run (the book's perceptron written plainly in test_engine_crash).
    """
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    from tests.test_engine_crash import N, engine_cmd, make_events, reference

    proxy, broker = proxied
    topic = f"run-cut-{uuid.uuid4().hex[:8]}"
    events = make_events(N)
    half = N // 2  # 1200: a multiple of the engine's snapshot_every (150)
    create_topic(broker.bootstrap_servers, topic, partitions=1)

    def send(part):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        for i, (x, y) in part:
            producer.send(topic, encode_event(x, y=y, id=i), partition=0)
        producer.flush(timeout=30)
        producer.close(timeout=5)

    send(list(enumerate(events))[:half])
    snapshots = tmp_path / "snapshots"
    cmd = engine_cmd(f"127.0.0.1:{proxy.port}", topic, "cut", snapshots, idle=CUT_S + 10)
    # raw features, so the plain perceptron is the oracle (scale = auto would standardise);
    # it stops at its N-th record, not CUT_S + 10 idle seconds later: an event read twice
    # ends it short of offset N, one skipped leaves it to the idle stop short of N learned
    flags = ["--transport", transport, "--scale", "none", "--max-events", str(N)]
    cmd = [*cmd[:-1], *flags, *cmd[-1:]]
    log_path = tmp_path / "engine.log"  # a file, not a pipe: librdkafka logs a lot while cut
    log_file = open(log_path, "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log_file, text=True)
    try:
        store = SnapshotStore(snapshots)

        def learned() -> int:
            snap = store.latest("model") if snapshots.exists() else None
            return 0 if snap is None else snap.offsets.get(topic, {}).get(0, 0)

        deadline = time.monotonic() + DEADLINE_S
        while learned() < half:  # bounded: the first half is learned and snapshotted
            assert proc.poll() is None, log_path.read_text()[-2000:]
            assert time.monotonic() < deadline, "the first half was never snapshotted"
            time.sleep(0.2)
        proxy.cut()
        cut_until = time.monotonic() + CUT_S
        while time.monotonic() < cut_until:  # the engine must survive the whole cut
            assert proc.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.2)
        proxy.restore()
        send(list(enumerate(events))[half:])
        try:
            proc.wait(timeout=DEADLINE_S + CUT_S)  # drains, then stops at N
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            pytest.fail(f"the engine did not stop: {log_path.read_text()[-3000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        log_file.close()
    err = log_path.read_text()
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    snap = SnapshotStore(snapshots).latest("model")
    assert snap.offsets == {topic: {0: N}}
    assert snap.model.n_learned == N  # not one event learned twice, not one skipped
    ref = reference(events)
    for x, _ in events[:100]:
        assert snap.model.predict_proba_one(x) == pytest.approx(ref.predict_proba_one(x), abs=1e-9)
    assert err.count("lost the connection") == err.count("restored after") >= 1
