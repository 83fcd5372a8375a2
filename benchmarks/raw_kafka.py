"""Raw client ceiling: how many events/s kafka-python can hand us, with and without decoding.

Run: ``python -m benchmarks.raw_kafka`` (starts a local tansu broker; ``--bootstrap``
uses an existing one). Produces N small msgpack events (``x``: 10 floats, ``y``: int)
and the same rows as blocks, then times in the same run, over repeats, a manual-
assignment consumer that (a) only polls, (b) polls and ``msgpack.unpackb``-s each
value, (c) polls and runs ``streamk.engine.events.decode`` (full validation), (d) polls
blocks and decodes them (rows/s). Records are counted, never end offsets (tansu 0.6
reports them wrongly). Prints a table; writes ``benchmarks/results/raw_kafka.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kafka
import msgpack
import numpy as np
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from benchmarks.common import machine_info
from streamk.cli.broker import LocalBroker, create_topic
from streamk.engine.events import decode, encode_block, encode_event

RESULTS = Path(__file__).resolve().parent / "results" / "raw_kafka.json"
CONSUMER_CONFIG: dict[str, Any] = {
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    "max_poll_records": 5000,
    "max_partition_fetch_bytes": 8 << 20,
    "fetch_max_bytes": 64 << 20,
}


def machine() -> dict[str, Any]:
    """The shared machine record plus the Kafka client, checksum and broker versions."""
    try:
        import crc32c  # noqa: F401

        has_crc32c = True
    except ImportError:
        has_crc32c = False
    try:
        from streamk.cli.broker import find_tansu

        tansu = subprocess.run(
            [str(find_tansu()), "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except Exception:
        tansu = "unknown"
    return {
        **machine_info(),
        "kafka_python": kafka.__version__,
        "crc32c": has_crc32c,
        "msgpack": ".".join(map(str, msgpack.version)),
        "broker": tansu,
    }


def produce(bootstrap: str, topic: str, payloads: list[bytes]) -> float:
    """Send all payloads; return messages/s (informational)."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=20, batch_size=512 << 10, max_request_size=8 << 20
    )
    start = time.perf_counter()
    for payload in payloads:
        producer.send(topic, payload)
    producer.flush(timeout=300)
    elapsed = time.perf_counter() - start
    producer.close()
    return len(payloads) / elapsed


def consume(
    bootstrap: str, topic: str, n_messages: int, handle: Callable[[bytes], Any] | None
) -> float:
    """Seconds to poll (and handle) ``n_messages`` records from the start of ``topic``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **CONSUMER_CONFIG)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    seen = 0
    deadline = time.monotonic() + 600
    start = time.perf_counter()
    while seen < n_messages:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {seen} of {n_messages} records arrived from {topic}")
        for records in consumer.poll(timeout_ms=1000).values():
            if handle is not None:
                for record in records:
                    handle(record.value)
            seen += len(records)
    elapsed = time.perf_counter() - start
    consumer.close()
    if seen != n_messages:
        raise RuntimeError(f"expected {n_messages} records from {topic}, got {seen}")
    return elapsed


def offline_decode(n_events: int, block_rows: int, repeats: int) -> list[dict[str, Any]]:
    """Decode throughput without Kafka: the per-event cost the engine pays after poll()."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n_events, 10))
    y = rng.integers(0, 2, n_events)
    cases = {
        "msgpack.unpackb (x list, y)": (
            [encode_event(X[i].tolist(), int(y[i])) for i in range(n_events)],
            msgpack.unpackb,
        ),
        "decode (x list, y)": (
            [encode_event(X[i].tolist(), int(y[i])) for i in range(n_events)],
            decode,
        ),
        "decode (x list, y, id, t)": (
            [encode_event(X[i].tolist(), int(y[i]), id=i, t=1.7e9 + i) for i in range(n_events)],
            decode,
        ),
        "decode (x map of 10, y, id)": (
            [
                encode_event({f"f{j}": float(v) for j, v in enumerate(X[i])}, int(y[i]), id=str(i))
                for i in range(n_events)
            ],
            decode,
        ),
        f"decode blocks of {block_rows} (rows/s)": (
            [
                encode_block(X[i : i + block_rows], y[i : i + block_rows])
                for i in range(0, n_events, block_rows)
            ],
            decode,
        ),
    }
    rows = []
    for name, (payloads, fn) in cases.items():
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            for payload in payloads:
                fn(payload)
            rates.append(n_events / (time.perf_counter() - start))
        rows.append(
            {
                "case": name,
                "events_per_s_median": statistics.median(rates),
                "events_per_s_min": min(rates),
                "events_per_s_max": max(rates),
                "runs": rates,
            }
        )
    return rows


