"""``adopt_merged``: a worker continues from the merged model plus what it learned since.

Oracles: the parameter-mixing sum computed from independent copies (the merged model, the
worker now and the worker at its base snapshot: ``f_merged + f_now - f_base``, exact when
nothing is compressed); on the real broker, the events produced (every event in exactly one
worker's durable snapshot, offsets reaching each partition's end) and the merged model's
support rows found in the adopting worker's final model.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from kafka import KafkaProducer
from river import datasets

from streamk.cli.broker import create_topic
from streamk.engine.events import encode_event
from streamk.errors import ConfigError, MergeError
from streamk.kernels import RBF
from streamk.learners.perceptron import KernelPerceptron
from streamk.merge import merge_models
from streamk.merge.adopt import adopt_merged
from streamk.snapshot import SnapshotReader, SnapshotStore
from tests.streamk_run import run_args

ROOT = str(Path(__file__).resolve().parents[1])


def _next_id(model) -> int:
    return int(model.state()["support"]["next_id"])


def test_adopted_function_is_merged_plus_what_the_worker_learned_since():
    data = list(datasets.Bananas().take(1300))
    workers = [KernelPerceptron(kernel=RBF(gamma=2.0)) for _ in range(2)]
    for i, (x, y) in enumerate(data[:600]):
        workers[i % 2].learn_one(x, y)
    base = copy.deepcopy(workers[0])
    merged = merge_models(workers)
    for x, y in data[600:900]:
        workers[0].learn_one(x, y)
    adopted, added = adopt_merged(workers[0], merged, _next_id(base))
    assert added == workers[0].n_support - base.n_support > 0
    assert adopted.n_learned == workers[0].n_learned  # the worker's own count, not the mixture's
    for x, _ in data[900:1300]:
        want = (
            merged.decision_function_one(x)
            + workers[0].decision_function_one(x)
            - base.decision_function_one(x)
        )
        np.testing.assert_allclose(adopted.decision_function_one(x), want, rtol=1e-9, atol=1e-9)
    # and it keeps learning
    for x, y in data[900:1000]:
        adopted.learn_one(x, y)
    assert adopted.n_learned == workers[0].n_learned + 100


def test_a_merge_built_before_the_workers_last_adoption_is_not_adopted(tmp_path):
    """The merger scanned while worker W checkpointed: merge M2 names W's snapshot from
    before W adopted M1. That adoption renumbered W's support ids, so "ids at or above the
    base's next_id" were rows of M1 (already inside M2): adopting M2 put them in twice
    (0.45 relative L2 from the mixture, held-out accuracy 0.69 against 0.86) and counted
    it "adopted". Now W keeps its model (``stale_base``) and adopts the next merge, whose
    base is a snapshot after its adoption, exactly: ``f_M3 + f_now - f_base``."""
    from streamk.engine.config import load_config
    from streamk.merge.adopt import Adopter
    from streamk.merge.role import Merger
    from streamk.snapshot import dumps

    data = list(datasets.Bananas().take(2100))
    store = SnapshotStore(tmp_path, keep=50)
    config = load_config(None, {"snapshot_dir": str(tmp_path), "topic": "events"}, environ={})

    def make():
        return KernelPerceptron(kernel=RBF(gamma=0.5))

    def learn(model, rows):
        for x, y in rows:
            model.learn_one(x, y)

    def save(name, model, offset, **meta):
        store.save(dumps(model, {"events": {0: offset}}, store.next_seq(name), **meta), name)

    w, v = make(), make()
    learn(w, data[0:300])
    save("W", w, 300)
    learn(v, data[300:600])
    save("V", v, 600)
    Merger(config).run_once()  # M1
    learn(v, data[600:900])
    save("V", v, 900)
    scanned = {name: store.latest(name, build=False) for name in store.names()}
    adopter = Adopter("W", "merged", store, lambda: store.latest("merged", build=False))
    learn(w, data[900:1200])
    w, meta = adopter(w)  # adopts M1
    assert adopter.counts["adopted"] == 1
    save("W", w, 1200, **meta)
    Merger(config, scan=lambda: scanned).run_once()  # M2: from W's snapshot before adopting
    learn(w, data[1200:1500])
    kept, meta = adopter(w)
    assert kept is w and adopter.counts["stale_base"] == 1 and adopter.counts["adopted"] == 1
    save("W", w, 1500, **meta)
    base = copy.deepcopy(w)
    Merger(config).run_once()  # M3: from W's snapshot after its adoption
    learn(w, data[1500:1800])
    adopted, meta = adopter(w)
    assert adopter.counts["adopted"] == 2
    m3 = store.latest("merged").model
    for x, _ in data[1800:2100]:
        want = m3.decision_function_one(x) + w.decision_function_one(x)
        want = want - base.decision_function_one(x)
        np.testing.assert_allclose(adopted.decision_function_one(x), want, rtol=1e-9, atol=1e-9)


def test_adoption_is_compressed_to_the_budget_and_refuses_another_learner():
    data = list(datasets.Bananas().take(900))
    workers = [KernelPerceptron(kernel=RBF(gamma=2.0), budget=60) for _ in range(2)]
    for i, (x, y) in enumerate(data[:600]):
        workers[i % 2].learn_one(x, y)
    base_next = _next_id(workers[0])
    merged = merge_models(workers)
    for x, y in data[600:900]:
        workers[0].learn_one(x, y)
    adopted, _ = adopt_merged(workers[0], merged, base_next)
    assert adopted.n_support <= 60
    from streamk.learners.adatron import KernelAdatron

    with pytest.raises(MergeError, match="one learner"):
        adopt_merged(KernelAdatron(), merged, 0)


def test_adopt_merged_refuses_a_scaled_worker_with_the_fix(tmp_path):
    from streamk.engine.config import load_config
    from streamk.engine.runner import adopter, model_factory
    from streamk.snapshot import SnapshotStore as Store

    config = load_config(None, {"adopt_merged": True, "scale": "standard"}, environ={})
    with pytest.raises(ConfigError, match="scale = none"):
        adopter(config, Store(tmp_path), model_factory(config))


class _Stderr:
    """A process's stderr read line by line in a thread: the pipe never fills, and a test
    can wait for a line (a worker's ``assigned`` at INFO) while the process runs."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for raw in stream:
            self.lines.append(raw.decode(errors="replace"))

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in list(self.lines)):
            if time.monotonic() > deadline or not self._thread.is_alive():
                return any(text in line for line in list(self.lines))
            time.sleep(0.1)
        return True

    def text(self) -> str:
        self._thread.join(timeout=10)
        return "".join(self.lines)[-4000:]


