"""SnapshotStore: atomic writes, LATEST, retention, crash fallback, concurrent readers."""

from __future__ import annotations

import logging
import os
import threading

import numpy as np
import pytest

from streamk.errors import ConfigError, SnapshotError
from streamk.snapshot import SnapshotStore, dumps, register_class, verify_bytes


class Counter:
    """A learner whose whole state is a counter and an array derived from it."""

    def __init__(self, n: int = 0):
        self.n = n
        self.v = np.full(1000, float(n))

    def state(self) -> dict:
        return {"params": {}, "n": self.n, "v": self.v}

    @classmethod
    def from_state(cls, state: dict) -> Counter:
        model = cls(state["n"])
        if not np.array_equal(model.v, state["v"]):
            raise ValueError("v does not match n")
        return model


register_class("CounterStore", f"{__name__}:Counter")


@pytest.fixture
def store(tmp_path):
    return SnapshotStore(tmp_path / "snaps", keep=3)


def test_save_names_files_by_seq_and_moves_latest(store):
    p0 = store.save(Counter(1), "m", offsets={"t": {0: 5}})
    p1 = store.save(Counter(2), "m", metrics={"acc": 1.0})
    assert p0.name == "000000000000.snapshot" and p1.name == "000000000001.snapshot"
    assert (p1.parent / "LATEST").read_text() == "000000000001.snapshot\n"
    snap = store.latest("m")
    assert snap.model.n == 2 and snap.seq == 1 and snap.metrics == {"acc": 1.0}
    assert [i.seq for i in store.list("m")] == [0, 1]
    info = store.list("m")[-1]
    assert info.path == p1 and info.size == p1.stat().st_size and info.mtime > 0
    assert store.names() == ["m"]


def test_explicit_seq_and_bytes(store):
    store.save(Counter(1), "m", seq=10)
    path = store.save(dumps(Counter(2), seq=12), "m")
    assert path.name == "000000000012.snapshot"
    assert store.load(path).model.n == 2
    with pytest.raises(SnapshotError, match="seq"):
        store.save(dumps(Counter(3), seq=13), "m", seq=14)
    # A valid snapshot at or above the seq being saved: another engine writes this model.
    for seq in (11, 12):
        with pytest.raises(SnapshotError, match="another engine is writing model 'm'") as err:
            store.save(Counter(3), "m", seq=seq)
        assert "give each worker its own model_name" in str(err.value).lower()
    assert store.latest("m").model.n == 2
    assert store.next_seq("m") == 13


def test_a_snapshot_above_what_this_writer_saved_last_is_another_writers(store):
    """An engine saves above every stored seq (``next_seq``), so the check at or above the
    seq it saves never meets a second engine: ``after`` (the seq it last wrote or
    restored) does. Two engines on one model each saved above the other, unrefused, until
    retention deleted one's model (session 23's Kafka audit)."""
    store.save(Counter(1), "m", seq=1)
    store.save(Counter(2), "m", seq=2)  # another writer's
    with pytest.raises(SnapshotError, match="another engine is writing model 'm'") as err:
        store.save(Counter(3), "m", seq=store.next_seq("m"), after=1)
    assert "seq 2 (000000000002.snapshot), which this engine did not write" in str(err.value)
    assert store.latest("m").model.n == 2 and store.next_seq("m") == 3
    store.save(Counter(3), "m", seq=3, after=2)  # the writer of seq 2 goes on
    # a damaged file above ``after`` is nobody's snapshot: it stays, and the save goes on
    (store.directory / "m" / "000000000004.snapshot").write_bytes(b"garbage")
    store.save(Counter(4), "m", seq=5, after=3)
    assert (store.directory / "m" / "000000000004.snapshot").read_bytes() == b"garbage"
    assert store.latest("m").model.n == 4


def test_a_model_directory_deleted_under_a_running_writer_is_said(store, caplog):
    """``rm -rf`` of a model's directory while its engine runs: the next save made it
    again without a word (session 24's limits audit), while docs/operations.md tells
    operators that deleting it starts a fresh model, which holds only for a stopped
    engine. The save goes on (the model in memory is whole) and says so once."""
    import shutil

    store.save(Counter(1), "m", seq=1)
    shutil.rmtree(store.directory / "m")
    with caplog.at_level(logging.WARNING, logger="streamk.snapshot"):
        store.save(Counter(2), "m", seq=2, after=1)
    said = [r.getMessage() for r in caplog.records if "was deleted while" in r.getMessage()]
    assert len(said) == 1 and "starts a fresh model only while its engine is stopped" in said[0]
    assert store.latest("m").model.n == 2
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="streamk.snapshot"):
        store.save(Counter(3), "m", seq=3, after=2)  # the directory is there again
        store.save(Counter(1), "fresh", seq=1, after=0)  # a first save: nothing to say
    assert not [r for r in caplog.records if "was deleted while" in r.getMessage()]


def test_corrupt_bytes_are_never_written(store):
    data = dumps(Counter(1))
    with pytest.raises(SnapshotError):
        store.save(data[:-3], "m")
    assert store.list("m") == []


