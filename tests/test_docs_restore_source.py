"""Where a restarted engine restores from: its file store, never the snapshot topic.

Issue 19: docs/snapshot-format.md said restarted engines get snapshots from the Kafka topic,
docs/operations.md that the engine restores from its file store. The second is the truth;
this test holds both documents and the behaviour to it, with the real ``streamk`` entry
point and the real local broker.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamk.sources.replay import write_log

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _flat(name: str) -> str:
    return " ".join((DOCS / name).read_text().split())


def test_both_documents_say_the_engine_restores_from_its_file_store():
    spec, ops = _flat("snapshot-format.md"), _flat("operations.md")
    assert "restores from its file store" in ops
    assert "restores from its file store" in spec
    # the old claim, in any wording: engines (restarted or not) getting snapshots from the topic
    assert not re.search(r"restarted engines[^.]*get snapshots from a", spec, re.I)


@pytest.mark.kafka
def test_an_engine_with_an_empty_store_starts_fresh_though_the_topic_holds_its_model(
    kafka_broker, topic_name, tmp_path
):
    from streamk.snapshot import SnapshotReader

    rng = random.Random(5)
    events = []
    for i in range(400):
        x = {"a": rng.uniform(-1, 1), "b": rng.uniform(-1, 1)}
        events.append({"x": x, "y": x["a"] * x["b"] > 0, "id": i})
    log = tmp_path / "events.jsonl"
    write_log(log, events)
    snapshot_topic = f"{topic_name}-snapshots"

    def replay(store: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable, "-m", "streamk.cli", "replay", str(log),
                "--snapshot-dir", str(store), "--snapshot-topic", snapshot_topic,
                "--bootstrap-servers", kafka_broker.bootstrap_servers,
                "--model-name", "m", "--json",
            ],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    first = replay(tmp_path / "a")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["learned"] == 400
    published = SnapshotReader(kafka_broker.bootstrap_servers, snapshot_topic).latest(
        "m", timeout=30
    )
    assert published is not None and published.offsets  # the topic holds the model

    second = replay(tmp_path / "b")  # a new, empty volume
    assert second.returncode == 0, second.stderr
    assert "no snapshot in" in second.stderr and "starting a fresh model" in second.stderr
    assert json.loads(second.stdout)["learned"] == 400  # not restored from the topic
