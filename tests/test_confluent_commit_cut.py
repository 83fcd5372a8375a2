"""The confluent transport's offset commit never stalls the polling thread.

confluent-kafka lets one call at a time into a consumer: while a synchronous
``commit`` waits on one thread (it has no timeout, and waits as long as the group
coordinator is unreachable), every other call on the consumer waits behind it, the
polling thread's ``consume`` included. A commit left waiting on a cut link therefore
froze ``poll`` until the link came back (for ever, in the network-cut test, whose
polling thread is the one that restores the link). These tests pin what
:class:`~streamk.sources.kafka_confluent.ConfluentKafkaSource` does instead: an
asynchronous commit whose answer is served by the polling thread, records consumed
while it waits held for the next ``poll`` (none lost, none twice), and a commit
answered late accounted for. Each blocking step runs on a thread with a bound, so a
hang fails the test instead of the suite.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from streamk.cli.broker import create_topic
from streamk.sources.base import Record
from streamk.sources.kafka import CommitFailedError
from tests.test_kafka_faults import _drain, _produce, proxied  # noqa: F401 - a fixture

pytestmark = pytest.mark.kafka
BOUND_S = 30.0  # far above any answer here; only a call stuck behind a commit reaches it


@pytest.fixture
def confluent_source():
    pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    from streamk.sources.kafka_confluent import ConfluentKafkaSource

    return ConfluentKafkaSource


def _bounded(call, *args):
    """``call(*args)`` on a daemon thread: (finished, its result or exception)."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = call(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(BOUND_S)
    return not worker.is_alive(), out


def _polls(source, n: int) -> list[Record]:
    got: list[Record] = []
    for _ in range(n):
        got.extend(source.poll(100, 0.2))
    return got


def test_a_commit_unanswered_on_a_cut_link_never_blocks_poll(proxied, confluent_source):  # noqa: F811
    proxy, broker = proxied
    topic, group = f"ccut-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    _produce(broker.bootstrap_servers, topic, 100, 2)
    source = confluent_source(f"127.0.0.1:{proxy.port}", topic, group, timeout_s=2.0)
    try:
        got = _drain(source, 100)
        positions = {p: 1 + max(r.offset for r in got if r.partition == p) for p in (0, 1)}
        proxy.cut()
        done, out = _bounded(source.commit, positions)  # no answer: fails within timeout_s
        assert done and isinstance(out.get("error"), CommitFailedError), out
        done, out = _bounded(_polls, source, 10)  # the commit still waits in the client
        proxy.restore()
        assert done, "poll blocked behind the unanswered commit"
        assert "error" not in out, out
        # once the link is back, the late answer is taken in and commits work again
        deadline = time.monotonic() + BOUND_S
        while True:
            done, out = _bounded(source.commit, positions)
            assert done, "commit hung after the link came back"
            if "error" not in out:
                break
            assert time.monotonic() < deadline, out
            assert _bounded(_polls, source, 5)[0]
        committed = source.committed([0, 1])
        assert {p: c.offset for p, c in committed.items()} == positions
    finally:
        proxy.restore() if proxy.cut_off else None
        assert _bounded(source.close)[0]


def test_records_consumed_while_a_commit_waits_are_delivered_once(broker_pair):
    """A commit serves the consumer's queue while it waits for its answer: every record
    taken from it then reaches the next polls, exactly once and in order."""
    source, n = broker_pair
    seen = list(source.poll(50, 5.0))  # librdkafka prefetches far more than 50 meanwhile
    assert seen
    held = []
    for _ in range(20):  # commit after every poll: each wait may take records in
        source.commit({r.partition: r.offset + 1 for r in seen[-1:]}, metadata="m")
        held.append(len(source._held))
        seen.extend(source.poll(50, 0.5))
    assert max(held) > 0, held  # the case under test happened
    seen.extend(_drain(source, n - len(seen)))
    offsets = [r.offset for r in seen]
    assert offsets == list(range(n))
    assert source.committed([0])[0].offset > 0


@pytest.fixture
def broker_pair(kafka_broker, topic_name, confluent_source):
    bootstrap = kafka_broker.bootstrap_servers
    n = 3000
    create_topic(bootstrap, topic_name, partitions=1)
    _produce(bootstrap, topic_name, n, 1, batch=100)
    source = confluent_source(bootstrap, topic_name, f"g-{topic_name}", partitions=[0])
    try:
        yield source, n
    finally:
        source.close()
