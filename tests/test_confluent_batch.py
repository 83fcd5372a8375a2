"""The confluent transport's batch decode (streamk/engine/columns.py) against the
per-record decoder, and the engine on it over the real broker.

The oracle is :func:`streamk.engine.events.decode`, one payload at a time: whenever the
batch decode returns a block, every payload must decode there to the same ``x``, ``y``
and ``id``; a batch holding any payload it rejects must go record by record, where that
payload becomes a dead letter with its reason and offset.
"""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from streamk import KernelPerceptron
from streamk.engine.columns import _maps_columns, _template_columns, decode_columns
from streamk.engine.columns import decode_columns as runs_decode
from streamk.engine.events import decode, encode_block, encode_event
from streamk.engine.runs import decode_record
from streamk.engine.schema import DEFAULT_LIMITS, Schema
from streamk.errors import InvalidEvent
from streamk.kernels import RBF
from streamk.sources.base import Record, RecordColumns


def events(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] + np.sin(2 * X[:, 1 % d]) > 0)


def check_against_decode(payloads, out):
    """``out`` (a batch decode) agrees with ``decode`` of every payload."""
    X, ys, ids = out
    assert X.dtype == np.float64 and X.shape[0] == len(payloads)
    for i, p in enumerate(payloads):
        ev = decode(p)  # raises InvalidEvent if the batch decode accepted a bad payload
        assert X[i].tolist() == [float(v) for v in ev.x]
        assert ys[i] == ev.y and type(ys[i]) is type(ev.y)
        assert ids[i] == ev.id and type(ids[i]) is type(ev.id)


X10, Y10 = events(300, 10)
BATCHES = {
    "bool labels": [encode_event(r.tolist(), y=bool(t)) for r, t in zip(X10, Y10)],
    "int labels": [encode_event(r.tolist(), y=int(t) * 3 - 1) for r, t in zip(X10, Y10)],
    "str labels": [encode_event(r.tolist(), y="yes" if t else "no") for r, t in zip(X10, Y10)],
    "float labels": [encode_event(r.tolist(), y=float(r[0])) for r in X10],
    "small ids": [encode_event(r.tolist(), id=i % 100) for i, r in enumerate(X10)],
    "ids across encodings": [encode_event(r.tolist(), id=100 + i) for i, r in enumerate(X10)],
    "str ids and labels": [
        encode_event(r.tolist(), y=bool(t), id=f"e{i}") for i, (r, t) in enumerate(zip(X10, Y10))
    ],
    "unlabelled, no id": [encode_event(r.tolist()) for r in X10],
    "ints and bools in x": [encode_event([1, True, -3, 2.5], y=bool(i % 2)) for i in range(50)],
    "d = 40 (array16)": [
        encode_event(r.tolist(), y=bool(t)) for r, t in zip(*events(100, 40, seed=2))
    ],
    "d = 0": [encode_event([], y=True) for _ in range(5)],
    "float32 values": [
        msgpack.packb({"x": r.tolist(), "y": True}, use_single_float=True) for r in X10[:50]
    ],
}
TEMPLATE = {"bool labels", "int labels", "small ids", "unlabelled, no id", "d = 40 (array16)"}


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_batch_decode_equals_decode_of_each_payload(name):
    payloads = BATCHES[name]
    out = decode_columns(payloads, DEFAULT_LIMITS, None)
    assert out is not None  # the common event: decoded in one pass
    check_against_decode(payloads, out)
    maps = _maps_columns(payloads, DEFAULT_LIMITS, None)
    assert maps is not None
    check_against_decode(payloads, maps)
    if name in TEMPLATE:  # uniform layout: the strided decode applies
        template = _template_columns(payloads, DEFAULT_LIMITS, None)
        assert template is not None
        check_against_decode(payloads, template)


