"""Engine throughput over the local broker next to the raw client ceiling, in one run.

Produces N events (``x``: 10 floats, ``y``: a label) as per-event messages and as
blocks of 500 rows, then measures, over interleaved repeats and in the same process:

* the raw ceiling: the client's poll + ``streamk.engine.events.decode`` of every message, with
  the consumer settings and poll size (500) the engine uses, for kafka-python and
  confluent-kafka;
* the engine with a constant model (its own overhead: source records, decode, runs,
  frames, positions, metrics) scoring and test-then-train, on both transports;
* the engine scoring unlabelled events (``predict_many``; a trained budget-100 model)
  and learning labelled events (test-then-train, ``learn_predict_many``);
* both again on block-encoded events;
* the engine scoring and publishing every prediction to a topic, one record per event
  (the default) or one block per run, through kafka-python's and confluent-kafka's
  producers; these rates run until the sink's last record is acknowledged;
* snapshot + commit cost per snapshot, and resident memory before/after a long run.

Every rate is events over the time from the first record received to the last one
handled (the engine's ``busy_seconds``; connection set-up is excluded on both sides).
``cpu_us`` is the process CPU time per event, steadier than wall time on a shared
machine. Ratios are engine / raw ceiling of the same transport and form (medians).
Run::

    python -m benchmarks.engine            # 100k events, 3 repeats
    python -m benchmarks.engine --quick    # 20k events, 1 repeat
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from river import base

from benchmarks.raw_kafka import machine, produce
from streamk import RBF, KernelPerceptron, RemoveOldest
from streamk.cli.broker import LocalBroker, create_topic
from streamk.engine import Engine, EngineConfig
from streamk.engine.events import decode, encode_block, encode_event
from streamk.snapshot import SnapshotStore
from streamk.sources.kafka import DEFAULT_CONSUMER_CONFIG, KafkaSource

RESULTS = Path(__file__).parent / "results"
BLOCK = 500
#: the same fetch settings for the raw ceiling and the engine (kafka-python spelling)
FETCH = {"max_partition_fetch_bytes": 8 << 20, "fetch_max_bytes": 64 << 20}
_RUN = 0


class ConstantModel(base.Classifier):
    """Predicts ``True`` and learns nothing: what is left is the engine's own cost."""

    def learn_one(self, x: dict, y: Any) -> None:
        pass

    def predict_one(self, x: dict) -> bool:
        return True

    def predict_many(self, X: Any) -> Any:
        import pandas as pd

        return pd.Series(np.ones(len(X), dtype=bool))

    def learn_predict_many(self, X: Any, y: Any) -> list[bool]:
        return [True] * len(X)


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


def _group() -> str:
    global _RUN
    _RUN += 1  # a fresh group each run: committed offsets of an earlier run don't apply
    return f"bench-{time.time_ns()}-{_RUN}"


def raw_rate(
    bootstrap: str, topic: str, n_messages: int, transport: str, rows: int = 1
) -> dict[str, Any]:
    """The client's poll + ``decode`` of each message, timed like the engine's busy time."""
    if transport == "confluent":
        import confluent_kafka as ck

        consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": _group(),
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign([ck.TopicPartition(topic, 0, 0)])

        def poll() -> list[bytes]:
            return [m.value() for m in consumer.consume(num_messages=BLOCK, timeout=1.0)]

    else:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, **DEFAULT_CONSUMER_CONFIG, **FETCH, group_id=_group()
        )
        consumer.assign([TopicPartition(topic, 0)])

        def poll() -> list[bytes]:
            got = consumer.poll(timeout_ms=1000, max_records=BLOCK)
            return [m.value for msgs in got.values() for m in msgs]

    seen, first, cpu0 = 0, None, 0.0
    deadline = time.monotonic() + 600
    while seen < n_messages and time.monotonic() < deadline:
        values = poll()
        if values and first is None:
            first, cpu0 = time.perf_counter(), time.process_time()
        for value in values:
            decode(value)
        seen += len(values)
    elapsed, cpu = time.perf_counter() - first, time.process_time() - cpu0
    consumer.close()
    if seen != n_messages:
        raise RuntimeError(f"expected {n_messages} records from {topic}, got {seen}")
    events = seen * rows
    return {"rate": events / elapsed, "cpu_us": cpu / events * 1e6}


