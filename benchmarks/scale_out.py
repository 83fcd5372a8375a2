"""Scaling out: merged-model accuracy, merge time, and the throughput of 1, 2, 4 workers.

Two parts (``--part merge|throughput|all``, default all). *throughput*: real ``streamk run``
processes in one consumer group on the local broker (:mod:`benchmarks.scale_out_kafka`).
*merge*, in process:

A stream is split round-robin over ``k`` workers (what a consumer group does with
round-robin-keyed partitions); each worker learns its share, then :func:`streamk.merge.merge_models`
merges them. On a held-out tail of the stream the same run scores each worker, one model that
learned the whole stream, a majority vote of the workers (what a user would otherwise do with
``k`` models: ``k`` times the scoring cost) and the merged model under each compression
(``project``; ``solve``; ``policy``; ``compress="auto"`` picks ``solve`` for KernelPerceptron
and ``project`` for the others, from these figures). Repeats are rotations of Bananas and seeds of
the hyperplane; the table shows the median and min-max of merged minus best worker and merged
minus one model, in accuracy points, and the merge time.

Streams: river's Bananas (5,300 events, the last 1,000 held out) and a d = 20 drifting
hyperplane (``synth.Hyperplane(n_features=20, n_drift_features=5, mag_change=0.001,
noise_percentage=0.05)``, 6,000 events, the last 1,500 held out). Learners, all ``gamma="auto"``
(so the workers' widths differ and are pooled): ``KernelPerceptron(budget=200)``,
``MarginPerceptron(budget=Projectron(200))``, ``KernelAdatron(C=1, budget=200)``.

Run::

    python -m benchmarks.scale_out            # both parts, 3 repeats (~10 min on 2 cores)
    python -m benchmarks.scale_out --quick    # k = 3 merge, 12k-event throughput, 1 repeat
    python -m benchmarks.scale_out --part throughput

Writes ``benchmarks/results/scale_out_merge.json`` and ``scale_out_throughput.json``
(``-quick`` before ``.json`` for quick runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from river import datasets
from river.datasets import synth

from streamk.budget import Projectron
from streamk.learners import KernelAdatron, KernelPerceptron, MarginPerceptron
from streamk.merge.models import _merge

from .common import machine_info

RESULTS = Path(__file__).parent / "results"
METHODS = ("project", "solve", "policy")

LEARNERS: dict[str, Callable[[], Any]] = {
    "KernelPerceptron(200)": lambda: KernelPerceptron(budget=200),
    "MarginPerceptron(Projectron(200))": lambda: MarginPerceptron(budget=Projectron(200)),
    "KernelAdatron(C=1, 200)": lambda: KernelAdatron(C=1.0, resweeps=1, budget=200),  # as measured
}


def streams(repeats: int) -> dict[str, list[tuple[list, list]]]:
    """``{name: [(train, test), ...]}``, one pair per repeat."""
    bananas = list(datasets.Bananas())
    out: dict[str, list[tuple[list, list]]] = {"bananas": [], "hyperplane20": []}
    for r in range(repeats):
        rotated = bananas[r * 300 :] + bananas[: r * 300]
        out["bananas"].append((rotated[:-1000], rotated[-1000:]))
        hyp = list(
            synth.Hyperplane(
                seed=1 + r,
                n_features=20,
                n_drift_features=5,
                mag_change=0.001,
                noise_percentage=0.05,
            ).take(6000)
        )
        out["hyperplane20"].append((hyp[:-1500], hyp[-1500:]))
    return out


def accuracy(predict: Callable[[dict], Any], test: list) -> float:
    return sum(predict(x) == y for x, y in test) / len(test)


def vote(models: list) -> Callable[[dict], Any]:
    """Majority vote of the workers (ties: the first worker's label among the tied)."""

    def predict(x: dict) -> Any:
        labels = [m.predict_one(x) for m in models]
        counts = Counter(labels)
        top = max(counts.values())
        return next(label for label in labels if counts[label] == top)

    return predict


def one_case(make: Callable[[], Any], train: list, test: list, ks: list[int]) -> list[dict]:
    single = make()
    for x, y in train:
        single.learn_one(x, y)
    acc_single = accuracy(single.predict_one, test)
    rows = []
    for k in ks:
        workers = [make() for _ in range(k)]
        for i, (x, y) in enumerate(train):
            workers[i % k].learn_one(x, y)
        acc_workers = [accuracy(w.predict_one, test) for w in workers]
        row: dict[str, Any] = {
            "k": k,
            "single": acc_single,
            "workers": acc_workers,
            "vote": accuracy(vote(workers), test),
            "merged": {},
        }
        for method in METHODS:
            result = _merge(workers, None, None, method, "pool", None)
            row["merged"][method] = {
                "accuracy": accuracy(result.model.predict_one, test),
                "seconds": result.seconds,
                "n_union": result.n_union,
                "n_support": result.n_support,
                "gamma_spread": result.gamma_spread,
            }
        rows.append(row)
    return rows


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):+.1f} [{min(values):+.1f}, {max(values):+.1f}]"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="k = 3 and one repeat only")
    parser.add_argument("--part", choices=("merge", "throughput", "all"), default="all")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    if args.part in ("throughput", "all"):
        out["throughput"] = throughput(args.quick)
    if args.part in ("merge", "all"):
        out["merge"] = merge_part(args)
    return out


