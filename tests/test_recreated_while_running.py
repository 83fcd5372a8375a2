"""A topic deleted and recreated *while* an engine reads it: never skipped silently.

``streamk run`` learns 300 events and writes its snapshot; the engine keeps running while
the topic is deleted and recreated with (a) 120 new events, fewer than its position (the
fetch is past the end: tansu answers nothing at all, Apache Kafka OFFSET_OUT_OF_RANGE, which
the client no longer resolves by jumping), or (b) 500, past its position (no error at all:
before, the engine skipped the new topic's first 300 events and learned the rest into a
snapshot that carried offsets of two logs).

The check before each snapshot (and every ``snapshot_seconds`` while idle) compares the
topic's id with the one read at assignment: the recreated topic's is another, which stderr
names. The oracle is the count of records produced: by default the engine stops (exit 2,
the remedy in stderr) and the store's newest snapshot is still the old topic's (offsets and
mark of its record 299); with ``on_offset_beyond_end = earliest`` every new event is learned
exactly once on top of the old model (``n_learned == 300 + new``) and no old one twice.

Two engines in one group (each its own model, a partition each) are held to the same: both
stop under fail, and under earliest the two models learn the new topic's events once
between them (``n_learned`` summed over the two newest snapshots).

The confluent transport's cases are skipped: librdkafka 2.16 (confluent-kafka) crashes
(SIGSEGV in its ``rdk:main`` thread, exit -11) when a topic is deleted under a live consumer
on tansu 0.6, at b7c0ba2 as well (measured in session 26, again in session 28 with the id
check), so its running check is not exercised on the test broker; its start-up check is, in
``test_recreated_topic.py``, and its ``topic_id`` in ``test_log_check_every_snapshot.py``.
The engine code under test is the same for both transports.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
import zlib

import pytest
from kafka import KafkaProducer
from streamk_run import recreate_topic, run_args

from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event
from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _payloads(n, start):
    return [
        encode_event([float(i % 7), float(i % 5)], y=(i % 7) > (i % 5), id=i)
        for i in range(start, start + n)
    ]


def _produce(bootstrap, topic, payloads):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for payload in payloads:
        producer.send(topic, payload)
    producer.flush()
    producer.close()


def _start(bootstrap, topic, store, **settings):
    """``streamk run`` in a subprocess that stays up: snapshots every second, idle stop
    long after the topic is recreated."""
    args = run_args(bootstrap, topic, f"g-{topic}", store, model_name="m", **settings)
    cmd = [sys.executable, "-m", "streamk.cli", *args]
    cmd += ["--snapshot-seconds", "1", "--stop-when-idle", "10"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_snapshot(store, topic, offset, engine):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert engine.poll() is None, engine.communicate()[1][-2000:]
        snap = SnapshotStore(store).latest("m") if store.exists() else None
        if snap is not None and snap.offsets.get(topic) == {0: offset}:
            return snap
        time.sleep(0.2)
    engine.kill()
    raise AssertionError(f"no snapshot at {offset} within 120 s")


TRANSPORTS = [
    "kafka-python",
    pytest.param(
        "confluent",
        marks=pytest.mark.skip(
            reason="librdkafka 2.16 crashes (SIGSEGV, exit -11) when a topic is deleted under "
            "a live consumer on tansu 0.6 (seen again in session 28 with --runxfail)"
        ),
    ),
]


def _recreated_under(kafka_broker, tmp_path, new, policy, transport):
    """Learn 300 old events, recreate the topic with ``new`` events under the running
    engine; the engine's (return code, stderr) and the old topic's record 299."""
    bootstrap = kafka_broker.bootstrap_servers
    topic, store = f"live-{uuid.uuid4().hex[:8]}", tmp_path / "store"
    create_topic(bootstrap, topic, partitions=1)
    old = _payloads(300, 0)
    _produce(bootstrap, topic, old)
    engine = _start(bootstrap, topic, store, on_offset_beyond_end=policy, transport=transport)
    _wait_for_snapshot(store, topic, 300, engine)
    recreate_topic(bootstrap, topic)
    _produce(bootstrap, topic, _payloads(new, 1000))
    _, stderr = engine.communicate(timeout=180)
    return engine.returncode, stderr, SnapshotStore(store), topic, old[299]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("new", [120, 500], ids=["fewer", "refilled-past"])
def test_recreated_under_a_running_engine_stops_it_without_a_mixed_snapshot(
    kafka_broker, tmp_path, new, transport
):
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    code, stderr, store, topic, record_299 = _recreated_under(
        kafka_broker, tmp_path, new, None, transport
    )
    assert code == 2, stderr[-3000:]
    assert "deleted and recreated" in stderr and "while this engine read it" in stderr
    assert "the topic's id is" in stderr  # found by the id, nothing read back
    assert "on_offset_beyond_end = earliest" in stderr
    snap = store.latest("m")  # the old topic's: its offset and the mark of its record 299
    assert snap.offsets[topic] == {0: 300}
    assert snap.model.n_learned == 300
    offset, _, crc = snap.meta["marks"][topic][0][1:]
    assert (offset, crc) == (299, zlib.crc32(record_299))


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("new", [120, 500], ids=["fewer", "refilled-past"])
def test_recreated_under_a_running_engine_learns_the_new_topic_once(
    kafka_broker, tmp_path, new, transport
):
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    code, stderr, store, topic, _ = _recreated_under(
        kafka_broker, tmp_path, new, "earliest", transport
    )
    assert code == 0, stderr[-3000:]
    assert "WARNING" in stderr and "while this engine read it" in stderr
    snap = store.latest("m")
    assert snap.offsets[topic] == {0: new}
    assert snap.model.n_learned == 300 + new  # each new event once, no old one twice


def _produce_split(bootstrap, topic, payloads):
    """Half of ``payloads`` to each of two partitions."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i, payload in enumerate(payloads):
        producer.send(topic, payload, partition=i % 2)
    producer.flush()
    producer.close()


