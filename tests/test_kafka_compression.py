"""Topics whose producers compress their batches (lz4, zstd, snappy, gzip) are read by both
transports (session 26).

kafka-python reads lz4, snappy and zstd batches only with their codec libraries, and
streamk depended on ``kafka-python[crc32c]`` alone: ``streamk run`` on a topic written by
a producer with ``compression.type = lz4`` (or zstd, or snappy: the usual production
settings) ended in a traceback, ``UnsupportedCodecError: Libraries for lz4 compression
codec not found`` (exit 1), before learning a single event. The dependency now carries
the codecs. Oracle: the number of events produced, each learned once.
"""

from __future__ import annotations

import json

import pytest
from kafka import KafkaProducer
from streamk_run import run_args, streamk

from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event

pytestmark = [pytest.mark.kafka]

N = 400


@pytest.mark.parametrize(
    "codec, transport",
    [*((c, "kafka-python") for c in ("lz4", "zstd", "snappy", "gzip")), ("lz4", "confluent")],
)  # (librdkafka has every codec built in: one of them shows the transport reads them)
def test_a_compressed_topic_is_learned_whole(kafka_broker, topic_name, tmp_path, codec, transport):
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"{topic_name}-{codec}"
    create_topic(bootstrap, topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20)
    for i in range(N):
        producer.send(topic, encode_event([float(i % 7), float(i % 5)], y=(i % 7) > (i % 5)))
    producer.flush()
    producer.close()
    args = run_args(bootstrap, topic, f"g-{topic}", tmp_path / "s", transport=transport)
    done = streamk(*args, "--stop-when-idle", "2", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert (out["records"], out["learned"], out["dead_lettered"]) == (N, N, 0)
    assert out["positions"] == {"0": N}
