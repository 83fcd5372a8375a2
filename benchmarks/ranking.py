"""The kernel ranker (Alg. 8.14) against PRank on raw features, in one run.

Two synthetic ordinal streams with 5 ranks: one whose latent score is linear in the
features (PRank's home ground) and one whose score is not. Every model runs the same
prequential protocol (predict, score, learn). Compared:

* ``streamk OnlineRanker`` with ``RBF(gamma="auto")``, unbounded and budgeted;
* PRank on raw features: the same learner with ``Linear()`` (the kernel form) and a plain
  NumPy primal PRank (``w`` in R^d, the code a user would write; it must make the same
  predictions, which the run checks);
* river ``LinearRegression`` on the rank index, rounded and clipped (regress-then-round,
  what a river user would otherwise do).

Accuracy, MAE in rank units and events/s (median, min-max over repeats) are reported, with
ratios against the primal PRank.

Run::

    python -m benchmarks.ranking            # full run (3 repeats)
    python -m benchmarks.ranking --quick    # shorter streams, 1 repeat
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
from river import compose, linear_model, preprocessing

from benchmarks.common import machine_info
from streamk.kernels import Linear
from streamk.learners import OnlineRanker

RESULTS = Path(__file__).parent / "results"
RANKS = (1, 2, 3, 4, 5)


def ordinal_stream(kind: str, n: int, d: int = 6, seed: int = 7) -> list[tuple[dict, int]]:
    """Ranks 1-5 by quantiles of a latent score (cut points fixed from a large sample)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)

    def score(X: np.ndarray) -> np.ndarray:
        if kind == "linear":
            return X @ w
        return 2.0 * np.sin(1.5 * X[:, 0]) + X[:, 1] ** 2 - X[:, 2] * X[:, 3]

    ref = rng.normal(size=(20_000, d))
    cuts = np.quantile(score(ref), [0.2, 0.4, 0.6, 0.8])
    X = rng.normal(size=(n, d))
    s = score(X) + 0.2 * rng.normal(size=n)
    y = 1 + np.searchsorted(cuts, s)
    return [({f"x{j}": float(v) for j, v in enumerate(r)}, int(t)) for r, t in zip(X, y)]


class PrimalPRank:
    """Crammer & Singer's PRank written plainly in the primal (CF 8.2 with phi(x) = x)."""

    def __init__(self, n_ranks: int):
        self.w: np.ndarray | None = None
        self.b = np.zeros(n_ranks - 1)

    def _row(self, x: dict) -> np.ndarray:
        row = np.fromiter(x.values(), float, count=len(x))
        if self.w is None:
            self.w = np.zeros(len(row))
        return row

    def predict_one(self, x: dict) -> int:
        f = float(self._row(x) @ self.w)
        return 1 + int(np.searchsorted(self.b, f, side="right"))

    def learn_one(self, x: dict, y: int) -> None:
        row = self._row(x)
        p = 1 + int(np.searchsorted(self.b, float(row @ self.w), side="right"))
        if p != y:
            self.w += (y - p) * row
            if p < y:
                self.b[p - 1 : y - 1] -= 1.0
            else:
                self.b[y - 1 : p - 1] += 1.0


class RegressThenRound:
    """river's LinearRegression on the rank value, rounded and clipped to a rank."""

    def __init__(self):
        self.model = compose.Pipeline(
            preprocessing.StandardScaler(), linear_model.LinearRegression()
        )

    def predict_one(self, x: dict) -> int:
        return int(min(max(round(self.model.predict_one(x)), RANKS[0]), RANKS[-1]))

    def learn_one(self, x: dict, y: int) -> None:
        self.model.learn_one(x, float(y))


def models(budget: int) -> dict[str, Callable[[], Any]]:
    return {
        "streamk OnlineRanker RBF(auto)": lambda: OnlineRanker(ranks=RANKS),
        f"streamk OnlineRanker RBF(auto) (budget {budget})": lambda: OnlineRanker(
            ranks=RANKS, budget=budget
        ),
        "streamk OnlineRanker Linear (= PRank)": lambda: OnlineRanker(kernel=Linear(), ranks=RANKS),
        "plain NumPy primal PRank": lambda: PrimalPRank(len(RANKS)),
        "river LinearRegression, rounded": lambda: RegressThenRound(),
    }


