"""Why ``KernelAdatron`` makes no resweeps by default: accuracy and speed of ``resweeps=0``
against ``resweeps=1`` on the online grid's classification streams.

``python -m benchmarks.adatron_default`` runs prequential test-then-train
(``predict_one`` then ``learn_one``, RBF ``gamma="auto"``, ``C=inf``) over each stream's
3,000 events (Phishing: its 1,250), at B = 200 (``RemoveOldest``) and unbounded, and
writes ``benchmarks/results/adatron_default.json``: the accuracy of each, and the events/s
of the whole loop (CPU time, median of the repeats). docs/user-guide.md quotes it
(tests/test_readme_figures.py holds the quote to the file).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.common import machine_info
from benchmarks.online_grid import streams
from streamk import KernelAdatron, RemoveOldest

RESULTS = Path(__file__).parent / "results" / "adatron_default.json"
STREAMS = ("Bananas", "Phishing", "Synth50")
BUDGETS: tuple[int | None, ...] = (200, None)


def prequential(
    data: list[tuple[dict, Any]], resweeps: int, budget: int | None
) -> tuple[float, float]:
    """(accuracy, CPU seconds) of one test-then-train pass on a fresh model."""
    model = KernelAdatron(
        resweeps=resweeps, budget=None if budget is None else RemoveOldest(budget)
    )
    hits = 0
    start = time.process_time()
    for x, y in data:
        hits += model.predict_one(x) == y
        model.learn_one(x, y)
    return hits / len(data), time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    data = streams(quick=False)
    rows = []
    for name in STREAMS:
        events = data[name][1]
        for budget in BUDGETS:
            row: dict[str, Any] = {"stream": name, "budget": budget or "-", "events": len(events)}
            for resweeps in (0, 1):
                runs = [prequential(events, resweeps, budget) for _ in range(args.repeats)]
                seconds = statistics.median(t for _, t in runs)
                row[f"accuracy_resweeps_{resweeps}"] = runs[0][0]
                row[f"ev_s_resweeps_{resweeps}"] = len(events) / seconds
            row["speedup"] = row["ev_s_resweeps_0"] / row["ev_s_resweeps_1"]
            row["accuracy_gain"] = row["accuracy_resweeps_0"] - row["accuracy_resweeps_1"]
            rows.append(row)
            print(
                f"{name:9s} B={row['budget']!s:4s} accuracy {row['accuracy_resweeps_0']:.3f} vs "
                f"{row['accuracy_resweeps_1']:.3f}  events/s {row['ev_s_resweeps_0']:,.0f} vs "
                f"{row['ev_s_resweeps_1']:,.0f} ({row['speedup']:.0f}x)",
                flush=True,
            )
    doc = {
        "benchmark": "adatron_default",
        "command": "python -m benchmarks.adatron_default",
        "repeats": args.repeats,
        "machine": machine_info(),
        "rows": rows,
    }
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
