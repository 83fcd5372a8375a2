"""KafkaSource against the real local broker: exactly-once counts, seek, commit, rebalance.

Every wait is bounded by a deadline and ends as soon as its condition holds; nothing
decides "drained" from end offsets (tansu 0.6 reports them wrongly): records are counted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from kafka import KafkaProducer
from kafka.structs import MemberState

from streamk.cli.broker import QUICK_GROUP_CONFIG, create_topic
from streamk.engine.events import decode, encode_event
from streamk.errors import ConfigError
from streamk.sources.base import Record
from streamk.sources.kafka import KafkaSource

pytestmark = pytest.mark.kafka

DEADLINE_S = 60.0


@pytest.fixture(params=["kafka-python", "confluent"])
def make_source(request: pytest.FixtureRequest) -> type[KafkaSource]:
    """Each transport behind the same Source interface (confluent-kafka is optional)."""
    if request.param == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
        from streamk.sources.kafka_confluent import ConfluentKafkaSource

        return ConfluentKafkaSource  # type: ignore[return-value]
    return KafkaSource


def _produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    """Send events ``id = 0..n-1`` round-robin over the partitions, and wait for acks."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        futures = [
            producer.send(
                topic, encode_event(x=[float(i)], y=i % 2, id=i), partition=i % partitions
            )
            for i in range(n)
        ]
        producer.flush(timeout=30)
        for f in futures:
            f.get(timeout=0)  # raises if any send failed
    finally:
        producer.close(timeout=5)


def _drain(source: KafkaSource, n: int, until: Callable[[], bool] | None = None) -> list[Record]:
    """Poll until ``n`` records (and ``until()``) or the deadline; fail on the deadline."""
    out: list[Record] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(out) < n or (until is not None and not until()):
        assert time.monotonic() < deadline, f"got {len(out)} of {n} records before the deadline"
        out.extend(source.poll(500, 0.2))
    return out


def _check_exactly_once(records: list[Record], n: int) -> None:
    ids = sorted(decode(r.payload).id for r in records)
    assert ids == list(range(n))
    positions = {(r.partition, r.offset) for r in records}
    assert len(positions) == n
    for p in {r.partition for r in records}:
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == sorted(offsets) == list(range(len(offsets)))


def test_manual_assignment_reads_every_event_once(kafka_broker, topic_name, make_source):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=3)
    _produce(bootstrap, topic_name, 300, 3)
    source = make_source(bootstrap, topic_name, partitions=[0, 1, 2])
    seen: list[list[int]] = []
    source.on_rebalance(seen.append, lambda parts: None)
    try:
        records = _drain(source, 300)
        assert source.poll(500, 0.3) == []  # nothing beyond the 300
        assert seen == [[0, 1, 2]]
        assert source.assignment() == [0, 1, 2]
        assert source.name == topic_name
        assert all(r.timestamp_ms is not None for r in records)
    finally:
        source.close()
    _check_exactly_once(records, 300)


def test_group_mode_reads_every_event_once(kafka_broker, topic_name, make_source):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=2)
    _produce(bootstrap, topic_name, 200, 2)
    source = make_source(
        bootstrap, topic_name, f"g-{topic_name}", consumer_config=dict(QUICK_GROUP_CONFIG)
    )
    assigned: list[list[int]] = []
    source.on_rebalance(assigned.append, lambda parts: None)
    try:
        records = _drain(source, 200)
        assert assigned == [[0, 1]]
        assert source.assignment() == [0, 1]
        lag = source.lag()
        assert lag is None or lag >= 0  # approximate on tansu; only its type is checked
    finally:
        source.close()
    _check_exactly_once(records, 200)


def test_seek_then_poll_returns_records_from_that_offset(kafka_broker, topic_name, make_source):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    _produce(bootstrap, topic_name, 50, 1)
    source = make_source(bootstrap, topic_name, partitions=[0])
    try:
        assert len(_drain(source, 50)) == 50
        source.seek(0, 20)
        again = _drain(source, 30)
        assert [r.offset for r in again] == list(range(20, 50))
        assert [decode(r.payload).id for r in again] == list(range(20, 50))
        with pytest.raises(ValueError, match="cannot seek"):
            source.seek(5, 0)  # not assigned
    finally:
        source.close()