GOOD = BATCHES["bool labels"][:40]
BAD = {
    "nan": encode_event([float("nan")] + [0.0] * 9, y=True),
    "inf": encode_event([float("inf")] + [0.0] * 9, y=True),
    "string in x": msgpack.packb({"x": ["1.5"] + [0.0] * 9, "y": True}),
    "unknown key": msgpack.packb({"x": [0.0] * 10, "label": True}),
    "nil label": msgpack.packb({"x": [0.0] * 10, "y": None}),
    "duplicate x": b"\x83\xa1x\x9a" + b"\xcb" + b"\x00" * 8 * 1 + GOOD[0][13:-3] + b"\xa1y\xc3",
    "truncated": GOOD[1][:-1],
    "trailing bytes": GOOD[2] + b"\xc3",
    "empty (tombstone)": b"",
    "nested x": msgpack.packb({"x": [[0.0]] * 10, "y": True}),
    "dict label": msgpack.packb({"x": [0.0] * 10, "y": {"a": 1}}),
    "list id": msgpack.packb({"x": [0.0] * 10, "id": [1]}),
    "json": b'{"x": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "y": true}',
    "block": encode_block(X10[:3], Y10[:3]),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_batch_with_a_payload_decode_refuses_or_treats_apart_goes_record_by_record(name):
    batch = [*GOOD[:20], BAD[name], *GOOD[20:]]
    assert decode_columns(batch, DEFAULT_LIMITS, None) is None
    assert _template_columns(batch, DEFAULT_LIMITS, None) is None


def test_flipped_bytes_never_pass_the_batch_decode_unless_decode_agrees():
    """Fuzz: one byte of one message changed, many times; the batch decode either declines
    or agrees with ``decode`` on every payload (a changed value is still a valid event)."""
    rng = np.random.default_rng(11)
    base = BATCHES["bool labels"][:64]
    accepted = 0
    for _ in range(1500):
        batch = list(base)
        i = int(rng.integers(len(batch)))
        raw = bytearray(batch[i])
        raw[int(rng.integers(len(raw)))] = int(rng.integers(256))
        batch[i] = bytes(raw)
        out = decode_columns(batch, DEFAULT_LIMITS, None)
        if out is not None:
            accepted += 1
            check_against_decode(batch, out)
    assert 0 < accepted < 1500  # both outcomes were exercised


def test_schema_and_limits_apply_to_the_batch():
    payloads = BATCHES["bool labels"][:30]
    assert decode_columns(payloads, DEFAULT_LIMITS, Schema(dim=10)) is not None
    assert decode_columns(payloads, DEFAULT_LIMITS, Schema(dim=9)) is None
    assert decode_columns(payloads, DEFAULT_LIMITS, Schema(labels=[True, False])) is not None
    assert decode_columns(payloads, DEFAULT_LIMITS, Schema(labels=["a"])) is None
    with pytest.raises(InvalidEvent):  # the record-by-record path gives the reason
        decode(payloads[0], schema=Schema(dim=9))


def test_record_columns_behave_like_the_list_of_records():
    stamps = [None, 5, 7]
    cols = RecordColumns([b"a", b"b", b"c"], [0, 0, 1], [10, 11, 3], stamps.__getitem__)
    as_list = [Record(b"a", 0, 10, None), Record(b"b", 0, 11, 5), Record(b"c", 1, 3, 7)]
    assert list(cols) == as_list and cols == as_list and len(cols) == 3
    assert cols[-1] == as_list[-1] and cols[1:] == as_list[1:] and cols[::2] == as_list[::2]
    assert cols[1:][0].timestamp_ms == 5  # a slice keeps each record's own timestamp
    assert as_list[:1] + cols[2:] == [as_list[0], as_list[2]]
    with pytest.raises(IndexError):
        cols[3]


def _refused(payload: bytes) -> str | None:
    """The code the engine's per-record decoder refuses ``payload`` with, or None when it is
    a valid event (JSON and blocks included)."""
    try:
        decode_record(Record(payload, 0, 0), DEFAULT_LIMITS, None)
    except InvalidEvent as exc:
        return exc.code
    return None


@pytest.mark.kafka
def test_engine_on_confluent_learns_the_good_and_dead_letters_the_bad(
    kafka_broker, topic_name, tmp_path, monkeypatch
):
    pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    from kafka import KafkaProducer

    from streamk.cli.broker import create_topic
    from streamk.engine import Engine, EngineConfig
    from streamk.engine.events import DeadLetterFile, read_dead_letters
    from streamk.sources.kafka_confluent import ConfluentKafkaSource

    X, y = events(700, 4, seed=5)
    good = [encode_event(r.tolist(), y=bool(t)) for r, t in zip(X, y)]
    bad = sorted((k, v) for k, v in BAD.items() if _refused(v))  # valid events aside
    stream, bad_at = [], {}
    for i, payload in enumerate(good):  # a bad message every 25 good ones, then none
        stream.append(payload)
        if i % 25 == 12 and bad:
            name, raw = bad.pop()
            bad_at[len(stream)] = (name, raw)
            stream.append(raw)
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for payload in stream:
        producer.send(topic_name, payload)
    producer.flush(timeout=30)
    producer.close()

    def factory():
        return KernelPerceptron(kernel=RBF(0.5), budget=60)

    import streamk.engine.runs as runs

    decoded = []  # batches the one-pass decode took (a spy: the real function runs)
    monkeypatch.setattr(
        runs, "decode_columns", lambda *a: decoded.append(runs_decode(*a)) or decoded[-1]
    )
    letters = tmp_path / "dead.jsonl"
    sink = DeadLetterFile(letters)
    source = ConfluentKafkaSource(bootstrap, topic_name, partitions=[0], group_id=topic_name)
    engine = Engine(
        source,
        factory,
        dead_letters=sink,
        config=EngineConfig(max_records=200, max_events=len(stream), stop_when_idle=20.0),
    )
    result = engine.run()
    sink.close()
    assert result.records == len(stream)
    assert result.learned == len(good)
    got = [(d.offset, d.payload, d.code) for d in read_dead_letters(letters)]
    want = [(offset, raw, _refused(raw)) for offset, (_, raw) in sorted(bad_at.items())]
    assert [g[:2] for g in got] == [w[:2] for w in want] and len(want) >= 9
    assert [g[2] for g in got] == [w[2] for w in want]
    ref = factory()
    for r, t in zip(X, y):
        ref.learn_one({i: v for i, v in enumerate(r.tolist())}, bool(t))
    probe = events(200, 4, seed=6)[0]
    model = engine.model
    assert [model.predict_one(dict(enumerate(r))) for r in probe.tolist()] == [
        ref.predict_one(dict(enumerate(r))) for r in probe.tolist()
    ]
    assert result.positions == {0: len(stream)}
    assert any(out is not None for out in decoded)  # clean batches: one pass
    assert any(out is None for out in decoded)  # batches with a bad message: record by record
