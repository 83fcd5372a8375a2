"""``streamk learn`` with its defaults on every data set the README lists: the user guide's table.

Each data set is run through the real command line (``python -m streamk.cli learn NAME
--json --quiet``), once with the defaults (the task from the data set, features
standardised on-line) and once with ``--scale none``. Beside the figures stands the
baseline a model must beat, computed plainly here: the majority class so far
(classification; the first event, with nothing seen, is not scored, as for the learners)
or the running mean of the targets (regression; 0 before any). The rows go to
``benchmarks/results/learn_table.json`` and the table between the ``learn-table`` markers
of ``docs/user-guide.md`` is rewritten from them (``tests/test_learn_table.py`` checks the
two agree).

Run::

    python -m benchmarks.learn_table          # every data set (~5 min)
    python -m benchmarks.learn_table --render # only rewrite the guide's table from the JSON
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.common import machine_info, write_between

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "learn_table.json"
GUIDE = ROOT / "docs" / "user-guide.md"
START, END = "<!-- learn-table:start -->", "<!-- learn-table:end -->"

#: the data sets README.md lists for ``streamk learn``, in its order
DATASETS = [
    "Bananas",
    "Phishing",
    "ImageSegments",
    "Shuttle",
    "TrumpApproval",
    "Hyperplane",
    "SEA",
    "Agrawal",
    "Friedman",
]


def run_learn(name: str, *extra: str) -> dict[str, Any]:
    """``streamk learn NAME --json --quiet`` through the real entry point."""
    cmd = [sys.executable, "-m", "streamk.cli", "learn", name, "--json", "--quiet", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout)


def baseline(name: str, task: str) -> float:
    """Majority class so far (accuracy) or running mean (MAE), on the stream ``learn`` reads."""
    from streamk.engine.registry import load_dataset

    if task == "regression":
        total, n, err = 0.0, 0, 0.0
        for _, y in load_dataset(name):
            err += abs(y - (total / n if n else 0.0))
            total += y
            n += 1
        return err / n
    counts: Counter = Counter()
    hits = scored = 0
    for _, y in load_dataset(name):
        if counts:
            hits += counts.most_common(1)[0][0] == y
            scored += 1
        counts[y] += 1
    return hits / scored


def measure() -> list[dict[str, Any]]:
    rows = []
    for name in DATASETS:
        out = run_learn(name)
        raw = run_learn(name, "--scale", "none")
        row = {
            "dataset": name,
            "task": out["task"],
            "learner": out["learner"],
            "events": out["n_events"],
            "metric_name": out["metric_name"],
            "metric": out["metric"],
            "r2": out["extra"].get("R2"),
            "metric_scale_none": raw["metric"],
            "baseline": baseline(name, out["task"]),
            "n_support": out["n_support"],
            "kernel": out["kernel"],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """The markdown table for the user guide (figures only: no timings, so it is reproducible)."""
    lines = [
        "| data set | task | learner | events | figure | R² | with `--scale none` "
        "| baseline | support vectors |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        regression = r["task"] == "regression"
        base = "running mean" if regression else "majority so far"
        r2 = f"{r['r2']:.3f}" if r["r2"] is not None else "—"
        lines.append(
            f"| {r['dataset']} | {r['task']} | `{r['learner']}` | {r['events']:,} "
            f"| {r['metric_name']} {r['metric']:.4f} | {r2} | {r['metric_scale_none']:.4f} "
            f"| {base} {r['baseline']:.4f} | {r['n_support']:,} |"
        )
    return "\n".join(lines)


def write_guide(rows: list[dict[str, Any]], guide: Path = GUIDE) -> None:
    """Put :func:`render`'s table between the guide's markers."""
    write_between(guide, START, END, render(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="only rewrite the guide's table")
    args = parser.parse_args(argv)
    if args.render:
        rows = json.loads(RESULTS.read_text())["rows"]
    else:
        rows = measure()
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        out = {
            "benchmark": "learn_table",
            "command": "python -m benchmarks.learn_table",
            "machine": machine_info(),
            "rows": rows,
        }
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {RESULTS}")
    write_guide(rows)
    print(render(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
