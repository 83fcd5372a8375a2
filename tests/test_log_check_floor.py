"""``log_check_seconds``: on a Kafka topic every snapshot is checked (the log read back at
one record per partition) before it is saved, and a snapshot due sooner than the floor
after the last check waits for it (docs/configuration.md, docs/operations.md).

The oracle is arithmetic on the run's settings: 600 records, a snapshot every 50, polls of
at most 50. With no floor every due snapshot is taken, each after a read of its own (at
least 600 / 100 of them); with a floor longer than the run only the first due snapshot and
the one at shutdown are taken, each after its read. The reads are counted by wrapping the
source's own ``records_before`` (the real read still runs against the broker).
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


def _run(bootstrap, topic, tmp_path, floor):
    """The engine over the topic's N records; (snapshots written, reads of the log)."""
    source = KafkaSource(bootstrap, topic, group_id=f"{topic}-{floor}", partitions=[0])
    read, reads = source.records_before, []

    def counted(targets):
        reads.append(dict(targets))
        return read(targets)

    source.records_before = counted
    engine = Engine(
        source,
        lambda: KernelPerceptron(kernel=RBF(1.0), budget=50),
        store=SnapshotStore(tmp_path / f"store-{floor}"),
        config=EngineConfig(
            max_records=EVERY,
            snapshot_every=EVERY,
            snapshot_seconds=None,
            stop_when_idle=3.0,
            max_events=N,
            log_check_seconds=floor,
        ),
    )
    result = engine.run()
    source.close()
    assert result.records == N
    snap = SnapshotStore(tmp_path / f"store-{floor}").latest("model")
    assert snap.offsets[topic] == {0: N} and snap.model.n_learned == N
    return result.metrics["snapshots_written"], [r for r in reads if r]


def test_every_snapshot_is_checked_and_the_floor_spaces_the_checks(
    kafka_broker, topic_name, tmp_path
):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(N):
        producer.send(topic_name, encode_event([float(i % 7), float(i % 5)], y=i % 3 == 0))
    producer.flush()
    producer.close()

    snapshots, reads = _run(bootstrap, topic_name, tmp_path, 0.0)
    assert N // (2 * EVERY) <= snapshots <= N // EVERY
    assert len(reads) == snapshots  # one read before each snapshot

    snapshots, reads = _run(bootstrap, topic_name, tmp_path, 3600.0)
    assert snapshots == 2  # the first due one, then the one at shutdown, which never waits
    assert len(reads) == 2
