"""The best ratio to river any Projectron could reach on the grid's cells (issue #16).

Every update under ``Projectron(B)`` computes ``d = P k`` with ``P = K(S, S)^-1``, so it
reads the ``n (n + 1) / 2`` stored entries of ``P`` at least once (``n``: the support's
size at that event), and a growth or removal writes them too. Reading alone is a floor on
an update's time. It is priced here at the fastest read bandwidth this machine shows on
any contiguous block of doubles from ``P``'s size at n = 64 to n = 1,000 (NumPy's
vectorised sum, median of repeats): a speed only a block in cache reaches, which an 8 MB
``P`` at B = 1,000 is not, so the floor errs low.

Summed over the events of a grid cell that update (a fresh model learning the grid's
events one at a time; an event "updates" when the support set changes) and divided by the
events, that is a floor on the learner's time per event. river's linear model's
``learn_one`` time per event on the same stream, measured in the same run, over that floor
is the best ``learn_many`` / ``learn_one`` ratio any implementation of the algorithm could
reach, printed next to the ratio issue #16 asks (``target``: 4 for the kernel perceptron,
else 1) and the ratios ``benchmarks/results/online_grid.json`` holds.

Run: ``python -m benchmarks.projectron_floor`` (about a minute; writes
``benchmarks/results/projectron_floor.json``).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from river import linear_model

from benchmarks import online_grid as grid
from benchmarks.common import learn_one_seconds, result_document, write_results
from streamk import Projectron

RESULTS = Path(__file__).resolve().parent / "results"
#: the grid's budgets, and the sizes of P whose read bandwidth is measured
BUDGETS = (200, 1000)
SIZES = (64, 128, 200, 400, 700, 1000)
#: the grid's learners under the Projectron (the kernel perceptron updates on its mistakes
#: only, the others on most events)
LEARNERS = ("perceptron", "svr", "ranker", "novelty", "margin", "adatron")
#: the ratio to river's linear model issue #16 asks of a learner's ``learn_many`` (1 unless named)
TARGETS = {"perceptron": 4.0}


def _read_seconds(n: int, repeats: int = 7) -> float:
    """Median seconds to read ``n (n + 1) / 2`` contiguous doubles once (a vectorised sum)."""
    block = np.random.default_rng(0).random(n * (n + 1) // 2)
    inner = max(1, 2_000_000 // block.size)
    block.sum()  # touch it once: it is in cache as a live P would be
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            block.sum()
        runs.append((time.perf_counter() - start) / inner)
    return statistics.median(runs)


def _bandwidths() -> dict[int, float]:
    """Bytes per second read at each size of ``P`` (the floor uses the fastest)."""
    return {n: 8 * n * (n + 1) / 2 / _read_seconds(n) for n in SIZES}


def _updates(model: Any) -> int:
    """The updates ``model`` has made so far: its own count (novelty inserts every event;
    the support set's version would also count the growth of its buffers)."""
    for name in ("n_updates", "n_mistakes"):
        if hasattr(model, name):
            return getattr(model, name)
    return model.n_learned


def _update_sizes(model: Any, data: list, unsupervised: bool) -> list[int]:
    """The support's size before each event on which a fresh ``model`` updates (learning
    ``data`` one event at a time)."""
    sizes = []
    for x, y in data:
        before, n = _updates(model), model._support.n
        if unsupervised:
            model.learn_one(x)
        else:
            model.learn_one(x, y)
        if _updates(model) != before:
            sizes.append(max(n, 1))
    return sizes


def _river_seconds(task: str, data: list, repeats: int = 3) -> float:
    """river's linear model's ``learn_one`` seconds per event (median of ``repeats``)."""
    make = linear_model.Perceptron if task == "clf" else linear_model.LinearRegression
    return learn_one_seconds(make, data, repeats)


def _grid_ratios() -> dict[tuple, tuple[float, float]]:
    """(stream, learner, B) -> the committed grid's (learn_many, learn_one) ratios."""
    path = RESULTS / "online_grid.json"
    if not path.exists():
        return {}
    rows = json.loads(path.read_text())["rows"]
    return {
        (r["stream"], r["learner"], r["budget"]): (r["many_vs_river"], r["one_vs_river"])
        for r in rows
        if r.get("policy") == "Projectron" and "many_vs_river" in r
    }


def main() -> int:
    load_before = os.getloadavg()
    bandwidth = _bandwidths()
    fastest = max(bandwidth.values())
    measured = _grid_ratios()
    rows: list[dict[str, Any]] = []
    print(
        f"{'stream':<12} {'learner':<8} {'B':>5} {'updates':>8} {'floor µs/ev':>11} "
        f"{'river µs/ev':>11} {'best ratio':>10} {'target':>6} {'grid many/one':>14}"
    )
    for sname, (stask, data0) in grid.streams(False).items():
        river_s = None
        for lname in LEARNERS:
            ltask = grid.LEARNERS[lname][0]
            if (ltask in ("reg", "rank")) != (stask == "reg") or (
                ltask == "novelty" and stask == "reg"
            ):
                continue
            data = (grid._ranks(data0) if ltask == "rank" else data0)[
                : grid.CAPS_POLICY["Projectron"]
            ]
            if river_s is None:
                river_s = _river_seconds("clf" if stask == "clf" else "reg", data)
            for budget in BUDGETS:
                model = grid.LEARNERS[lname][1](grid.KERNELS["rbf"](), Projectron(budget))
                sizes = _update_sizes(model, data, ltask == "novelty")
                floor = sum(8 * n * (n + 1) / 2 for n in sizes) / fastest / len(data)
                ratio = river_s / floor if floor else float("inf")
                many, one = measured.get((sname, lname, budget), (None, None))
                rows.append(
                    {
                        "stream": sname,
                        "learner": lname,
                        "budget": budget,
                        "events": len(data),
                        "update_share": len(sizes) / len(data),
                        "floor_us_per_event": 1e6 * floor,
                        "river_us_per_event": 1e6 * river_s,
                        "best_ratio": ratio,
                        "target": TARGETS.get(lname, 1.0),
                        "grid_many_vs_river": many,
                        "grid_one_vs_river": one,
                    }
                )
                shown = "-" if many is None else f"{many:.2f} / {one:.2f}"
                print(
                    f"{sname:<12} {lname:<8} {budget:>5} {len(sizes) / len(data):>8.0%} "
                    f"{1e6 * floor:>11.2f} {1e6 * river_s:>11.2f} {ratio:>10.2f} "
                    f"{TARGETS.get(lname, 1.0):>6.0f} {shown:>14}",
                    flush=True,
                )
    doc = result_document(
        "projectron_floor",
        False,
        load_before,
        rows,
        read_bandwidth_bytes_per_s={str(n): bw for n, bw in bandwidth.items()},
    )
    write_results(RESULTS, "projectron_floor", False, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