def engine_rate(
    bootstrap: str,
    topic: str,
    n_events: int,
    model,
    store_dir=None,
    snapshot_every=None,
    transport: str = "kafka-python",
    predictions: Any = None,
) -> dict[str, Any]:
    if transport == "confluent":
        from streamk.sources.kafka_confluent import ConfluentKafkaSource

        source = ConfluentKafkaSource(bootstrap, topic, partitions=[0], group_id=_group())
    else:
        source = KafkaSource(
            bootstrap, topic, partitions=[0], group_id=_group(), consumer_config=FETCH
        )
    store = SnapshotStore(store_dir) if store_dir is not None else None
    engine = Engine(
        source,
        lambda: model,
        store=store,
        predictions=predictions,
        config=EngineConfig(
            max_records=BLOCK,
            snapshot_every=snapshot_every,
            snapshot_seconds=None,
            stop_when_idle=3.0,
            max_events=n_events,
        ),
    )
    span = _busy_span(source, engine, predictions)
    result = engine.run()
    m = result.metrics
    if result.records != n_events:
        raise RuntimeError(f"engine saw {result.records} of {n_events} records from {topic}")
    events = result.learned + result.scored  # rows: a block record carries many events
    # with a sink, until its last record is acknowledged (the shutdown flush)
    seconds = span["wall"][1] - span["wall"][0] if predictions is not None else None
    return {
        "rate": events / (seconds or result.busy_seconds),
        "cpu_us": (span["cpu"][1] - span["cpu"][0]) / events * 1e6,
        "records": result.records,
        "events": events,
        "snapshots": m["snapshots_written"],
        "snapshot_seconds_each": (
            m["snapshot_seconds_total"] / m["snapshots_written"] if m["snapshots_written"] else None
        ),
    }


def _busy_span(source: Any, engine: Engine, sink: Any = None) -> dict[str, list[float]]:
    """Note process CPU time and wall time over the engine's busy span, from the first
    record received to the end of the last batch handled, or with a ``sink`` to the end
    of its last flush: ``{"cpu": [start, end], "wall": [start, end]}``."""
    span = {"cpu": [0.0, 0.0], "wall": [0.0, 0.0]}
    poll, process = source.poll, engine._process

    def mark(end: int) -> None:
        span["cpu"][end], span["wall"][end] = time.process_time(), time.perf_counter()

    def timed_poll(max_records: int, timeout: float) -> list[Any]:
        batch = poll(max_records, timeout)
        if batch and not span["cpu"][0]:
            mark(0)
        return batch

    def timed_process(batch: list[Any]) -> None:
        process(batch)
        mark(1)

    source.poll, engine._process = timed_poll, timed_process
    if sink is not None:
        flush = sink.flush

        def timed_flush() -> None:
            flush()
            mark(1)

        sink.flush = timed_flush
    return span


