"""``streamk demo``: the whole production path on one machine, with nothing to set up.

It starts the embedded Kafka-compatible broker on 127.0.0.1, produces river's Bananas
followed by a drifting SEA stream as msgpack events (a share of them unlabelled, to be
scored, and a few malformed, to be dead-lettered), runs the engine on the topic with a
live progress line, writes snapshots to ``./snapshots``, prints a summary, and stops
everything it started.

``--text`` runs the same path on text: the deterministic DNA-like reads with planted
motifs of :mod:`streamk.sources.motifs`, learned by a kernel perceptron with a normalised
6-spectrum kernel (budget 500); the malformed events are text ones (invalid UTF-8, a
number, an over-long read), dead-lettered with their reasons.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .output import SCHEMA_VERSION, EngineProgress, describe_start, format_summary, machine, plain

__all__ = ["run_demo", "demo_events", "text_events", "cmd_demo", "DEMO_EXAMPLES", "TEXT_KERNEL"]

DEMO_EXAMPLES = """examples:
  # the whole pipeline here: broker, Bananas then 20,000 drifting events, the engine,
  # snapshots in ./snapshots
  streamk demo
  # a shorter drifting stream, snapshots under /tmp/try, the summary as JSON
  streamk demo --n 2000 --dir /tmp/try --json
  # then look inside the newest snapshot
  streamk snapshot show ./snapshots/demo
  # text: DNA-like reads with planted motifs, a string kernel (snapshots in ./snapshots/demo-text)
  streamk demo --text --n 5000