def run(factory, events: list[tuple[dict, int]]) -> dict[str, Any]:
    model = factory()
    preds = np.empty(len(events), dtype=int)
    start = time.perf_counter()
    for i, (x, y) in enumerate(events):
        preds[i] = model.predict_one(x)
        model.learn_one(x, y)
    secs = time.perf_counter() - start
    y = np.array([t for _, t in events])
    return {
        "seconds": secs,
        "preds": preds,
        "accuracy": float(np.mean(preds == y)),
        "mae_ranks": float(np.mean(np.abs(preds - y))),
        "n_support": int(getattr(model, "n_support", 0)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=int, default=300)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    n = 2_000 if args.quick else 5_000
    machine = machine_info()
    rows: list[dict[str, Any]] = []
    for kind in ("linear", "nonlinear"):
        sname = f"ordinal-{kind}(n={n})"
        events = ordinal_stream(kind, n)
        srows, preds = [], {}
        for mname, factory in models(args.budget).items():
            runs = [run(factory, events) for _ in range(repeats)]
            rates = [n / r["seconds"] for r in runs]
            preds[mname] = runs[0]["preds"]
            row = {
                "stream": sname,
                "model": mname,
                "events": n,
                "events_per_s_median": statistics.median(rates),
                "events_per_s_min": min(rates),
                "events_per_s_max": max(rates),
                "accuracy": runs[0]["accuracy"],
                "mae_ranks": runs[0]["mae_ranks"],
                "n_support": runs[0]["n_support"],
            }
            srows.append(row)
            print(
                f"{sname:<26} {mname:<44} {row['events_per_s_median']:>9,.0f} ev/s  "
                f"acc {row['accuracy']:.4f}  MAE {row['mae_ranks']:.4f}  sv {row['n_support']}",
                flush=True,
            )
        same = np.array_equal(
            preds["streamk OnlineRanker Linear (= PRank)"], preds["plain NumPy primal PRank"]
        )
        base = next(r for r in srows if r["model"].startswith("plain"))
        for r in srows:
            r["speed_vs_primal_prank"] = r["events_per_s_median"] / base["events_per_s_median"]
            r["mae_vs_primal_prank"] = r["mae_ranks"] / base["mae_ranks"]
            r["linear_kernel_matches_primal"] = bool(same)
        rows.extend(srows)
    print()
    header = (
        f"{'stream':<26} {'model':<44} {'ev/s (min-max)':>22} {'x prank':>7} "
        f"{'acc':>6} {'MAE':>6} {'/prank':>6} {'sv':>5}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        rate = (
            f"{r['events_per_s_median']:,.0f} "
            f"({r['events_per_s_min']:,.0f}-{r['events_per_s_max']:,.0f})"
        )
        print(
            f"{r['stream']:<26} {r['model']:<44} {rate:>22} {r['speed_vs_primal_prank']:>7.2f} "
            f"{r['accuracy']:>6.3f} {r['mae_ranks']:>6.3f} {r['mae_vs_primal_prank']:>6.2f} "
            f"{r['n_support']:>5}"
        )
    print(
        "\nkernel PRank (Linear) predictions identical to the primal PRank: "
        + ", ".join(
            f"{s}: {next(r for r in rows if r['stream'] == s)['linear_kernel_matches_primal']}"
            for s in dict.fromkeys(r["stream"] for r in rows)
        )
    )
    try:
        machine["loadavg_end"] = os.getloadavg()
    except OSError:
        pass
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "benchmark": "ranking",
        "command": "python -m benchmarks.ranking" + (" --quick" if args.quick else ""),
        "repeats": repeats,
        "budget": args.budget,
        "machine": machine,
        "rows": rows,
    }
    path = RESULTS / ("ranking_quick.json" if args.quick else "ranking.json")
    path.write_text(json.dumps(out, indent=2))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
