"""The throughput grid's protocol (benchmarks/online_grid.py), on a tiny stream with the
timings replaced by known numbers: each cell's ratios are against river's reference timed
just before that cell in every repeat, and ``--only`` keeps off the full grid's file."""

from __future__ import annotations

import argparse
import itertools
import json
import statistics

import numpy as np

from benchmarks import online_grid as grid
from streamk import KernelPerceptron


def _tiny_streams(quick: bool):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    rows = [dict(zip(("a", "b", "c"), r)) for r in X.tolist()]
    return {"Tiny": ("clf", list(zip(rows, (X[:, 0] * X[:, 1] > 0).tolist())))}


def test_each_cell_is_against_the_reference_timed_just_before_it(monkeypatch, tmp_path):
    monkeypatch.setattr(grid, "streams", _tiny_streams)
    configs = grid._configs
    monkeypatch.setattr(grid, "_configs", lambda budgets: configs(budgets)[:3])
    clock = itertools.count(1)
    log: list[tuple[str, float]] = []  # (what was timed, its seconds per event)

    def fake_repeat(fresh, learn, events):
        model = fresh()
        what = "cell" if isinstance(model, KernelPerceptron) else type(model).__name__
        seconds = next(clock) * 1e-6  # a different, known time for every timing
        log.append((what, seconds))
        return seconds, events

    monkeypatch.setattr(grid, "_repeat", fake_repeat)
    args = argparse.Namespace(quick=False, repeats=3, kernel="rbf", only="perceptron")
    assert grid.run(args, tmp_path) == 0

    assert not (tmp_path / "online_grid.json").exists()  # the full grid's file
    doc = json.loads((tmp_path / "online_grid_only_perceptron.json").read_text())
    cells = [r for r in doc["rows"] if "policy" in r]
    assert len(cells) == 3
    # per cell, in run order: the Perceptron timing just before its learn_many, each repeat
    river_before: list[list[float]] = [[] for _ in cells]
    many: list[list[float]] = [[] for _ in cells]
    k = 0
    for i, (what, seconds) in enumerate(log):
        if what == "cell" and log[i - 1][0] != "cell":  # learn_many (learn_one follows it)
            assert log[i - 1][0] == "Perceptron", log[i - 2 : i + 1]
            river_before[k % 3].append(log[i - 1][1])
            many[k % 3].append(seconds)
            k += 1
    assert k == 9  # three cells, three repeats
    for row, rivers, manys in zip(cells, river_before, many):
        ref = 1.0 / statistics.median(rivers)
        assert row["river_learn_one_ev_s"] == ref
        assert row["many_vs_river"] == (1.0 / statistics.median(manys)) / ref
