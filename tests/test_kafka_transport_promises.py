"""Bounds of what streamk writes to and buffers from Kafka, on the session's real broker.

docs/operations.md: a dead letter fits the producer's ``max_request_size`` (16 KiB under
it) when one is set; docs/snapshot-format.md: a snapshot reader buffers at most
``max_bytes`` of chunks, dropping the oldest pending snapshot, with a warning. The oracles
are the bytes the test wrote and read back with plain kafka-python clients.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid

import msgpack
import pytest
from kafka import KafkaConsumer, KafkaProducer

from streamk import RBF, KernelPerceptron
from streamk.cli.broker import create_topic
from streamk.engine.deadletter import DeadLetter
from streamk.engine.loop import Engine, EngineConfig
from streamk.sinks import KafkaDeadLetterSink
from streamk.snapshot import Limits, dumps
from streamk.snapshot.kafka import SnapshotPublisher, SnapshotReader
from streamk.snapshot.kafka_scheme import H_INDEX, H_KIND, Assembler, headers
from streamk.sources.replay import ReplaySource

pytestmark = pytest.mark.kafka


def _read_all(bootstrap: str, topic: str) -> list:
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    try:
        return list(consumer)
    finally:
        consumer.close()


def test_a_dead_letter_fits_16_kib_under_the_max_request_size_you_set(
    kafka_broker, topic_name, tmp_path
):
    """docs/operations.md, "Common failure scenarios", poison messages: "on the dead-letter
    topic a record is at most 1,000,000 bytes (or 16 KiB under a `max_request_size` you
    set), so an oversize payload keeps its head and the reason says how much".

    An engine reads a log whose event 50 is a 500 KB line it must refuse; its dead letters
    go to a topic through ``KafkaDeadLetterSink`` with ``max_request_size = 200,000``. The
    one record on the topic is at most 200,000 - 16,384 bytes (and within 2 KiB of it:
    the head kept is as long as fits), its payload is the head of the line, and the
    reason says how much was kept."""
    bootstrap, dlq = kafka_broker.bootstrap_servers, f"{topic_name}-dlq"
    create_topic(bootstrap, dlq, partitions=1)
    lines = [
        json.dumps({"x": {"a": i % 7 / 7, "b": i % 3 / 3}, "y": i % 2 == 0}) for i in range(100)
    ]
    lines[50] = json.dumps({"x": {"a": "z" * 500_000}, "y": True})  # text: no string kernel
    log = tmp_path / "events.jsonl"
    log.write_text("".join(line + "\n" for line in lines))
    sink = KafkaDeadLetterSink(bootstrap, dlq, {"max_request_size": 200_000})
    engine = Engine(
        ReplaySource(log),
        lambda: KernelPerceptron(kernel=RBF(0.5)),
        dead_letters=sink,
        config=EngineConfig(max_records=20),
    )
    result = engine.run()
    assert (result.learned, result.dead_lettered) == (99, 1)
    (record,) = _read_all(bootstrap, dlq)
    limit = 200_000 - (16 << 10)
    assert limit - 2048 < len(record.value) <= limit
    letter = DeadLetter.from_dict(msgpack.unpackb(record.value))
    whole = (lines[50] + "\n").encode()
    assert letter.offset == 50 and whole.startswith(letter.payload)
    assert f"cut to its first {len(letter.payload):,} of " in letter.reason


class _Watched(Assembler):
    """An assembler that remembers the most it ever buffered (for the bound)."""

    most = 0

    def feed(self, record) -> None:
        super().feed(record)
        self.most = max(self.most, self.pending_bytes)


def test_buffered_chunks_stay_within_max_bytes_dropping_the_oldest_pending_snapshot(
    kafka_broker, topic_name, caplog
):
    """docs/snapshot-format.md, "Reading": "a chunk is buffered under its id ... Buffered
    chunks are bounded by `max_bytes` in all; beyond that the oldest pending snapshot is
    dropped with a warning".

    On the topic: the chunks of a snapshot whose writer died before its manifest (the
    records a publisher sends, written by hand), then a whole snapshot published by
    ``SnapshotPublisher``. A reader whose ``max_bytes`` holds one snapshot but not both
    drops the dead writer's chunks with a WARNING naming them, never buffers more than
    ``max_bytes``, and still reads the whole snapshot."""
    bootstrap = kafka_broker.bootstrap_servers
    model = KernelPerceptron(kernel=RBF(0.5))
    for i in range(300):
        model.learn_one({"a": (i * 7919 % 101) / 101, "b": (i * 104729 % 97) / 97}, i % 3 == 0)
    dead, whole = dumps(model, seq=1), dumps(model, seq=2)
    assert abs(len(dead) - len(whole)) < 100 and len(whole) > 4000
    with SnapshotPublisher(bootstrap, topic_name, chunk_size=1000) as publisher:
        sid, n = uuid.uuid4().hex, -(-len(dead) // 1000)
        common = headers(sid, n, len(dead), hashlib.sha256(dead).hexdigest())
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for i in range(n):  # the dead writer's chunks: no manifest follows
            hdrs = [(H_KIND, b"chunk"), (H_INDEX, b"%d" % i), *common]
            producer.send(
                topic_name, key=f"m/{sid}/{i}".encode(), value=dead[i * 1000 : (i + 1) * 1000],
                headers=hdrs, partition=0,
            )  # fmt: skip
        producer.flush()
        producer.close()
        publisher.publish("m", whole)
    # one snapshot's chunks, not two (what it implies when rebuilt is not the point here)
    limits = Limits(max_bytes=len(whole) + 500, max_implied_bytes=Limits().max_implied_bytes)
    assembler = _Watched("m", limits)
    caplog.set_level(logging.WARNING, logger="streamk.snapshot.kafka")
    assert SnapshotReader(bootstrap, topic_name, limits=limits).scan(assembler, 30.0)
    assert 0 < assembler.most <= limits.max_bytes
    assert assembler.best["m"].seq == 2  # the newer, complete snapshot survived
    assert sid not in assembler.pending
    drops = [r.getMessage() for r in caplog.records if "exceed max_bytes" in r.getMessage()]
    assert drops == [f"dropping snapshot {sid}: buffered chunks exceed max_bytes"]
    assert all(r.levelno == logging.WARNING for r in caplog.records if "dropping" in r.getMessage())
