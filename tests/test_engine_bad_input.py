"""A fuzzed mix of valid and malformed messages on a real topic: no crash, nothing lost."""

from __future__ import annotations

import random

import msgpack
import pytest
from kafka import KafkaProducer

from streamk import RBF, KernelPerceptron
from streamk.cli.broker import create_topic
from streamk.engine import Engine, EngineConfig
from streamk.engine.deadletter import DeadLetterFile, read_dead_letters
from streamk.engine.events import encode_event
from streamk.sources.kafka import KafkaSource

pytestmark = [pytest.mark.kafka]


def malformed(rng: random.Random) -> bytes:
    """One message that must be rejected, of a randomly chosen kind."""
    kind = rng.choice(
        [
            "random",
            "truncated",
            "nan",
            "inf",
            "wrong_x",
            "wrong_y",
            "huge_map",
            "unknown_key",
            "nested",
            "empty",
            "not_a_map",
            "string_value",
        ]
    )
    good = encode_event([rng.random(), rng.random()], y=True)
    if kind == "random":
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))) + b"\xc1"
    if kind == "truncated":
        return good[: rng.randint(1, len(good) - 1)]
    if kind == "nan":
        return msgpack.packb({"x": [1.0, float("nan")], "y": True})
    if kind == "inf":
        return msgpack.packb({"x": {"a": float("-inf")}, "y": False})
    if kind == "wrong_x":
        return msgpack.packb({"x": 42, "y": True})
    if kind == "wrong_y":
        return msgpack.packb({"x": [1.0, 2.0], "y": {"label": 1}})
    if kind == "huge_map":
        return msgpack.packb({"x": {f"f{i}": 1.0 for i in range(20_000)}, "y": True})
    if kind == "unknown_key":
        return msgpack.packb({"x": [1.0, 2.0], "label": True})
    if kind == "nested":
        inner: object = 1.0
        for _ in range(200):
            inner = [inner]
        return msgpack.packb({"x": inner, "y": True})
    if kind == "empty":
        return b""
    if kind == "not_a_map":
        return msgpack.packb([1.0, 2.0, 3.0])
    return msgpack.packb({"x": {"a": "seven"}, "y": True})


def test_fuzzed_mix_every_malformed_message_is_dead_lettered_every_valid_one_used(
    kafka_broker, topic_name, tmp_path
):
    rng = random.Random(2026)
    payloads, bad, n_valid = [], set(), 0
    for i in range(1500):
        if rng.random() < 0.15:
            payloads.append(malformed(rng))
            bad.add(i)
        else:
            x = [rng.gauss(0, 1), rng.gauss(0, 1)]
            labelled = rng.random() < 0.9
            payloads.append(encode_event(x, y=(x[0] * x[1] > 0) if labelled else None, id=i))
            n_valid += 1
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20)
    for p in payloads:
        producer.send(topic_name, p)
    producer.flush()
    producer.close()

    source = KafkaSource(bootstrap, topic_name, group_id=f"{topic_name}-g", partitions=[0])
    dead = tmp_path / "dead.jsonl"
    with DeadLetterFile(dead) as sink:
        engine = Engine(
            source,
            lambda: KernelPerceptron(kernel=RBF(1.0), budget=100),
            dead_letters=sink,
            config=EngineConfig(
                max_records=128, stop_when_idle=3.0, snapshot_every=None, snapshot_seconds=None
            ),
        )
        result = engine.run()
    source.close()
    letters = list(read_dead_letters(dead))
    assert result.records == len(payloads)
    assert {letter.offset for letter in letters} == bad
    assert all(letter.reason and letter.code for letter in letters)
    assert sorted(letter.payload for letter in letters) == sorted(payloads[i] for i in bad)
    assert result.learned + result.scored == n_valid
    assert engine.positions == {0: len(payloads)}


def test_an_oversize_record_reaches_the_dead_letter_topic_cut_to_fit(
    kafka_broker, topic_name, tmp_path
):
    """A record above ``max_payload_bytes`` (3 MiB here; a broker whose limit was raised
    accepts it) is a dead letter whose whole payload no default producer or broker takes:
    sending it stopped ``streamk run`` at that record on every restart (exit 2,
    MessageSizeTooLargeError). The dead letter now keeps the payload's head and says so.
    The real CLI, the real topics; the original bytes are the oracle of the head."""
    from kafka import KafkaConsumer
    from streamk_run import run_args, streamk
    from test_engine_crash import make_events

    from streamk.engine.deadletter import DeadLetter
    from streamk.snapshot import SnapshotStore

    bootstrap = kafka_broker.bootstrap_servers
    dlq = f"{topic_name}-dlq"
    create_topic(bootstrap, topic_name, partitions=1)
    create_topic(bootstrap, dlq, partitions=1)
    good = [encode_event(x, y=y, id=i) for i, (x, y) in enumerate(make_events(300, seed=4))]
    huge = msgpack.packb({"x": {"f0": 1.0}, "pad": b"a" * (3 << 20)})
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20)
    for value in good[:100] + [huge] + good[100:]:
        producer.send(topic_name, value)
    producer.flush()
    producer.close()
    store = tmp_path / "snapshots"
    args = run_args(
        bootstrap,
        topic_name,
        f"{topic_name}-g",
        store,
        model_name="m",
        snapshot_every=50,
        max_records=20,
        dead_letter_topic=dlq,
        stop_when_idle=4.0,
    )
    done = streamk(*args)
    assert done.returncode == 0, done.stderr[-2000:]
    snap = SnapshotStore(store).latest("m")
    assert snap.offsets == {topic_name: {0: 301}} and snap.model.n_learned == 300
    consumer = KafkaConsumer(
        dlq, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    letters = [DeadLetter.from_dict(msgpack.unpackb(m.value)) for m in consumer]
    consumer.close()
    assert len(letters) == 1 and letters[0].code == "oversize" and letters[0].offset == 100
    head = letters[0].payload
    assert 900_000 < len(head) < 1_000_000 and huge.startswith(head)
    assert f"cut to its first {len(head):,} of {len(huge):,} bytes" in letters[0].reason
