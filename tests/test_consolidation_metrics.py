"""The engine reports the time spent consolidating (``streamk_consolidation_seconds_total``)."""

from __future__ import annotations

from river import datasets

from streamk import KernelPerceptron, RemoveOldest
from streamk.consolidation import Consolidated
from streamk.engine import Engine, EngineConfig
from streamk.sources.iterable import IterableSource


def test_consolidation_seconds_total_is_the_sum_of_every_solve(tmp_path):
    data = list(datasets.Phishing().take(900))
    models = []

    def factory():
        m = Consolidated(KernelPerceptron(budget=RemoveOldest(60)), every=200, window_size=200,
                         solver="svc")  # fmt: skip
        models.append(m)
        return m

    engine = Engine(
        IterableSource(lambda: iter(data), name="phishing"),
        factory,
        config=EngineConfig(max_records=100, snapshot_every=0),
    )
    engine.run()
    c = models[-1].consolidator_
    assert c.n_consolidations + c.n_skipped >= 4  # every 200 of 900 events
    total = engine.metrics.get("consolidation_seconds_total")
    assert total == c.seconds_total > 0.0
    assert "streamk_consolidation_seconds_total " in engine.metrics.render()
