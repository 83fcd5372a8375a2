"""The engine with snapshots at the default cadence (every 10,000 events), both transports:
what the log's check before each snapshot costs (``Engine._start_check``).

Each repeat runs, interleaved, the engine (test-then-train, budget-100 kernel perceptron,
a file store) over N labelled events on kafka-python and on confluent-kafka, and reports
the rate over the busy span, the snapshot's own time (encode + save + commit), the
process CPU time per event, as :func:`benchmarks.engine.engine_rate` measures them, and
the snapshots written.

Compare two commits back to back by running this file against each clone's code, e.g.::

    cd OLD && PYTHONPATH=$PWD python NEW/benchmarks/snapshot_check.py --repeats 2 \
        --id-calls 0 --results A
    cd NEW && PYTHONPATH=$PWD python -m benchmarks.snapshot_check --repeats 2 --results B

``--no-check`` turns the check off (new code only: no topic id is read, nothing read back);
``--paired`` runs the check on and off alternately in this one process and reports the
median ratios of each pair (less exposed to a shared machine's load than two processes);
``--id-calls N`` times N calls of the source's ``topic_id`` first (the check itself).

The check is one ``topic_id`` per snapshot. At e3fd344 + the id check (session 28; load
average 6.0-6.4 on 2 shared cores), per call: kafka-python 0.60 ms CPU, 0.75 ms wall;
confluent 0.22 ms CPU, 0.31 ms wall (medians over 9 processes of 50 calls); 0.4-0.6% of
the CPU of the 10,000 events between two snapshots. End to end, A/B against e3fd344 (no
running check), 9 rounds in alternating order, 2 runs each (``results/snapshot_check_ab.
json``), medians of 18 runs:

                  e3fd344              id check
  kafka-python    49,756 ev/s          47,100 ev/s   (single runs 35k-78k)
                  14.68 us/ev CPU      14.54 us/ev
  confluent      118,572 ev/s         119,743 ev/s   (single runs 100k-171k)
                   3.87 us/ev CPU       3.57 us/ev

``--paired --repeats 8`` (``results/snapshot_check.json``), check / no check, medians of 8
pairs: kafka-python rate x1.173, CPU per event x0.944; confluent x1.010 and x0.991. At this
load a single run varies by +-20%: neither measure resolves the ~0.5% the call costs.

The previous check, a read-back of one record per partition by a fresh kafka-python
consumer (~13-15 ms CPU) before every snapshot, cost 16% (kafka-python) and 13% (confluent)
of the rate in this benchmark (e4bddca + that check, 5 interleaved repeats, load 3.6-5.7);
it remains the fallback where no topic id can be read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.engine import data, engine_rate, trained_model
from benchmarks.raw_kafka import machine, produce
from streamk.cli.broker import LocalBroker, create_topic
from streamk.engine.events import encode_event

RESULTS = Path(__file__).parent / "results"
TRANSPORTS = ("kafka-python", "confluent")


def _checks(on: bool) -> None:
    """Turn the log's check on (the code's own) or off (new code only): off, no topic id is
    read (no admin client made) and nothing is read before a snapshot."""
    from streamk.engine import loop

    if not hasattr(loop.Engine, "_note_topic_id"):
        raise SystemExit("--no-check and --paired need code with the topic-id check")
    if not _ORIGINAL:
        _ORIGINAL.update(start=loop.Engine._start_check, note=loop.Engine._note_topic_id)
    if on:
        loop.Engine._start_check = _ORIGINAL["start"]  # type: ignore[method-assign]
        loop.Engine._note_topic_id = _ORIGINAL["note"]  # type: ignore[method-assign]
    else:
        loop.Engine._start_check = lambda self: None  # type: ignore[method-assign]
        loop.Engine._note_topic_id = lambda self: None  # type: ignore[method-assign]


_ORIGINAL: dict[str, Any] = {}


def _id_cost(bootstrap: str, topic: str, transport: str, calls: int) -> dict[str, float]:
    """The source's ``topic_id`` (the check before each snapshot), ``calls`` times after
    two warm-up calls: median wall time and process CPU time per call, in ms."""
    if transport == "confluent":
        from streamk.sources.kafka_confluent import ConfluentKafkaSource

        source: Any = ConfluentKafkaSource(bootstrap, topic, partitions=[0], group_id=None)
    else:
        from streamk.sources.kafka import KafkaSource

        source = KafkaSource(bootstrap, topic, partitions=[0])
    try:
        for _ in range(2):
            if source.topic_id() is None:
                raise RuntimeError(f"no topic id for {topic} on {transport}")
        walls, cpu0 = [], time.process_time()
        for _ in range(calls):
            t0 = time.perf_counter()
            source.topic_id()
            walls.append(time.perf_counter() - t0)
        cpu = (time.process_time() - cpu0) / calls
    finally:
        source.close()
    return {"wall_ms_median": statistics.median(walls) * 1e3, "cpu_ms_per_call": cpu * 1e3}


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=os.getcwd()
        )
        return out.stdout.strip()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--snapshot-every", type=int, default=10_000)
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument(
        "--paired", action="store_true", help="alternate check / no check in this process"
    )
    parser.add_argument("--id-calls", type=int, default=200, help="topic_id calls timed")
    parser.add_argument(
        "--results", type=Path, default=RESULTS / "snapshot_check.json", help="JSON written"
    )
    args = parser.parse_args(argv)
    load_start = os.getloadavg()
    if args.no_check:
        _checks(False)
    variants = [True, False] if args.paired else [not args.no_check]
    X, y = data(args.events)
    labelled = [encode_event(row.tolist(), y=bool(lab)) for row, lab in zip(X, y)]
    runs: dict[str, list[dict[str, Any]]] = {}
    with LocalBroker() as broker:
        b = broker.bootstrap_servers
        create_topic(b, "lab", partitions=1)
        produce(b, "lab", labelled)
        engine_rate(b, "lab", 2000, trained_model(100))  # warm-up: imports, caches
        ids = {}
        if not args.no_check and args.id_calls:
            for transport in TRANSPORTS:
                ids[transport] = _id_cost(b, "lab", transport, args.id_calls)
                print(f"{transport:<13} topic_id {ids[transport]}", flush=True)
        for r in range(args.repeats):
            for transport in TRANSPORTS:
                for check in variants if r % 2 == 0 else variants[::-1]:
                    if args.paired:
                        _checks(check)
                    label = transport if check else f"{transport} no-check"
                    with tempfile.TemporaryDirectory() as tmp:
                        out = engine_rate(
                            b,
                            "lab",
                            args.events,
                            trained_model(100),
                            store_dir=tmp,
                            snapshot_every=args.snapshot_every,
                            transport=transport,
                        )
                    runs.setdefault(label, []).append(out)
                    print(
                        f"[{r + 1}/{args.repeats}] {label:<22} {out['rate']:>10,.0f} ev/s  "
                        f"snapshot {out['snapshot_seconds_each'] * 1e3:6.1f} ms  "
                        f"cpu {out['cpu_us']:.2f} us/ev  snapshots {out['snapshots']}",
                        flush=True,
                    )
    rows = []
    for transport, outs in runs.items():
        rates = [o["rate"] for o in outs]
        rows.append(
            {
                "transport": transport,
                "events_per_s_median": statistics.median(rates),
                "events_per_s_min": min(rates),
                "events_per_s_max": max(rates),
                "snapshot_ms_median": statistics.median(
                    o["snapshot_seconds_each"] * 1e3 for o in outs
                ),
                "cpu_us_per_event_median": statistics.median(o["cpu_us"] for o in outs),
                "runs": rates,
            }
        )
        print(
            f"{transport:<13} median {rows[-1]['events_per_s_median']:>10,.0f} ev/s "
            f"({min(rates):,.0f}-{max(rates):,.0f}); snapshot "
            f"{rows[-1]['snapshot_ms_median']:.1f} ms; cpu "
            f"{rows[-1]['cpu_us_per_event_median']:.2f} us/ev"
        )
    paired = {}
    for transport in TRANSPORTS:
        on, off = runs.get(transport), runs.get(f"{transport} no-check")
        if on and off:  # the same repeat's two runs, one after the other
            rate = [a["rate"] / b["rate"] for a, b in zip(on, off)]
            cpu = [a["cpu_us"] / b["cpu_us"] for a, b in zip(on, off)]
            paired[transport] = {
                "rate_ratio_median": statistics.median(rate),
                "cpu_ratio_median": statistics.median(cpu),
                "rate_ratios": rate,
                "cpu_ratios": cpu,
            }
            got = paired[transport]
            print(
                f"{transport:<13} check / no check: rate x{got['rate_ratio_median']:.3f}, "
                f"cpu per event x{got['cpu_ratio_median']:.3f} (medians of {len(rate)} pairs)"
            )
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(
        json.dumps(
            {
                "benchmark": "snapshot_check",
                "command": "python -m benchmarks.snapshot_check "
                + " ".join(sys.argv[1:] if argv is None else argv),
                "code": _commit(),
                "check": not args.no_check,
                "topic_id_cost": ids,
                "events": args.events,
                "repeats": args.repeats,
                "snapshot_every": args.snapshot_every,
                "load_average_start": load_start,
                "load_average": os.getloadavg(),
                "machine": machine(),
                "rows": rows,
                "paired": paired,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
