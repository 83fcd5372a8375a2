"""What on-line standardisation costs: ``scale = "standard"``, the engine's and ``streamk
learn``'s default for a classifier or regressor.

The kernel perceptron (budget 200) learns each stream test-then-train twice: in blocks of
500 rows (``learn_predict_many`` on a DataFrame, what the engine and ``streamk learn
--batch-size`` call) and one event at a time (``predict_one`` then ``learn_one`` on dicts).
Four models: the bare learner; the learner behind :func:`streamk.learners.scaling.
standard_scaled` (a block standardised in one compiled pass, its rows handed to the
learner's compiled per-event core two at a time: the event before and after it moves the
statistics); the same wrapper standardising in Python (the compiled block pass switched
off, as on an install without a compiler); and river's ``StandardScaler() |
Perceptron()`` one event at a time, the reference every ratio is taken against, in the same
repeat. Each row: the median (min-max) over repeats of CPU time.

Run::

    python -m benchmarks.scaled            # 3 repeats, 20,000 synthetic events
    python -m benchmarks.scaled --quick    # 1 repeat, 5,000 synthetic events
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from river import datasets, linear_model, preprocessing
from river.datasets import synth

from benchmarks.common import paired_rates, result_document, write_between, write_results
from streamk import KernelPerceptron, accel
from streamk.learners.scaling import standard_scaled
from streamk.learners.standardizer import FeatureStandardizer

RESULTS = Path(__file__).parent / "results"
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user-guide.md"
START, END = "<!-- scaled-table:start -->", "<!-- scaled-table:end -->"
BUDGET = 200
BLOCK = 500
RIVER = "river StandardScaler | Perceptron, per event"


def streams(quick: bool) -> dict[str, list[tuple[dict, Any]]]:
    n = 5_000 if quick else 20_000
    return {
        "Bananas (d=2)": list(datasets.Bananas()),
        "Phishing (d=9)": list(datasets.Phishing()),
        f"Hyperplane(d=50, n={n})": list(synth.Hyperplane(seed=7, n_features=50).take(n)),
    }


class _PythonStandardizer(FeatureStandardizer):
    """The statistics without the compiled block pass (an install without a compiler)."""

    def block(self, names: list[Any], values: Any, learn: bool) -> None:
        return None


def _python_scaled() -> Any:
    model = standard_scaled(KernelPerceptron(budget=BUDGET))
    model.scaler_ = _PythonStandardizer()
    return model


def models() -> dict[str, Callable[[], Any]]:
    return {
        RIVER: lambda: preprocessing.StandardScaler() | linear_model.Perceptron(),
        f"KernelPerceptron(budget={BUDGET}), unscaled": lambda: KernelPerceptron(budget=BUDGET),
        "standard_scaled(same)": lambda: standard_scaled(KernelPerceptron(budget=BUDGET)),
        "standard_scaled(same), Python standardisation": _python_scaled,
    }


def per_event(make: Callable[[], Any], events: list[tuple[dict, Any]]) -> float:
    """Events per CPU second: ``predict_one`` then ``learn_one`` of each event."""
    model = make()
    predict, learn = model.predict_one, model.learn_one
    t0 = time.process_time()
    for x, y in events:
        predict(x)
        learn(x, y)
    return len(events) / max(time.process_time() - t0, 1e-9)


def blocks(make: Callable[[], Any], frames: list[tuple[pd.DataFrame, list]]) -> float | None:
    """Events per CPU second: ``learn_predict_many`` of each block (``None`` for river's
    pipeline, which has no such method)."""
    model = make()
    step = getattr(model, "learn_predict_many", None)
    if step is None:
        return None
    n = sum(len(ys) for _, ys in frames)
    t0 = time.process_time()
    for X, ys in frames:
        step(X, ys)
    return n / max(time.process_time() - t0, 1e-9)


def _frames(events: list[tuple[dict, Any]]) -> list[tuple[pd.DataFrame, list]]:
    return [
        (pd.DataFrame([x for x, _ in events[s : s + BLOCK]]), [y for _, y in events[s : s + BLOCK]])
        for s in range(0, len(events), BLOCK)
    ]


#: the guide's columns: (protocol, model) of each, after the stream
COLUMNS = (
    ("per event", RIVER, "river `StandardScaler \\| Perceptron`, per event"),
    (f"blocks of {BLOCK}", f"KernelPerceptron(budget={BUDGET}), unscaled", "unscaled, blocks"),
    (f"blocks of {BLOCK}", "standard_scaled(same)", "`standard_scaled`, blocks"),
    (
        f"blocks of {BLOCK}",
        "standard_scaled(same), Python standardisation",
        "`standard_scaled`, blocks, Python standardisation",
    ),
    ("per event", "standard_scaled(same)", "`standard_scaled`, per event"),
)


def render(rows: list[dict[str, Any]]) -> str:
    """The user guide's table (µs an event, the median rate's inverse) of ``rows``."""
    cell = {(r["stream"], r["protocol"], r["model"]): r["events_per_s_median"] for r in rows}
    head = "| stream | " + " | ".join(c[2] for c in COLUMNS) + " |"
    lines = [head, "|---|" + "---:|" * len(COLUMNS)]
    for stream in dict.fromkeys(r["stream"] for r in rows):
        us = [f"{1e6 / cell[(stream, p, m)]:.2f}" for p, m, _ in COLUMNS]
        lines.append(f"| {stream} | " + " | ".join(us) + " |")
    return "\n".join(lines)


def write_guide(rows: list[dict[str, Any]]) -> None:
    """Put :func:`render`'s table between the guide's markers."""
    write_between(GUIDE, START, END, render(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat, shorter synthetic stream")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else 3
    load_before = os.getloadavg()
    print(accel.describe())
    print(f"load average before: {load_before[0]:.2f}")
    print(f"{'stream':<26} {'protocol':<22} {'model':<46} {'ev/s':>10} {'x river':>8}")
    rows = []
    for sname, events in streams(args.quick).items():
        frames = _frames(events)
        for protocol, run in (
            (f"blocks of {BLOCK}", lambda m, f=frames: blocks(m, f)),
            ("per event", lambda m, e=events: per_event(m, e)),
        ):
            samples: dict[str, list[float]] = {m: [] for m in models()}
            ratios: dict[str, list[float]] = {m: [] for m in models()}
            for _ in range(repeats):  # every model once per repeat: paired ratios
                base = per_event(models()[RIVER], events)
                for m, make in models().items():
                    r = base if m == RIVER else run(make)
                    if r is not None:
                        samples[m].append(r)
                        ratios[m].append(r / base)
            for m, s in samples.items():
                if not s:
                    continue
                row = {
                    "stream": sname,
                    "protocol": protocol,
                    "model": m,
                    **paired_rates(s, ratios[m]),
                }
                rows.append(row)
                print(
                    f"{sname:<26} {protocol:<22} {m:<46} {row['events_per_s_median']:>10,.0f} "
                    f"{row['ratio_vs_river_median']:>8.2f}",
                    flush=True,
                )
    out = result_document(
        "scaled",
        args.quick,
        load_before,
        rows,
        repeats=repeats,
        budget=BUDGET,
        block=BLOCK,
        timing="CPU time (time.process_time) of one pass, data in memory",
    )
    write_results(RESULTS, "scaled", args.quick, out)
    if not args.quick:
        write_guide(rows)
        print(f"wrote the table in {GUIDE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
