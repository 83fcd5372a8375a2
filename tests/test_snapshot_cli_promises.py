"""The snapshot store and its command line as the runbook uses them (docs/operations.md,
docs/snapshot-format.md): a learner class this install lacks, ``snapshot reset --force``,
and ``snapshot ls/show --topic`` with the broker taken from ``$STREAMK_BOOTSTRAP_SERVERS``.

Real ``streamk`` processes on real stores and, for the topic, the session's broker. The
oracles: the bytes of the store before and after, the event log the test wrote, and a
plain perceptron fed its labelled events once.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import msgpack
import pytest
from streamk_run import streamk

from streamk import RBF, KernelPerceptron, RemoveOldest
from streamk.snapshot import SnapshotStore, dumps
from streamk.snapshot.format import seal
from streamk.snapshot.kafka import SnapshotPublisher

pytestmark = pytest.mark.slow  # CLI starts: a few seconds each

MODEL = ["--learner", "perceptron", "--kernel", "rbf:0.5", "--budget", "80", "--scale", "none"]


def write_log(path: Path, n: int) -> list[dict]:
    rng = random.Random(41)
    events = []
    for i in range(n):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        events.append({"id": f"e{i}", "x": {"a": a, "b": b}, "y": a * b > 0})
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return events


def replay(log: Path, store: Path, *extra: str):
    return streamk(
        "replay", str(log), "--snapshot-dir", str(store), "--snapshot-every", "500",
        "--snapshot-seconds", "0", *MODEL, *extra, "--quiet",
    )  # fmt: skip


def files(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (lock files aside), by relative path."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def reference(events: list[dict]) -> KernelPerceptron:
    model = KernelPerceptron(kernel=RBF(0.5), budget=RemoveOldest(80))
    for e in events:
        model.learn_one(e["x"], e["y"])
    return model


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> Path:
    """A log of 1,000 labelled events and the store its replay left (seq 1 and 2), made
    once; each test works on its own copy (:func:`copy_of`)."""
    where = tmp_path_factory.mktemp("learned")
    write_log(where / "events.jsonl", 1000)
    first = replay(where / "events.jsonl", where / "snapshots")
    assert first.returncode == 0, first.stderr
    return where


def copy_of(learned: Path, tmp_path: Path) -> tuple[Path, Path, list[dict]]:
    """This test's copy of the log and the store, and the log's events."""
    shutil.copy2(learned / "events.jsonl", tmp_path / "events.jsonl")
    shutil.copytree(learned / "snapshots", tmp_path / "snapshots")
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    return tmp_path / "events.jsonl", tmp_path / "snapshots", events


def test_a_learner_class_this_install_lacks_stops_the_engine_with_nothing_set_aside(
    learned, tmp_path
):
    """docs/operations.md, "Common failure scenarios": "**learner class missing or snapshot
    state refused** | valid snapshots | the engine refuses to start (`SnapshotError`):
    falling back would fail the same way, and starting empty would silently lose the
    model"; docs/snapshot-format.md (store failure table): "learner module missing ... |
    raises `SnapshotError`: falling back would fail the same way".

    The newest of two snapshots names a class outside this install's allow-list (what a
    newer streamk's learner looks like), sealed with a valid checksum. The replay must
    exit 2 naming the allow-list, fall back to the older valid snapshot not at all, start
    no empty model, and set no file aside: the store stays byte for byte."""
    log, store, _ = copy_of(learned, tmp_path)
    newest = store / "model" / f"{2:012d}.snapshot"
    body = msgpack.unpackb(msgpack.unpackb(newest.read_bytes())["body"])
    assert body["model"]["class"] == "KernelPerceptron"
    body["model"]["class"] = "KernelPerceptronV9"  # a learner of a later release
    newest.write_bytes(seal(msgpack.packb(body, use_bin_type=True)))
    before = files(store)
    stopped = replay(log, store)
    assert stopped.returncode == 2, stopped.stderr
    assert files(store) == before  # no *.corrupt, no fallback snapshot, no fresh model saved
    (error,) = [ln for ln in stopped.stderr.splitlines() if ln.startswith("streamk: error:")]
    assert "KernelPerceptronV9" in error and "not in the allow-list" in error
    assert "Traceback" not in stopped.stderr
    assert "starting a fresh model" not in stopped.stderr and "restored" not in stopped.stderr


def test_reset_force_quarantines_valid_snapshots_keeps_the_store_id_and_starts_fresh(
    learned, tmp_path
):
    """docs/operations.md, "How to start over": "It moves the model's snapshot files and
    `LATEST` into `DIR/NAME/quarantine/<UTC time>/` (nothing is deleted; new seqs continue
    above them) and refuses a model that still has a valid snapshot unless `--force`. It
    keeps the model's `.store-id`, so the next start is a fresh model".

    A store with two valid snapshots is reset with ``--force``: the two files and
    ``LATEST`` move, unchanged, into one ``quarantine/<UTC time>/`` directory named for
    now; ``.store-id`` stays where it was; the next replay starts a fresh model, learns
    the whole log once and writes seqs 3 and up."""
    log, store, events = copy_of(learned, tmp_path)
    model_dir = store / "model"
    moved = {n: b for n, b in files(model_dir).items() if n.endswith(".snapshot") or n == "LATEST"}
    assert sorted(moved) == ["000000000001.snapshot", "000000000002.snapshot", "LATEST"]
    store_id = (model_dir / ".store-id").read_bytes()
    started = datetime.now(UTC).replace(microsecond=0)
    reset = streamk("snapshot", "reset", "--dir", str(store), "--model", "model", "--force")
    assert reset.returncode == 0, reset.stderr
    (stamp,) = [p.name for p in (model_dir / "quarantine").iterdir()]
    assert re.fullmatch(r"\d{8}T\d{6}Z", stamp)
    when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert started <= when <= datetime.now(UTC)
    assert files(model_dir / "quarantine" / stamp) == moved  # nothing deleted or altered
    assert (model_dir / ".store-id").read_bytes() == store_id
    left = {n for n in files(model_dir) if not n.startswith("quarantine/")}
    assert left == {".store-id", ".commits.json"}
    again = replay(log, store, "--json")
    assert again.returncode == 0, again.stderr
    assert "starting a fresh model" in again.stderr
    summary = json.loads(again.stdout)
    assert summary["learned"] == len(events) and summary["seq"] == 4  # seqs 3 and 4
    snap = SnapshotStore(store).latest("model")
    assert snap.model.n_learned == len(events)
    ref = reference(events)
    for e in events[::29]:
        assert snap.model.predict_proba_one(e["x"]) == pytest.approx(
            ref.predict_proba_one(e["x"]), abs=1e-9
        )


def _perceptron(n: int) -> KernelPerceptron:
    model = KernelPerceptron()
    for i in range(n):
        model.learn_one({"a": float(i % 7), "b": float(i % 3)}, i % 2 == 0)
    return model


@pytest.mark.kafka
def test_snapshot_cli_on_a_topic_takes_the_broker_from_the_environment(kafka_broker, topic_name):
    """docs/snapshot-format.md, "Command line": "`--bootstrap-servers` defaults to
    `$STREAMK_BOOTSTRAP_SERVERS`, then `127.0.0.1:9092` ... `show` describes the newest
    complete, verified snapshot of the model as for a file, and exits 1 if there is none."

    A model's snapshot is published to a topic; ``snapshot ls`` and ``show`` are given the
    broker only through ``STREAMK_BOOTSTRAP_SERVERS``. They find it; ``show`` of a model
    with no snapshot on the topic exits 1."""
    bootstrap = kafka_broker.bootstrap_servers
    with SnapshotPublisher(bootstrap, topic_name) as publisher:
        publisher.publish("fraud", dumps(_perceptron(40), offsets={"events": {0: 40}}, seq=7))
    env = {"STREAMK_BOOTSTRAP_SERVERS": bootstrap}
    listed = streamk("snapshot", "ls", "--topic", topic_name, "--json", "--timeout", "20", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["snapshots"]
    assert [(r["name"], r["seq"], r["status"]) for r in rows] == [("fraud", 7, "latest")]
    shown = streamk("snapshot", "show", "--topic", topic_name, "--name", "fraud", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["seq"] == 7
    started = time.monotonic()
    missing = streamk("snapshot", "show", "--topic", topic_name, "--name", "nobody", env=env)
    assert missing.returncode == 1, missing.stderr
    assert "no complete, verified snapshot of 'nobody'" in missing.stderr
    assert time.monotonic() - started < 20  # read to the end, not timed out
