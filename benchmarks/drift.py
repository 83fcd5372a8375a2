"""MMD drift detection per input: false alarms on stationary streams and delay after a shift.

Run: ``python -m benchmarks.drift [--events 100000] [--runs 20] [--quick]``.

For each input the detector accepts — feature vectors (``drift_input="x"``: 2-D standard
normal, shift = the mean moves by 1 sd in both coordinates) and the learner's 0/1 errors
(``drift_input="error"``: Bernoulli(0.1), shift = the error rate jumps to 0.3) — and each window
size, with the default kernel and ``alpha = 0.01``:

* false alarms per 100,000 events on a stationary stream (nominal: ``alpha`` per test, i.e.
  ``alpha * 100000 / window_size``), and the observed rate per test;
* detection delay after a shift at a random point: median and 90th percentile over ``--runs``
  seeded runs, and how many runs detected within 2,000 events.

Prints a table; JSON to ``benchmarks/results/drift.json`` (``drift-quick.json`` for --quick).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import machine_info
from streamk.kernels.measures import MMDDrift

RESULTS = Path(__file__).resolve().parent / "results"
ALPHA = 0.01


def stream(kind: str, n: int, rng: np.random.Generator, shift_at: int | None) -> np.ndarray:
    if kind == "x":
        X = rng.standard_normal((n, 2))
        if shift_at is not None:
            X[shift_at:] += 1.0
        return X
    rate = np.full(n, 0.1)
    if shift_at is not None:
        rate[shift_at:] = 0.3
    return (rng.random(n) < rate).astype(float)[:, None]


def false_alarms(kind: str, window: int, events: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    det = MMDDrift(window_size=window, alpha=ALPHA, seed=seed)
    alarms = 0
    for v in stream(kind, events, rng, None):
        det.update(v if kind == "x" else float(v[0]))
        alarms += det.drift_detected
    return {
        "false_alarms_per_100k": alarms * 100_000 / events,
        "nominal_per_100k": ALPHA * 100_000 / window,
        "rate_per_test": alarms / max(det.n_tests, 1),
        "tests": det.n_tests,
    }


def delays(kind: str, window: int, runs: int, horizon: int = 2000) -> dict[str, Any]:
    out = []
    for r in range(runs):
        rng = np.random.default_rng(1000 + r)
        shift_at = int(rng.integers(5 * window, 10 * window))
        det = MMDDrift(window_size=window, alpha=ALPHA, seed=r)
        delay = None
        for t, v in enumerate(stream(kind, shift_at + horizon, rng, shift_at)):
            det.update(v if kind == "x" else float(v[0]))
            if det.drift_detected and t >= shift_at:
                delay = t - shift_at
                break
        out.append(delay)
    found = [d for d in out if d is not None]
    return {
        "detected": len(found),
        "runs": runs,
        "delay_median": float(np.median(found)) if found else None,
        "delay_p90": float(np.percentile(found, 90)) if found else None,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="20,000 events, 5 runs")
    args = p.parse_args(argv)
    events, runs = (20_000, 5) if args.quick else (args.events, args.runs)
    rows = []
    print(f"{'input':<6} {'window':>6} {'FA/100k':>8} {'nominal':>8} {'FA/test':>8} "
          f"{'detected':>9} {'delay med':>9} {'p90':>6}")  # fmt: skip
    for kind in ("x", "error"):
        for window in (100, 200):
            fa = false_alarms(kind, window, events, seed=7)
            de = delays(kind, window, runs)
            row = {"input": kind, "window": window, **fa, **de}
            rows.append(row)
            med = "-" if de["delay_median"] is None else f"{de['delay_median']:.0f}"
            p90 = "-" if de["delay_p90"] is None else f"{de['delay_p90']:.0f}"
            print(f"{kind:<6} {window:>6} {fa['false_alarms_per_100k']:>8.0f} "
                  f"{fa['nominal_per_100k']:>8.0f} {fa['rate_per_test']:>8.4f} "
                  f"{de['detected']:>4}/{runs:<4} {med:>9} {p90:>6}", flush=True)  # fmt: skip
    out = {"benchmark": "drift", "machine": machine_info(), "alpha": ALPHA, "events": events,
           "rows": rows}  # fmt: skip
    path = RESULTS / ("drift-quick.json" if args.quick else "drift.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
