"""The values an engine exports at ``/metrics``, against what happened, counted apart.

docs/operations.md, "Metrics to watch": tests/test_metrics_documented.py checks that each
documented name is exported; these tests read a real engine's ``/metrics`` over HTTP and
check what the numbers say. The oracles are counted outside the engine: the snapshot
files in its store, the events the test produced, and plain learners fed the same events
one at a time, in-process (their support size, their consolidations, their flags).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from http_probe import free_port, http_get, metric_samples
from streamk_run import run_args
from test_engine_crash import make_events, produce

from streamk import RBF, KernelNovelty, KernelPerceptron, RemoveOldest
from streamk.consolidation import Consolidated
from streamk.engine.config import load_config
from streamk.engine.runner import build_engine
from streamk.snapshot import SnapshotStore
from streamk.sources.replay import ReplaySource

N, EVERY, SNAP = 6000, 500, 1000  # events; consolidate_every; snapshot_every
SLOW = Path(__file__).parent / "helpers" / "slow_at_offset.py"
PAUSE_AT, PAUSE_S = 2000, 2.0  # one batch that takes 2 s: the engine falls behind, for sure


def _scrape(port: int) -> dict[str, float] | None:
    try:
        status, body = http_get(port, "/metrics")
    except OSError:  # not serving yet, or gone
        return None
    if status != 200:
        return None
    return {k.removeprefix("streamk_"): v for k, v in metric_samples(body).items()}


@pytest.mark.kafka
@pytest.mark.slow
def test_a_running_engine_exports_what_happened(kafka_broker, topic_name, tmp_path):
    """docs/operations.md, "Metrics to watch":
    "`streamk_snapshots_written` | counter | checkpoints whose snapshot is durable";
    "`streamk_consolidations` | counter | batch consolidations adopted";
    "`streamk_support_size` | gauge | support vectors held (at most `budget`)";
    "`streamk_lag` | gauge | records behind the end of the assigned partitions, where known".

    A real ``streamk run`` drains a topic of 6,000 events (consolidating every 500,
    snapshotting every 1,000) and idles; ``/metrics`` is read every 0.1 s. Once, after the
    batch holding offset 2,000, it takes 2 s (tests/helpers/slow_at_offset.py: a slow batch,
    as a long consolidation would make one), so it is surely behind for a progress tick:
    the lag read then is above 0 and at most the 4,000 events still to read; once drained
    it is 0, snapshots_written is the number of snapshot files in its store, and
    support_size and consolidations are those of the same learner fed the same events
    in-process."""
    events = make_events(N, seed=4)
    produce(kafka_broker.bootstrap_servers, topic_name, events)
    store, port = tmp_path / "snapshots", free_port()
    args = run_args(
        kafka_broker.bootstrap_servers,
        topic_name,
        f"{topic_name}-group",
        store,
        model_name="model",
        snapshot_every=SNAP,
        snapshot_seconds=0,
        snapshot_keep=100,
        max_records=20,
        learner="perceptron",
        kernel="rbf:0.5",
        budget=60,
        scale="none",
        consolidate_every=EVERY,
        consolidate_mode="sync",
        metrics_port=port,
        max_poll_interval_ms=10_000,  # the slow batch is no eviction
    )
    proc = subprocess.Popen(
        [sys.executable, str(SLOW), str(PAUSE_AT), str(PAUSE_S), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    scrapes: list[dict[str, float]] = []
    try:
        deadline = time.monotonic() + 120
        drained_at = None
        while drained_at is None or time.monotonic() < drained_at + 2.5:  # 2 progress ticks
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, scrapes[-1:]
            got = _scrape(port)
            if got is not None:
                scrapes.append(got)
                if drained_at is None and got["events_in"] == N:
                    drained_at = time.monotonic()
            time.sleep(0.1)
        end = _scrape(port)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    assert sum(PAUSE_AT <= s["events_in"] < N for s in scrapes) >= 10  # the pause was seen
    behind = [s["lag"] for s in scrapes if s["lag"] > 0]
    assert all(lag <= N for lag in behind), behind
    assert any(lag <= N - PAUSE_AT for lag in behind), behind  # the tick after the pause
    assert end["events_in"] == N and end["lag"] == 0  # drained: nothing behind the end
    written = sorted((store / "model").glob("*.snapshot"))
    assert len(written) == N // SNAP  # the SIGTERM checkpoint had nothing new to write
    assert end["snapshots_written"] == len(written) == end["model_seq"]
    oracle = Consolidated(
        KernelPerceptron(kernel=RBF(0.5), budget=RemoveOldest(60)),
        every=EVERY,
        window_size=1000,
        mode="sync",
        guard=500,
    )
    for x, y in events:
        oracle.learn_one(x, y)
    assert oracle.n_learned == N
    assert oracle.metrics()["consolidations"] >= N // EVERY  # the count trigger, at least
    assert end["consolidations"] == oracle.metrics()["consolidations"]
    assert end["support_size"] == oracle.served_model.n_support <= 60
    snap = SnapshotStore(store).latest("model")
    assert snap.model.served_model.n_support == end["support_size"]


def _novelty_log(path: Path, n: int) -> tuple[list[dict], list[int]]:
    """A cloud about the origin with a far point planted every 400 events (each further
    out): the events, and where the far points are."""
    rng = random.Random(8)
    xs, planted = [], []
    for i in range(n):
        if i % 400 == 200:
            planted.append(i)
            xs.append({"a": 30.0 + i / 100, "b": rng.gauss(0, 1)})
        else:
            xs.append({"a": rng.gauss(0, 1), "b": rng.gauss(0, 1)})
    path.write_text("".join(json.dumps({"id": f"n{i}", "x": x}) + "\n" for i, x in enumerate(xs)))
    return xs, planted


def test_a_novelty_engine_exports_the_flags_a_plain_detector_gives(tmp_path):
    """docs/operations.md, "Metrics to watch": "`streamk_events_flagged` | counter | events a
    novelty detector (`learner = novelty`) flagged as novel before learning them".

    An engine built as ``streamk replay`` builds it (``build_engine``) runs a log of 3,000
    events through ``learner = novelty`` and serves ``/metrics``; the count it exports is
    the number of events a plain ``KernelNovelty`` flags, each just before learning it: the
    far points planted in the log."""
    log = tmp_path / "events.jsonl"
    xs, planted = _novelty_log(log, 3000)
    port = free_port()
    config = load_config(
        None,
        {
            "learner": "novelty",
            "kernel": "rbf:0.01",
            "budget": 150,
            "snapshot_dir": str(tmp_path / "snapshots"),
            "snapshot_every": 1000,
            "snapshot_seconds": 0,
            "max_records": 250,
            "metrics_port": port,
        },
        environ={},
    )
    engine = build_engine(config, source=ReplaySource(log))
    try:
        result = engine.run()
        exported = _scrape(port)
    finally:
        engine.metrics.close()
    detector = KernelNovelty(kernel=RBF(0.01), budget=RemoveOldest(150))
    flags = []
    for i, x in enumerate(xs):
        if detector.predict_one(x):
            flags.append(i)
        detector.learn_one(x)
    assert flags == planted  # each far point, once its predecessor left the window
    assert result.records == exported["events_in"] == len(xs)
    assert exported["events_flagged"] == len(flags) == 7
    assert exported["events_scored"] == len(xs)  # unlabelled: every flag is published
    assert exported["support_size"] == detector.n_support
    assert (
        exported["snapshots_written"]
        == 3
        == len(list((tmp_path / "snapshots").rglob("*.snapshot")))
    )