"""

#: the string kernel of ``streamk demo --text`` (the short syntax of ``--kernel``)
TEXT_KERNEL = "norm-spectrum:6"
TEXT_MALFORMED = [
    b"\x82\xa1x\xc4\x06\xc3(acgt\xa1y\xc3",  # {"x": bin b"\xc3(acgt", "y": true}: not UTF-8
    b"\x82\xa1x\x11\xa1y\xc2",  # {"x": 17, "y": false}: not text
    b"\xc1 not msgpack",
]

TOPIC = "streamk-demo"
MALFORMED = [
    b"\xc1 not msgpack",
    b"\x81\xa1x\xa4text",  # {"x": "text"}: text needs a string kernel
    b"\x82\xa1x\x91\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00\xa1y\xc3",  # {"x": [NaN], "y": true}
]


def demo_events(
    n_drift: int = 20_000, unlabelled_share: float = 0.05, seed: int = 7
) -> Iterator[bytes]:
    """Bananas, then SEA with a concept drift halfway; some events unlabelled, some malformed."""
    from river import datasets
    from river.datasets import synth

    from ..engine.events import encode_event

    rng = random.Random(seed)
    drift = synth.ConceptDriftStream(
        stream=synth.SEA(seed=seed, variant=0),
        drift_stream=synth.SEA(seed=seed, variant=2),
        position=n_drift // 2,
        width=500,
        seed=seed,
    ).take(n_drift)
    for i, (x, y) in enumerate(_chain(datasets.Bananas(), drift)):
        if i and i % 5000 == 0:
            yield MALFORMED[(i // 5000) % len(MALFORMED)]
        if rng.random() < unlabelled_share:
            yield encode_event({str(k): float(v) for k, v in x.items()}, id=i)
        else:
            yield encode_event({str(k): float(v) for k, v in x.items()}, y=bool(y), id=i)


def text_events(n: int = 20_000, unlabelled_share: float = 0.05, seed: int = 7) -> Iterator[bytes]:
    """``n`` motif reads (:func:`streamk.sources.motifs.iter_motifs`); some unlabelled, and
    every 2,500th event followed by a malformed one (the last kind: an over-long read)."""
    from ..engine.events import encode_event
    from ..sources.motifs import iter_motifs

    rng = random.Random(seed)
    for i, (read, y) in enumerate(iter_motifs(n, seed=seed)):
        if i and i % 2500 == 0:
            k = (i // 2500) % (len(TEXT_MALFORMED) + 1)
            yield TEXT_MALFORMED[k] if k < len(TEXT_MALFORMED) else encode_event("acgt" * 2600)
        if rng.random() < unlabelled_share:
            yield encode_event(read, id=i)
        else:
            yield encode_event(read, y=y, id=i)


def _chain(*streams: Any) -> Iterator[tuple[dict, Any]]:
    for s in streams:
        yield from s


def run_demo(
    workdir: str | Path = ".",
    n_drift: int = 20_000,
    quiet: bool = False,
    on_progress: Any = None,
    text: bool = False,
) -> dict[str, Any]:
    """Run the demo (``text``: on motif reads); returns the engine summary (also printed)."""
    from kafka import KafkaProducer

    from ..engine.config import load_config
    from ..engine.runner import build_engine
    from ..sources.kafka import KafkaSource
    from .broker import QUICK_GROUP_CONFIG, LocalBroker, create_topic

    workdir = Path(workdir)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))  # noqa: E731
    name = "demo-text" if text else "demo"
    topic = f"{TOPIC}-text" if text else TOPIC
    previous = workdir / "snapshots" / name
    if previous.is_dir():
        # The demo's broker is new each run: the last run's snapshots describe a topic that
        # no longer exists, and resuming from their offsets would skip the new events.
        shutil.rmtree(previous)
        say(f"snapshots  cleared {previous} (a previous demo run's; its broker is gone)")
    with LocalBroker() as broker:
        bootstrap = broker.bootstrap_servers
        say(f"broker     tansu on {bootstrap} (stopped at the end)")
        create_topic(bootstrap, topic, partitions=1)
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all")
        t0 = time.perf_counter()
        produced = 0
        for payload in text_events(n_drift) if text else demo_events(n_drift):
            producer.send(topic, payload)
            produced += 1
        producer.flush()
        producer.close()
        what = "DNA-like reads with planted motifs" if text else "Bananas, then SEA with a drift"
        say(
            f"produced   {produced:,} events to {topic!r} in {time.perf_counter() - t0:.1f} s "
            f"({what}; 5% unlabelled, a few malformed)"
        )
        learner = {"kernel": TEXT_KERNEL, "budget": 500} if text else {}
        config = load_config(
            overrides={
                "bootstrap_servers": bootstrap,
                "topic": topic,
                "group": "streamk-demo",
                "snapshot_dir": str(workdir / "snapshots"),
                "snapshot_every": 5000,
                "stop_when_idle": 3.0,
                "predictions_topic": f"{topic}-predictions",
                "dead_letter_topic": f"{topic}-dead-letters",
                "snapshot_topic": f"{topic}-snapshots",
                "model_name": name,
                "max_poll_interval_ms": QUICK_GROUP_CONFIG["max_poll_interval_ms"],
                **learner,
            }
        )
        source = KafkaSource(bootstrap, topic, "streamk-demo", consumer_config=QUICK_GROUP_CONFIG)
        engine = build_engine(config, source=source, on_progress=on_progress)
        engine.restore()
        say(describe_start(engine, config["snapshot_dir"]))
        result = engine.run()
        summary = {
            "produced": produced,
            "records": result.records,
            "learned": result.learned,
            "scored": result.scored,
            "dead_lettered": result.dead_lettered,
            "rolling_accuracy": engine.progress()["rolling_metric"],
            "support_vectors": engine.progress()["support"],
            "snapshots": result.snapshots,
            "seq": result.seq,
            "snapshot_dir": str(workdir / "snapshots" / name),
            "events_per_second": result.events_per_second,
            "predictions_topic": config["predictions_topic"],
            "dead_letter_topic": config["dead_letter_topic"],
            "snapshot_topic": config["snapshot_topic"],
        }
    return summary


def cmd_demo(args: argparse.Namespace) -> int:
    """Embedded broker, a shipped data set as Kafka events, the engine, snapshots: all local."""
    progress = EngineProgress("accuracy", args.quiet or args.json)
    summary = run_demo(
        args.dir,
        n_drift=args.n,
        quiet=args.quiet or args.json,
        on_progress=progress,
        text=getattr(args, "text", False),
    )
    progress.close()
    if args.json:
        document = {"schema_version": SCHEMA_VERSION, **summary, "machine": machine()}
        print(json.dumps(plain(document), indent=2, allow_nan=False))
        return 0
    print()
    print(format_summary(summary))
    print("\nlook inside a snapshot:  streamk snapshot show " + summary["snapshot_dir"])
    return 0