def _rows(model) -> set[tuple]:
    """Support rows as ``{(feature, value), ...}`` tuples (column order independent)."""
    st = model.state()
    names = st["features"]
    X = np.asarray(st["support"]["X"])
    return {tuple(sorted(zip(map(str, names), row.tolist()))) for row in X}


@pytest.mark.kafka
def test_a_worker_adopts_the_merged_model_on_the_broker_and_keeps_its_offsets_exact(
    kafka_broker, topic_name, tmp_path
):
    b = kafka_broker.bootstrap_servers
    events, snapshots, group = topic_name, f"{topic_name}-snaps", f"{topic_name}-g"
    parts, n1, n2 = 2, 800, 600
    data = list(datasets.Bananas().take(n1 + n2))
    create_topic(b, events, partitions=parts)

    def produce(rows, start):
        producer = KafkaProducer(bootstrap_servers=b, acks="all")
        for i, (x, y) in enumerate(rows, start):
            producer.send(events, encode_event(x, y=y, id=i), partition=i % parts)
        producer.flush()
        producer.close()

    env = {**os.environ, "PYTHONPATH": ROOT}
    # The adopter reads the snapshot topic within max_poll_interval_ms / 3000 at each
    # checkpoint (it runs inside the poll loop); the quick group's 3 s gave it 1 s, which a
    # loaded machine missed at every checkpoint of the run: 30 s gives it 10 s.
    model = dict(
        learner="perceptron", kernel="rbf:2.0", budget=0, scale="none", snapshot_every=200,
        snapshot_topic=snapshots, max_records=100, poll_timeout=0.2, stop_when_idle=5,
        max_poll_interval_ms=30_000,
    )  # fmt: skip

    def run(name: str, *extra: str, idle: float = 5, level: str = "WARNING") -> subprocess.Popen:
        settings = {**model, "stop_when_idle": idle}
        args = run_args(b, events, group, tmp_path / name, model_name=name, **settings)
        return subprocess.Popen(
            [sys.executable, "-m", "streamk.cli", "--log-level", level, *args, *extra],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    # w0 outlasts w1 by 7 s: it must not leave while the rejoin after w1's departure is in
    # flight. A member that leaves between its JoinGroup answer (as leader) and its
    # SyncGroup is kept by tansu 0.6 as the leader of the next generation, so the adopting
    # w0 below could never complete a join (SyncGroup "rebalance in progress" every 5 s),
    # was never assigned, and stopped with nothing learned: how this test failed under
    # parallel load (tests/test_kafka_source.py has the same broker trap).
    procs = [run("w0", idle=12, level="INFO"), run("w1", level="INFO")]
    logs = [_Stderr(p) for p in procs]
    # Events only once both hold partitions: a worker slow to start (a loaded machine)
    # would find its partition consumed by the other and have no snapshot to merge.
    for log in logs:
        assert log.wait_for("INFO: assigned [", 90), log.text()
    produce(data[:n1], 0)
    for p, log in zip(procs, logs):
        assert p.wait(timeout=120) == 0, log.text()
    first = {n: SnapshotStore(tmp_path / n).latest(n) for n in ("w0", "w1")}
    assert sum(s.model.n_learned for s in first.values()) == n1
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "merge", "--bootstrap-servers", b,
         "--topic", events, "--group", group, "--snapshot-topic", snapshots, "--snapshot-dir",
         str(tmp_path / "merger"), "--budget", "0", "--once", "--quiet"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    merged = SnapshotReader(b, snapshots).latest("merged", timeout=30)
    assert merged is not None and merged.offsets == {}

    # More events; w0 alone, adopting: it takes both partitions, w1's from w1's commit.
    produce(data[n1:], n1)
    p = run("w0", "--adopt-merged", level="INFO")
    adopting = _Stderr(p)
    assert p.wait(timeout=120) == 0, adopting.text()
    log = adopting.text()
    assert "INFO: assigned [0, 1]" in log, f"the adopting worker never got its partitions:\n{log}"
    store = SnapshotStore(tmp_path / "w0")
    final = store.latest("w0")
    assert "adopted" in final.meta, log[-3000:]  # the worker says why
    assert final.meta["adopted"]["seq"] == merged.seq
    # every merged support vector is in the final model (unbudgeted: nothing is dropped)
    assert _rows(merged.model) <= _rows(final.model)
    assert _rows(first["w1"].model) <= _rows(final.model)  # w1's knowledge came with it
    # offsets: exactly once across the group (w1's snapshot + w0's)
    assert final.model.n_learned + first["w1"].model.n_learned == n1 + n2
    ends = {str(q): len(range(q, n1 + n2, parts)) for q in range(parts)}
    assert {str(q): o for q, o in final.offsets[events].items()} == ends
    # the merged snapshot on the topic still carries no offsets (recovery reads workers only)
    assert SnapshotReader(b, snapshots).latest("merged", timeout=30).offsets == {}
