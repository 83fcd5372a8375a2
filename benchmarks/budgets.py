"""Accuracy and throughput of every budget policy at several budgets, next to river's models.

Every model runs the same prequential protocol (predict, score, learn, one event at a
time; :func:`streamk.cli.evaluate.prequential`) on the same materialised streams: river's
Bananas, Phishing and ImageSegments (multiclass), and drifting synthetic streams (SEA
with two concept drifts, Agrawal with a concept change, Hyperplane with ``mag_change``).
Kernel learners: ``KernelPerceptron`` (Alg. 7.52) and ``MarginPerceptron`` (margin 1),
each with every policy at budgets 50/100/200/500 and unbounded (``Unbounded`` for the
removal policies, ``Projectron(None)`` for the Projectron). Baselines: river's
``KNNClassifier``, ``ARFClassifier`` and ``LogisticRegression``. Kernel learners, KNN
and logistic regression read standardised features (``preprocessing.StandardScaler``,
as river's docs do for KNN and linear models); ARF reads raw features.

A second table, the README's recommended model at speed: ``MarginPerceptron(budget=
Projectron(200))`` and ``Merge(200)`` on Bananas through ``learn_predict_many`` in blocks of
500 (the exact per-event test-then-train predictions, computed in one compiled pass per
block when ``streamk/budget/_policies.pyx`` is built) against river's ``KNNClassifier``
(``StandardScaler | KNNClassifier``, one event at a time), paired in each of 3 repeats;
the ratio is the median of the paired ratios. river's Bananas is already standardised
(the JSON records its feature means and standard deviations), so the block runs read it
as it is.

Run::

    python -m benchmarks.budgets            # full run (~10 min on 2 cores)
    python -m benchmarks.budgets --quick    # 1,500 events per stream, 3 budgets (~1 min)

Writes ``benchmarks/results/budgets.json`` (``budgets-quick.json`` with ``--quick``) and
an accuracy-vs-budget plot ``budgets.png`` when matplotlib (extra ``[plot]``) is present.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from river import datasets, forest, linear_model, metrics, multiclass, neighbors, preprocessing
from river.datasets import synth

from streamk import KernelPerceptron, accel
from streamk.budget import (
    Forgetron,
    Merge,
    Projectron,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    Unbounded,
)
from streamk.budget import compiled as compiled_policies
from streamk.cli.evaluate import prequential
from streamk.learners.budgeted import MarginPerceptron

from .common import machine_info

RESULTS = Path(__file__).parent / "results"

POLICIES: dict[str, Callable[[int | None], Any]] = {
    "RemoveOldest": lambda b: RemoveOldest(b) if b else Unbounded(),
    "RemoveRandom": lambda b: RemoveRandom(b, seed=0) if b else Unbounded(),
    "RemoveSmallest": lambda b: RemoveSmallest(b) if b else Unbounded(),
    "Forgetron": lambda b: Forgetron(b) if b else Unbounded(),
    "Projectron": lambda b: Projectron(b),
    "Merge": lambda b: Merge(b) if b else Unbounded(),
}
LEARNERS: dict[str, Callable[[Any], Any]] = {
    "perceptron": lambda policy: KernelPerceptron(budget=policy),
    "margin": lambda policy: MarginPerceptron(budget=policy),
}
BASELINES: dict[str, Callable[[], Any]] = {
    "river KNN": lambda: preprocessing.StandardScaler() | neighbors.KNNClassifier(),
    "river ARF": lambda: forest.ARFClassifier(seed=42),
    "river LogReg": lambda: preprocessing.StandardScaler() | linear_model.LogisticRegression(),
}
# LogisticRegression is binary: one-vs-rest on multiclass streams.
MULTICLASS_BASELINES: dict[str, Callable[[], Any]] = {
    **BASELINES,
    "river LogReg": lambda: (
        preprocessing.StandardScaler()
        | multiclass.OneVsRestClassifier(linear_model.LogisticRegression())
    ),
}


def streams(n: int | None) -> dict[str, Callable[[], Any]]:
    """Stream factories; ``n`` caps every stream (``None``: shipped sets whole, synth 10k)."""
    synth_n = n or 10_000

    def sea():
        return synth.ConceptDriftStream(
            synth.SEA(variant=0, seed=1, noise=0.05),
            synth.ConceptDriftStream(
                synth.SEA(variant=1, seed=2, noise=0.05),
                synth.SEA(variant=2, seed=3, noise=0.05),
                position=synth_n // 3,
                width=200,
                seed=5,
            ),
            position=synth_n // 3,
            width=200,
            seed=4,
        ).take(synth_n)

    def agrawal():
        return synth.ConceptDriftStream(
            synth.Agrawal(classification_function=0, seed=1),
            synth.Agrawal(classification_function=2, seed=2),
            position=synth_n // 2,
            width=50,
            seed=6,
        ).take(synth_n)

    def hyperplane():
        return synth.Hyperplane(seed=42, n_features=10, n_drift_features=5, mag_change=0.001)

    def cap(ds):
        return lambda: itertools.islice(ds(), n) if n else ds()

    return {
        "Bananas": cap(datasets.Bananas),
        "Phishing": cap(datasets.Phishing),
        "ImageSegments": cap(datasets.ImageSegments),
        "SEA-drift": sea,
        "Agrawal-change": agrawal,
        "Hyperplane-mag": lambda: hyperplane().take(synth_n),
    }


def run(factory: Callable[[], Any], events: list[tuple[dict, Any]]) -> dict[str, Any]:
    model = factory()
    res = prequential(model, events, every=1e9)
    inner = model[-1] if hasattr(model, "steps") else model
    return {
        "accuracy": res.metric,
        "events_per_second": res.events_per_second,
        "n_support": int(getattr(inner, "n_support", 0)),
    }


def kernel_configs(budgets: list[int | None]):
    for learner, make in LEARNERS.items():
        for policy, pol in POLICIES.items():
            for b in budgets:
                if b is None and policy not in ("RemoveOldest", "Projectron"):
                    continue  # the removal policies are all Unbounded() without a budget
                name = "Unbounded" if b is None and policy != "Projectron" else policy

                def factory(make=make, pol=pol, b=b):
                    return preprocessing.StandardScaler() | make(pol(b))

                yield learner, name, b, factory


#: The recommended model and the other policy that reaches 0.88 on Bananas, at speed.
FAST: dict[str, Callable[[], Any]] = {
    "MarginPerceptron(budget=Projectron(200))": lambda: MarginPerceptron(budget=Projectron(200)),
    "MarginPerceptron(budget=Merge(200))": lambda: MarginPerceptron(budget=Merge(200)),
}
FAST_BLOCK = 500
KNN = "StandardScaler | KNNClassifier"


def _accuracy(labels: list[Any], preds: list[Any]) -> float:
    acc = metrics.Accuracy()
    for y, p in zip(labels, preds):
        if p is not None:  # as river and streamk.cli.evaluate: no guess, no score
            acc.update(y, p)
    return float(acc.get())


def _timed_blocks(factory: Callable[[], Any], X: np.ndarray, labels: list[Any]):
    model = factory()
    t0 = time.perf_counter()
    preds: list[Any] = []
    for i in range(0, len(labels), FAST_BLOCK):
        preds += model.learn_predict_many(X[i : i + FAST_BLOCK], labels[i : i + FAST_BLOCK])
    seconds = time.perf_counter() - t0
    return len(labels) / seconds, _accuracy(labels, preds), int(model.n_support)


def _timed_knn(events: list[tuple[dict, Any]]):
    model = BASELINES["river KNN"]()
    t0 = time.perf_counter()
    preds = []
    for x, y in events:
        preds.append(model.predict_one(x))
        model.learn_one(x, y)
    seconds = time.perf_counter() - t0
    return len(events) / seconds, _accuracy([y for _, y in events], preds)


def recommended(repeats: int = 3) -> dict[str, Any]:
    """The fast table: each repeat runs every model and KNN back to back (paired ratios)."""
    events = list(datasets.Bananas())
    keys = sorted(events[0][0])
    X = np.array([[x[k] for k in keys] for x, _ in events])
    labels = [y for _, y in events]
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in FAST}
    knn: list[tuple[float, float]] = []
    for _ in range(repeats):
        for name, factory in FAST.items():
            runs[name].append(_timed_blocks(factory, X, labels))
        knn.append(_timed_knn(events))
    knn_speed = [s for s, _ in knn]
    rows = []
    for name, got in runs.items():
        speeds = [s for s, _, _ in got]
        ratios = [s / k for s, k in zip(speeds, knn_speed)]
        rows.append(
            {
                "model": name,
                "path": f"learn_predict_many/{FAST_BLOCK}",
                "accuracy": got[0][1],
                "n_support": got[0][2],
                "events_per_second_median": statistics.median(speeds),
                "events_per_second_min": min(speeds),
                "events_per_second_max": max(speeds),
                "ratio_vs_knn_median": statistics.median(ratios),
                "ratio_vs_knn_min": min(ratios),
                "ratio_vs_knn_max": max(ratios),
            }
        )
    return {
        "stream": "Bananas",
        "events": len(labels),
        "repeats": repeats,
        "block": FAST_BLOCK,
        "feature_means": X.mean(axis=0).tolist(),
        "feature_sds": X.std(axis=0).tolist(),
        "compiled_core": accel.available(),
        "compiled_policies": compiled_policies.available(),
        "rows": rows,
        "knn": {
            "model": KNN,
            "path": "predict_one + learn_one",
            "accuracy": knn[0][1],
            "events_per_second_median": statistics.median(knn_speed),
            "events_per_second_min": min(knn_speed),
            "events_per_second_max": max(knn_speed),
        },
    }


def print_recommended(fast: dict[str, Any]) -> None:
    knn = fast["knn"]
    print(f"\nBananas at speed (median of {fast['repeats']}, paired with {knn['model']})")
    for r in fast["rows"]:
        print(
            f"  {r['model']:42s} {r['path']:24s} acc {r['accuracy']:.4f}  sv {r['n_support']:3d}"
            f"  {r['events_per_second_median']:9.0f} ev/s  {r['ratio_vs_knn_median']:6.1f}x KNN"
            f" ({r['ratio_vs_knn_min']:.1f}-{r['ratio_vs_knn_max']:.1f})"
        )
    print(
        f"  {knn['model']:42s} {knn['path']:24s} acc {knn['accuracy']:.4f}"
        f"        {knn['events_per_second_median']:9.0f} ev/s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short streams, 3 budgets")
    parser.add_argument(
        "--fast-only", action="store_true", help="only the Bananas-at-speed table (no JSON)"
    )
    args = parser.parse_args(argv)
    if args.fast_only:
        print_recommended(recommended())
        return 0
    budgets: list[int | None] = [50, 200, None] if args.quick else [50, 100, 200, 500, None]
    n = 1500 if args.quick else None
    load_before = list(os.getloadavg())
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for ds_name, make_stream in streams(n).items():
        events = list(make_stream())
        print(f"\n== {ds_name} ({len(events)} events)", flush=True)
        for learner, policy, b, factory in kernel_configs(budgets):
            r = run(factory, events)
            rows.append(
                {"dataset": ds_name, "learner": learner, "policy": policy, "budget": b, **r}
            )
            print(
                f"  {learner:10s} {policy:14s} {str(b):>5s}  acc {r['accuracy']:.4f}"
                f"  {r['events_per_second']:8.0f} ev/s  sv {r['n_support']}",
                flush=True,
            )
        multi = len({y for _, y in events}) > 2
        for name, factory in (MULTICLASS_BASELINES if multi else BASELINES).items():
            r = run(factory, events)
            rows.append({"dataset": ds_name, "learner": name, "policy": None, "budget": None, **r})
            print(
                f"  {name:25s} {'':>5s}  acc {r['accuracy']:.4f}"
                f"  {r['events_per_second']:8.0f} ev/s",
                flush=True,
            )
    fast = recommended()
    elapsed = time.perf_counter() - t0
    print_table(rows, budgets)
    print_recommended(fast)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "budgets-quick" if args.quick else "budgets"
    out = {
        "benchmark": "budgets",
        "command": "python -m benchmarks.budgets" + (" --quick" if args.quick else ""),
        "machine": machine_info(),
        "load_average_1_5_15": {"before": load_before, "after": list(os.getloadavg())},
        "seconds": elapsed,
        "budgets": budgets,
        "results": rows,
        "recommended": fast,
    }
    path = RESULTS / f"{stem}.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"\nwrote {path} ({elapsed:.0f} s)")
    plot(rows, budgets, RESULTS / f"{stem}.png")
    return 0


def print_table(rows: list[dict[str, Any]], budgets: list[int | None]) -> None:
    """Accuracy per (learner, policy) and budget; events/s at budget 200 (or the largest)."""
    ref = 200 if 200 in budgets else max(b for b in budgets if b)
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        sub = [r for r in rows if r["dataset"] == ds]
        head = "".join(f"{'inf' if b is None else b:>8}" for b in budgets)
        print(f"\n{ds}\n  {'learner / policy':30s}{head}  ev/s@{ref}")
        keys = dict.fromkeys((r["learner"], r["policy"]) for r in sub)
        for learner, policy in keys:
            cells = {
                r["budget"]: r for r in sub if (r["learner"], r["policy"]) == (learner, policy)
            }
            if policy is None:
                r = cells[None]
                row = f"{'':>8}" * (len(budgets) - 1) + f"{r['accuracy']:8.4f}"
                print(f"  {learner:30s}{row}  {r['events_per_second']:8.0f}")
                continue
            row = "".join(
                f"{cells[b]['accuracy']:8.4f}" if b in cells else f"{'':>8}" for b in budgets
            )
            speed = cells.get(ref, next(iter(cells.values())))["events_per_second"]
            print(f"  {learner + ' ' + policy:30s}{row}  {speed:8.0f}")


def plot(rows: list[dict[str, Any]], budgets: list[int | None], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'streamk[plot]'): skipping the plot")
        return
    sets = list(dict.fromkeys(r["dataset"] for r in rows))
    xs = [b for b in budgets if b]
    inf_x = max(xs) * 2
    fig, axes = plt.subplots(2, (len(sets) + 1) // 2, figsize=(15, 8), squeeze=False)
    for ax, ds in zip(axes.flat, sets):
        sub = [r for r in rows if r["dataset"] == ds]
        for learner, policy in dict.fromkeys(
            (r["learner"], r["policy"]) for r in sub if r["policy"]
        ):
            pts = [r for r in sub if (r["learner"], r["policy"]) == (learner, policy)]
            if policy == "Unbounded":
                continue
            pts.sort(key=lambda r: r["budget"] or inf_x)
            ax.plot(
                [r["budget"] or inf_x for r in pts],
                [r["accuracy"] for r in pts],
                "-o" if learner == "margin" else "--",
                label=f"{learner} {policy}",
                markersize=3,
            )
        for r in sub:
            if r["policy"] is None:
                ax.axhline(r["accuracy"], linestyle=":", color="grey")
                ax.annotate(r["learner"], (xs[0], r["accuracy"]), fontsize=7, color="grey")
        ax.set_xscale("log")
        ax.set_xticks(xs + [inf_x], [str(b) for b in xs] + ["inf"])
        ax.set_title(ds)
        ax.set_xlabel("budget (support vectors)")
        ax.set_ylabel("prequential accuracy")
    axes.flat[0].legend(fontsize=6, ncol=2)
    for ax in list(axes.flat)[len(sets) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
