"""A snapshot-topic scan reads to the real end, and an adopter never misses a merge silently.

The flake this guards against (``test_merge_adopt`` under parallel load): a scan ended at
the first empty poll once the position reached the end offset the broker listed. tansu
lists the start of the last batch as the end (design §8), and on a loaded machine a poll
comes back empty before the fetch does, so the last record (the merged snapshot) was never
read and the adopter carried on without a word. ``idle_timeout=0`` makes every poll return
only what already arrived: the same race on the real broker, every time instead of one run
in three. The adopter's tests need no broker: its snapshot source is a plain callable.
"""

from __future__ import annotations

import itertools
import logging

import pytest
from river import datasets

import streamk
from streamk.merge import adopt
from streamk.merge.adopt import Adopter
from streamk.snapshot import SnapshotStore, dumps
from streamk.snapshot.kafka import SnapshotPublisher, SnapshotReader
from streamk.snapshot.kafka_scheme import Assembler

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
        "failed": 0,
    }
    assert len(_warnings(caplog)) == 2
