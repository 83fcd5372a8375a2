"""Snapshots over Kafka: chunking, reassembly, rejection of bad parts, follow and hot swap.

Tests that take ``servers`` run against the real local broker (tansu), each with its
own topic (the ``kafka`` marker comes with the fixture); the rest need no broker. A small
independent writer (``_raw``) produces messages by the documented scheme, so the
reader is also checked against the spec, and can be fed incomplete or damaged parts.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import threading
import time
import uuid

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from river import datasets

import streamk
from streamk.cli.snapshot import main as snapshot_main
from streamk.errors import ConfigError, SnapshotError
from streamk.snapshot import Limits, dumps, loads
from streamk.snapshot.kafka import (
    DEFAULT_CHUNK_SIZE,
    TRANSPORT,
    HotSwapModel,
    SnapshotPublisher,
    SnapshotReader,
)
from streamk.snapshot.kafka_scheme import Assembler

LOGGER = "streamk.snapshot.kafka"
DEFAULT_LIMITS_SMALL = Limits(max_bytes=1000)
ROWS = list(itertools.islice(datasets.Phishing(), 700))
TEST_X = [x for x, _ in ROWS[600:]]


def _perceptron(n: int) -> streamk.KernelPerceptron:
    model = streamk.KernelPerceptron()
    for x, y in ROWS[:n]:
        model.learn_one(x, y)
    return model


def _predictions(model) -> list:
    return [model.predict_one(x) for x in TEST_X]


def _big_model() -> streamk.KernelPerceptron:
    """A perceptron on random labels over 150 features: ~1,000 support vectors, > 1 MB."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(2000, 150)), rng.integers(0, 2, 2000)
    model = streamk.KernelPerceptron()
    for row, label in zip(X, y):
        model.learn_one(dict(enumerate(row)), bool(label))
    return model


