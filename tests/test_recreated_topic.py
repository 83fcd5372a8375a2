"""A topic deleted and recreated under a model (issue 13, item 6): never skipped silently.

``streamk run`` learns 300 events, the topic is deleted and recreated with 120 new ones,
and the engine restarts on the same store: by default it stops with a message naming the
remedy (exit 2); with ``on_offset_beyond_end = earliest`` it learns the new partition from
its start, with a WARNING. Before, it resumed at offset 300 of the new topic and learned
nothing, reporting success.

Recreated with 500 new events, the resume offset is inside the new topic: offsets alone
cannot tell, and the engine skipped the new topic's first 300 events in silence (session
23's audit). The snapshot now carries a mark of the last record each partition learned
(offset, timestamp, CRC of its bytes), and the record before the resume offset is read
back and compared, on both transports.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from kafka import KafkaProducer
from streamk_run import recreate_topic, run_args

from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event
from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _produce(bootstrap, topic, n, start):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(start, start + n):
        x = [float(i % 7), float(i % 5)]
        producer.send(topic, encode_event(x, y=(i % 7) > (i % 5), id=i))
    producer.flush()
    producer.close()


def _run(bootstrap, topic, store, group=None, **settings):
    args = run_args(bootstrap, topic, group or f"g-{topic}", store, model_name="m", **settings)
    cmd = [sys.executable, "-m", "streamk.cli", *args, "--stop-when-idle", "2"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_recreated_topic_stops_with_the_remedy_or_starts_over(kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    topic, store = f"recreated-{uuid.uuid4().hex[:8]}", tmp_path / "store"
    create_topic(bootstrap, topic, partitions=1)
    _produce(bootstrap, topic, 300, 0)
    first = _run(bootstrap, topic, store)
    assert first.returncode == 0, first.stderr[-2000:]
    assert SnapshotStore(store).latest("m").offsets[topic] == {0: 300}

    recreate_topic(bootstrap, topic)
    _produce(bootstrap, topic, 120, 1000)

    stopped = _run(bootstrap, topic, store)
    assert stopped.returncode == 2
    assert "past the partitions' ends" in stopped.stderr
    assert "on_offset_beyond_end = earliest" in stopped.stderr

    again = _run(bootstrap, topic, store, on_offset_beyond_end="earliest")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "WARNING" in again.stderr and "learning it from 0" in again.stderr
    snap = SnapshotStore(store).latest("m")
    assert snap.offsets[topic] == {0: 120}
    assert snap.model.n_learned == 300 + 120


@pytest.mark.parametrize("transport", ["kafka-python", "confluent"])
def test_a_recreated_topic_refilled_past_the_old_offset_is_noticed(
    kafka_broker, tmp_path, transport
):
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    bootstrap = kafka_broker.bootstrap_servers
    topic, store = f"refilled-{uuid.uuid4().hex[:8]}", tmp_path / "store"
    create_topic(bootstrap, topic, partitions=1)
    _produce(bootstrap, topic, 300, 0)
    first = _run(bootstrap, topic, store, transport=transport)
    assert first.returncode == 0, first.stderr[-2000:]
    again = _run(bootstrap, topic, store, transport=transport)  # the same topic: no alarm
    assert again.returncode == 0 and "holds other" not in again.stderr, again.stderr[-2000:]

    recreate_topic(bootstrap, topic)
    _produce(bootstrap, topic, 500, 1000)

    stopped = _run(bootstrap, topic, store, transport=transport)
    assert stopped.returncode == 2, stopped.stderr[-2000:]
    assert "offset 299 holds other bytes" in stopped.stderr
    assert "on_offset_beyond_end = earliest" in stopped.stderr
    assert SnapshotStore(store).latest("m").offsets[topic] == {0: 300}  # nothing written

    learned = _run(bootstrap, topic, store, transport=transport, on_offset_beyond_end="earliest")
    assert learned.returncode == 0, learned.stderr[-2000:]
    assert "WARNING" in learned.stderr and "learning it from its start" in learned.stderr
    snap = SnapshotStore(store).latest("m")
    assert snap.offsets[topic] == {0: 500}
    assert snap.model.n_learned == 300 + 500  # each new event once, none skipped