def throughput(quick: bool) -> dict[str, Any]:
    """Events/s of 1, 2 and 4 real workers, merge time and accuracy (scale_out_kafka)."""
    from . import scale_out_kafka

    result = scale_out_kafka.run(quick, repeats=1 if quick else 3)
    scale_out_kafka.show(result)
    out = {
        "benchmark": "scale_out_throughput",
        "command": "python -m benchmarks.scale_out --part throughput"
        + (" --quick" if quick else ""),
        "machine": machine_info(),
        "created_at": time.time(),
        **result,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"scale_out_throughput{'-quick' if quick else ''}.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path} (load average {out['machine']['loadavg']})")
    return out


def merge_part(args: argparse.Namespace) -> dict[str, Any]:
    """The in-process merge-accuracy part (every learner, compression, k)."""
    ks = [3] if args.quick else [2, 3, 4]
    repeats = 1 if args.quick else 3
    warnings.simplefilter("ignore")
    data = streams(repeats)
    results = []
    for sname, pairs in data.items():
        for lname, make in LEARNERS.items():
            cases = [one_case(make, train, test, ks) for train, test in pairs]
            for j, k in enumerate(ks):
                rows = [case[j] for case in cases]
                entry = {"stream": sname, "learner": lname, "k": k, "repeats": rows}
                results.append(entry)
                line = [f"{sname:13s} {lname:34s} k={k}"]
                for method in METHODS:
                    acc = [r["merged"][method]["accuracy"] for r in rows]
                    best = [100 * (a - max(r["workers"])) for a, r in zip(acc, rows)]
                    one = [100 * (a - r["single"]) for a, r in zip(acc, rows)]
                    secs = statistics.median(r["merged"][method]["seconds"] for r in rows)
                    line.append(
                        f"{method}: {statistics.median(acc):.3f} vs best {summary(best)} "
                        f"vs one {summary(one)} {1000 * secs:.0f} ms"
                    )
                vote_d = [100 * (r["vote"] - r["single"]) for r in rows]
                line.append(
                    f"best worker {statistics.median(max(r['workers']) for r in rows):.3f} "
                    f"one model {statistics.median(r['single'] for r in rows):.3f} "
                    f"vote vs one {summary(vote_d)}"
                )
                print("\n    ".join(line), flush=True)
    out = {
        "benchmark": "scale_out_merge",
        "command": "python -m benchmarks.scale_out" + (" --quick" if args.quick else ""),
        "machine": machine_info(),
        "created_at": time.time(),
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"scale_out_merge{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
