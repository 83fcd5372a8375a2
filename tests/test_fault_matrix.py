"""Exactly-once model state under damaged snapshot stores (issue 13's fault matrix).

For each fault × {consolidation off, on} × {1, 3 partitions}: an engine learns 2,000 of
3,000 labelled events from a real topic on the local broker into a real file store
(snapshots every 500, commits after each), the store is damaged as an operator finds it,
and the engine restarts and drains the topic. Then:

- the newest durable snapshot has learned every event **exactly once**: its learner's
  count of learned events is 3,000 and its offsets are each partition's end (counted from
  what was produced, never from tansu's end offsets, design §8);
- on one partition, where the order of events is fixed, the restored model predicts on a
  probe set exactly as a model that learned the stream without interruption (the oracle).

The all-corrupt store stops the engine with the documented message; after the documented
fresh start (``streamk snapshot reset``) the new model learns the whole stream once.
The engines run in this process (real broker, real files, manual partition assignment so
no group join slows the 56 runs); tests/test_cli_faults.py runs a subset through the real
``streamk run`` entry point.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest
from kafka import KafkaProducer

from streamk.cli.broker import create_topic
from streamk.engine.config import load_config
from streamk.engine.events import encode_event
from streamk.engine.runner import build_engine
from streamk.errors import SnapshotError
from streamk.snapshot import SnapshotStore
from streamk.sources.kafka import KafkaSource

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N, FIRST = 3000, 2000
MODEL = "m"


def _events(seed: int = 11) -> list[tuple[dict, bool]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] > 0
    return [({f"f{j}": float(v) for j, v in enumerate(r)}, bool(t)) for r, t in zip(X, y)]


EVENTS = _events()
PROBE = [
    {f"f{j}": float(v) for j, v in enumerate(r)}
    for r in np.random.default_rng(5).normal(size=(200, 3))
]


@pytest.fixture(scope="module")
def topics(kafka_broker):
    """One topic per partition count, produced once: event i goes to partition i % P."""
    bootstrap = kafka_broker.bootstrap_servers
    made = {}
    for parts in (1, 3):
        topic = f"faults-{parts}-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions=parts)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        for i, (x, y) in enumerate(EVENTS):
            producer.send(topic, encode_event(x, y=y, id=i), partition=i % parts)
        producer.flush()
        producer.close()
        made[parts] = topic
    return bootstrap, made


def _run(bootstrap, topic, parts, store_dir, *, consolidate, group, max_events=0):
    config = load_config(
        overrides={
            "bootstrap_servers": bootstrap,
            "topic": topic,
            "group": group,
            "model_name": MODEL,
            "snapshot_dir": str(store_dir),
            "snapshot_every": 500,
            "snapshot_seconds": 0.0,
            "max_records": 500,
            "max_events": max_events,
            "stop_when_idle": 1.0,
            "budget": 300,
            "consolidate_every": 700 if consolidate else 0,
            "consolidate_window": 300,
        }
    )
    source = KafkaSource(bootstrap, topic, group, partitions=range(parts))
    engine = build_engine(config, source=source)
    return engine.run()


def _learner(model):
    return getattr(model, "_wrapped_model", model)


def _newest_files(store_dir, k):
    infos = SnapshotStore(store_dir).list(MODEL)
    return [info.path for info in infos[-k:]]


def _corrupt(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A
    path.write_bytes(bytes(data))


def _fault(kind, store_dir):
    model_dir = store_dir / MODEL
    if kind == "truncated":
        (newest,) = _newest_files(store_dir, 1)
        newest.write_bytes(newest.read_bytes()[:100])
    elif kind == "bit-flipped":
        (newest,) = _newest_files(store_dir, 1)
        _corrupt(newest)
    elif kind == "two-newest-corrupt":
        for path in _newest_files(store_dir, 2):
            _corrupt(path)
    elif kind == "all-corrupt":
        for path in _newest_files(store_dir, 100):
            _corrupt(path)
    elif kind == "junk-high-seq":
        (model_dir / "999999999999.snapshot").write_bytes(b"not a snapshot at all")
    elif kind == "fifo":
        os.mkfifo(model_dir / "000000000999.snapshot")
    elif kind == "latest-dangling":
        (model_dir / "LATEST").write_text("000000000777.snapshot\n")
    else:  # pragma: no cover
        raise AssertionError(kind)


FAULTS = [
    "truncated",
    "bit-flipped",
    "two-newest-corrupt",
    "all-corrupt",
    "junk-high-seq",
    "fifo",
    "latest-dangling",
]

_reference: dict[tuple[bool, int], list] = {}


def _uninterrupted(bootstrap, topic, tmp_path_factory, consolidate):
    """Probe predictions of a model that learned the 1-partition stream in one run."""
    key = (consolidate, 1)
    if key not in _reference:
        store_dir = tmp_path_factory.mktemp("reference")
        _run(bootstrap, topic, 1, store_dir, consolidate=consolidate, group=_group())
        model = SnapshotStore(store_dir).latest(MODEL).model
        assert _learner(model).n_learned == N
        _reference[key] = [model.predict_one(x) for x in PROBE]
    return _reference[key]


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("parts", [1, 3])
@pytest.mark.parametrize("consolidate", [False, True], ids=["plain", "consolidated"])
@pytest.mark.parametrize("fault", FAULTS)
def test_restart_after_store_damage_learns_every_event_once(
    topics, tmp_path, tmp_path_factory, fault, consolidate, parts, caplog
):
    bootstrap, topic_of = topics
    topic, group, store_dir = topic_of[parts], _group(), tmp_path / "store"
    first = _run(
        bootstrap, topic, parts, store_dir, consolidate=consolidate, group=group, max_events=FIRST
    )
    assert first.records == FIRST
    _fault(fault, store_dir)
    caplog.set_level("WARNING", logger="streamk")
    if fault == "all-corrupt":
        with pytest.raises(SnapshotError, match="streamk snapshot reset"):
            _run(bootstrap, topic, parts, store_dir, consolidate=consolidate, group=group)
        from streamk.cli import main

        assert main(["snapshot", "reset", "--dir", str(store_dir), "--model", MODEL]) == 0
    _run(bootstrap, topic, parts, store_dir, consolidate=consolidate, group=group)
    if fault != "latest-dangling":  # a dangling pointer is harmless; damage is reported
        assert any(r.levelname == "WARNING" for r in caplog.records), "a silent fallback"

    snap = SnapshotStore(store_dir).latest(MODEL)
    ends = {p: len(range(p, N, parts)) for p in range(parts)}
    assert snap.offsets[topic] == ends
    assert _learner(snap.model).n_learned == N  # no event lost, none learned twice
    if parts == 1:
        expected = _uninterrupted(bootstrap, topic, tmp_path_factory, consolidate)
        assert [snap.model.predict_one(x) for x in PROBE] == expected
