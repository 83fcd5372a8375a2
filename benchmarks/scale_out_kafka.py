"""Scale-out throughput: 1, 2 and 4 real ``streamk run`` workers in one group on the local broker.

One 8-partition topic holds a d = 20 drifting hyperplane (``synth.Hyperplane(seed=1,
n_features=20, n_drift_features=5, mag_change=0.001, noise_percentage=0.05)``), one message per
event; the events after it are held out. For each ``k`` in (1, 2, 4), interleaved over repeats,
``k`` worker processes (``KernelPerceptron``, RBF ``gamma="auto"``, budget 200, ``scale =
none``, default snapshot interval) join a fresh group and drain the topic; then ``streamk merge
--once`` merges their snapshots from the snapshot topic. Recorded per run:

* each worker's records, events learned (its snapshot's ``n_learned``; they must sum to the
  topic's events) and busy seconds (first record received to last handled, from its
  ``--json`` summary) and the group's rate, ``N / max(busy)`` (the workers join in one
  generation, so their busy spans start together; this excludes process start-up, the group
  join and the idle wait before they stop);
* the merge time (the merger's own ``merge_seconds``) and the merger process's wall time;
* held-out accuracy of each worker, of the merged model and of the one worker of ``k = 1``
  (the single engine that learned the whole stream).

Called from ``python -m benchmarks.scale_out`` (see there); results in
``benchmarks/results/scale_out_throughput.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PARTITIONS = 8
KS = (1, 2, 4)
LEARNER = ["--learner", "perceptron", "--kernel", "rbf", "--budget", "200", "--scale", "none"]
GROUP_TIMINGS = [
    "--max-poll-interval-ms", "3000", "--session-timeout-ms", "3000",
    "--heartbeat-interval-ms", "500",
]  # fmt: skip
ROOT = str(Path(__file__).resolve().parents[1])


def stream(n_train: int, n_test: int) -> tuple[list, list]:
    from river.datasets import synth

    gen = synth.Hyperplane(
        seed=1, n_features=20, n_drift_features=5, mag_change=0.001, noise_percentage=0.05
    )
    rows = [
        ({str(k): float(v) for k, v in x.items()}, bool(y)) for x, y in gen.take(n_train + n_test)
    ]
    return rows[:n_train], rows[n_train:]


def _produce(bootstrap: str, topic: str, train: list) -> None:
    from kafka import KafkaProducer

    from streamk.engine.events import encode_event

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    for i, (x, y) in enumerate(train):
        producer.send(topic, encode_event(x, y=y, id=i), partition=i % PARTITIONS)
    producer.flush()
    producer.close()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "streamk.cli", *args]


def one_run(
    bootstrap: str, topic: str, k: int, tag: str, tmp: Path, test: list, n_events: int
) -> dict:
    """``k`` workers drain the topic in group ``tag``; merge; score on ``test``."""
    from streamk.cli.broker import create_topic
    from streamk.snapshot import SnapshotReader, SnapshotStore

    env = {**os.environ, "PYTHONPATH": ROOT}
    snaps = f"snaps-{tag}"
    create_topic(bootstrap, snaps, partitions=1)
    common = ["--bootstrap-servers", bootstrap, "--topic", topic, "--snapshot-topic", snaps]
    names = [f"w{i}" for i in range(k)]
    procs = {
        name: subprocess.Popen(
            _cli(
                "run",
                *common,
                *LEARNER,
                *GROUP_TIMINGS,
                "--group",
                f"g-{tag}",
                "--model-name",
                name,
                "--snapshot-dir",
                str(tmp / tag / name),
                "--stop-when-idle",
                "4",
                "--poll-timeout",
                "0.2",
                "--json",
            ),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name in names
    }
    workers: dict[str, dict[str, Any]] = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"worker {name} failed: {err[-2000:]}")
        summary = json.loads(out)
        rate = summary["events_per_second"] or 0.0
        workers[name] = {
            "events": summary["records"],
            "busy_seconds": summary["records"] / rate if rate else 0.0,
            "events_per_s": rate,
        }
    models = {n: SnapshotStore(tmp / tag / n).latest(n) for n in names}
    for name, snap in models.items():
        workers[name]["learned"] = 0 if snap is None else int(snap.model.n_learned)
        workers[name]["accuracy"] = _accuracy(snap.model, test) if snap is not None else None
    learned = sum(w["learned"] for w in workers.values())
    row: dict[str, Any] = {
        "k": k,
        "events": n_events,
        # records handed to the workers: more than the events when a rebalance mid-run made a
        # new owner re-read what the old one had polled but not yet snapshotted
        "records_handled": sum(w["events"] for w in workers.values()),
        "learned_total": learned,
        "exactly_once": learned == n_events,
        "group_events_per_s": n_events / max(w["busy_seconds"] for w in workers.values()),
        "sum_of_worker_rates": sum(w["events_per_s"] for w in workers.values()),
        "workers": workers,
    }
    if k > 1:
        t0 = time.perf_counter()
        done = subprocess.run(
            _cli("merge", *common, *LEARNER, "--snapshot-dir", str(tmp / tag / "merger"),
                 "--once", "--json"),
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"merge failed: {done.stderr[-2000:]}")
        last = json.loads(done.stdout)["last"]
        merged = SnapshotReader(bootstrap, snaps).latest("merged", timeout=30)
        row["merge"] = {
            "seconds": last["merge_seconds"],
            "process_wall_seconds": wall,
            "n_union": last["n_union"],
            "n_support": last["n_support"],
            "method": last["method"],
            "accuracy": _accuracy(merged.model, test),
        }
    return row


def _accuracy(model: Any, test: list) -> float:
    return sum(model.predict_one(x) == y for x, y in test) / len(test)


def run(quick: bool, repeats: int) -> dict[str, Any]:
    """Every ``k`` for every repeat, interleaved; medians and min-max per ``k``."""
    from streamk.cli.broker import LocalBroker, create_topic

    n_train, n_test = (12_000, 2_000) if quick else (60_000, 4_000)
    train, test = stream(n_train, n_test)
    runs: dict[int, list[dict]] = {k: [] for k in KS}
    with LocalBroker() as broker, tempfile.TemporaryDirectory() as tmpdir:
        b, tmp = broker.bootstrap_servers, Path(tmpdir)
        create_topic(b, "events", partitions=PARTITIONS)
        _produce(b, "events", train)
        for r in range(repeats):
            for k in KS:
                row = one_run(b, "events", k, f"r{r}k{k}", tmp, test, n_train)
                runs[k].append(row)
                merge = row.get("merge")
                print(
                    f"[{r + 1}/{repeats}] k={k}: {row['group_events_per_s']:>9,.0f} ev/s "
                    f"(learned {[w['learned'] for w in row['workers'].values()]}, "
                    f"records {row['records_handled']}); accuracy "
                    f"workers {[w['accuracy'] for w in row['workers'].values()]}"
                    + (
                        f", merged {merge['accuracy']:.3f} in {merge['seconds']:.3f} s"
                        if merge
                        else ""
                    ),
                    flush=True,
                )
    single = [row["workers"]["w0"]["accuracy"] for row in runs[1]]
    one_rate = statistics.median(row["group_events_per_s"] for row in runs[1])
    table = []
    for k in KS:
        rates = [row["group_events_per_s"] for row in runs[k]]
        entry: dict[str, Any] = {
            "k": k,
            "events_per_s_median": statistics.median(rates),
            "events_per_s_min": min(rates),
            "events_per_s_max": max(rates),
            "speedup_vs_1": statistics.median(rates) / one_rate,
            "runs": runs[k],
        }
        if k > 1:
            merged = [row["merge"]["accuracy"] for row in runs[k]]
            best = [max(w["accuracy"] for w in row["workers"].values()) for row in runs[k]]
            entry["merged_accuracy_median"] = statistics.median(merged)
            entry["merged_minus_best_worker_points"] = [
                100 * (m - bw) for m, bw in zip(merged, best)
            ]
            entry["merged_minus_single_engine_points"] = [
                100 * (m - s) for m, s in zip(merged, single)
            ]
            entry["merge_seconds_median"] = statistics.median(
                row["merge"]["seconds"] for row in runs[k]
            )
        table.append(entry)
    return {
        "events": n_train,
        "held_out": n_test,
        "partitions": PARTITIONS,
        "repeats": repeats,
        "single_engine_accuracy": single,
        "table": table,
    }


def show(result: dict[str, Any]) -> None:
    print(f"\n{'k':>2} {'events/s median [min-max]':>32} {'x vs 1':>7}  merged - best / - single")
    for e in result["table"]:
        rng = f"{e['events_per_s_median']:,.0f} [{e['events_per_s_min']:,.0f}-"
        rng += f"{e['events_per_s_max']:,.0f}]"
        tail = ""
        if "merged_accuracy_median" in e:
            best = statistics.median(e["merged_minus_best_worker_points"])
            one = statistics.median(e["merged_minus_single_engine_points"])
            tail = (
                f"  acc {e['merged_accuracy_median']:.3f}: {best:+.1f} / {one:+.1f} points, "
                f"merge {1000 * e['merge_seconds_median']:.0f} ms"
            )
        print(f"{e['k']:>2} {rng:>32} {e['speedup_vs_1']:>7.2f}{tail}")
    print(f"single engine accuracy {result['single_engine_accuracy']}")
