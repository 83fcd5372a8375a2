"""Prediction and dead-letter sinks: Kafka and file round trips, and flush that really acks."""

from __future__ import annotations

import json
import time

import msgpack
import numpy as np
import pytest
from kafka import KafkaConsumer, TopicPartition

from streamk.cli.broker import LocalBroker, create_topic
from streamk.engine.deadletter import DeadLetter, read_dead_letters
from streamk.errors import ConfigError
from streamk.sinks import (
    ConfluentPredictionSink,
    DeadLetterSink,
    FileDeadLetterSink,
    FilePredictionSink,
    KafkaDeadLetterSink,
    KafkaPredictionSink,
    PredictionSink,
    SinkError,
    decode_predictions,
    read_predictions,
)

DEADLINE_S = 60.0


def _read_all(bootstrap: str, topic: str, n: int, partitions: int = 1) -> list:
    """Exactly ``n`` messages of the topic's first ``partitions`` partitions (bounded wait;
    counted, not end offsets), partition by partition."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
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
    return sorted(out, key=lambda m: (m.partition, m.offset))


def _kafka_sink(transport: str, bootstrap: str, topic: str, **kwargs):
    """The prediction sink of a transport; the confluent one needs the [kafka-fast] extra."""
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
        return ConfluentPredictionSink(bootstrap, topic, **kwargs)
    return KafkaPredictionSink(bootstrap, topic, **kwargs)


def _expected(i: int, seq: int = 3, partition: int | None = 0) -> dict:
    """The record of event ``i`` in the tests below, written out by hand."""
    record = {
        "id": f"e{i}" if i % 5 else None,
        "prediction": ["spam", 1.5, True, 7][i % 4],
        "model_seq": seq,
        "partition": partition,
        "offset": 100 + i,
    }
    return record


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


TRANSPORTS = ["kafka-python", "confluent"]


def _columns(n: int) -> tuple[list, list, list]:
    """Predictions (NumPy scalars among them), ids and offsets of ``n`` events."""
    predictions = [["spam", np.float32(1.5), np.bool_(True), np.int64(7)][i % 4] for i in range(n)]
    return predictions, [_expected(i)["id"] for i in range(n)], [100 + i for i in range(n)]


@pytest.mark.kafka
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_write_many_writes_the_same_messages_as_write(kafka_broker, topic_name, transport):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    sink = _kafka_sink(transport, bootstrap, topic_name)
    assert isinstance(sink, PredictionSink)
    predictions, ids, offsets = _columns(40)
    sink.write_many(predictions[:30], ids=ids[:30], offsets=offsets[:30], model_seq=3, partition=0)
    for i in range(30, 40):  # the same records one at a time
        sink.write(predictions[i], id=ids[i], model_seq=3, partition=0, offset=offsets[i])
    sink.flush()
    messages = _read_all(bootstrap, topic_name, 40)
    sink.close()
    assert sink.count == 40
    for i, m in enumerate(messages):
        # byte for byte what msgpack makes of the record map (field order included)
        assert m.value == msgpack.packb(_expected(i)), i
        assert m.key == (None if i % 5 == 0 else f"e{i}".encode())
        assert decode_predictions(m.value) == [_expected(i)]


@pytest.mark.kafka
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_keyed_predictions_land_on_the_partition_of_the_java_hash(
    kafka_broker, topic_name, transport
):
    from kafka.partitioner.default import murmur2  # kafka-python's port of the Java hash

    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=3)
    sink = _kafka_sink(transport, bootstrap, topic_name)
    ids = [f"event-{i}" for i in range(60)]
    sink.write_many([i % 2 == 0 for i in range(60)], ids=ids, offsets=list(range(60)))
    sink.close()
    messages = _read_all(bootstrap, topic_name, 60, partitions=3)
    assert sorted(m.key for m in messages) == sorted(i.encode() for i in ids)
    for m in messages:
        assert m.partition == (murmur2(m.key) & 0x7FFFFFFF) % 3, m.key
    assert len({m.partition for m in messages}) == 3  # the hash does spread them


@pytest.mark.kafka
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_block_layout_is_one_message_per_run(kafka_broker, topic_name, transport):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    sink = _kafka_sink(transport, bootstrap, topic_name, layout="block")
    predictions, ids, offsets = _columns(25)
    sink.write_many(predictions[:20], ids=ids[:20], offsets=offsets[:20], model_seq=3, partition=0)
    sink.write_many(predictions[20:], ids=ids[20:], offsets=offsets[20:], model_seq=4, partition=2)
    sink.write(False, id="last", proba={True: 0.25, False: 0.75}, model_seq=4, offset=9)
    sink.close()
    messages = _read_all(bootstrap, topic_name, 3)
    assert sink.count == 26
    assert [m.key for m in messages] == [b"0", b"2", None]  # the source partition
    records = [r for m in messages for r in decode_predictions(m.value)]
    last = {"id": "last", "prediction": False, "model_seq": 4, "partition": None, "offset": 9}
    assert records == [_expected(i) for i in range(20)] + [
        _expected(i, seq=4, partition=2) for i in range(20, 25)
    ] + [{**last, "proba": {True: 0.25, False: 0.75}}]
    raw = msgpack.unpackb(messages[0].value)
    assert raw["kind"] == "predictions" and raw["v"] == 1 and len(raw["predictions"]) == 20


@pytest.mark.kafka
def test_confluent_sink_flush_raises_a_clear_error_when_the_broker_is_gone(topic_name):
    pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    broker = LocalBroker()
    try:
        create_topic(broker.bootstrap_servers, topic_name, partitions=1)
        sink = ConfluentPredictionSink(broker.bootstrap_servers, topic_name, timeout_s=2.0)
        sink.write(1, id="a")
        sink.flush()
    finally:
        broker.stop()
    sink.write(2, id="b")
    with pytest.raises(SinkError, match="not acknowledged within 2s"):
        sink.flush()
    with pytest.raises(SinkError):
        sink.close()
    with pytest.raises(SinkError, match="closed"):
        sink.write(3)


def test_confluent_sink_translates_kafka_python_setting_names():
    pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    from streamk.sinks.confluent import producer_settings

    assert producer_settings(
        {"security_protocol": "SSL", "ssl_cafile": "/ca.pem", "sasl_plain_username": "u"}
    ) == {"security.protocol": "SSL", "ssl.ca.location": "/ca.pem", "sasl.username": "u"}
    with pytest.raises(ConfigError, match="producer_config"):
        ConfluentPredictionSink("127.0.0.1:1", "t", {"no.such.setting": 1})


@pytest.mark.parametrize("format", ["jsonl", "msgpack"])
def test_file_write_many_writes_the_bytes_of_write(tmp_path, format):
    predictions, ids, offsets = _columns(12)
    probas = [{"spam": 0.5, "ham": np.float64(0.5)} if i % 3 == 0 else None for i in range(12)]
    one, many = tmp_path / f"one.{format}", tmp_path / f"many.{format}"
    with_proba = [
        {**_expected(i), "proba": {"spam": 0.5, "ham": 0.5}} if i % 3 == 0 else _expected(i)
        for i in range(12)
    ]
    sink = FilePredictionSink(many, format=format)
    sink.write_many(predictions[:6], ids=ids[:6], offsets=offsets[:6], model_seq=3, partition=0)
    sink.write_many(
        predictions[6:],
        ids=ids[6:],
        offsets=offsets[6:],
        model_seq=3,
        partition=0,
        probas=probas[6:],
    )
    sink.close()
    reference = FilePredictionSink(one, format=format)
    for i in range(12):
        reference.write(
            predictions[i],
            id=ids[i],
            proba=probas[i] if i >= 6 else None,
            model_seq=3,
            partition=0,
            offset=offsets[i],
        )
    reference.close()
    assert many.read_bytes() == one.read_bytes()
    expected = [_expected(i) for i in range(6)] + with_proba[6:]
    if format == "jsonl":  # written out by hand: compact JSON, one record per line
        lines = [json.dumps(r, separators=(",", ":")) for r in expected]
        assert many.read_bytes() == ("\n".join(lines) + "\n").encode()
    else:
        assert many.read_bytes() == b"".join(msgpack.packb(r) for r in expected)
    read_back = expected if format == "msgpack" else json.loads(json.dumps(expected))
    assert list(read_predictions(many)) == read_back  # JSON turns proba keys into text


@pytest.mark.parametrize("format", ["jsonl", "msgpack"])
def test_file_block_layout_reads_back_as_records(tmp_path, format):
    path = tmp_path / f"blocks.{format}"
    predictions, ids, offsets = _columns(9)
    sink = FilePredictionSink(path, format=format, layout="block")
    sink.write_many(predictions[:5], ids=ids[:5], offsets=offsets[:5], model_seq=3, partition=0)
    sink.write_many(predictions[5:], ids=ids[5:], offsets=offsets[5:], model_seq=3, partition=0)
    sink.close()
    assert sink.count == 9
    assert len(path.read_bytes().splitlines()) == (2 if format == "jsonl" else 1)
    assert list(read_predictions(path)) == [_expected(i) for i in range(9)]


def test_unknown_layout_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="'record' or 'block'"):
        FilePredictionSink(tmp_path / "p", layout="rows")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="as many ids"):
        FilePredictionSink(tmp_path / "q", layout="block").write_many([1, 2], ids=[1], offsets=[1])
