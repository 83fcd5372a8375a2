"""A worker of a group killed between its snapshot and its commit (issue 13, item 12).

Two ``streamk run`` processes share a 4-partition topic in one consumer group, each with
its own model name, seeing each other's snapshots in one snapshot directory or on the
snapshot topic. One is killed with SIGKILL at a chosen commit — after its snapshot is
durable, before the commit — so its durable model covers more than the group's committed
offsets say. The other takes its partitions (and, restarted, the killed one shares them
again) and must resume after the killed worker's *snapshot*, not its commit: across the
group every event is in exactly one model's newest durable snapshot (counted: the models'
learned-event counts add up to the stream, and the snapshots' offsets reach each
partition's end).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from streamk_run import run_args
from test_engine_crash import make_events, produce

from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N, PARTS = 2400, 4
KILLER = Path(__file__).parent / "helpers" / "kill_at_commit.py"


def worker_args(bootstrap, topic, store, model, idle=6.0, snapshot_topic=None):
    """``streamk run`` arguments; the group is named after the topic, so that no member
    left from another test's group (tansu keeps them a session timeout) assigns it."""
    return run_args(
        bootstrap,
        topic,
        f"{topic}-group",
        store,
        model_name=model,
        snapshot_every=150,
        max_records=50,
        budget=80,
        stop_when_idle=idle,
        snapshot_topic=snapshot_topic,
    )


