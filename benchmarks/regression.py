"""On-line SVR next to river's regressors and a batch scikit-learn SVR, in one run.

Every on-line model runs the same prequential protocol (predict, score, learn) on the same
streams, with features standardised on-line (river's ``StandardScaler``). The batch
``sklearn.svm.SVR`` is the accuracy ceiling a user would otherwise reach for: it is fitted
on a prefix of the stream (standardised with the prefix's statistics) and scored on the
rest, so the table also gives every on-line model's MAE on that same suffix. Events/s are
the median (min-max) over repeats; ratios are against river's ``LinearRegression``
(speed) and scikit-learn's SVR (suffix MAE).

Run::

    python -m benchmarks.regression            # full run (3 repeats, ~2 min)
    python -m benchmarks.regression --quick    # smaller streams, 1 repeat
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from river import compose, datasets, linear_model, neighbors, preprocessing
from river.datasets import synth

from benchmarks.common import machine_info
from streamk.learners import OnlineSVR

RESULTS = Path(__file__).parent / "results"


def streams(quick: bool) -> dict[str, tuple[Callable[[], Any], int]]:
    """name -> (factory, prefix length for the batch SVR)."""
    n = 2_000 if quick else 5_000
    return {
        "TrumpApproval": (lambda: datasets.TrumpApproval(), 300),
        f"Friedman(n={n})": (lambda: synth.Friedman(seed=42).take(n), 1_000),
    }


def _online(regressor) -> Any:
    return compose.Pipeline(
        preprocessing.StandardScaler(), preprocessing.TargetStandardScaler(regressor)
    )


def models(budget: int) -> dict[str, Callable[[], Any]]:
    large = 5 * budget
    return {
        f"streamk OnlineSVR (budget {budget})": lambda: _online(
            OnlineSVR(epsilon=0.1, C=1.0, budget=budget)
        ),
        f"streamk OnlineSVR resweeps=1 (budget {budget})": lambda: _online(
            OnlineSVR(epsilon=0.1, C=1.0, resweeps=1, budget=budget)
        ),
        f"streamk OnlineSVR (budget {large})": lambda: _online(
            OnlineSVR(epsilon=0.1, C=1.0, budget=large)
        ),
        "river LinearRegression": lambda: compose.Pipeline(
            preprocessing.StandardScaler(), linear_model.LinearRegression()
        ),
        "river KNNRegressor": lambda: compose.Pipeline(
            preprocessing.StandardScaler(), neighbors.KNNRegressor()
        ),
    }


def run_online(factory, events: list[tuple[dict, float]], prefix: int) -> dict[str, Any]:
    model = factory()
    errors = np.empty(len(events))
    start = time.perf_counter()
    for i, (x, y) in enumerate(events):
        errors[i] = abs(y - model.predict_one(x))
        model.learn_one(x, y)
    secs = time.perf_counter() - start
    last = model[-1]
    last = getattr(last, "regressor", last)
    return {
        "seconds": secs,
        "mae": float(errors.mean()),
        "mae_suffix": float(errors[prefix:].mean()),
        "n_support": int(getattr(last, "n_support", 0)),
    }


def run_sklearn(events: list[tuple[dict, float]], prefix: int) -> dict[str, Any]:
    from sklearn.svm import SVR

    names = list(events[0][0])
    X = np.array([[x[k] for k in names] for x, _ in events], dtype=float)
    y = np.array([t for _, t in events], dtype=float)
    start = time.perf_counter()
    mu, sd = X[:prefix].mean(axis=0), X[:prefix].std(axis=0)
    sd[sd == 0] = 1.0
    ym, ys = y[:prefix].mean(), y[:prefix].std() or 1.0
    model = SVR(C=1.0, epsilon=0.1, gamma="scale").fit(
        (X[:prefix] - mu) / sd, (y[:prefix] - ym) / ys
    )
    pred = model.predict((X[prefix:] - mu) / sd) * ys + ym
    secs = time.perf_counter() - start
    return {
        "seconds": secs,
        "mae": float("nan"),
        "mae_suffix": float(np.abs(pred - y[prefix:]).mean()),
        "n_support": int(len(model.support_)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=int, default=200)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    machine = machine_info()
    rows: list[dict[str, Any]] = []
    for sname, (sfactory, prefix) in streams(args.quick).items():
        events = [(dict(x), float(y)) for x, y in sfactory()]
        candidates = {name: (f, False) for name, f in models(args.budget).items()}
        candidates[f"sklearn SVR (batch, fit on first {prefix})"] = (None, True)
        srows = []
        for mname, (factory, batch) in candidates.items():
            runs = [
                run_sklearn(events, prefix) if batch else run_online(factory, events, prefix)
                for _ in range(repeats)
            ]
            rates = [len(events) / r["seconds"] for r in runs]
            row = {
                "stream": sname,
                "model": mname,
                "events": len(events),
                "prefix": prefix,
                "events_per_s_median": statistics.median(rates),
                "events_per_s_min": min(rates),
                "events_per_s_max": max(rates),
                "mae": runs[0]["mae"],
                "mae_suffix": runs[0]["mae_suffix"],
                "n_support": runs[0]["n_support"],
            }
            srows.append(row)
            print(
                f"{sname:<16} {mname:<44} {row['events_per_s_median']:>9,.0f} ev/s "
                f"({row['events_per_s_min']:,.0f}-{row['events_per_s_max']:,.0f})  "
                f"MAE {row['mae']:.4f}  suffix {row['mae_suffix']:.4f}  sv {row['n_support']}",
                flush=True,
            )
        base_rate = next(r for r in srows if r["model"].startswith("river Linear"))
        ceiling = next(r for r in srows if r["model"].startswith("sklearn"))
        for r in srows:
            r["speed_vs_river_linear"] = r["events_per_s_median"] / base_rate["events_per_s_median"]
            r["suffix_mae_vs_sklearn_svr"] = r["mae_suffix"] / ceiling["mae_suffix"]
        rows.extend(srows)
    print()
    header = (
        f"{'stream':<16} {'model':<44} {'ev/s (min-max)':>22} {'x lin':>6} "
        f"{'MAE':>7} {'suffix':>7} {'/sk':>5} {'sv':>5}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        rate = (
            f"{r['events_per_s_median']:,.0f} "
            f"({r['events_per_s_min']:,.0f}-{r['events_per_s_max']:,.0f})"
        )
        print(
            f"{r['stream']:<16} {r['model']:<44} {rate:>22} {r['speed_vs_river_linear']:>6.2f} "
            f"{r['mae']:>7.4f} {r['mae_suffix']:>7.4f} {r['suffix_mae_vs_sklearn_svr']:>5.2f} "
            f"{r['n_support']:>5}"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    try:
        machine["loadavg_end"] = os.getloadavg()
    except OSError:
        pass
    out = {
        "benchmark": "regression",
        "command": "python -m benchmarks.regression" + (" --quick" if args.quick else ""),
        "repeats": repeats,
        "budget": args.budget,
        "machine": machine,
        "rows": rows,
    }
    path = RESULTS / ("regression_quick.json" if args.quick else "regression.json")
    path.write_text(json.dumps(out, indent=2))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
