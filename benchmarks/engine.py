"""Engine throughput over the local broker next to the raw client ceiling, in one run.

Produces N events (``x``: 10 floats, ``y``: a label) as per-event messages and as
blocks of 500 rows, then measures, over repeats and in the same process:

* the raw ceiling: kafka-python poll + ``streamk.events.decode`` of every message;
* the engine scoring unlabelled events (``predict_many``; a trained model);
* the engine learning labelled events (test-then-train, ``learn_many``);
* both again on block-encoded events;
* snapshot + commit cost per snapshot, and resident memory before/after a long run.

Ratios are engine / raw ceiling (medians). Run::

    python -m benchmarks.engine            # 100k events, 3 repeats (~5 min)
    python -m benchmarks.engine --quick    # 20k events, 1 repeat
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.raw_kafka import consume, machine, produce
from streamk import RBF, KernelPerceptron, RemoveOldest
from streamk.broker import LocalBroker, create_topic
from streamk.engine import Engine, EngineConfig
from streamk.events import decode, encode_block, encode_event
from streamk.snapshot import SnapshotStore
from streamk.sources.kafka import KafkaSource

RESULTS = Path(__file__).parent / "results"
BLOCK = 500
_RUN = 0


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 10))
    y = X[:, 0] + 0.5 * np.sin(3 * X[:, 1]) > 0
    return X, y


def trained_model(budget: int) -> KernelPerceptron:
    X, y = data(5000, seed=1)
    model = KernelPerceptron(kernel=RBF(0.1), budget=RemoveOldest(budget))
    model.learn_many(X, y.tolist())
    return model


def engine_rate(
    bootstrap: str, topic: str, n_events: int, model, store_dir=None, snapshot_every=None
) -> dict[str, Any]:
    global _RUN
    _RUN += 1  # a fresh group each run: committed offsets of an earlier run don't apply
    source = KafkaSource(bootstrap, topic, partitions=[0], group_id=f"bench-{_RUN}")
    store = SnapshotStore(store_dir) if store_dir is not None else None
    engine = Engine(
        source,
        lambda: model,
        store=store,
        config=EngineConfig(
            max_records=BLOCK,
            snapshot_every=snapshot_every,
            snapshot_seconds=None,
            stop_when_idle=3.0,
            max_events=n_events,
        ),
    )
    result = engine.run()
    source.close()
    m = result.metrics
    if result.records != n_events:
        raise RuntimeError(f"engine saw {result.records} of {n_events} records from {topic}")
    events = result.learned + result.scored  # rows: a block record carries many events
    return {
        "rate": events / result.busy_seconds,
        "records": result.records,
        "events": events,
        "snapshots": m["snapshots_written"],
        "snapshot_seconds_each": (
            m["snapshot_seconds_total"] / m["snapshots_written"] if m["snapshots_written"] else None
        ),
    }


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=int, default=100)
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.events
    repeats = 1 if args.quick else args.repeats
    X, y = data(n)
    labelled = [encode_event(row.tolist(), y=bool(lab)) for row, lab in zip(X, y)]
    unlabelled = [encode_event(row.tolist(), id=i) for i, row in enumerate(X)]
    blocks_lab = [encode_block(X[i : i + BLOCK], y[i : i + BLOCK]) for i in range(0, n, BLOCK)]
    blocks_unl = [encode_block(X[i : i + BLOCK]) for i in range(0, n, BLOCK)]
    rows: list[dict[str, Any]] = []
    with LocalBroker() as broker:
        b = broker.bootstrap_servers
        for topic, payloads in (
            ("lab", labelled),
            ("unl", unlabelled),
            ("blab", blocks_lab),
            ("bunl", blocks_unl),
        ):
            create_topic(b, topic, partitions=1)
            produce(b, topic, payloads)

        def measure(name: str, fn, events: int) -> None:
            rates, extra = [], {}
            for _ in range(repeats):
                out = fn()
                rates.append(out["rate"] if isinstance(out, dict) else out)
                extra = out if isinstance(out, dict) else {}
            rows.append(
                {
                    "case": name,
                    "events": events,
                    "events_per_s_median": statistics.median(rates),
                    "events_per_s_min": min(rates),
                    "events_per_s_max": max(rates),
                    **{k: v for k, v in extra.items() if k != "rate"},
                }
            )
            print(
                f"{name:<58} {statistics.median(rates):>12,.0f} ev/s "
                f"({min(rates):,.0f}-{max(rates):,.0f})",
                flush=True,
            )

        measure(
            "raw: kafka-python poll + events.decode", lambda: n / consume(b, "lab", n, decode), n
        )
        measure(
            "raw: poll + decode, blocks of 500 (rows/s)",
            lambda: n / consume(b, "blab", len(blocks_lab), decode),
            n,
        )
        measure(
            f"engine: score unlabelled (budget {args.budget})",
            lambda: engine_rate(b, "unl", n, trained_model(args.budget)),
            n,
        )
        measure(
            f"engine: test-then-train labelled (budget {args.budget})",
            lambda: engine_rate(b, "lab", n, trained_model(args.budget)),
            n,
        )
        measure(
            f"engine: score unlabelled, blocks (budget {args.budget})",
            lambda: engine_rate(b, "bunl", len(blocks_unl), trained_model(args.budget)),
            n,
        )
        measure(
            f"engine: test-then-train, blocks (budget {args.budget})",
            lambda: engine_rate(b, "blab", len(blocks_lab), trained_model(args.budget)),
            n,
        )
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            before = rss_mib()
            out = engine_rate(
                b,
                "lab",
                n,
                trained_model(args.budget),
                store_dir=tmp,
                snapshot_every=max(n // 10, 1),
            )
            rows.append(
                {
                    "case": "engine with snapshots every n/10",
                    "events": n,
                    "events_per_s_median": out["rate"],
                    **out,
                    "max_rss_mib_before": before,
                    "max_rss_mib_after": rss_mib(),
                }
            )
            print(
                f"snapshot + commit: {out['snapshot_seconds_each'] * 1e3:.1f} ms each over "
                f"{out['snapshots']:.0f} snapshots; max RSS {before:.0f} -> {rss_mib():.0f} MiB"
            )
    raw = rows[0]["events_per_s_median"]
    raw_block = rows[1]["events_per_s_median"]
    print(f"\n{'case':<58} {'ev/s':>12} {'/ raw':>7}")
    for r in rows:
        ref = raw_block if "blocks" in r["case"] else raw
        r["ratio_vs_raw"] = r["events_per_s_median"] / ref
        print(f"{r['case']:<58} {r['events_per_s_median']:>12,.0f} {r['ratio_vs_raw']:>7.2f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("engine_quick.json" if args.quick else "engine.json")
    path.write_text(
        json.dumps(
            {
                "benchmark": "engine",
                "events": n,
                "repeats": repeats,
                "machine": machine(),
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
