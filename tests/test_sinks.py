"""Prediction and dead-letter sinks: Kafka and file round trips, and flush that really acks."""

from __future__ import annotations

import time

import msgpack
import numpy as np
import pytest
from kafka import KafkaConsumer, TopicPartition

from streamk.broker import LocalBroker, create_topic
from streamk.deadletter import DeadLetter, read_dead_letters
from streamk.errors import ConfigError
from streamk.sinks import (
    DeadLetterSink,
    FileDeadLetterSink,
    FilePredictionSink,
    KafkaDeadLetterSink,
    KafkaPredictionSink,
    PredictionSink,
    SinkError,
    read_predictions,
)

DEADLINE_S = 60.0


def _read_all(bootstrap: str, topic: str, n: int) -> list:
    """Exactly the first ``n`` messages of partition 0 (bounded wait; counted, not end offsets)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    out: list = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(out) < n:
            assert time.monotonic() < deadline, f"read {len(out)} of {n}"
            for msgs in consumer.poll(timeout_ms=200).values():
                out.extend(msgs)
        out.extend(m for msgs in consumer.poll(timeout_ms=300).values() for m in msgs)
    finally:
        consumer.close()
    return out


def _letters() -> list[DeadLetter]:
    return [
        DeadLetter(b"\x93\x01", "x must be a map", "events", 0, 7, 1_700_000_000_000, "bad_x"),
        DeadLetter(b"{not json", "undecodable", "log.jsonl", None, None, 5, None),
        DeadLetter(bytes(range(256)), "too big", "events", 2, 99, 6, "oversized"),
    ]


@pytest.mark.kafka
def test_kafka_prediction_sink_round_trip(kafka_broker, topic_name):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    sink = KafkaPredictionSink(bootstrap, topic_name)
    assert isinstance(sink, PredictionSink)
    for i in range(50):
        sink.write(
            i % 2 == 0,
            id=f"e{i}" if i % 5 else None,
            proba={True: 0.75, False: np.float64(0.25)} if i % 3 == 0 else None,
            model_seq=np.int64(3),
            partition=0,
            offset=i,
        )
    sink.flush()  # acked: every record is readable before close
    messages = _read_all(bootstrap, topic_name, 50)
    sink.close()
    sink.close()  # idempotent
    assert len(messages) == 50
    for i, m in enumerate(messages):
        rec = msgpack.unpackb(m.value, strict_map_key=False)
        assert rec["prediction"] is (i % 2 == 0)
        assert rec["model_seq"] == 3 and rec["partition"] == 0 and rec["offset"] == i
        assert rec["id"] == (f"e{i}" if i % 5 else None)
        assert m.key == (f"e{i}".encode() if i % 5 else None)
        if i % 3 == 0:
            assert rec["proba"] == {True: 0.75, False: 0.25}
        else:
            assert "proba" not in rec


@pytest.mark.kafka
def test_kafka_dead_letter_sink_round_trip(kafka_broker, topic_name):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    letters = _letters()
    sink = KafkaDeadLetterSink(bootstrap, topic_name)
    assert isinstance(sink, DeadLetterSink)
    for letter in letters:
        sink.write(letter)
    sink.close()  # close flushes
    messages = _read_all(bootstrap, topic_name, 3)
    assert [DeadLetter.from_dict(msgpack.unpackb(m.value)) for m in messages] == letters
    assert [m.key for m in messages] == [b"bad_x", b"unknown", b"oversized"]
    headers = [dict(m.headers) for m in messages]
    assert headers[0] == {"source": b"events", "partition": b"0", "offset": b"7"}
    assert headers[1] == {"source": b"log.jsonl"}
    assert headers[2]["offset"] == b"99"


@pytest.mark.kafka
def test_flush_raises_a_clear_error_when_the_broker_is_gone(topic_name):
    broker = LocalBroker()
    try:
        create_topic(broker.bootstrap_servers, topic_name, partitions=1)
        sink = KafkaPredictionSink(broker.bootstrap_servers, topic_name, timeout_s=2.0)
        sink.write(1, id="a")
        sink.flush()
    finally:
        broker.stop()
    sink.write(2, id="b")
    with pytest.raises(SinkError, match="not acknowledged within 2s"):
        sink.flush()
    with pytest.raises(SinkError):
        sink.close()  # close flushes too, and says so
    with pytest.raises(SinkError, match="closed"):
        sink.write(3)


@pytest.mark.parametrize("format", ["jsonl", "msgpack"])
def test_file_prediction_sink_round_trip(tmp_path, format):
    path = tmp_path / f"predictions.{format}"
    sink = FilePredictionSink(path, format=format)
    assert isinstance(sink, PredictionSink)
    sink.write("spam", id=1, proba={"spam": 0.9, "ham": 0.1}, model_seq=2, partition=0, offset=5)
    sink.write(np.float32(1.5), model_seq=2, partition=1, offset=6)
    sink.flush()
    assert len(list(read_predictions(path))) == 2  # durable before close
    sink.close()
    sink.close()
    got = list(read_predictions(path, format))
    assert got == [
        {
            "id": 1,
            "prediction": "spam",
            "model_seq": 2,
            "partition": 0,
            "offset": 5,
            "proba": {"spam": 0.9, "ham": 0.1},
        },
        {"id": None, "prediction": 1.5, "model_seq": 2, "partition": 1, "offset": 6},
    ]
    with pytest.raises(SinkError, match="closed"):
        sink.write(1)


@pytest.mark.parametrize("format", ["jsonl", "msgpack"])
def test_file_dead_letter_sink_round_trip(tmp_path, format):
    path = tmp_path / f"dead.{format}"
    sink = FileDeadLetterSink(path, format=format)
    assert isinstance(sink, DeadLetterSink)
    for letter in _letters():
        sink.write(letter)
    sink.flush()
    assert sink.count == 3
    sink.close()
    assert list(read_dead_letters(path)) == _letters()


def test_bad_file_format_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="'jsonl' or 'msgpack'"):
        FilePredictionSink(tmp_path / "p", format="csv")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'jsonl' or 'msgpack'"):
        FileDeadLetterSink(tmp_path / "d", format="xml")  # type: ignore[arg-type]