def test_seek_in_the_assigned_handler_sets_the_start(kafka_broker, topic_name, make_source):
    """What the engine does on assignment: seek each partition to its snapshot's offset."""
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=2)
    _produce(bootstrap, topic_name, 40, 2)
    source = make_source(
        bootstrap, topic_name, f"g-{topic_name}", consumer_config=dict(QUICK_GROUP_CONFIG)
    )
    starts = {0: 5, 1: 17}

    def assigned(parts: list[int]) -> None:
        for p in parts:
            source.seek(p, starts[p])

    source.on_rebalance(assigned, lambda parts: None)
    try:
        records = _drain(source, (20 - 5) + (20 - 17))
        assert source.poll(100, 0.3) == []
    finally:
        source.close()
    for p, start in starts.items():
        assert [r.offset for r in records if r.partition == p] == list(range(start, 20))


def test_commit_is_seen_by_a_new_consumer_in_the_group(kafka_broker, topic_name, make_source):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=2)
    _produce(bootstrap, topic_name, 40, 2)
    group = f"g-{topic_name}"
    first = make_source(bootstrap, topic_name, group, partitions=[0, 1])
    try:
        assert first.committed([0, 1]) == {}
        _drain(first, 40)
        first.commit({0: 20, 1: 7})
        assert {p: c.offset for p, c in first.committed([0, 1]).items()} == {0: 20, 1: 7}
    finally:
        first.close()
    second = make_source(bootstrap, topic_name, group, partitions=[0, 1])
    try:
        assert {p: c.offset for p, c in second.committed([0, 1]).items()} == {0: 20, 1: 7}
        # with no seek, a group member resumes at the committed offsets
        rest = _drain(second, 13)
        assert sorted((r.partition, r.offset) for r in rest) == [(1, o) for o in range(7, 20)]
    finally:
        second.close()


def test_config_errors_are_clear(kafka_broker, topic_name):
    bootstrap = kafka_broker.bootstrap_servers
    with pytest.raises(ConfigError, match="group_id"):
        KafkaSource(bootstrap, topic_name)
    with pytest.raises(ConfigError, match="enable_auto_commit"):
        KafkaSource(bootstrap, topic_name, "g", consumer_config={"enable_auto_commit": True})
    with pytest.raises(ConfigError, match="invalid consumer_config"):
        KafkaSource(bootstrap, topic_name, "g", consumer_config={"no_such_key": 1})
    with pytest.raises(ConfigError, match="cannot commit"):
        source = KafkaSource(bootstrap, topic_name, partitions=[0])
        try:
            source.commit({0: 1})
        finally:
            source.close()


