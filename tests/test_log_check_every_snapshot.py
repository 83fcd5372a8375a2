"""On a Kafka topic every snapshot is checked before it is saved: the topic's id is read
and compared with the one read at assignment (a recreated topic gets a new id), and only
where no id can be read is the log read back at one record per partition
(docs/operations.md, "the topic deleted and recreated while an engine reads it").

The oracle is arithmetic on the run's settings: 600 records, a snapshot every 50, polls of
at most 50, one partition assigned once; both transports. Each snapshot written costs one
read of the id, and the assignment one more; nothing is read back. With a source that names no id (a
broker older than 2.8) every snapshot is preceded by a read-back of its own instead. The
calls are counted by wrapping the source's own ``topic_id`` and ``records_before`` (the
real calls still go to the broker).
"""

from __future__ import annotations

import pytest
from kafka import KafkaProducer

from streamk import RBF, KernelPerceptron
from streamk.cli.broker import create_topic
from streamk.engine import Engine, EngineConfig
from streamk.engine.events import encode_event
from streamk.snapshot import SnapshotStore
from streamk.sources.kafka import KafkaSource

pytestmark = pytest.mark.kafka

N, EVERY = 600, 50


def _counted(source, name, calls, answer=None):
    """Count the calls of ``source.name`` (the real one runs, unless ``answer`` is given)."""
    real = getattr(source, name)

    def wrapped(*args):
        calls.append(args)
        return real(*args) if answer is None else answer()

    setattr(source, name, wrapped)


def _source(transport, bootstrap, topic, group):
    if transport == "confluent":
        from streamk.sources.kafka_confluent import ConfluentKafkaSource

        return ConfluentKafkaSource(bootstrap, topic, group_id=group, partitions=[0])
    return KafkaSource(bootstrap, topic, group_id=group, partitions=[0])


def _run(transport, bootstrap, topic, tmp_path, label, ids=True):
    """The engine over the topic's N records; (snapshots written, id reads, read-backs)."""
    source = _source(transport, bootstrap, topic, f"{topic}-{label}")
    id_reads, read_backs = [], []
    _counted(source, "topic_id", id_reads, None if ids else (lambda: None))
    _counted(source, "records_before", read_backs)
    engine = Engine(
        source,
        lambda: KernelPerceptron(kernel=RBF(1.0), budget=50),
        store=SnapshotStore(tmp_path / label),
        config=EngineConfig(
            max_records=EVERY,
            snapshot_every=EVERY,
            snapshot_seconds=None,
            stop_when_idle=3.0,
            max_events=N,
        ),
    )
    result = engine.run()
    source.close()
    assert result.records == N
    snap = SnapshotStore(tmp_path / label).latest("model")
    assert snap.offsets[topic] == {0: N} and snap.model.n_learned == N
    return result.metrics["snapshots_written"], len(id_reads), [r for r in read_backs if r[0]]


@pytest.mark.parametrize("transport", ["kafka-python", "confluent"])
def test_every_snapshot_is_checked_by_the_topic_id_or_else_by_a_read_back(
    kafka_broker, topic_name, tmp_path, transport
):
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(N):
        producer.send(topic_name, encode_event([float(i % 7), float(i % 5)], y=i % 3 == 0))
    producer.flush()
    producer.close()

    snapshots, id_reads, read_backs = _run(transport, bootstrap, topic_name, tmp_path, "ids")
    assert N // (2 * EVERY) <= snapshots <= N // EVERY
    assert id_reads == snapshots + 1  # one before each snapshot, one at the assignment
    assert read_backs == []  # the same id: nothing read back

    snapshots, id_reads, read_backs = _run(
        transport, bootstrap, topic_name, tmp_path, "no-ids", ids=False
    )
    assert N // (2 * EVERY) <= snapshots <= N // EVERY
    assert len(read_backs) == snapshots  # no id to compare: one read before each snapshot
