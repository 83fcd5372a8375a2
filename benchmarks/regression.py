"""``OnlineSVR()`` with its defaults against the running mean and river's regressors, in one run.

Every model runs the same prequential protocol (predict, score, learn) on the same streams:
river's TrumpApproval (1,001 days, 6 features), Friedman #1 (d = 10) and Planes2D (a
d = 10 synthetic piecewise-linear stream). streamk's SVR is used with **defaults only**
(``OnlineSVR()``: ε, ``C`` and the offset follow the target, γ follows the features), bare
and behind river's ``StandardScaler`` (what ``streamk learn`` does). The comparison is the
running mean of the targets (river's ``dummy.StatisticRegressor(stats.Mean())``), river's
``LinearRegression`` and ``KNNRegressor`` (both behind a ``StandardScaler``, as a user would
run them). MAE and R² are the median (min-max) over 3 seeds of the synthetic streams;
TrumpApproval is fixed, so it runs once. The goal (issue 19): the defaults beat the running
mean on all three streams and come within 10% of ``KNNRegressor``'s MAE on at least one.

Run::

    python -m benchmarks.regression            # full run (n = 5,000, 3 seeds; ~3 min)
    python -m benchmarks.regression --quick    # n = 1,500, 1 seed
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from river import datasets, dummy, linear_model, metrics, neighbors, preprocessing, stats
from river.datasets import synth

from benchmarks.common import machine_info
from streamk.learners import OnlineSVR

RESULTS = Path(__file__).parent / "results"

SVR_BARE = "streamk OnlineSVR()"
SVR_SCALED = "StandardScaler | streamk OnlineSVR()"
MEAN = "running mean"
KNN = "StandardScaler | river KNNRegressor"


def streams(n: int, seeds: list[int]) -> dict[str, list[Callable[[], Iterable]]]:
    """name -> one factory per repeat (a fixed data set has one)."""
    return {
        "TrumpApproval": [lambda: datasets.TrumpApproval()],
        f"Friedman(n={n})": [lambda s=s: synth.Friedman(seed=s).take(n) for s in seeds],
        f"Planes2D(n={n})": [lambda s=s: synth.Planes2D(seed=s).take(n) for s in seeds],
    }


def models() -> dict[str, Callable[[], Any]]:
    return {
        SVR_BARE: lambda: OnlineSVR(),
        SVR_SCALED: lambda: preprocessing.StandardScaler() | OnlineSVR(),
        MEAN: lambda: dummy.StatisticRegressor(stats.Mean()),
        "StandardScaler | river LinearRegression": lambda: (
            preprocessing.StandardScaler() | linear_model.LinearRegression()
        ),
        KNN: lambda: preprocessing.StandardScaler() | neighbors.KNNRegressor(),
    }


def prequential(model: Any, events: list[tuple[dict, float]]) -> dict[str, float]:
    mae, r2 = metrics.MAE(), metrics.R2()
    start = time.perf_counter()
    for x, y in events:
        p = model.predict_one(x)
        mae.update(y, p)
        r2.update(y, p)
        model.learn_one(x, y)
    seconds = time.perf_counter() - start
    last = model[-1] if hasattr(model, "steps") else model
    return {
        "mae": mae.get(),
        "r2": r2.get(),
        "events_per_s": len(events) / seconds,
        "n_support": int(getattr(last, "n_support", 0)),
    }


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 1,500 and one seed")
    parser.add_argument("--n", type=int, help="events of the synthetic streams (default 5,000)")
    args = parser.parse_args(argv)
    n = args.n or (1_500 if args.quick else 5_000)
    seeds = [42] if args.quick else [42, 43, 44]
    machine = machine_info()
    rows: list[dict[str, Any]] = []
    for sname, factories in streams(n, seeds).items():
        runs_events = [[(dict(x), float(y)) for x, y in f()] for f in factories]
        for mname, make in models().items():
            runs = [prequential(make(), events) for events in runs_events]
            row = {
                "stream": sname,
                "model": mname,
                "events": len(runs_events[0]),
                "repeats": len(runs),
                "mae": _summary([r["mae"] for r in runs]),
                "r2": _summary([r["r2"] for r in runs]),
                "events_per_s": _summary([r["events_per_s"] for r in runs]),
                "n_support": statistics.median(r["n_support"] for r in runs),
            }
            rows.append(row)
            print(
                f"{sname:<16} {mname:<40} MAE {row['mae']['median']:8.4f} "
                f"R2 {row['r2']['median']:7.4f} {row['events_per_s']['median']:>9,.0f} ev/s",
                flush=True,
            )
    goals = _goals(rows)
    _print_table(rows, goals)
    RESULTS.mkdir(parents=True, exist_ok=True)
    try:
        machine["loadavg_end"] = list(os.getloadavg())
    except OSError:
        pass
    out = {
        "benchmark": "regression",
        "command": "python -m benchmarks.regression" + (" --quick" if args.quick else ""),
        "n": n,
        "seeds": seeds,
        "machine": machine,
        "goals": goals,
        "rows": rows,
    }
    path = RESULTS / ("regression_quick.json" if args.quick else "regression.json")
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {path}")
    return 0


def _goals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per stream and SVR variant: beats the running mean? MAE / KNN's MAE."""
    by = {(r["stream"], r["model"]): r["mae"]["median"] for r in rows}
    out: dict[str, Any] = {}
    for svr in (SVR_BARE, SVR_SCALED):
        per = {}
        for stream in dict.fromkeys(r["stream"] for r in rows):
            per[stream] = {
                "beats_running_mean": by[stream, svr] < by[stream, MEAN],
                "mae_vs_running_mean": by[stream, svr] / by[stream, MEAN],
                "mae_vs_knn": by[stream, svr] / by[stream, KNN],
            }
        out[svr] = {
            "streams": per,
            "beats_running_mean_on_all": all(p["beats_running_mean"] for p in per.values()),
            "within_10pct_of_knn_on_one": any(p["mae_vs_knn"] <= 1.10 for p in per.values()),
        }
    return out


def _print_table(rows: list[dict[str, Any]], goals: dict[str, Any]) -> None:
    print()
    header = f"{'stream':<16} {'model':<40} {'MAE (min-max)':>26} {'R2':>7} {'ev/s':>9} {'sv':>6}"
    print(header)
    print("-" * len(header))
    for r in rows:
        mae = f"{r['mae']['median']:.4f} ({r['mae']['min']:.4f}-{r['mae']['max']:.4f})"
        print(
            f"{r['stream']:<16} {r['model']:<40} {mae:>26} {r['r2']['median']:>7.4f} "
            f"{r['events_per_s']['median']:>9,.0f} {r['n_support']:>6.0f}"
        )
    print()
    for svr, g in goals.items():
        ratios = ", ".join(
            f"{s}: {p['mae_vs_running_mean']:.2f}x mean, {p['mae_vs_knn']:.2f}x KNN"
            for s, p in g["streams"].items()
        )
        print(
            f"{svr}: beats the running mean on all: {g['beats_running_mean_on_all']}; "
            f"within 10% of KNN's MAE on one: {g['within_10pct_of_knn_on_one']} ({ratios})"
        )


if __name__ == "__main__":
    raise SystemExit(main())