def _read_all(bootstrap: str, topic: str, n: int, timeout: float = 30.0) -> list:
    """Every record of partition 0, counting records until `n` arrived (never end offsets)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < n and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
    finally:
        consumer.close()
    return records


def _raw(bootstrap, topic, name, data, *, seq, chunk_size=4096, skip=(), corrupt=(), manifest=True):
    """Produce one snapshot by the documented scheme with kafka-python, optionally damaged."""
    sid, sha = uuid.uuid4().hex, hashlib.sha256(data).hexdigest()
    n = math.ceil(len(data) / chunk_size)
    common = [("streamk.format", b"1"), ("streamk.id", sid.encode()), ("streamk.chunks", b"%d" % n)]
    common += [("streamk.size", b"%d" % len(data)), ("streamk.sha256", sha.encode())]
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(n):
            part = data[i * chunk_size : (i + 1) * chunk_size]
            if i in skip:
                continue
            if i in corrupt:
                part = bytes(b ^ 0x5A for b in part[:64]) + part[64:]
            headers = [("streamk.kind", b"chunk"), ("streamk.chunk", b"%d" % i), *common]
            key = f"{name}/{sid}/{i}".encode()
            producer.send(topic, key=key, value=part, headers=headers, partition=0)
        if manifest:
            doc = {"format": TRANSPORT, "version": 1, "name": name, "id": sid, "chunks": n}
            doc.update(size=len(data), sha256=sha, seq=seq, **{"class": "KernelPerceptron"})
            value = msgpack.packb(doc, use_bin_type=True)
            headers = [("streamk.kind", b"manifest"), *common]
            producer.send(topic, key=name.encode(), value=value, headers=headers, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close()


@pytest.fixture
def servers(kafka_broker) -> str:
    return kafka_broker.bootstrap_servers


def test_small_snapshot_round_trip_inline(servers, topic_name):
    model = _perceptron(300)
    data = dumps(model, offsets={"events": {0: 300}}, seq=1, metrics={"accuracy": 0.9})
    with SnapshotPublisher(servers, topic_name) as pub:
        result = pub.publish("phish", data)
    assert result.chunks == 0 and result.size == len(data) and result.seq == 1
    snap = SnapshotReader(servers, topic_name).latest("phish", timeout=30)
    assert snap is not None and snap.seq == 1 and snap.offsets == {"events": {0: 300}}
    assert snap.checksum == loads(data).checksum and snap.size == len(data)
    assert _predictions(snap.model) == _predictions(model)
    assert SnapshotReader(servers, topic_name).latest("other", timeout=30) is None


def test_chunked_round_trip_and_tombstones(servers, topic_name):
    first, second = _perceptron(300), _perceptron(600)
    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as pub:
        r1 = pub.publish("phish", dumps(first, seq=1))
        r2 = pub.publish("phish", dumps(second, seq=2))
    assert r1.chunks >= 2 and r2.chunks >= 2 and r2.tombstones == r1.chunks
    snap = SnapshotReader(servers, topic_name).latest("phish", timeout=30)
    assert snap is not None and snap.seq == 2
    assert _predictions(snap.model) == _predictions(second)
    records = _read_all(servers, topic_name, r1.chunks + r2.chunks + 2 + r1.chunks)
    tombstoned = {r.key.decode() for r in records if r.value is None}
    assert tombstoned == {f"phish/{r1.id}/{i}" for i in range(r1.chunks)}
    assert max(len(r.value) for r in records if r.value is not None) <= 4096 + 512


def test_snapshot_over_one_megabyte_with_default_chunks(servers, topic_name):
    model = _big_model()
    data = dumps(model, seq=5)
    assert len(data) > 1_000_000
    with SnapshotPublisher(servers, topic_name) as pub:
        result = pub.publish("big", data)
    assert result.chunks == math.ceil(len(data) / DEFAULT_CHUNK_SIZE) >= 3
    records = _read_all(servers, topic_name, result.chunks + 1)
    assert max(len(r.value) for r in records) <= DEFAULT_CHUNK_SIZE  # never relies on > 1 MB
    snap = SnapshotReader(servers, topic_name).latest("big", timeout=60)
    assert snap is not None and snap.seq == 5 and snap.checksum == loads(data).checksum
    rng = np.random.default_rng(1)
    probe = [dict(enumerate(row)) for row in rng.normal(size=(50, 150))]
    assert [snap.model.predict_one(x) for x in probe] == [model.predict_one(x) for x in probe]


def test_incomplete_snapshots_are_ignored(servers, topic_name, caplog):
    good = _perceptron(300)
    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as pub:
        pub.publish("phish", dumps(good, seq=1))
    newer = dumps(_perceptron(600), seq=2)
    _raw(servers, topic_name, "phish", newer, seq=2, manifest=False)  # publisher died
    _raw(servers, topic_name, "phish", newer, seq=3, skip={1})  # a chunk never arrived
    with caplog.at_level(logging.INFO, logger=LOGGER):
        snap = SnapshotReader(servers, topic_name).latest("phish", timeout=30)
    assert snap is not None and snap.seq == 1
    assert _predictions(snap.model) == _predictions(good)
    chunks = math.ceil(len(newer) / 4096)  # _raw's chunk size
    assert chunks >= 3
    assert "no manifest" in caplog.text and f"1 of {chunks} chunks missing" in caplog.text


def test_corrupt_chunk_is_rejected_with_reason(servers, topic_name, caplog):
    good = _perceptron(300)
    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as pub:
        pub.publish("phish", dumps(good, seq=1))
    newer = dumps(_perceptron(600), seq=2)
    _raw(servers, topic_name, "phish", newer, seq=2, corrupt={0})
    _raw(servers, topic_name, "phish", b"\x80" * 5000, seq=3)  # checksum right, not a snapshot
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        snap = SnapshotReader(servers, topic_name).latest("phish", timeout=30)
    assert snap is not None and snap.seq == 1
    assert f"seq 2 (corrupt): reassembled {len(newer)} bytes hash to" in caplog.text
    assert "seq 3 (corrupt): envelope: 4999 trailing bytes" in caplog.text


def test_raw_writer_by_the_spec_is_read(servers, topic_name):
    """An independent writer following docs/snapshot-format.md is understood by the reader."""
    model = _perceptron(600)
    SnapshotPublisher(servers, topic_name).close()  # creates the topic
    _raw(servers, topic_name, "phish", dumps(model, seq=4), seq=4, chunk_size=1000)
    snap = SnapshotReader(servers, topic_name).latest("phish", timeout=30)
    assert snap is not None and snap.seq == 4
    assert _predictions(snap.model) == _predictions(model)


def test_older_and_duplicate_snapshots_do_not_win(servers, topic_name, caplog):
    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as pub:
        pub.publish("phish", dumps(_perceptron(600), seq=3))
        with pytest.raises(SnapshotError, match="only move forward"):
            pub.publish("phish", dumps(_perceptron(300), seq=2))
    _raw(servers, topic_name, "phish", dumps(_perceptron(300), seq=2), seq=2)  # late, older
    with caplog.at_level(logging.INFO, logger=LOGGER):
        snap = SnapshotReader(servers, topic_name).latest("phish", timeout=30)
    assert snap is not None and snap.seq == 3
    assert "seq 2 (stale): seq 2 < 3 already held" in caplog.text


def test_two_models_on_one_topic_do_not_mix(servers, topic_name):
    alpha, beta = _perceptron(300), _perceptron(600)
    beta2 = _perceptron(450)
    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as pub:
        pub.publish("alpha", dumps(alpha, seq=1, run="a"))
        pub.publish("beta", dumps(beta, seq=7, run="b"))
        pub.publish("beta", dumps(beta2, seq=8, run="b"))
    reader = SnapshotReader(servers, topic_name)
    a, b = reader.latest("alpha", timeout=30), reader.latest("beta", timeout=30)
    assert a is not None and a.seq == 1 and a.meta == {"run": "a"}
    assert b is not None and b.seq == 8 and b.meta == {"run": "b"}
    assert _predictions(a.model) == _predictions(alpha)
    assert _predictions(b.model) == _predictions(beta2)
    listed = [(i.name, i.seq, i.status) for i in reader.list(timeout=30)]
    assert listed == [("alpha", 1, "latest"), ("beta", 7, "ok"), ("beta", 8, "latest")]


def test_follow_and_hot_swap(servers, topic_name):
    first, second = _perceptron(300), _perceptron(600)
    pub = SnapshotPublisher(servers, topic_name, chunk_size=4096)
    seen: list[int] = []
    got = {1: threading.Event(), 2: threading.Event()}
    stop = threading.Event()

    def on_snapshot(snap) -> None:
        seen.append(snap.seq)
        got[snap.seq].set()

    reader = SnapshotReader(servers, topic_name)
    follower = threading.Thread(target=reader.follow, args=("phish", on_snapshot, stop, 0.2))
    try:
        pub.publish("phish", dumps(first, seq=1))
        follower.start()
        with HotSwapModel(reader, "phish", poll_timeout=0.2) as live:
            assert live.wait_for(1, timeout=30)
            assert _predictions(live) == _predictions(first)
            assert got[1].wait(30)  # both followers hold seq 1 before seq 2 exists
            pub.publish("phish", dumps(second, seq=2))
            assert live.wait_for(2, timeout=30)
            assert live.seq == 2 and _predictions(live) == _predictions(second)
            assert got[2].wait(30) and live.error is None
    finally:
        stop.set()
        follower.join(30)
        pub.close()
    assert not follower.is_alive() and seen == [1, 2]


def test_cli_ls_and_show_topic(servers, topic_name, capsys):
    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as pub:
        pub.publish("phish", dumps(_perceptron(300), seq=1, offsets={"events": {0: 300}}))
    args = ["--topic", topic_name, "--bootstrap-servers", servers]
    assert snapshot_main(["ls", *args]) == 0
    out = capsys.readouterr().out
    assert "phish" in out and "latest" in out
    assert snapshot_main(["show", *args, "--name", "phish", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["class"] == "KernelPerceptron" and doc["seq"] == 1
    assert doc["offsets"] == {"events": {"0": 300}} and doc["path"].endswith(f"{topic_name}/phish")
    assert snapshot_main(["show", *args, "--name", "nobody"]) == 1


def test_bad_arguments_and_invalid_bytes(servers, topic_name):
    with pytest.raises(ConfigError, match="chunk_size"):
        SnapshotPublisher(servers, topic_name, chunk_size=2_000_000)
    with SnapshotPublisher(servers, topic_name) as pub:
        with pytest.raises(SnapshotError, match="not a valid snapshot"):
            pub.publish("phish", b"not a snapshot")
        with pytest.raises(ConfigError, match="model name"):
            pub.publish("a/b", dumps(_perceptron(10)))


def test_unreachable_broker_fails_within_the_timeout():
    from streamk.cli.broker import free_port

    nowhere = f"127.0.0.1:{free_port()}"
    with pytest.raises(SnapshotError, match="cannot connect"):
        SnapshotReader(nowhere, "snapshots").latest("phish", timeout=1)
    with pytest.raises(SnapshotError, match="cannot reach"):
        SnapshotPublisher(nowhere, "snapshots", timeout=1)


def test_sweep_tombstones_what_a_previous_writer_left(servers, topic_name):
    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as old_writer:
        r1 = old_writer.publish("phish", dumps(_perceptron(300), seq=1))
    orphan = dumps(_perceptron(450), seq=2)
    _raw(servers, topic_name, "phish", orphan, seq=2, manifest=False)  # it died mid-snapshot
    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as writer:
        r3 = writer.publish("phish", dumps(_perceptron(600), seq=3))
        assert r3.tombstones == 0  # it cannot know what its predecessor wrote
        n_orphan = math.ceil(len(orphan) / 4096)
        assert writer.sweep("phish") == r1.chunks + n_orphan
        assert writer.sweep("phish") == 0
    n = r1.chunks + 1 + n_orphan + r3.chunks + 1 + r1.chunks + n_orphan
    records = _read_all(servers, topic_name, n)
    tombstoned = {r.key.decode() for r in records if r.value is None}
    assert len(records) == n and len(tombstoned) == r1.chunks + n_orphan
    assert not any(k.startswith(f"phish/{r3.id}/") for k in tombstoned)
    snap = SnapshotReader(servers, topic_name).latest("phish", timeout=30)
    assert snap is not None and snap.seq == 3


def test_equal_seq_replaces_like_the_file_store(servers, topic_name):
    first, replay = _perceptron(300), _perceptron(600)  # same seq, e.g. a replayed writer
    with SnapshotPublisher(servers, topic_name) as pub:
        pub.publish("phish", dumps(first, seq=4))
        pub.publish("phish", dumps(replay, seq=4))
    snap = SnapshotReader(servers, topic_name).latest("phish", timeout=30)
    assert snap is not None and _predictions(snap.model) == _predictions(replay)


def test_models_spread_over_partitions_keep_their_parts_together(servers, topic_name):
    from streamk.cli.broker import create_topic

    create_topic(servers, topic_name, partitions=3)
    models = {name: _perceptron(100 * (i + 2)) for i, name in enumerate(["a", "b", "c", "d"])}
    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as pub:
        results = {name: pub.publish(name, dumps(m, seq=1)) for name, m in models.items()}
    reader = SnapshotReader(servers, topic_name)
    for name, model in models.items():
        snap = reader.latest(name, timeout=30)
        assert snap is not None and _predictions(snap.model) == _predictions(model)
    assert len({r.partition for r in results.values()}) > 1  # murmur2 spreads these names
    listed = {(i.name, i.partition, i.status) for i in reader.list(timeout=30)}
    assert listed == {(n, r.partition, "latest") for n, r in results.items()}


def test_deleting_a_model_with_a_tombstone(servers, topic_name):
    with SnapshotPublisher(servers, topic_name) as pub:
        pub.publish("phish", dumps(_perceptron(300), seq=1))
        pub.publish("keep", dumps(_perceptron(300), seq=1))
    producer = KafkaProducer(bootstrap_servers=servers)
    producer.send(topic_name, key=b"phish", value=None, partition=0)
    producer.flush(timeout=30)
    producer.close()
    reader = SnapshotReader(servers, topic_name)
    assert reader.latest("phish", timeout=30) is None
    assert reader.latest("keep", timeout=30) is not None


def test_scoring_during_a_swap_sees_one_whole_model(servers, topic_name):
    """A scorer predicting in a loop while the model swaps gets old or new answers, never errors."""
    first, second = _perceptron(300), _perceptron(600)
    expected = [set(pair) for pair in zip(_predictions(first), _predictions(second))]
    answers: list[tuple[int, object]] = []
    done = threading.Event()

    def score() -> None:
        i = 0
        while not done.is_set():
            answers.append((i, live.predict_one(TEST_X[i])))
            i = (i + 1) % len(TEST_X)

    with SnapshotPublisher(servers, topic_name, chunk_size=4096) as pub:
        pub.publish("phish", dumps(first, seq=1))
        with HotSwapModel(SnapshotReader(servers, topic_name), "phish", poll_timeout=0.2) as live:
            assert live.wait_for(1, timeout=30)
            scorer = threading.Thread(target=score)
            scorer.start()
            try:
                pub.publish("phish", dumps(second, seq=2))
                assert live.wait_for(2, timeout=30)
            finally:
                done.set()
                scorer.join(30)
    assert answers and all(answer in expected[i] for i, answer in answers)


class _Record:
    def __init__(self, key, value, headers, offset):
        self.key, self.value, self.headers = key, value, headers
        self.partition, self.offset = 0, offset


_header = st.tuples(
    st.sampled_from(["streamk.id", "streamk.chunk", "streamk.chunks", "streamk.size", "x"]),
    st.one_of(st.none(), st.binary(max_size=40), st.sampled_from([b"0", b"1", b"7", b"-1"])),
)
_record = st.tuples(
    st.one_of(
        st.none(),
        st.binary(max_size=30),
        st.sampled_from([b"m", b"m/", b"m/x/0", b"m/x/1", b"m//", b"\xff/"]),
    ),
    st.one_of(st.none(), st.binary(max_size=200)),
    st.lists(_header, max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_record, max_size=30))
def test_assembler_never_raises_on_garbage(records):
    """Arbitrary keys, headers and values are logged and skipped, never raised."""
    asm = Assembler("m", DEFAULT_LIMITS_SMALL)
    for offset, (key, value, headers) in enumerate(records):
        asm.feed(_Record(key, value, headers, offset))
    asm.finish()
    assert asm.best == {} and asm.pending_bytes >= 0


_SMALL = dumps(_perceptron(150), seq=9)


@settings(max_examples=150, deadline=None)
@given(
    chunk_size=st.integers(300, 3000),
    drop=st.sets(st.integers(0, 30), max_size=2),
    corrupt=st.sets(st.integers(0, 30), max_size=2),
    dup=st.sets(st.integers(0, 30), max_size=3),
    order=st.randoms(use_true_random=False),
)
def test_assembler_accepts_exactly_the_intact_snapshot(chunk_size, drop, corrupt, dup, order):
    """Chunks lost, damaged, duplicated or reordered: the snapshot is accepted iff intact."""
    data, sid = _SMALL, "a" * 32
    sha, n = hashlib.sha256(data).hexdigest(), math.ceil(len(_SMALL) / chunk_size)
    common = [("streamk.id", sid.encode()), ("streamk.chunks", b"%d" % n)]
    chunks = []
    for i in range(n):
        part = data[i * chunk_size : (i + 1) * chunk_size]
        if i in corrupt:
            part = bytes([part[0] ^ 1]) + part[1:]
        if i not in drop:
            chunks += [(i, part)] * (2 if i in dup else 1)
    order.shuffle(chunks)
    asm = Assembler("m", Limits())
    for offset, (i, part) in enumerate(chunks):
        headers = [("streamk.chunk", b"%d" % i), *common]
        asm.feed(_Record(f"m/{sid}/{i}".encode(), part, headers, offset))
    doc = {"format": TRANSPORT, "version": 1, "id": sid, "chunks": n, "size": len(data)}
    doc.update(sha256=sha, seq=9)
    asm.feed(_Record(b"m", msgpack.packb(doc), [], len(chunks)))
    intact = not (drop | corrupt) & set(range(n))
    assert ("m" in asm.best) == intact
    if intact:
        assert asm.best["m"].checksum == loads(data).checksum and asm.best["m"].seq == 9


class _Follower:
    """A stand-in for SnapshotReader.follow: delivers `snaps`, then fails or waits."""

    def __init__(self, snaps, error=None):
        self.snaps, self.error, self.delivered = snaps, error, threading.Event()

    def follow(self, name, callback, stop_event, poll_timeout):
        for snap in self.snaps:
            callback(snap)
        self.delivered.set()
        if self.error is not None:
            raise self.error
        stop_event.wait(60)


def test_hot_swap_never_goes_back_and_reports_a_dead_follower():
    newer, older = loads(dumps(_perceptron(600), seq=2)), loads(dumps(_perceptron(300), seq=1))
    follower = _Follower([newer, older])
    with HotSwapModel(follower, "phish") as live:
        assert follower.delivered.wait(30) and live.wait_for(2, timeout=30)
        assert live.seq == 2 and live.snapshot is newer
    dead = HotSwapModel(_Follower([], SnapshotError("broker gone")), "phish").start()
    assert dead.wait_for(0, timeout=30) is False  # returns once the follower is gone
    assert isinstance(dead.error, SnapshotError)
    with pytest.raises(SnapshotError, match="no snapshot of 'phish'"):
        dead.predict_one(TEST_X[0])
    dead.stop()
