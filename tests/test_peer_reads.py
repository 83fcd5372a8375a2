"""An engine reads its peers' snapshots without touching them (docs/operations.md, "A merge
covers only the readable workers": the other models' files are their own engines').

Engines sharing a file store read each other's newest snapshots to know which events a
peer's durable model already holds. A peer whose newest snapshot is damaged was read with
``SnapshotStore.latest``, which renamed that file ``*.corrupt`` in the peer's own directory;
now the newest *readable* one is used and nothing of the peer's changes.
"""

from __future__ import annotations

import hashlib

from river import datasets
from test_merge_role import LOG, replay, write_log

from streamk.snapshot import SnapshotStore


def _files(directory) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def test_a_peers_damaged_snapshot_is_read_past_and_left_in_place(tmp_path):
    write_log(tmp_path / LOG, datasets.Bananas().take(600))
    w0 = replay(tmp_path, "w0", "snaps", "--max-events", "300", "--max-records", "50")
    assert w0["learned"] == 300 and w0["snapshots"] >= 2
    store = SnapshotStore(tmp_path / "snaps")
    infos = store.list("w0")
    older = store.load(infos[-2].path, build=False)
    newest = infos[-1].path
    raw = bytearray(newest.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    newest.write_bytes(bytes(raw))
    before = _files(tmp_path / "snaps" / "w0")

    # w1 resumes after w0's older snapshot: the events after it are in no durable model
    (stream,) = older.offsets
    covered = older.offsets[stream][0]
    assert covered < 300
    assert replay(tmp_path, "w1")["learned"] == 600 - covered
    assert _files(tmp_path / "snaps" / "w0") == before  # nothing renamed or rewritten


def test_a_peer_that_learned_a_shorter_version_of_a_growing_log_still_counts(tmp_path):
    """A replayed log's name in snapshots is its content's fingerprint, which changes as the
    log grows; the engine looked its peers' offsets up under the current name only. w1
    learned offsets 300-749 of the log when it had 750 records; w0 (its own snapshot at
    300), replayed once the log had 900, resumed at 300 and learned 300-749 a second time:
    600 events, 450 of them held by w1's durable model too. Now 150."""
    data = list(datasets.Bananas().take(900))
    write_log(tmp_path / LOG, data[:600])
    assert replay(tmp_path, "w0", "snaps", "--max-events", "300")["learned"] == 300
    write_log(tmp_path / LOG, data[600:750])
    assert replay(tmp_path, "w1")["learned"] == 450
    write_log(tmp_path / LOG, data[750:])
    assert replay(tmp_path, "w0")["learned"] == 150
    store = SnapshotStore(tmp_path / "snaps")
    assert store.latest("w0").model.n_learned + store.latest("w1").model.n_learned == 900


def test_a_damaged_merged_snapshot_is_read_past_by_an_adopting_worker(tmp_path):
    """With ``adopt_merged`` and no snapshot topic, a worker reads the merger's newest
    snapshot from the shared store: a damaged one was renamed ``*.corrupt`` by the worker
    (the merger's file); now the worker adopts the newest readable merge and leaves it."""
    from test_merge_role import merge

    data = list(datasets.Bananas().take(900))
    write_log(tmp_path / LOG, data[:600])
    replay(tmp_path, "w0", "snaps", "--max-events", "300")
    replay(tmp_path, "w1")
    assert merge(tmp_path)["seq"] == 0
    write_log(tmp_path / LOG, data[600:750])
    replay(tmp_path, "w1")
    assert merge(tmp_path)["seq"] == 1
    store = SnapshotStore(tmp_path / "snaps")
    newest = store.list("merged")[-1].path
    raw = bytearray(newest.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    newest.write_bytes(bytes(raw))
    before = _files(tmp_path / "snaps" / "merged")

    write_log(tmp_path / LOG, data[750:])
    assert replay(tmp_path, "w0", "snaps", "--adopt-merged")["learned"] == 150  # after w1's
    assert store.latest("w0").meta["adopted"]["seq"] == 0  # the newest readable merge
    assert _files(tmp_path / "snaps" / "merged") == before
