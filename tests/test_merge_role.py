"""``streamk merge``: the merge role over a file store, with real processes and real files.

Oracles: the merged model's decision function against each worker's own, combined by hand
with weights n_learned_i / N (unbudgeted workers with a fixed kernel: nothing is compressed,
so the merge is exactly that sum); the provenance against the snapshots the workers wrote;
where workers resume against the events each one must learn.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from http_probe import free_port, http_get, metric_samples
from river import datasets

from streamk.snapshot import SnapshotStore
from streamk.sources.replay import ReplaySource

ROOT = str(Path(__file__).resolve().parents[1])
LOG = "log.jsonl"


def write_log(path: Path, rows) -> None:
    with open(path, "a") as f:
        for x, y in rows:
            f.write(json.dumps({"x": x, "y": bool(y)}) + "\n")


def run_cli(cwd: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """The real ``streamk`` entry point in ``cwd``, whatever its exit code."""
    return subprocess.run(
        [sys.executable, "-m", "streamk.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def streamk(cwd: Path, *args: str) -> dict:
    done = run_cli(cwd, *args, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def merge_once(cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    """``streamk merge --once`` over the shared store ``snaps``, whatever its exit code."""
    args = ("merge", "--snapshot-dir", "snaps", "--topic", LOG, "--once", *extra)
    return run_cli(cwd, *args, timeout=120)


def replay(cwd: Path, name: str, store: str = "snaps", *extra: str) -> dict:
    return streamk(
        cwd, "replay", LOG, "--model-name", name, "--snapshot-dir", store,
        "--kernel", "rbf:0.5", "--budget", "0", "--scale", "none", "--snapshot-every", "100",
        "--quiet", *extra,
    )  # fmt: skip


def merge(cwd: Path, store: str = "snaps") -> dict:
    return streamk(cwd, "merge", "--snapshot-dir", store, "--topic", LOG, "--once", "--quiet")


def test_merge_once_publishes_the_weighted_sum_once_with_provenance_and_no_offsets(tmp_path):
    data = list(datasets.Bananas().take(800))
    write_log(tmp_path / LOG, data[:600])
    assert replay(tmp_path, "w0", "snaps", "--max-events", "300")["learned"] == 300
    assert replay(tmp_path, "w1")["learned"] == 300  # resumes after w0's snapshot
    store = SnapshotStore(tmp_path / "snaps")
    w0, w1 = store.latest("w0"), store.latest("w1")

    first = merge(tmp_path)
    stream = ReplaySource(tmp_path / LOG).name  # the log's name in snapshots: its content
    assert first["published"] == 1 and first["seq"] == 0
    merged = store.latest("merged")
    assert merged.seq == 0 and merged.offsets == {}  # not a worker: no coverage claimed
    got = {s["name"]: (s["seq"], s["offsets"], s["n_learned"]) for s in merged.meta["sources"]}
    assert got == {
        "w0": (w0.seq, {stream: {"0": 300}}, 300),
        "w1": (w1.seq, {stream: {"0": 600}}, 300),
    }
    for x, _ in data[600:700]:
        expected = 0.5 * w0.model.decision_function_one(x) + 0.5 * w1.model.decision_function_one(x)
        np.testing.assert_allclose(
            merged.model.decision_function_one(x), expected, rtol=1e-9, atol=1e-12
        )

    # Unchanged workers: a second pass (a restarted merger) publishes nothing.
    again = merge(tmp_path)
    assert again["published"] == 0 and again["last"]["skipped"].startswith("unchanged")
    assert [i.seq for i in store.list("merged")] == [0]

    # A worker moves on: the next pass publishes seq 1 with its new snapshot.
    write_log(tmp_path / LOG, data[600:])
    assert replay(tmp_path, "w1")["learned"] == 200  # the merged snapshot is not coverage
    third = merge(tmp_path)
    assert third["published"] == 1 and third["seq"] == 1
    sources = {s["name"]: s for s in store.latest("merged").meta["sources"]}
    assert sources["w1"]["seq"] == store.latest("w1").seq
    stream = ReplaySource(tmp_path / LOG).name  # the log's name in snapshots: its content
    assert sources["w1"]["offsets"] == {stream: {"0": 800}} and sources["w1"]["n_learned"] == 500


def test_a_merged_snapshot_does_not_move_a_workers_resume_position(tmp_path):
    """A store holding only a merged model: a worker learns every event (nothing is durable
    in any worker's model); had the merge carried its sources' offsets, it would learn none."""
    write_log(tmp_path / LOG, datasets.Bananas().take(400))
    replay(tmp_path, "w0", "snaps", "--max-events", "250")
    replay(tmp_path, "w1")
    assert merge(tmp_path)["published"] == 1
    shutil.copytree(tmp_path / "snaps" / "merged", tmp_path / "fresh" / "merged")
    assert replay(tmp_path, "w2", "fresh")["learned"] == 400
    # and in the shared store, a new worker still resumes after w0 and w1: nothing to learn
    assert replay(tmp_path, "w3")["learned"] == 0


def test_merge_with_no_workers_publishes_nothing(tmp_path):
    out = merge(tmp_path)
    assert out["published"] == 0 and out["last"]["skipped"] == "no worker snapshots yet"
    assert not (tmp_path / "snaps" / "merged").exists()


def test_the_merge_loop_publishes_each_change_once_and_stops_on_sigterm(tmp_path):
    """``streamk merge`` without --once: many passes, one merge per change of the workers."""
    import signal
    import time

    write_log(tmp_path / LOG, datasets.Bananas().take(300))
    replay(tmp_path, "w0", "snaps", "--max-events", "150")
    store = SnapshotStore(tmp_path / "snaps")
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamk.cli", "merge", "--snapshot-dir", "snaps", "--topic", LOG,
         "--merge-every", "0.2", "--json"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def wait_for_seq(seq: int) -> None:
        deadline = time.monotonic() + 60
        while not [i for i in store.list("merged") if i.seq == seq]:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, f"no merged seq {seq}"
            time.sleep(0.1)

    try:
        wait_for_seq(0)
        replay(tmp_path, "w1")  # a second worker appears: one more merge
        wait_for_seq(1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert summary["published"] == 2 and summary["passes"] > 2  # passes over unchanged workers
    assert [i.seq for i in store.list("merged")] == [0, 1]
    names = [s["name"] for s in store.latest("merged").meta["sources"]]
    assert names == ["w0", "w1"]


def test_workers_that_standardise_their_features_are_refused_with_the_fix(tmp_path):
    write_log(tmp_path / LOG, datasets.Bananas().take(200))
    for name, scale in (("w0", "standard"), ("w1", "standard")):
        streamk(tmp_path, "replay", LOG, "--model-name", name, "--snapshot-dir", "snaps",
                "--scale", scale, "--quiet")  # fmt: skip
    done = merge_once(tmp_path)
    assert done.returncode == 2
    assert "standardise their features" in done.stderr and 'scale = "none"' in done.stderr
    assert not (tmp_path / "snaps" / "merged").exists()


def test_a_damaged_local_copy_of_the_merge_does_not_stop_the_merger(tmp_path):
    """Every local merged file damaged (a bad volume): the merger stopped with "no valid
    snapshot" on every pass, even with a snapshot topic holding what it published. It reads
    its seqs without loading them, merges again, and publishes above them (real CLI)."""
    data = list(datasets.Bananas().take(900))
    write_log(tmp_path / LOG, data[:600])
    replay(tmp_path, "w0", "snaps", "--max-events", "300")
    replay(tmp_path, "w1")
    assert merge(tmp_path)["seq"] == 0
    path = tmp_path / "snaps" / "merged" / "000000000000.snapshot"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    write_log(tmp_path / LOG, data[600:900])
    replay(tmp_path, "w1")  # a worker moves on
    again = merge(tmp_path)
    assert again["published"] == 1 and again["seq"] == 1
    merged = SnapshotStore(tmp_path / "snaps").latest("merged")
    assert merged.seq == 1
    assert sum(s["n_learned"] for s in merged.meta["sources"]) == 900


def _reseal(path: Path, target: Path, version: int) -> None:
    """Write ``path``'s snapshot to ``target`` sealed as format ``version`` (a newer writer)."""
    import msgpack

    outer = msgpack.unpackb(path.read_bytes(), raw=False)
    outer["version"] = version
    target.write_bytes(msgpack.packb(outer, use_bin_type=True))


def test_unreadable_workers_are_listed_as_excluded_and_their_files_left_untouched(tmp_path):
    """w0 valid, w1 every snapshot damaged, w2 an empty directory, w3 whose newest snapshot
    is from a newer format version. The merger merged w0 alone, said so only in WARNINGs,
    and renamed w1's file to ``*.corrupt`` in w1's own directory. Now: nothing in the store
    changes, the summary lists w1 and w2 with why, and w3's older snapshot is merged."""
    import hashlib

    write_log(tmp_path / LOG, datasets.Bananas().take(900))
    for name in ("w0", "w1", "w3"):
        assert replay(tmp_path, name, "snaps", "--max-events", "300")["learned"] == 300
    store = SnapshotStore(tmp_path / "snaps")
    w0, w3 = store.latest("w0"), store.latest("w3")
    (tmp_path / "snaps" / "w2").mkdir()
    for info in store.list("w1"):
        raw = bytearray(info.path.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        info.path.write_bytes(bytes(raw))
    newest = store.list("w3")[-1].path
    _reseal(newest, newest.with_name(f"{w3.seq + 1:012d}.snapshot"), version=99)

    def files() -> dict[str, str]:
        root = tmp_path / "snaps"
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.parts[-2] != "merged" and p.name != ".lock"
        }

    before = files()
    done = merge_once(tmp_path, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert files() == before  # a reader: no other model's file renamed, moved or rewritten
    assert not list((tmp_path / "snaps" / "w1").glob("*.corrupt*"))
    out = json.loads(done.stdout)
    excluded = {e["name"]: e["reason"] for e in out["excluded"]}
    assert sorted(excluded) == ["w1", "w2"]
    assert "damaged" in excluded["w1"] and excluded["w2"] == "no snapshot files"
    assert out["last"]["excluded"] == out["excluded"]
    merged = store.latest("merged")
    got = {s["name"]: (s["seq"], s["n_learned"]) for s in merged.meta["sources"]}
    assert got == {"w0": (w0.seq, 300), "w3": (w3.seq, 300)}  # w3: the newest it can read
    assert "format version 99 is newer" in done.stderr  # the skipped file is said once

    # the text summary names them too
    text = merge_once(tmp_path)
    assert text.returncode == 0, text.stderr[-3000:]
    line = next(ln for ln in text.stderr.splitlines() if ln.startswith("merge 'merged'"))
    assert "excluded w1 (" in line and "w2 (no snapshot files)" in line
    assert "name:w1" in text.stdout and "name:w2" in text.stdout


def test_a_refused_merge_names_the_workers_not_their_positions(tmp_path):
    """Workers configured with different kernels: the refusal said "model 1 has kernel=...
    where model 0 has ..."; it names w0 and w1 (real CLI, exit 2, nothing published)."""
    write_log(tmp_path / LOG, datasets.Bananas().take(300))
    replay(tmp_path, "w0", "snaps", "--max-events", "150")
    replay(tmp_path, "w1", "snaps", "--kernel", "rbf:0.25")  # the last --kernel wins
    done = merge_once(tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "worker 'w1' has kernel=" in done.stderr
    assert "where worker 'w0' has kernel=" in done.stderr
    assert "model 1" not in done.stderr
    assert not (tmp_path / "snaps" / "merged").exists()


def test_the_merge_loop_serves_metrics_on_metrics_port(tmp_path):
    """``--metrics-port`` was accepted and nothing listened (connection refused). The merger
    serves /metrics (passes, published, seq, workers, excluded), /healthz and /ready, and
    stops serving when it stops on SIGTERM."""
    import signal
    import socket
    import time

    write_log(tmp_path / LOG, datasets.Bananas().take(300))
    replay(tmp_path, "w0", "snaps", "--max-events", "150")
    replay(tmp_path, "w1")
    (tmp_path / "snaps" / "w2").mkdir()  # no snapshot: excluded
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamk.cli", "merge", "--snapshot-dir", "snaps", "--topic", LOG,
         "--merge-every", "1", "--metrics-port", str(port), "--json"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "no second pass seen on /metrics"
            try:
                status, text = http_get(port, "/metrics")
            except OSError:  # not listening yet
                time.sleep(0.2)
                continue
            got = metric_samples(text)
            if got["streamk_merge_passes_total"] >= 2:
                break
            time.sleep(0.2)
        assert status == 200
        assert got["streamk_merge_published_total"] == 1  # the second pass: unchanged
        assert got["streamk_merge_seq"] == 0
        assert got["streamk_merge_workers"] == 2 and got["streamk_merge_excluded"] == 1
        assert got["streamk_merge_failures_total"] == 0
        assert got["streamk_merge_last_pass_seconds"] > 0
        assert "streamk_events_learned" not in got  # the engine's, not a merger's
        assert http_get(port, "/healthz")[0] == 200 and http_get(port, "/ready")[0] == 200
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out)["published"] == 1
    with socket.socket() as s:  # the endpoint went with the process
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_a_metrics_port_in_use_stops_the_merger_naming_the_key(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = merge_once(tmp_path, "--metrics-port", str(port))
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"metrics_port {port}" in done.stderr and len(done.stderr.strip().splitlines()) == 1
