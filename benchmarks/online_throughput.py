"""Throughput and accuracy of the kernel perceptron next to river's models, in one run.

Every model runs the same prequential protocol (predict, score, learn) on the same
streams; events/s are the median (min-max) over repeats, and ratios are taken against
river's linear ``Perceptron`` and against a plain one-event-at-a-time NumPy kernel
perceptron (the code a user would write by hand).

A second table times learning alone on data held in memory, each model in its own input
form (dicts for ``learn_one``, pandas blocks of 500 for ``learn_many``): the cost of the
learners without the stream generator, the metric and the per-event Python loop of the
prequential harness, which all models share.

Run::

    python -m benchmarks.online_throughput            # full run (~3-5 min)
    python -m benchmarks.online_throughput --quick    # smaller streams, 1 repeat
    python -m benchmarks.online_throughput --write-guide  # then docs/user-guide.md's figures
    python -m benchmarks.online_throughput --guide-only   # those from the committed grid
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
from river import datasets, linear_model, metrics, multiclass, neighbors, preprocessing
from river.datasets import synth

from benchmarks import online_grid as grid
from benchmarks.common import machine_info
from streamk import KernelPerceptron, accel
from streamk.cli.evaluate import prequential
from streamk.kernels import RBF, ScaleEstimator
from streamk.learners.base import regamma_at

RESULTS = Path(__file__).parent / "results"
#: where ``--write-guide`` and ``--guide-only`` put the grid's tables and figure
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user-guide.md"


class PlainKernelPerceptron:
    """A hand-written one-event-at-a-time NumPy kernel perceptron (one-vs-rest, budget).

    It uses the same gamma="auto" rule as streamk so accuracies are comparable; features
    are read in the dict's order, as a hand-written loop would.
    """

    def __init__(self, budget: int = 500, warmup: int = 200):
        self.budget = budget
        self.warmup = warmup
        self.S = None
        self.C = None
        self.classes: list[Any] = []
        self.scale = ScaleEstimator()
        self.gamma = 1.0

    def _f(self, x: np.ndarray) -> np.ndarray:
        if self.S is None:
            return np.zeros(max(len(self.classes), 1))
        k = np.exp(-self.gamma * np.sum((self.S - x) ** 2, axis=1))
        return k @ self.C

    def predict_one(self, x: dict) -> Any:
        if not self.classes:
            return None
        f = self._f(np.fromiter(x.values(), float))
        if len(self.classes) <= 2:
            return self.classes[0] if f[0] >= 0 else self.classes[-1]
        return self.classes[int(np.argmax(f))]

    def learn_one(self, x: dict, y: Any) -> None:
        if y not in self.classes:
            self.classes.append(y)
            if self.C is not None and len(self.classes) > 2:
                if len(self.classes) == 3:
                    self.C = np.hstack([self.C, -self.C])
                self.C = np.hstack([self.C, np.zeros((len(self.C), 1))])
        row = np.fromiter(x.values(), float)
        if self.scale.n < self.warmup:
            self.scale.update(row[None, :])
            if regamma_at(self.scale.n):
                self.gamma = RBF().resolve(self.scale).gamma
        f = self._f(row)
        if len(self.classes) <= 2:
            t = np.array([1.0 if y == self.classes[0] else -1.0])
        else:
            t = -np.ones(len(self.classes))
            t[self.classes.index(y)] = 1.0
        wrong = (f[: len(t)] >= 0) != (t > 0)
        if wrong.any():
            coef = np.where(wrong, t, 0.0)[None, :]
            if self.S is None:
                self.S, self.C = row[None, :], coef
            else:
                self.S = np.vstack([self.S, row])[-self.budget :]
                self.C = np.vstack([self.C, coef])[-self.budget :]


def streams(quick: bool) -> dict[str, Callable[[], Any]]:
    n = 5_000 if quick else 20_000
    return {
        "Bananas": lambda: datasets.Bananas(),
        "Phishing": lambda: datasets.Phishing(),
        "ImageSegments": lambda: datasets.ImageSegments(),
        f"Hyperplane(d=10, n={n})": lambda: synth.Hyperplane(seed=7, n_features=10).take(n),
    }


def models(budget: int, multiclass_stream: bool) -> dict[str, tuple[Callable[[], Any], int]]:
    """name -> (factory, batch size); river's binary-only linear models get one-vs-rest."""

    def logreg() -> Any:
        inner = linear_model.LogisticRegression()
        return multiclass.OneVsRestClassifier(inner) if multiclass_stream else inner

    out = {
        f"streamk KernelPerceptron learn_one (budget {budget})": (
            lambda: KernelPerceptron(budget=budget),
            1,
        ),
        f"streamk KernelPerceptron learn_many/500 (budget {budget})": (
            lambda: KernelPerceptron(budget=budget),
            500,
        ),
        f"plain NumPy kernel perceptron (budget {budget})": (
            lambda: PlainKernelPerceptron(budget=budget),
            1,
        ),
        "river linear_model.Perceptron": (lambda: linear_model.Perceptron(), 1),
        "river LogisticRegression (scaled)": (
            lambda: preprocessing.StandardScaler() | logreg(),
            1,
        ),
        "river KNNClassifier (scaled)": (
            lambda: preprocessing.StandardScaler() | neighbors.KNNClassifier(),
            1,
        ),
    }
    if multiclass_stream:  # river's Perceptron is binary only
        out.pop("river linear_model.Perceptron")
    return out