class _Member(threading.Thread):
    """One group member polling on its own thread, as one engine process would."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        commit_on_revoke: bool,
        factory: type[KafkaSource] = KafkaSource,
    ):
        super().__init__(daemon=True)
        config = dict(QUICK_GROUP_CONFIG)
        self.source = factory(bootstrap, topic, group, consumer_config=config)
        self.events: list[tuple[str, list[int]]] = []
        self.records: list[Record] = []
        self.read: dict[int, int] = {}
        self.error: BaseException | None = None
        self.committed_at_assign: list[dict[int, int]] = []
        self.stop = threading.Event()
        self.commit_on_revoke = commit_on_revoke
        self.source.on_rebalance(self._assigned, self._revoked)

    def _assigned(self, parts: list[int]) -> None:
        self.events.append(("assigned", parts))
        # the engine's fallback when no snapshot covers a partition; called from the
        # handler, on the polling thread (clients are not safe across threads)
        got = self.source.committed(parts)
        self.committed_at_assign.append({p: c.offset for p, c in got.items()})

    def _revoked(self, parts: list[int]) -> None:
        self.events.append(("revoked", parts))
        if self.commit_on_revoke:  # the engine's snapshot-then-commit
            self.source.commit({p: self.read[p] for p in parts if p in self.read})

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for r in self.source.poll(100, 0.1):
                    self.records.append(r)
                    self.read[r.partition] = r.offset + 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.source.close()


def _wait(condition: Callable[[], bool], members: list[_Member]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        for m in members:
            assert m.error is None, f"member failed: {m.error!r}"
        assert time.monotonic() < deadline, [m.events for m in members]
        time.sleep(0.05)  # bounded readiness check: the condition is polled to a deadline


def test_rebalance_revokes_before_assigning_and_commits_on_revoke(
    kafka_broker, topic_name, make_source
):
    """Two members of one group on a 4-partition topic: the first gives up half.

    The first member's revoked handler commits its read positions (the engine's
    snapshot-then-commit); it runs on a worker thread while ``poll`` waits, so a
    blocking commit inside it must work with kafka-python 3's IO thread.
    """
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=4)
    _produce(bootstrap, topic_name, 80, 4)
    group = f"g-{topic_name}"
    a = _Member(bootstrap, topic_name, group, commit_on_revoke=True, factory=make_source)
    members = [a]
    a.start()
    try:
        _wait(lambda: len(a.records) >= 80, members)
        assert a.events == [("assigned", [0, 1, 2, 3])]
        assert a.read == {0: 20, 1: 20, 2: 20, 3: 20}

        b = _Member(bootstrap, topic_name, group, commit_on_revoke=False, factory=make_source)
        members.append(b)
        b.start()
        # the handlers record their event before their committed() lookup returns: wait
        # for both, or the lookups may not be in yet
        _wait(
            lambda: len(a.committed_at_assign) >= 2 and len(b.committed_at_assign) >= 1,
            members,
        )
        assert a.events[1] == ("revoked", [0, 1, 2, 3])
        kind, mine = a.events[2]
        assert kind == "assigned" and 0 < len(mine) < 4
        assert b.events[0][0] == "assigned"
        theirs = b.events[0][1]
        assert sorted(mine + theirs) == [0, 1, 2, 3]
        assert b.committed_at_assign[0] == {p: 20 for p in theirs}
        assert a.committed_at_assign == [{}, {p: 20 for p in mine}]
        assert a.source.rebalances == a.events
        assert len(a.records) == 80 and b.records == []  # b resumed at a's commits
        _check_exactly_once(a.records, 80)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(timeout=30)


def test_evicted_member_sees_lost_not_revoked_and_commits_nothing(kafka_broker, topic_name):
    """A member that stops polling past max_poll_interval_ms is evicted (KIP-429 lost).

    Its next poll reports the partitions lost (never revoked: no snapshot, no commit),
    then rejoins and gets them assigned again. One member only: tansu 0.6 keeps a
    departed leader as the leader of the next generation, which stalls a second member.
    """
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=2)
    group = f"g-{topic_name}"
    a = KafkaSource(bootstrap, topic_name, group, consumer_config=dict(QUICK_GROUP_CONFIG))
    events: list[tuple[str, list[int]]] = []
    a.on_rebalance(
        lambda parts: events.append(("assigned", parts)),
        lambda parts: events.append(("revoked", parts)),
    )
    a.on_lost(lambda parts: events.append(("lost", parts)))
    try:
        _wait_polling(a, lambda: bool(events))
        assert events == [("assigned", [0, 1])]
        # stop polling until the client gives up its membership (poll interval lapsed)
        _wait(lambda: a.consumer.group_metadata().state != MemberState.STABLE, [])
        _wait_polling(a, lambda: len(events) >= 3)
        assert events == [("assigned", [0, 1]), ("lost", [0, 1]), ("assigned", [0, 1])]
        assert a.committed([0, 1]) == {}
    finally:
        a.close()
    assert len(events) == 3  # close revokes nothing either


def _wait_polling(source: KafkaSource, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, source.rebalances
        source.poll(100, 0.1)


def test_confluent_source_takes_the_security_settings_streamk_run_passes(kafka_broker, topic_name):
    # streamk run builds kafka-python's names (config.kafka_settings); librdkafka has others.
    pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    from streamk.sources.kafka_confluent import ConfluentKafkaSource

    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    _produce(bootstrap, topic_name, 20, 1)
    source = ConfluentKafkaSource(
        bootstrap, topic_name, partitions=[0], consumer_config={"security_protocol": "PLAINTEXT"}
    )
    try:
        records = _drain(source, 20)
    finally:
        source.close()
    _check_exactly_once(records, 20)