def test_retention_keeps_the_newest(store):
    for n in range(7):
        store.save(Counter(n), "m")
    assert [i.seq for i in store.list("m")] == [4, 5, 6]
    assert store.latest("m").model.n == 6


def test_latest_of_unknown_model_is_none(store):
    assert store.latest("nothing") is None
    assert store.list("nothing") == []


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "x" * 200, 5])
def test_model_names_are_checked(store, name):
    with pytest.raises(SnapshotError, match="model name"):
        store.save(Counter(), name)


def test_keep_is_validated(tmp_path):
    with pytest.raises(ConfigError):
        SnapshotStore(tmp_path, keep=0)


def test_crash_leaves_temp_and_truncated_newest_then_latest_falls_back(store, caplog):
    for n in range(3):
        store.save(Counter(n), "m")
    model_dir = store.directory / "m"
    good = (model_dir / "000000000002.snapshot").read_bytes()
    # A crash mid-save: a stray temp file, and (on a filesystem that lost data) a truncated newest.
    stray = model_dir / ".000000000004.snapshot.999.dead.tmp"
    stray.write_bytes(good[:100])
    (model_dir / "000000000003.snapshot").write_bytes(good[: len(good) // 2])
    with caplog.at_level(logging.WARNING, logger="streamk.snapshot"):
        snap = store.latest("m")
    assert snap.seq == 2 and snap.model.n == 2
    warning = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warning) == 1 and "000000000003.snapshot" in warning[0].getMessage()
    assert "truncated" in warning[0].getMessage()
    assert [i.seq for i in store.list("m")] == [0, 1, 2]  # temp files are not snapshots
    ok, reason = store.verify(model_dir / "000000000003.snapshot.corrupt")  # moved aside
    assert not ok and "truncated" in reason
    assert store.verify(model_dir / "000000000002.snapshot") == (True, "ok")
    store.save(Counter(9), "m")  # the next save clears the stray temp file
    assert not stray.exists() and store.latest("m").model.n == 9


def test_all_corrupt_stops_with_the_reset_command(store, caplog):
    path = store.save(Counter(1), "m")
    path.write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger="streamk.snapshot"):
        with pytest.raises(SnapshotError, match="no valid snapshot") as err:
            store.latest("m")
    assert f"streamk snapshot reset --dir {store.directory} --model m" in str(err.value)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and path.name in messages[0] and "moved it aside" in messages[0]
    with pytest.raises(SnapshotError, match="no valid snapshot"):  # and on every restart
        store.latest("m")


def test_non_corruption_errors_propagate(store):
    """An older file would fail the same way, so latest() must not silently go back."""
    store.save(Counter(1), "m")
    store.save(Counter(2), "m")
    register_class("CounterStore", "streamk.no_such_module:Counter", replace=True)
    try:
        with pytest.raises(SnapshotError, match="cannot be imported"):
            store.latest("m")
    finally:
        register_class("CounterStore", f"{__name__}:Counter", replace=True)
    assert store.latest("m").model.n == 2


def test_oversized_file_is_refused_without_reading(tmp_path):
    from streamk.snapshot import Limits

    big = SnapshotStore(tmp_path, limits=Limits(max_bytes=100))
    path = tmp_path / "m" / "000000000000.snapshot"
    path.parent.mkdir()
    path.write_bytes(b"\0" * 101)
    assert big.verify(path)[0] is False
    assert "max_bytes" in big.verify(path)[1]


def test_write_failure_is_a_snapshot_error(store, monkeypatch):
    store.save(Counter(1), "m")

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(SnapshotError, match="No space"):
        store.save(Counter(2), "m")
    monkeypatch.undo()
    assert store.latest("m").model.n == 1
    assert not list((store.directory / "m").glob(".*.tmp"))


def test_concurrent_readers_never_see_a_partial_file(tmp_path, caplog):
    store = SnapshotStore(tmp_path, keep=2)
    store.save(Counter(0), "m")
    done = threading.Event()
    errors: list[BaseException] = []
    seen: dict[int, list[int]] = {0: [], 1: []}

    def read(reader: int) -> None:
        try:
            while not done.is_set():
                snap = store.latest("m")
                assert snap is not None and snap.model.n == snap.seq
                seen[reader].append(snap.seq)
                for info in store.list("m"):
                    try:
                        data = info.path.read_bytes()
                    except FileNotFoundError:  # retention removed it meanwhile
                        continue
                    assert verify_bytes(data) == (True, "ok"), info.path
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read, args=(i,)) for i in seen]
    with caplog.at_level(logging.WARNING, logger="streamk.snapshot"):
        for t in readers:
            t.start()
        try:
            for n in range(1, 40):
                store.save(Counter(n), "m")
        finally:
            done.set()
            for t in readers:
                t.join()
    assert not errors, errors
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    for seqs in seen.values():
        assert seqs and seqs == sorted(seqs)  # a reader never goes back in time
    assert store.latest("m").model.n == 39
