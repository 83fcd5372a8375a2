"""The confluent source's asynchronous commit against a scripted consumer (no broker).

:class:`~streamk.sources.kafka_confluent.ConfluentKafkaSource` commits asynchronously
and serves the consumer's queue itself until the answer comes, holding the records it
takes for the next polls (tests/test_confluent_commit_cut.py shows why, on a real
broker). Here a fake consumer plays librdkafka's queue in order: records, then the
commit's answer behind them, so each rule is pinned exactly: held records come first
and once, a seek drops the held records of its partition, a lost assignment drops
them all, an unanswered commit fails within ``timeout_s`` and its late answer is
taken in by a later poll, and a refusal fails the commit.
"""

from __future__ import annotations

import logging
from collections import deque

import pytest

from streamk.sources.kafka import CommitFailedError

ck = pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
from streamk.sources.kafka_confluent import ConfluentKafkaSource  # noqa: E402

TOPIC = "t"


class _Msg:
    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._o = partition, offset

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def value(self) -> bytes:
        return b"x"

    def error(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (ck.TIMESTAMP_NOT_AVAILABLE, 0)


class _Queue:
    """librdkafka's consumer queue, scripted: records and events (callables) in order."""

    def __init__(self, config: dict) -> None:
        self.on_commit = config["on_commit"]  # the source's, as librdkafka is given it
        self.items: deque = deque()
        self.answer_commits = True  # an answer is queued behind what is there now
        self.refuse = False
        self.commits: list[list] = []
        self.consumes = 0

    def records(self, partition: int, offsets: range) -> None:
        self.items.extend(_Msg(partition, o) for o in offsets)

    # -- the consumer's interface ---------------------------------------------------------
    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[_Msg]:
        self.consumes += 1
        out: list[_Msg] = []
        while self.items and len(out) < num_messages:
            item = self.items.popleft()
            if callable(item):
                item()  # an event: served inside consume(), as librdkafka does
                continue
            out.append(item)
        return out

    def commit(self, offsets: list, asynchronous: bool = True) -> None:
        assert asynchronous, "a synchronous commit would hold the consumer"
        self.commits.append(offsets)
        if self.answer_commits:
            self.items.append(lambda: self.answer(offsets))

    def answer(self, offsets: list) -> None:
        err = ck.KafkaError(ck.KafkaError.REBALANCE_IN_PROGRESS) if self.refuse else None
        self.on_commit(err, offsets)

    def assign(self, tps: list) -> None:
        pass

    def unassign(self) -> None:
        pass

    def seek(self, tp) -> None:
        pass

    def assignment(self) -> list:
        return [ck.TopicPartition(TOPIC, p) for p in (0, 1)]

    def list_topics(self, topic: str, timeout: float) -> None:
        pass  # the link answers: an outage a failed commit reported ends

    def close(self) -> None:
        pass


@pytest.fixture
def queue(monkeypatch) -> _Queue:
    monkeypatch.setattr(ck, "Consumer", _Queue)
    source = ConfluentKafkaSource("127.0.0.1:9", TOPIC, "g", partitions=[0, 1], timeout_s=0.3)
    q = source.consumer
    q.source = source
    yield q
    source.close()


def _offsets(batch) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in batch]


def test_records_taken_while_waiting_come_first_and_once(queue):
    source = queue.source
    queue.records(0, range(0, 5))
    assert _offsets(source.poll(2, 0.0)) == [(0, 0), (0, 1)]
    queue.records(1, range(0, 3))
    source.commit({0: 2})  # its answer sits behind the 6 records queued: they are held
    assert len(source._held) == 6
    queue.records(0, range(5, 7))
    got = []
    while len(got) < 8:
        got += _offsets(source.poll(3, 0.0))
    assert got == [(0, 2), (0, 3), (0, 4), (1, 0), (1, 1), (1, 2), (0, 5), (0, 6)]
    assert queue.consumes >= 4  # consume() ran at every poll, held records or not


def test_a_seek_drops_the_held_records_of_its_partition(queue):
    source = queue.source
    source.poll(1, 0.0)  # the manual assignment is announced on the first poll
    queue.records(0, range(0, 4))
    queue.records(1, range(0, 4))
    source.commit({0: 0})
    source.seek(0, 10)
    got = []
    for _ in range(5):
        got += _offsets(source.poll(10, 0.0))
    assert got == [(1, 0), (1, 1), (1, 2), (1, 3)]


def test_a_lost_assignment_drops_every_held_record(queue):
    source = queue.source
    queue.records(0, range(0, 4))
    queue.answer_commits = False
    with pytest.raises(CommitFailedError, match="no answer"):
        source.commit({0: 0})
    assert len(source._held) == 4
    source._lost_cb(queue, [ck.TopicPartition(TOPIC, 0), ck.TopicPartition(TOPIC, 1)])
    assert source.poll(10, 0.0) == []


def test_an_unanswered_commit_fails_in_time_and_its_late_answer_is_taken_in(queue, caplog):
    source = queue.source
    queue.answer_commits = False
    with pytest.raises(CommitFailedError, match="no answer within 0.3 s"):
        source.commit({0: 4})
    source.health.ok()  # (the failed commit marked the link down; say it is back)
    with pytest.raises(CommitFailedError, match="still unanswered"):
        source.commit({0: 5})
    assert len(queue.commits) == 1  # never two in flight
    caplog.set_level(logging.INFO, logger="streamk.sources")
    queue.items.append(lambda: queue.answer(queue.commits[0]))  # the answer, late
    source.poll(10, 0.0)
    assert any("answered after the call returned: committed" in m for m in caplog.messages)
    queue.answer_commits = True
    source.commit({0: 5})  # works again
    assert len(queue.commits) == 2


def test_a_refused_commit_fails(queue):
    queue.refuse = True
    with pytest.raises(CommitFailedError, match="failed"):
        queue.source.commit({0: 1})
    queue.refuse = False
    queue.source.commit({0: 1})  # the refusal left nothing pending