def run_one(factory, batch_size: int, stream) -> dict[str, Any]:
    model = factory()
    multiclass_ok = getattr(model, "_multiclass", True)
    start = time.perf_counter()
    res = prequential(model, stream, metrics.Accuracy(), batch_size=batch_size, every=3600)
    secs = time.perf_counter() - start
    return {
        "events": res.n_events,
        "seconds": secs,
        "accuracy": res.metric,
        "n_support": res.n_support,
        "multiclass": multiclass_ok,
    }


def training_rows(stream_name: str, data: list[tuple[dict, Any]], budget: int, repeats: int):
    """Learning alone, data in memory: CPU seconds per event of each learner, same run."""
    import pandas as pd

    X = pd.DataFrame([x for x, _ in data])
    y = pd.Series([y for _, y in data], dtype=object)
    blocks = [(X.iloc[i : i + 500], y.iloc[i : i + 500]) for i in range(0, len(data), 500)]

    def one(factory):
        def run():
            model = factory()
            for x, label in data:
                model.learn_one(x, label)

        return run

    def many():
        model = KernelPerceptron(budget=budget)
        for Xb, yb in blocks:
            model.learn_many(Xb, yb)

    cases = {
        f"streamk KernelPerceptron learn_many/500 (budget {budget})": many,
        f"streamk KernelPerceptron learn_one (budget {budget})": one(
            lambda: KernelPerceptron(budget=budget)
        ),
        f"plain NumPy kernel perceptron learn_one (budget {budget})": one(
            lambda: PlainKernelPerceptron(budget=budget)
        ),
    }
    if len({label for _, label in data}) <= 2:
        cases["river linear_model.Perceptron learn_one"] = one(linear_model.Perceptron)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, run in cases.items():
            start = time.process_time()
            run()
            times[name].append(time.process_time() - start)
    rows = []
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        row = {
            "stream": stream_name,
            "model": name,
            "events": len(data),
            "events_per_s_median": len(data) / medians[name],
            "events_per_s_min": len(data) / max(t),
            "events_per_s_max": len(data) / min(t),
        }
        for base, key in (("river", "river linear"), ("plain", "plain NumPy")):
            ref = next((m for n, m in medians.items() if n.startswith(key)), None)
            if ref is not None:
                row[f"ratio_vs_{base}"] = ref / medians[name]
        rows.append(row)
    return rows


