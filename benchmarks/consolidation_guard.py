"""What consolidation's guard buys and costs: the on-line learner, the same learner consolidated
without a guard (``Consolidated(..., guard=0)``, every solution adopted) and with the default
guard (``guard=500``: an unconsolidated copy learns beside it, the one that erred less over
the last 500 labelled events serves).

Each learner (budget 300; ``every=1000``, a window of 1,000 and the other consolidation
defaults) learns each stream test-then-train, ``predict_one`` then ``learn_one``: the
prequential accuracy (MAE for the SVR) is deterministic; the CPU time is the median of the
repeats, all three models run once per repeat, with river's linear model of the task
(``StandardScaler() | Perceptron()``, ``StandardScaler() | LinearRegression()``), what a
user would run instead, in the same repeat: each model's CPU time is also given as a ratio
to it (median of the paired ratios). The streams: river's Bananas (consolidation
helps), a 50-feature Hyperplane (an RBF solution needs nearly every window row, which half a
budget cannot hold: consolidation hurts), a 10-feature one, SEA; Friedman and TrumpApproval
for the SVR.

The scores depend, at the third decimal, on the BLAS's threads (they move the solver's
rounding, and so which events a solution gets right at the margin): the committed figures
were taken with ``OPENBLAS_NUM_THREADS=1``, recorded in the JSON.

Run::

    python -m benchmarks.consolidation_guard            # 3 repeats, 6,000 synthetic events
    python -m benchmarks.consolidation_guard --quick    # 1 repeat, 1,500 synthetic events
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from river import datasets, linear_model, metrics, preprocessing
from river.datasets import synth

from benchmarks.common import result_document, write_between, write_results
from streamk import KernelAdatron, KernelPerceptron, MarginPerceptron, OnlineSVR, accel
from streamk.consolidation import Consolidated

RESULTS = Path(__file__).parent / "results"
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user-guide.md"
START, END = "<!-- guard-table:start -->", "<!-- guard-table:end -->"
BUDGET = 300
EVERY = 1000
GUARD = 500
MODELS = ("on-line", "consolidated, guard=0", f"consolidated, guard={GUARD}")


def streams(quick: bool) -> dict[str, tuple[list[tuple[dict, Any]], bool]]:
    """name -> (events, regression)."""
    n = 1_500 if quick else 6_000
    return {
        "Bananas": (list(datasets.Bananas()), False),
        "Hyperplane(d=50)": (list(synth.Hyperplane(seed=42, n_features=50).take(n)), False),
        "Hyperplane(d=10)": (list(synth.Hyperplane(seed=42, n_features=10).take(n)), False),
        "SEA": (list(synth.SEA(seed=3).take(n)), False),
        "Friedman": (list(synth.Friedman(seed=42).take(n)), True),
        "TrumpApproval": (list(datasets.TrumpApproval()), True),
    }


LEARNERS: dict[str, tuple[Callable[[], Any], bool]] = {
    "KernelPerceptron": (lambda: KernelPerceptron(budget=BUDGET), False),
    "MarginPerceptron": (lambda: MarginPerceptron(budget=BUDGET), False),
    "KernelAdatron": (lambda: KernelAdatron(budget=BUDGET), False),
    "OnlineSVR": (lambda: OnlineSVR(budget=BUDGET), True),
}


def river_model(regression: bool) -> tuple[str, Callable[[], Any]]:
    """The user's alternative: river's linear model of the task, standardised."""
    if regression:
        return (
            "river StandardScaler | LinearRegression",
            lambda: preprocessing.StandardScaler() | linear_model.LinearRegression(),
        )
    return (
        "river StandardScaler | Perceptron",
        lambda: preprocessing.StandardScaler() | linear_model.Perceptron(),
    )


def makers(learner: Callable[[], Any]) -> dict[str, Callable[[], Any]]:
    return {
        MODELS[0]: learner,
        MODELS[1]: lambda: Consolidated(learner(), every=EVERY, window_size=EVERY, guard=0),
        MODELS[2]: lambda: Consolidated(learner(), every=EVERY, window_size=EVERY, guard=GUARD),
    }


def prequential(model: Any, events: list, regression: bool) -> tuple[float, float]:
    """(accuracy or MAE, CPU seconds) of ``predict_one`` then ``learn_one`` of each event."""
    metric = metrics.MAE() if regression else metrics.Accuracy()
    t0 = time.process_time()
    for x, y in events:
        metric.update(y, model.predict_one(x))
        model.learn_one(x, y)
    return metric.get(), time.process_time() - t0


def render(rows: list[dict[str, Any]]) -> str:
    """The user guide's table: score and µs an event of each model, per learner and stream."""
    cell = {(r["learner"], r["stream"], r["model"]): r for r in rows}
    head = (
        "| learner | stream | metric | river's linear model | "
        + " | ".join(MODELS)
        + " | serving at the end |"
    )
    lines = [head, "|---|---|---|" + "---:|" * (len(MODELS) + 1) + "---|"]
    for learner, stream in dict.fromkeys((r["learner"], r["stream"]) for r in rows):
        got = [cell[(learner, stream, m)] for m in MODELS]
        river = f"{got[0]['river_score']:.4f} ({got[0]['river_us_per_event_median']:.1f} µs)"
        scores = [
            f"{g['score']:.4f} ({g['us_per_event_median']:.1f} µs, {g['cpu_vs_river_median']:.1f}×)"
            for g in got
        ]
        lines.append(
            f"| {learner} | {stream} | {got[0]['metric']} | {river} | "
            + " | ".join(scores)
            + f" | {got[2]['serving']} |"
        )
    return "\n".join(lines)


