"""A snapshot-topic scan reads to the real end, and an adopter never misses a merge silently.

The scan ends once each partition's position reaches the high watermark of a fetch (the
end offset listed at the start is only a lower bound: tansu lists the first offset of the
last batch plus one) and never on an empty poll alone, so it waits for no idle poll at the
end. ``idle_timeout=0`` makes every poll return only what already arrived, as on a loaded
machine where a poll comes back before its fetch. The adopter's tests need no broker: its
snapshot source is a plain callable.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import uuid

import pytest
from kafka import KafkaProducer
from river import datasets

import streamk
from streamk.merge import adopt
from streamk.merge.adopt import Adopter
from streamk.snapshot import SnapshotStore, dumps, loads
from streamk.snapshot.kafka import SnapshotPublisher, SnapshotReader
from streamk.snapshot.kafka_scheme import H_KIND, Assembler, encode_manifest, headers

ROWS = list(itertools.islice(datasets.Phishing(), 60))


def _snapshot(seq: int, n: int = 20) -> bytes:
    model = streamk.KernelPerceptron()
    for x, y in ROWS[:n]:
        model.learn_one(x, y)
    return dumps(model, seq=seq)


def _hasty(servers: str, topic: str) -> SnapshotReader:
    """A reader whose polls never wait: each returns only what the client already holds."""
    return SnapshotReader(servers, topic, idle_timeout=0.0)


@pytest.mark.kafka
@pytest.mark.parametrize("others", [0, 3])
def test_a_scan_reads_the_last_record_though_its_first_polls_come_back_empty(
    kafka_broker, topic_name, others
):
    servers = kafka_broker.bootstrap_servers
    with SnapshotPublisher(servers, topic_name) as pub:
        for i in range(others):  # other models' snapshots before it, as on a worker's topic
            pub.publish(f"w{i}", _snapshot(i))
        pub.publish("merged", _snapshot(7))
    merged = _hasty(servers, topic_name).latest("merged", timeout=30)
    assert merged is not None and merged.seq == 7
    infos = _hasty(servers, topic_name).list(timeout=30)
    assert [i.name for i in infos] == [*(f"w{i}" for i in range(others)), "merged"]


def _one_batch(servers: str, topic: str, names: list[str]) -> None:
    """Inline manifests of `names` sent together, so the broker keeps them as one batch."""
    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=500, acks="all")
    try:
        for seq, name in enumerate(names):
            data = _snapshot(seq)
            sid, sha = uuid.uuid4().hex, hashlib.sha256(data).hexdigest()
            value = encode_manifest(name, sid, 0, data, sha, loads(data, build=False))
            hdrs = [(H_KIND, b"manifest"), *headers(sid, 0, len(data), sha)]
            producer.send(topic, key=name.encode(), value=value, headers=hdrs, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close()


@pytest.mark.kafka
def test_a_scan_reads_past_the_listed_end_inside_the_last_batch(kafka_broker, topic_name):
    # tansu lists the first offset of the last batch plus one as the end: one record in
    # here. A reader handed one record per poll sits at that listed end after the first
    # record, with the rest still to come; it must read on to the fetched high watermark.
    servers = kafka_broker.bootstrap_servers
    _one_batch(servers, topic_name, ["w0", "w1", "merged"])
    reader = SnapshotReader(
        servers, topic_name, idle_timeout=0.0, consumer_config={"max_poll_records": 1}
    )
    merged = reader.latest("merged", timeout=30, build=False)
    assert merged is not None and merged.seq == 2
    assert [i.name for i in reader.list(timeout=30)] == ["w0", "w1", "merged"]


@pytest.mark.kafka
def test_write_then_scan_at_once_always_sees_the_write(kafka_broker, topic_name):
    servers = kafka_broker.bootstrap_servers
    reader = _hasty(servers, topic_name)
    with SnapshotPublisher(servers, topic_name) as pub:
        for seq in range(6):
            pub.publish("merged", _snapshot(seq, n=10 + seq))
            got = reader.latest("merged", timeout=30, build=False)
            assert got is not None and got.seq == seq, f"round {seq}: {got}"


@pytest.mark.kafka
def test_scan_says_whether_it_read_the_topic_to_its_end(kafka_broker, topic_name):
    servers = kafka_broker.bootstrap_servers
    reader = _hasty(servers, topic_name)
    assert reader.scan(Assembler(None, reader.limits), 5) is False  # no such topic yet
    with SnapshotPublisher(servers, topic_name) as pub:
        pub.publish("merged", _snapshot(1))
    asm = Assembler(None, reader.limits)
    assert reader.scan(asm, 30) is True
    assert set(asm.best) == {"merged"}


def _warnings(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "streamk.merge" and r.levelno == logging.WARNING
    ]


def test_an_adopter_that_finds_no_merged_snapshot_says_so_and_counts_it(tmp_path, caplog):
    found = {"snap": None}
    adopter = Adopter("w0", "merged", SnapshotStore(tmp_path), lambda: found["snap"])
    model = streamk.KernelPerceptron()
    caplog.set_level(logging.INFO, logger="streamk.merge")
    every = adopt.WARN_EVERY
    for _ in range(every + 1):
        kept, meta = adopter(model)
        assert kept is model and meta == {}
    warned = _warnings(caplog)
    assert len(warned) == 2  # the first checkpoint of the run, then every WARN_EVERY
    assert "found no merged snapshot 'merged'" in warned[0]
    assert "checkpoint 1 in a row" in warned[0]
    assert f"checkpoint {every + 1} in a row" in warned[1]
    assert adopter.counts["no_merged"] == every + 1
    assert adopter.counts["adopted"] == 0


def test_an_adopter_counts_what_each_checkpoint_came_to(tmp_path, caplog):
    store = SnapshotStore(tmp_path)
    worker = streamk.KernelPerceptron()
    for x, y in ROWS[:30]:
        worker.learn_one(x, y)
    merged = store.load(store.save(_snapshot(seq=3), "merged"))
    found = {"snap": None}
    adopter = Adopter("w0", "merged", store, lambda: found["snap"])
    caplog.set_level(logging.INFO, logger="streamk.merge")
    adopter(worker)  # nothing merged yet: warned
    found["snap"] = merged
    adopted, meta = adopter(worker)
    assert adopted is not worker and meta["adopted"]["seq"] == 3
    kept, _ = adopter(adopted)  # the same merge again: nothing to do, no warning
    assert kept is adopted
    found["snap"] = None  # the topic reads empty again: warned again, a new run
    adopter(adopted)
    assert adopter.counts == {
        "adopted": 1,
        "no_merged": 2,
        "not_newer": 1,
        "no_base": 0,
        "stale_base": 0,
        "failed": 0,
    }
    assert len(_warnings(caplog)) == 2
