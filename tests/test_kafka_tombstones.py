"""Tombstones (null values) and empty messages on an events topic are dead letters that say
what they are (session 26).

A compacted topic carries null values (tombstones) and a producer may send an empty value;
neither holds an event. Both were dead-lettered as "payload is not a single valid msgpack
value: Unpack failed: incomplete input", which sends an operator looking for a broken
producer. Oracle: the records the test produced.
"""

from __future__ import annotations

import json

import pytest
from kafka import KafkaProducer
from streamk_run import run_args, streamk

from streamk.cli.broker import create_topic
from streamk.engine.deadletter import read_dead_letters
from streamk.engine.events import encode_event

pytestmark = [pytest.mark.kafka]

N, EVERY = 60, 10


@pytest.mark.parametrize("transport", ["kafka-python", "confluent"])
def test_null_and_empty_values_are_dead_letters_named_so(
    kafka_broker, topic_name, tmp_path, transport
):
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"{topic_name}-{transport}"
    create_topic(bootstrap, topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    empty = []
    offset = 0
    for i in range(N):
        producer.send(topic, encode_event([float(i % 7), 1.0], y=i % 2 == 0))
        offset += 1
        if i % EVERY == 0:
            producer.send(topic, key=b"k", value=None)  # a tombstone
            producer.send(topic, key=b"k", value=b"")
            empty += [offset, offset + 1]
            offset += 2
    producer.flush()
    producer.close()
    args = run_args(
        bootstrap, topic, f"g-{topic}", tmp_path / "s", transport=transport,
        dead_letter_dir=tmp_path / "dead",
    )  # fmt: skip
    done = streamk(*args, "--stop-when-idle", "2", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert (out["learned"], out["dead_lettered"]) == (N, len(empty))
    letters = list(read_dead_letters(tmp_path / "dead" / "dead-letters.jsonl"))
    assert sorted(d.offset for d in letters) == empty
    for d in letters:
        assert d.payload == b"" and d.code == "undecodable"
        assert d.reason.startswith("an empty payload (a null value: a Kafka tombstone")