def legacy_tables(args: argparse.Namespace) -> int:
    """The earlier two tables (prequential harness; learning alone), with ``--old-tables``."""
    repeats = 1 if args.quick else args.repeats
    rows = []
    load_before = os.getloadavg()
    for sname, sfactory in streams(args.quick).items():
        is_multiclass = len({y for _, y in sfactory()}) > 2
        base_rates: dict[str, float] = {}
        candidates = models(args.budget, is_multiclass)
        # Repeats go round-robin over the models, so a burst of load from another process
        # on a shared machine lands on every model alike instead of on one model's repeats.
        all_runs: dict[str, list[dict[str, Any]]] = {m: [] for m in candidates}
        for _ in range(repeats):
            for mname, (mfactory, batch) in candidates.items():
                all_runs[mname].append(run_one(mfactory, batch, sfactory()))
        for mname, runs in all_runs.items():
            rates = [r["events"] / r["seconds"] for r in runs]
            row = {
                "stream": sname,
                "model": mname,
                "events": runs[0]["events"],
                "events_per_s_median": statistics.median(rates),
                "events_per_s_min": min(rates),
                "events_per_s_max": max(rates),
                "accuracy": runs[0]["accuracy"],
                "n_support": runs[0]["n_support"],
            }
            rows.append(row)
            if mname.startswith("river linear_model.Perceptron"):
                base_rates["river"] = row["events_per_s_median"]
            if mname.startswith("plain"):
                base_rates["plain"] = row["events_per_s_median"]
            print(
                f"{sname:<24} {mname:<58} {row['events_per_s_median']:>10,.0f} ev/s "
                f"({row['events_per_s_min']:,.0f}-{row['events_per_s_max']:,.0f})  "
                f"acc {row['accuracy']:.4f}  sv {row['n_support']}",
                flush=True,
            )
        for row in rows:
            if row["stream"] == sname:
                for key, rate in base_rates.items():
                    row[f"ratio_vs_{key}"] = row["events_per_s_median"] / rate
    print()
    print(f"{'stream':<24} {'model':<58} {'ev/s':>10} {'x river':>8} {'x plain':>8} {'acc':>7}")
    nan = float("nan")
    for r in rows:
        vs_river, vs_plain = r.get("ratio_vs_river", nan), r.get("ratio_vs_plain", nan)
        print(
            f"{r['stream']:<24} {r['model']:<58} {r['events_per_s_median']:>10,.0f} "
            f"{vs_river:>8.2f} {vs_plain:>8.2f} {r['accuracy']:>7.4f}"
        )
    print("\nLearning alone, data in memory (CPU time, median of repeats)")
    print(f"{'stream':<24} {'model':<58} {'ev/s':>10} {'x river':>8} {'x plain':>8}")
    training = []
    for sname, sfactory in streams(args.quick).items():
        for r in training_rows(sname, list(sfactory()), args.budget, repeats):
            training.append(r)
            print(
                f"{r['stream']:<24} {r['model']:<58} {r['events_per_s_median']:>10,.0f} "
                f"{r.get('ratio_vs_river', nan):>8.2f} {r.get('ratio_vs_plain', nan):>8.2f}",
                flush=True,
            )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "benchmark": "online_throughput",
        "repeats": repeats,
        "budget": args.budget,
        "machine": machine_info(),
        "compiled_core": accel.available(),
        "load_average_1_5_15": {"before": load_before, "after": os.getloadavg()},
        "rows": rows,
        "learning_alone": training,
    }
    name = "online_throughput" + ("_quick" if args.quick else "")
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"\nwrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller streams, B = 200, 1 repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=int, default=500, help="budget of --old-tables")
    parser.add_argument("--old-tables", action="store_true", help="the earlier two tables instead")
    parser.add_argument("--kernel", default="rbf", choices=sorted(grid.KERNELS))
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated learner names to run (written to online_grid_only_<names>.json, "
        "not the full grid's file)",
    )
    parser.add_argument(
        "--write-guide",
        action="store_true",
        help="after the full grid, put its ratio tables and resweep figure into the user guide",
    )
    parser.add_argument(
        "--guide-only",
        action="store_true",
        help="run nothing: put the committed grid's tables and figure into the user guide",
    )
    parser.add_argument("--guide", type=Path, default=GUIDE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.old_tables:
        return legacy_tables(args)
    guide = args.write_guide or args.guide_only
    if guide and (args.quick or args.only or args.kernel != "rbf"):
        parser.error("the user guide quotes the full RBF grid: no --quick, --only or --kernel")
    if not args.guide_only:
        status = grid.run(args, RESULTS)
        if status or not guide:
            return status
    doc = json.loads((RESULTS / "online_grid.json").read_text())
    changed = grid.write_guide(doc, args.guide)
    print(f"{'wrote' if changed else 'unchanged:'} {args.guide}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
