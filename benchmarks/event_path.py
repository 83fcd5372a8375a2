"""Per-event cost of ``learn_one`` / ``predict_one``: the compiled path, the NumPy path, river.

Each learner learns a stream held in memory as dicts, one event at a time, in three
protocols: ``learn_one`` alone, and test-then-train (``predict_one``, or
``predict_proba_one``, then ``learn_one``).
River's linear ``Perceptron`` runs the same events in the same repeat, so the ratio is
paired; each row is the median (min-max) over repeats of CPU time. "NumPy path" is the
same learner with its compiled per-event path switched off (``model._event = None``),
i.e. what ``learn_one`` cost before ``streamk/learners/_event.pyx``. In test-then-train
the compiled ``learn_one`` takes the kernel row (or the float32 hints) ``predict_one`` has
just computed for the same event, so the protocol computes one row per event, not two.

Run::

    python -m benchmarks.event_path            # 3 repeats, 20,000 synthetic events
    python -m benchmarks.event_path --quick    # 1 repeat, 5,000 synthetic events
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from river import datasets, linear_model
from river.datasets import synth

from benchmarks.common import paired_rates, result_document, write_results
from streamk import KernelAdatron, KernelPerceptron, MarginPerceptron, accel
from streamk.learners import eventpass

RESULTS = Path(__file__).parent / "results"
BUDGET = 200
#: protocol -> what each event is asked before ``learn_one`` (river's progressive_val_score
#: asks predict_proba_one for metrics on probabilities: ROC AUC, log loss)
PROTOCOLS = {
    "learn_one": None,
    "test-then-train": "predict_one",
    "test-then-train, proba": "predict_proba_one",
}


def streams(quick: bool) -> dict[str, list[tuple[dict, Any]]]:
    n = 5_000 if quick else 20_000
    return {
        "Bananas": list(datasets.Bananas()),
        "Phishing": list(datasets.Phishing()),
        f"Hyperplane(d=50, n={n})": list(synth.Hyperplane(seed=7, n_features=50).take(n)),
    }


def models() -> dict[str, Callable[[], Any]]:
    def numpy_path(make: Callable[[], Any]) -> Callable[[], Any]:
        def build() -> Any:
            m = make()
            m._event = None
            return m

        return build

    kp = lambda: KernelPerceptron(budget=BUDGET)  # noqa: E731
    mp = lambda: MarginPerceptron(budget=BUDGET)  # noqa: E731
    ka = lambda: KernelAdatron(budget=BUDGET)  # noqa: E731
    return {
        "river linear_model.Perceptron": linear_model.Perceptron,
        f"KernelPerceptron(budget={BUDGET})": kp,
        f"KernelPerceptron(budget={BUDGET}), NumPy path": numpy_path(kp),
        f"MarginPerceptron(budget={BUDGET})": mp,
        f"MarginPerceptron(budget={BUDGET}), NumPy path": numpy_path(mp),
        f"KernelAdatron(budget={BUDGET})": ka,
        f"KernelAdatron(budget={BUDGET}), NumPy path": numpy_path(ka),
    }


def rate(make: Callable[[], Any], events: list[tuple[dict, Any]], ask: str | None) -> float:
    """Events per CPU second of one pass over ``events``: ``learn_one`` alone, or after
    ``ask`` (``"predict_one"`` or ``"predict_proba_one"``) of the same event."""
    model = make()
    learn = model.learn_one
    t0 = time.process_time()
    if ask:
        guess = getattr(model, ask)
        for x, y in events:
            guess(x)
            learn(x, y)
    else:
        for x, y in events:
            learn(x, y)
    return len(events) / max(time.process_time() - t0, 1e-9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat, shorter synthetic stream")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else 3
    load_before = os.getloadavg()
    print(f"{accel.describe()}; compiled per-event path: {eventpass.available()}")
    print(f"load average before: {load_before[0]:.2f}")
    rows = []
    print(
        f"{'stream':<24} {'protocol':<23} {'model':<42} {'ev/s':>10} {'range':>19} {'x river':>8}"
    )
    for sname, events in streams(args.quick).items():
        for protocol, ask in PROTOCOLS.items():
            samples: dict[str, list[float]] = {m: [] for m in models()}
            ratios: dict[str, list[float]] = {m: [] for m in models()}
            for _ in range(repeats):  # every model once per repeat: paired ratios
                got = {m: rate(make, events, ask) for m, make in models().items()}
                base = got["river linear_model.Perceptron"]
                for m, r in got.items():
                    samples[m].append(r)
                    ratios[m].append(r / base)
            for m, s in samples.items():
                row = {
                    "stream": sname,
                    "protocol": protocol,
                    "model": m,
                    **paired_rates(s, ratios[m]),
                }
                rows.append(row)
                span = f"{min(s):,.0f}-{max(s):,.0f}"
                print(
                    f"{sname:<24} {protocol:<23} {m:<42} {row['events_per_s_median']:>10,.0f} "
                    f"{span:>19} {row['ratio_vs_river_median']:>8.2f}",
                    flush=True,
                )
    out = result_document(
        "event_path",
        args.quick,
        load_before,
        rows,
        repeats=repeats,
        budget=BUDGET,
        timing="CPU time (time.process_time) of one pass, data in memory as dicts",
        compiled_event_path=eventpass.available(),
    )
    write_results(RESULTS, "event_path", args.quick, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
