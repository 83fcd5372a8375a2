"""An idle stop that learned nothing is said out loud (issue found with test_merge_adopt).

A worker of a consumer group that is never assigned a partition (more workers than
partitions, or a group stuck in a rebalance, as tansu 0.6 can leave one) used to stop for
idleness after ``JOIN_GRACE + stop_when_idle`` with exit code 0 and nothing at WARNING.
A group that never assigns cannot be provoked on demand against the test broker, so a
source standing in for it (no partition, no record) drives the real engine loop here.
"""

from __future__ import annotations

import logging
import time

import pytest

from streamk import KernelPerceptron
from streamk.engine import Engine, EngineConfig, loop
from streamk.sources.base import Record, Source


class SilentGroupSource(Source):
    """A live source whose group gives this reader ``partitions`` and never a record."""

    def __init__(self, partitions: list[int]) -> None:
        super().__init__()
        self.name = "silent-topic"
        self._partitions = partitions

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        time.sleep(min(timeout, 0.02))
        return []

    def seek(self, partition: int, offset: int) -> None:
        pass

    def assignment(self) -> list[int]:
        return list(self._partitions)


@pytest.mark.parametrize("partitions", [[], [0]])
def test_an_idle_stop_without_any_partition_warns(partitions, monkeypatch, caplog, tmp_path):
    monkeypatch.setattr(loop, "JOIN_GRACE", 0.2)
    engine = Engine(
        SilentGroupSource(partitions),
        KernelPerceptron,
        config=EngineConfig(stop_when_idle=0.3, poll_timeout=0.02, model_name="idle"),
    )
    with caplog.at_level(logging.WARNING, logger="streamk"):
        result = engine.run()
    assert result.learned == 0
    warned = [r for r in caplog.records if "without ever being assigned" in r.getMessage()]
    assert len(warned) == (0 if partitions else 1), [r.getMessage() for r in caplog.records]


def test_adoption_outcomes_are_exported_as_metrics(tmp_path):
    """``adopt_merged`` with no merger: every checkpoint finds no merged snapshot, and
    ``streamk_adoptions_total{outcome="no_merged"}`` counts them (one per snapshot)."""
    from river import datasets

    from streamk.merge.adopt import Adopter
    from streamk.snapshot import SnapshotStore
    from streamk.sources.iterable import IterableSource

    data = list(datasets.Phishing().take(500))
    store = SnapshotStore(tmp_path / "snaps")
    adopter = Adopter("w0", "merged", store, lambda: store.latest("merged", build=False))
    engine = Engine(
        IterableSource(lambda: iter(data), name="phishing"),
        KernelPerceptron,
        store=store,
        adopt=adopter,
        config=EngineConfig(max_records=50, snapshot_every=100, model_name="w0"),
    )
    result = engine.run()
    written = len(store.list("w0"))
    assert result.snapshots == written >= 4
    exposed = engine.metrics.render()
    assert f'streamk_adoptions_total{{outcome="no_merged"}} {written}' in exposed
    assert 'streamk_adoptions_total{outcome="adopted"} 0' in exposed