def _wait_for_group(store, topic, offsets, engines):
    """Until the two models' newest snapshots together cover ``offsets``."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for engine in engines:
            assert engine.poll() is None, engine.communicate()[1][-2000:]
        covered: dict[int, int] = {}
        for name in ("m1", "m2"):
            snap = SnapshotStore(store).latest(name) if store.exists() else None
            if snap is not None:
                for p, o in snap.offsets.get(topic, {}).items():
                    covered[p] = max(covered.get(p, 0), o)
        if covered == offsets:
            return
        time.sleep(0.2)
    for engine in engines:
        engine.kill()
    raise AssertionError(f"the group's snapshots never covered {offsets} within 120 s")


@pytest.mark.parametrize("policy", [None, "earliest"], ids=["fail", "earliest"])
def test_recreated_under_a_group_of_two_engines(kafka_broker, tmp_path, policy):
    """Two engines in one group, each with its own model, two partitions: the topic is
    recreated and refilled past their positions. With fail both stop (exit 2) and their
    snapshots still hold the old topic's 600 events; with earliest the two models learn
    the new topic's 1000 events once between them, on top of the old 600."""
    bootstrap = kafka_broker.bootstrap_servers
    topic, store = f"live-{uuid.uuid4().hex[:8]}", tmp_path / "store"
    create_topic(bootstrap, topic, partitions=2)
    _produce_split(bootstrap, topic, _payloads(600, 0))
    engines = []
    for name in ("m1", "m2"):
        args = run_args(
            bootstrap, topic, f"g-{topic}", store, model_name=name, on_offset_beyond_end=policy
        )
        args += ["--snapshot-seconds", "1", "--stop-when-idle", "15"]
        cmd = [sys.executable, "-m", "streamk.cli", *args]
        engines.append(
            subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    _wait_for_group(store, topic, {0: 300, 1: 300}, engines)
    recreate_topic(bootstrap, topic, partitions=2)
    _produce_split(bootstrap, topic, _payloads(1000, 1000))
    outs = [engine.communicate(timeout=240) for engine in engines]
    codes = [engine.returncode for engine in engines]
    snaps = [SnapshotStore(store).latest(name) for name in ("m1", "m2")]
    learned = sum(snap.model.n_learned for snap in snaps if snap is not None)
    if policy is None:
        assert codes == [2, 2], [err[-3000:] for _, err in outs]
        assert learned == 600
    else:
        assert codes == [0, 0], [err[-3000:] for _, err in outs]
        assert learned == 600 + 1000