def _start(args, kill_at=None):
    prefix = [sys.executable, "-m", "streamk.cli"]
    if kill_at is not None:
        prefix = [sys.executable, str(KILLER), str(kill_at)]
    return subprocess.Popen(prefix + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _covered(stores, topic):
    """Events in each model's newest snapshot, and the furthest offset per partition."""
    learned, ends = 0, {}
    for store, name in stores:
        snap = SnapshotStore(store).latest(name)
        if snap is None:  # killed before its first snapshot: it holds nothing
            continue
        learned += snap.model.n_learned
        for p, off in snap.offsets.get(topic, {}).items():
            ends[p] = max(ends.get(p, 0), off)
    return learned, ends


@pytest.mark.parametrize("shared", ["store", "topic"], ids=["shared-store", "snapshot-topic"])
@pytest.mark.parametrize("restart", [False, True], ids=["survivor-drains", "killed-restarts"])
def test_kill_between_snapshot_and_commit_leaves_no_overlap(
    kafka_broker, topic_name, tmp_path, restart, shared
):
    """The workers see each other's snapshots in one shared snapshot directory, or, each
    with its own directory (as deploy/ runs them), on the snapshot topic."""
    bootstrap = kafka_broker.bootstrap_servers
    produce(bootstrap, topic_name, make_events(N, seed=9), partitions=PARTS)
    if shared == "store":
        store_1 = store_2 = tmp_path / "snapshots"
        snapshot_topic = None
    else:
        store_1, store_2 = tmp_path / "one", tmp_path / "two"
        snapshot_topic = f"{topic_name}-snapshots"
    procs = []
    try:
        args_1 = worker_args(bootstrap, topic_name, store_1, "w1", snapshot_topic=snapshot_topic)
        # w1 starts first, alone in the group, so it surely reaches its third commit (it
        # would race a second worker for the partitions otherwise); w2 joins as it dies.
        killed = _start(args_1, kill_at=3)
        procs.append(killed)
        assert killed.wait(timeout=120) == -9, killed.stderr.read().decode()[-2000:]
        args_2 = worker_args(
            bootstrap, topic_name, store_2, "w2", idle=10.0, snapshot_topic=snapshot_topic
        )
        survivor = _start(args_2)
        procs.append(survivor)
        if restart:
            again = _start(
                worker_args(
                    bootstrap, topic_name, store_1, "w1", idle=10.0, snapshot_topic=snapshot_topic
                )
            )
            procs.append(again)
            assert again.wait(timeout=180) == 0, again.stderr.read().decode()[-2000:]
        assert survivor.wait(timeout=180) == 0, survivor.stderr.read().decode()[-2000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    learned, ends = _covered([(store_1, "w1"), (store_2, "w2")], topic_name)
    assert ends == {p: N // PARTS for p in range(PARTS)}
    assert learned == N  # an overlap would exceed N, a gap fall short


def test_group_worker_killed_at_random_points_and_restarted(kafka_broker, topic_name, tmp_path):
    """Two workers in one group; one is killed with SIGKILL at random moments and started
    again, three times, then both drain: every event in exactly one worker's snapshot."""
    import random
    import signal
    import time

    bootstrap = kafka_broker.bootstrap_servers
    produce(bootstrap, topic_name, make_events(N, seed=13), partitions=PARTS)
    store = tmp_path / "snapshots"
    rng = random.Random(17)
    procs = []
    kills = 0
    try:
        steady = _start(worker_args(bootstrap, topic_name, store, "w2", idle=12.0))
        procs.append(steady)
        for _ in range(3):
            victim = _start(worker_args(bootstrap, topic_name, store, "w1", idle=12.0))
            procs.append(victim)
            time.sleep(rng.uniform(2.0, 6.0))  # a join takes ~3 s: before, during or after
            if victim.poll() is None:
                victim.send_signal(signal.SIGKILL)
                victim.wait(timeout=30)
                kills += 1
        last = _start(worker_args(bootstrap, topic_name, store, "w1", idle=12.0))
        procs.append(last)
        assert last.wait(timeout=240) == 0, last.stderr.read().decode()[-2000:]
        assert steady.wait(timeout=240) == 0, steady.stderr.read().decode()[-2000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    assert kills >= 1, "no kill happened; the test proved nothing"
    learned, ends = _covered([(store, "w1"), (store, "w2")], topic_name)
    assert ends == {p: N // PARTS for p in range(PARTS)}
    assert learned == N


def _merge_once(bootstrap, topic, snapshot_topic, group, store) -> dict:
    """``streamk merge --once --json`` for the workers of ``{topic}-{group}``."""
    args = ["merge", "--bootstrap-servers", bootstrap, "--topic", topic, "--once", "--json"]
    args += ["--group", f"{topic}-{group}", "--snapshot-topic", snapshot_topic]
    args += ["--snapshot-dir", str(store), "--merge-name", f"merged-{group}"]
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    return {key: out[key] for key in ("excluded", "other_groups")} | {
        "sources": out["last"]["workers"]
    }


def test_a_second_group_on_the_same_snapshot_topic_learns_the_whole_stream(
    kafka_broker, topic_name, tmp_path
):
    """A canary group pointed at production's snapshot topic took production's workers for
    its own peers: it resumed after their snapshots and learned 0 of 2,400 events (session
    23's scale-out audit). Each snapshot now names its consumer group, and peers of another
    group are not ours: the canary learns every event, and production, restarted, still
    resumes after its own."""
    bootstrap = kafka_broker.bootstrap_servers
    produce(bootstrap, topic_name, make_events(N, seed=4), partitions=PARTS)
    snapshot_topic = f"{topic_name}-snapshots"

    def worker(group, model, store):
        args = run_args(
            bootstrap,
            topic_name,
            group,
            store,
            model_name=model,
            snapshot_every=150,
            max_records=50,
            budget=80,
            stop_when_idle=6.0,
            snapshot_topic=snapshot_topic,
            scale="none",  # (a merge refuses standardised workers)
        )
        done = subprocess.run(
            [sys.executable, "-m", "streamk.cli", *args], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return SnapshotStore(store).latest(model)

    production = worker(f"{topic_name}-prod", "prod", tmp_path / "prod")
    assert production.model.n_learned == N and production.meta["group"] == f"{topic_name}-prod"
    canary = worker(f"{topic_name}-canary", "canary", tmp_path / "canary")
    assert canary.model.n_learned == N  # 0 before: it resumed after production's snapshots
    assert canary.offsets[topic_name] == {p: N // PARTS for p in range(PARTS)}
    again = worker(f"{topic_name}-prod", "prod", tmp_path / "prod")
    assert again.model.n_learned == N  # production's own position, not the canary's

    # Each group's merger merges its own workers only: production's merged model had the
    # canary's mixed in, at half weight, and production's workers adopted it.
    for group, ours, theirs in (("prod", "prod", "canary"), ("canary", "canary", "prod")):
        merged = _merge_once(bootstrap, topic_name, snapshot_topic, group, tmp_path / group)
        assert [s["name"] for s in merged["sources"]] == [ours]
        assert merged["other_groups"] == {theirs: f"{topic_name}-{theirs}"}
        assert merged["excluded"] == []  # (an alert: a worker that could not be read)
        published = SnapshotStore(tmp_path / group).latest(f"merged-{group}")
        assert published.meta["group"] == f"{topic_name}-{group}"
        assert published.model.n_learned == N  # one model's events, not two models' mixed

    # A merger given a group no worker learned in says whose models it saw.
    args = ["merge", "--bootstrap-servers", bootstrap, "--topic", topic_name, "--once"]
    args += ["--snapshot-topic", snapshot_topic, "--snapshot-dir", str(tmp_path / "none")]
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("merge 'merged'"))
    assert "no worker snapshots yet" in line and "models of other consumer groups" in line
    assert f"canary ('{topic_name}-canary')" in line and f"prod ('{topic_name}-prod')" in line