def write_guide(rows: list[dict[str, Any]]) -> None:
    """Put :func:`render`'s table between the guide's markers."""
    write_between(GUIDE, START, END, render(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat, shorter streams")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # the SVR's solver may stop at max_iter: reported apart
    repeats = 1 if args.quick else 3
    load_before = os.getloadavg()
    print(accel.describe())
    print(f"load average before: {load_before[0]:.2f}")
    rows = []
    for sname, (events, regression) in streams(args.quick).items():
        for lname, (learner, for_regression) in LEARNERS.items():
            if for_regression != regression:
                continue
            scores: dict[str, float] = {}
            seconds: dict[str, list[float]] = {m: [] for m in (*MODELS, "river")}
            ratios: dict[str, list[float]] = {m: [] for m in MODELS}
            serving = {}
            river_name, make_river = river_model(regression)
            for _ in range(repeats):  # every model once per repeat: paired ratios
                river_score, river_cpu = prequential(make_river(), events, regression)
                seconds["river"].append(river_cpu)
                for name, make in makers(learner).items():
                    model = make()
                    score, cpu = prequential(model, events, regression)
                    if scores.setdefault(name, score) != score:
                        raise RuntimeError(f"{lname} {sname} {name}: not deterministic")
                    seconds[name].append(cpu)
                    ratios[name].append(cpu / max(river_cpu, 1e-9))
                    serving[name] = getattr(model, "serving", "")
            river_us = statistics.median(1e6 * s / len(events) for s in seconds["river"])
            for name in MODELS:
                us = [1e6 * s / len(events) for s in seconds[name]]
                row = {
                    "learner": lname,
                    "stream": sname,
                    "events": len(events),
                    "model": name,
                    "metric": "MAE" if regression else "accuracy",
                    "score": scores[name],
                    "us_per_event_median": statistics.median(us),
                    "us_per_event_min": min(us),
                    "us_per_event_max": max(us),
                    "serving": serving[name],
                    "cpu_vs_river_median": statistics.median(ratios[name]),
                    "river_model": river_name,
                    "river_score": river_score,
                    "river_us_per_event_median": river_us,
                }
                rows.append(row)
                print(
                    f"{lname:<17} {sname:<17} {name:<24} {row['score']:.4f} "
                    f"{row['us_per_event_median']:8.1f} µs "
                    f"{row['cpu_vs_river_median']:6.1f}x river ({river_score:.4f}) "
                    f"{row['serving']}",
                    flush=True,
                )
    out = result_document(
        "consolidation_guard",
        args.quick,
        load_before,
        rows,
        repeats=repeats,
        budget=BUDGET,
        every=EVERY,
        guard=GUARD,
        timing="CPU time (time.process_time) of one prequential pass, data in memory",
        OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS"),
    )
    write_results(RESULTS, "consolidation_guard", args.quick, out)
    if not args.quick:
        write_guide(rows)
        print(f"wrote the table in {GUIDE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
