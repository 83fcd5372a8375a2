"""A stream that interleaves labelled events and events to score, through the real engine.

The engine cuts each batch into runs of one kind; where labelled events and events to score
alternate, every run is one event. ``streamk replay`` (the default model: the kernel
perceptron behind standardisation) learns and scores the same events in three orders:
alternating every event, alternating every 10 events, and grouped (runs of 250: each batch
of 500 is one labelled and one unlabelled run). Each order runs with the engine's
``BLOCK_MIN`` (runs shorter than it go event by event) and with ``BLOCK_MIN = 1`` (every run
through its frames, as before it existed). Rates are the engine's own ``events_per_second``
(busy time, start-up excluded), the median of the repeats, which alternate the two settings.

Run::

    python -m benchmarks.short_runs            # 40,000 events, 3 repeats
    python -m benchmarks.short_runs --quick    # 10,000 events, 1 repeat
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import result_document, write_results
from streamk.engine.runs import BLOCK_MIN

RESULTS = Path(__file__).parent / "results"
ORDERS = {
    "alternating every event": 1,
    "alternating every 10 events": 10,
    "grouped (runs of 250)": 250,
}
_RUN = (
    "import sys, streamk.engine.loop as l, streamk.engine.runs as r\n"
    "r.BLOCK_MIN = l.BLOCK_MIN = int(sys.argv[1])\n"
    "from streamk.cli.main import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def write_log(path: Path, n: int, run_length: int) -> None:
    """``n`` events, labelled and unlabelled in turns of ``run_length``."""
    rng = random.Random(7)
    with open(path, "w") as fh:
        for i in range(n):
            event = {"x": {"a": rng.gauss(0, 1), "b": rng.gauss(0, 1)}, "id": f"e-{i}"}
            if (i // run_length) % 2 == 0:
                event["y"] = event["x"]["a"] + 0.3 * rng.gauss(0, 1) > 0
            fh.write(json.dumps(event) + "\n")


def replay_rate(log: Path, block_min: int, workdir: Path) -> float:
    """The engine's events per second replaying ``log`` with ``BLOCK_MIN = block_min``."""
    snapshots = workdir / f"s-{block_min}-{random.random()}"
    args = ["replay", str(log), "--snapshot-dir", str(snapshots), "--json", "--quiet"]
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(block_min), *args], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return float(json.loads(done.stdout)["events_per_second"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 events, 1 repeat")
    args = parser.parse_args(argv)
    n, repeats = (10_000, 1) if args.quick else (40_000, 3)
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for order, run_length in ORDERS.items():
            log = workdir / f"events-{run_length}.jsonl"
            write_log(log, n, run_length)
            rates: dict[int, list[float]] = {BLOCK_MIN: [], 1: []}
            for _ in range(repeats):
                for block_min in rates:
                    rates[block_min].append(replay_rate(log, block_min, workdir))
            now, before = (statistics.median(rates[b]) for b in (BLOCK_MIN, 1))
            rows.append(
                {
                    "order": order,
                    "events": n,
                    f"events_per_s_block_min_{BLOCK_MIN}": now,
                    "events_per_s_every_run_framed": before,
                    "speed_up": now / before,
                    "repeats": {str(b): r for b, r in rates.items()},
                }
            )
            print(
                f"{order:30s} BLOCK_MIN={BLOCK_MIN}: {now:9,.0f} ev/s   "
                f"every run framed: {before:9,.0f} ev/s   {now / before:5.1f}x",
                flush=True,
            )
    doc = result_document("short_runs", args.quick, load_before, rows, block_min=BLOCK_MIN)
    write_results(RESULTS, "short_runs", args.quick, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