def run(bootstrap: str, n_events: int, block_rows: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_events, 10))
    y = rng.integers(0, 2, n_events)
    events = [encode_event(X[i].tolist(), int(y[i])) for i in range(n_events)]
    blocks = [
        encode_block(X[i : i + block_rows], y[i : i + block_rows])
        for i in range(0, n_events, block_rows)
    ]
    stamp = time.strftime("%Y%m%d%H%M%S")
    topic, block_topic = f"bench-raw-{stamp}", f"bench-raw-blocks-{stamp}"
    create_topic(bootstrap, topic)
    create_topic(bootstrap, block_topic)
    produced = {
        "events_per_s": produce(bootstrap, topic, events),
        "blocks_per_s": produce(bootstrap, block_topic, blocks),
    }
    modes: dict[str, tuple[str, int, Callable[[bytes], Any] | None, int]] = {
        "poll only": (topic, n_events, None, n_events),
        "poll + msgpack.unpackb": (topic, n_events, msgpack.unpackb, n_events),
        "poll + events.decode": (topic, n_events, decode, n_events),
        f"poll + decode blocks of {block_rows}": (block_topic, len(blocks), decode, n_events),
    }
    rates: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(repeats):  # interleave modes so machine noise hits all alike
        for name, (t, n_msgs, handle, n_rows) in modes.items():
            rates[name].append(n_rows / consume(bootstrap, t, n_msgs, handle))
    base = statistics.median(rates["poll only"])
    rows = [
        {
            "mode": name,
            "events_per_s_median": statistics.median(r),
            "events_per_s_min": min(r),
            "events_per_s_max": max(r),
            "ratio_to_poll_only": statistics.median(r) / base,
            "runs": r,
        }
        for name, r in rates.items()
    ]
    return {
        "benchmark": "raw_kafka",
        "schema_version": 1,
        "command": "python -m benchmarks.raw_kafka " + " ".join(sys.argv[1:]),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "params": {
            "events": n_events,
            "block_rows": block_rows,
            "repeats": repeats,
            "event_bytes": len(events[0]),
            "block_bytes": len(blocks[0]),
            "consumer_config": CONSUMER_CONFIG,
        },
        "produce": produced,
        "results": rows,
        "offline_decode": offline_decode(100_000, block_rows, repeats),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--block-rows", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bootstrap", help="use this broker instead of starting tansu")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    broker = None if args.bootstrap else LocalBroker()
    try:
        bootstrap = args.bootstrap or broker.bootstrap_servers  # type: ignore[union-attr]
        result = run(bootstrap, args.events, args.block_rows, args.repeats)
    finally:
        if broker is not None:
            broker.stop()
    m = result["machine"]
    print(
        f"raw Kafka client ceiling: {args.events} events, {args.repeats} repeats; "
        f"{m['cores']} cores, kafka-python {m['kafka_python']} (crc32c={m['crc32c']}), "
        f"{m['broker']}"
    )
    print(f"{'mode':<34} {'events/s (median)':>18} {'min-max':>22} {'vs poll':>8}")
    for row in result["results"]:
        spread = f"{row['events_per_s_min']:,.0f}-{row['events_per_s_max']:,.0f}"
        print(
            f"{row['mode']:<34} {row['events_per_s_median']:>18,.0f} {spread:>22} "
            f"{row['ratio_to_poll_only']:>8.2f}"
        )
    print(f"\n{'decode without Kafka (100k events)':<40} {'events/s (median)':>18} {'min-max':>24}")
    for row in result["offline_decode"]:
        spread = f"{row['events_per_s_min']:,.0f}-{row['events_per_s_max']:,.0f}"
        print(f"{row['case']:<40} {row['events_per_s_median']:>18,.0f} {spread:>24}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