def publish_rate(
    bootstrap: str, n_events: int, budget: int, transport: str, layout: str
) -> dict[str, Any]:
    """Score unlabelled events and publish each prediction (or each run, as a block) to a
    fresh topic through the transport's producer."""
    from streamk.sinks import ConfluentPredictionSink, KafkaPredictionSink

    global _RUN
    _RUN += 1
    topic = f"predictions-{_RUN}"
    create_topic(bootstrap, topic, partitions=1)
    kind = ConfluentPredictionSink if transport == "confluent" else KafkaPredictionSink
    sink = kind(bootstrap, topic, layout=layout)
    sink.write(None, id="warm-up")  # connection, metadata and producer id set-up, as for
    sink.flush()  # the consumers, is not part of the measured span
    return engine_rate(
        bootstrap, "unl", n_events, trained_model(budget), transport=transport, predictions=sink
    )


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
    nb, k, cf = len(blocks_lab), args.budget, "confluent"
    # name -> (measurement, the raw ceiling it is compared with: same transport and topic)
    raw_kl, raw_ku = "raw: kafka-python poll + decode, labelled", "raw: kafka-python, unlabelled"
    raw_cl, raw_cu = "raw: confluent poll + decode, labelled", "raw: confluent, unlabelled"
    raw_b = "raw: kafka-python poll + decode, blocks (rows/s)"
    cases: dict[str, tuple[Callable[[str], dict[str, Any]], str | None]] = {
        raw_kl: (lambda b: raw_rate(b, "lab", n, "kp"), None),
        raw_ku: (lambda b: raw_rate(b, "unl", n, "kp"), None),
        raw_cl: (lambda b: raw_rate(b, "lab", n, cf), None),
        raw_cu: (lambda b: raw_rate(b, "unl", n, cf), None),
        raw_b: (lambda b: raw_rate(b, "blab", nb, "kp", BLOCK), None),
        "engine overhead: score, constant model": (
            lambda b: engine_rate(b, "unl", n, ConstantModel()),
            raw_ku,
        ),
        "engine overhead: test-then-train, constant model": (
            lambda b: engine_rate(b, "lab", n, ConstantModel()),
            raw_kl,
        ),
        "engine overhead: score, constant model, confluent": (
            lambda b: engine_rate(b, "unl", n, ConstantModel(), transport=cf),
            raw_cu,
        ),
        "engine overhead: test-then-train, constant model, confluent": (
            lambda b: engine_rate(b, "lab", n, ConstantModel(), transport=cf),
            raw_cl,
        ),
        "engine overhead: score, blocks, constant model": (
            lambda b: engine_rate(b, "bunl", nb, ConstantModel()),
            raw_b,
        ),
        f"engine: score (budget {k})": (
            lambda b: engine_rate(b, "unl", n, trained_model(k)),
            raw_ku,
        ),
        f"engine: test-then-train (budget {k})": (
            lambda b: engine_rate(b, "lab", n, trained_model(k)),
            raw_kl,
        ),
        f"engine: score (budget {k}), confluent": (
            lambda b: engine_rate(b, "unl", n, trained_model(k), transport=cf),
            raw_cu,
        ),
        f"engine: test-then-train (budget {k}), confluent": (
            lambda b: engine_rate(b, "lab", n, trained_model(k), transport=cf),
            raw_cl,
        ),
        f"engine: score, blocks (budget {k})": (
            lambda b: engine_rate(b, "bunl", nb, trained_model(k)),
            raw_b,
        ),
        f"engine: test-then-train, blocks (budget {k})": (
            lambda b: engine_rate(b, "blab", nb, trained_model(k)),
            raw_b,
        ),
        f"engine: score (budget {k}) + publish predictions (kafka-python)": (
            lambda b: publish_rate(b, n, k, "kafka-python", "record"),
            raw_ku,
        ),
        f"engine: score (budget {k}) + publish prediction blocks (kafka-python)": (
            lambda b: publish_rate(b, n, k, "kafka-python", "block"),
            raw_ku,
        ),
        f"engine: score (budget {k}) + publish predictions, confluent": (
            lambda b: publish_rate(b, n, k, cf, "record"),
            raw_cu,
        ),
        f"engine: score (budget {k}) + publish prediction blocks, confluent": (
            lambda b: publish_rate(b, n, k, cf, "block"),
            raw_cu,
        ),
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
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
        engine_rate(b, "lab", min(n, 2000), ConstantModel())  # warm-up: imports, caches
        for r in range(repeats):  # interleaved, so machine noise hits every case alike
            for name, (fn, _) in cases.items():
                runs[name].append(fn(b))
                print(f"[{r + 1}/{repeats}] {name:<70} {runs[name][-1]['rate']:>12,.0f} ev/s")
        for name, (_, ref) in cases.items():
            rates = [o["rate"] for o in runs[name]]
            cpu = statistics.median(o["cpu_us"] for o in runs[name])
            rows.append(
                {
                    "case": name,
                    "events": n,
                    "events_per_s_median": statistics.median(rates),
                    "events_per_s_min": min(rates),
                    "events_per_s_max": max(rates),
                    "cpu_us_per_event_median": cpu,
                    "compared_with": ref,
                    "runs": rates,
                }
            )
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            before = rss_mib()
            out = engine_rate(
                b, "lab", n, trained_model(k), store_dir=tmp, snapshot_every=max(n // 10, 1)
            )
            rows.append(
                {
                    "case": "engine with snapshots every n/10",
                    "events": n,
                    "events_per_s_median": out["rate"],
                    "compared_with": raw_kl,
                    **out,
                    "max_rss_mib_before": before,
                    "max_rss_mib_after": rss_mib(),
                }
            )
            print(
                f"snapshot + commit: {out['snapshot_seconds_each'] * 1e3:.1f} ms each over "
                f"{out['snapshots']:.0f} snapshots; max RSS {before:.0f} -> {rss_mib():.0f} MiB"
            )
    by_name = {r["case"]: r for r in rows}
    print(f"\n{'case':<70} {'ev/s':>11} {'range':>21} {'cpu us/ev':>9} {'/ raw':>6}")
    for r in rows:
        ref = r["compared_with"]
        if ref is not None:
            r["ratio_vs_raw"] = r["events_per_s_median"] / by_name[ref]["events_per_s_median"]
            r["cpu_ratio_vs_raw"] = by_name[ref]["cpu_us_per_event_median"] / r.get(
                "cpu_us_per_event_median", r.get("cpu_us")
            )
        spread = f"{r.get('events_per_s_min', 0):,.0f}-{r.get('events_per_s_max', 0):,.0f}"
        print(
            f"{r['case']:<70} {r['events_per_s_median']:>11,.0f} {spread:>21} "
            f"{r.get('cpu_us_per_event_median', r.get('cpu_us')):>9.2f} "
            f"{r.get('ratio_vs_raw', 1.0):>6.2f}"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("engine_quick.json" if args.quick else "engine.json")
    path.write_text(
        json.dumps(
            {
                "benchmark": "engine",
                "command": "python -m benchmarks.engine " + " ".join(argv or []),
                "events": n,
                "repeats": repeats,
                "block_rows": BLOCK,
                "fetch_config": FETCH,
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
