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
