"""End to end on a real broker: `streamk demo` produces, the engine consumes, nothing is lost."""

from __future__ import annotations

import msgpack
import pytest
from kafka import KafkaConsumer, TopicPartition

from streamk.cli import main
from streamk.cli.demo import TOPIC, demo_events
from streamk.engine.deadletter import DeadLetter
from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def read_topic(bootstrap: str, topic: str, expected: int, timeout_ms: int = 20_000) -> list:
    """Read every partition of a topic from the start until `expected` records or a timeout.

    Counting records is the test (tansu's end offsets cannot be trusted, design §8).
    """
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partitions = consumer.partitions_for_topic(topic) or {0}
    consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
    consumer.seek_to_beginning()
    out = []
    while len(out) < expected:
        batch = consumer.poll(timeout_ms=timeout_ms)
        if not batch:
            break
        for records in batch.values():
            out.extend(records)
    consumer.close()
    return out


def test_demo_accounts_for_every_event(tmp_path, capsys, monkeypatch):
    import json

    import streamk.engine.runner as runner

    captured_bootstrap = {}
    real_build = runner.build_engine

    def spy(config, source=None, on_progress=None):
        captured_bootstrap["b"] = config["bootstrap_servers"]
        engine = real_build(config, source=source, on_progress=on_progress)
        captured_bootstrap["engine"] = engine
        return engine

    monkeypatch.setattr(runner, "build_engine", spy)
    # Keep the broker alive after the demo so the output topics can be read back.
    stops = []
    from streamk.cli import broker as broker_module

    monkeypatch.setattr(
        broker_module.LocalBroker, "__exit__", lambda self, *exc: stops.append(self) or False
    )
    try:
        assert main(["demo", "--dir", str(tmp_path), "--n", "3000", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        produced = sum(1 for _ in demo_events(3000))
        assert summary["produced"] == produced == summary["records"]
        assert summary["learned"] + summary["scored"] + summary["dead_lettered"] == produced
        assert summary["dead_lettered"] >= 1 and summary["scored"] > 0
        snap = SnapshotStore(tmp_path / "snapshots").latest("demo")
        assert snap.offsets == {TOPIC: {0: produced}}
        assert snap.model.n_learned == summary["learned"]

        bootstrap = captured_bootstrap["b"]
        predictions = read_topic(bootstrap, f"{TOPIC}-predictions", summary["scored"])
        assert len(predictions) == summary["scored"]
        first = msgpack.unpackb(predictions[0].value)
        assert {"id", "prediction", "model_seq"} <= set(first)
        assert isinstance(first["prediction"], bool)  # the label itself, not a nested record
        letters = read_topic(bootstrap, f"{TOPIC}-dead-letters", summary["dead_lettered"])
        assert len(letters) == summary["dead_lettered"]
        letter = DeadLetter.from_dict(msgpack.unpackb(letters[0].value))
        assert letter.reason and letter.source == TOPIC and letter.offset is not None
        from streamk.snapshot import SnapshotReader

        on_topic = SnapshotReader(bootstrap, f"{TOPIC}-snapshots").latest("demo", timeout=30)
        assert on_topic.seq == snap.seq and on_topic.checksum == snap.checksum
    finally:
        for b in stops:
            b.stop()
