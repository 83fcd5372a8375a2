"""Records of a producer's transaction are learned only once it commits (session 26).

kafka-python reads ``read_uncommitted`` by default: the engine learned the records of a
transaction still open, which its producer may yet abort; an aborted event must affect the
model zero times, so it learned what it must not. Both transports now read
``read_committed`` (librdkafka's default): a record is learned once its transaction
commits, never before. (tansu stops a ``read_committed`` fetch at the last stable offset,
which this test needs; it does not return the aborted transactions a fetch skips, so the
abort itself is not provoked here.) Oracle: the counts the test's producers committed.
"""

from __future__ import annotations

import json

import pytest
from streamk_run import run_args, streamk

from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

COMMITTED, OPEN = 50, 30


@pytest.mark.parametrize("transport", ["kafka-python", "confluent"])
def test_an_open_transaction_is_learned_only_after_it_commits(
    kafka_broker, topic_name, tmp_path, transport
):
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="transactional producer")
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"{topic_name}-{transport}"
    create_topic(bootstrap, topic, partitions=1)

    def producer(tid: str):
        p = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 0}
        )
        p.init_transactions(30)
        p.begin_transaction()
        return p

    done = producer(f"{topic}-a")
    for i in range(COMMITTED):
        done.produce(topic, encode_event([float(i % 7), 1.0], y=i % 2 == 0))
    done.commit_transaction(30)
    pending = producer(f"{topic}-b")
    for i in range(OPEN):
        pending.produce(topic, encode_event([float(i % 5), 2.0], y=i % 3 == 0))
    pending.flush(30)  # sent, not committed

    args = run_args(bootstrap, topic, f"g-{topic}", tmp_path / "s", transport=transport)
    first = streamk(*args, "--stop-when-idle", "3", "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout)["learned"] == COMMITTED

    pending.commit_transaction(30)
    second = streamk(*args, "--stop-when-idle", "3", "--json")
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout)["learned"] == OPEN  # each event once, once committed
