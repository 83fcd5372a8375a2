"""The snapshot store heals: every damaged or stray file is set aside or skipped, never fatal.

Real files in a real directory, a real learner, and the real ``streamk`` CLI in a
subprocess for the documented fresh start. The oracle for ``latest()`` is the seq of
the newest intact file the test itself wrote.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamk.errors import SnapshotError
from streamk.learners.perceptron import KernelPerceptron
from streamk.snapshot import SnapshotStore

SEQS = [0, 1, 2, 3, 4]  # written by every test; keep=10 so retention never interferes


def _model(n: int) -> KernelPerceptron:
    from streamk.kernels import RBF

    model = KernelPerceptron(kernel=RBF(gamma=0.5))
    for i in range(n):
        model.learn_one({"a": float(i % 5), "b": float(i % 3)}, i % 2 == 0)
    return model


@pytest.fixture
def store(tmp_path):
    s = SnapshotStore(tmp_path / "snaps", keep=10)
    for seq in SEQS:
        s.save(_model(seq + 2), "m", offsets={"events": {0: 100 * seq}}, seq=seq)
    return s


def streamk(*args: str) -> subprocess.CompletedProcess:
    """The real ``streamk`` entry point, importing this tree's code."""
    exe = Path(sys.executable).with_name("streamk")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, env=env)


def _file(store: SnapshotStore, seq: int) -> Path:
    return store.directory / "m" / f"{seq:012d}.snapshot"


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def bitflip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _warnings(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name.startswith("streamk")
    ]


@pytest.mark.parametrize(
    ("damage", "bad", "intact"),
    [
        ({4: truncate}, [4], 3),
        ({4: bitflip}, [4], 3),
        ({4: truncate, 3: bitflip}, [4, 3], 2),
    ],
    ids=["newest-truncated", "newest-bitflipped", "two-newest-corrupt"],
)
def test_damaged_newest_files_are_set_aside(store, caplog, damage, bad, intact):
    for seq, hurt in damage.items():
        hurt(_file(store, seq))
    with caplog.at_level(logging.WARNING, logger="streamk"):
        snap = store.latest("m")
        again = store.latest("m")  # a restart: nothing more to report
    assert snap.seq == intact and again.seq == intact
    assert snap.offsets == {"events": {0: 100 * intact}}
    warnings = _warnings(caplog)
    assert len(warnings) == len(bad)  # one line per damaged file, once
    for seq in bad:
        path = _file(store, seq)
        assert not path.exists()
        assert path.with_name(path.name + ".corrupt").is_file()  # kept for inspection
        assert any(str(path) in w and "moved it aside" in w for w in warnings)
    assert store.next_seq("m") == 5  # above the damaged seqs too
    written = store.save(_model(9), "m", seq=store.next_seq("m"))
    assert written.name == "000000000005.snapshot"
    assert store.latest("m").seq == 5


def test_all_corrupt_stops_then_reset_cli_starts_fresh(store, caplog):
    for seq in SEQS:
        (truncate if seq % 2 else bitflip)(_file(store, seq))
    with caplog.at_level(logging.WARNING, logger="streamk"):
        with pytest.raises(SnapshotError) as err:
            store.latest("m")
    message = str(err.value)
    assert "no valid snapshot" in message
    assert f"streamk snapshot reset --dir {store.directory} --model m" in message
    assert len(_warnings(caplog)) == len(SEQS)
    with pytest.raises(SnapshotError, match="no valid snapshot"):  # every restart, not once
        SnapshotStore(store.directory).latest("m")
    run = streamk("snapshot", "reset", "--dir", str(store.directory), "--model", "m")
    assert run.returncode == 0, run.stderr
    assert "fresh model" in run.stdout
    fresh = SnapshotStore(store.directory)
    assert fresh.latest("m") is None
    quarantined = list((store.directory / "m" / "quarantine").rglob("*.corrupt"))
    assert len(quarantined) == len(SEQS)
    assert fresh.next_seq("m") == 5  # seqs continue above the ones set aside
    assert fresh.save(_model(3), "m", seq=fresh.next_seq("m")).name == "000000000005.snapshot"
    assert fresh.latest("m").seq == 5


def test_reset_refuses_a_model_with_a_valid_snapshot(store):
    run = streamk("snapshot", "reset", "--dir", str(store.directory), "--model", "m")
    assert run.returncode == 2 and "--force" in run.stderr
    assert store.latest("m").seq == 4


def test_truly_empty_store_is_a_fresh_model(tmp_path):
    store = SnapshotStore(tmp_path / "snaps")
    assert store.latest("m") is None and store.next_seq("m") == 0
    (tmp_path / "snaps" / "m").mkdir(parents=True)
    assert store.latest("m") is None


def test_junk_high_seq_file_never_blocks_saves(store, caplog):
    junk = store.directory / "m" / "999999999999.snapshot"
    junk.write_bytes(b"not a snapshot at all")
    assert store.next_seq("m") == 999999999999 + 1
    with caplog.at_level(logging.WARNING, logger="streamk"):
        assert store.latest("m").seq == 4
    assert not junk.exists() and junk.with_name(junk.name + ".corrupt").exists()
    assert len(_warnings(caplog)) == 1 and str(junk) in _warnings(caplog)[0]
    assert store.next_seq("m") == 10**12  # still above the junk, now set aside
    path = store.save(_model(7), "m", seq=store.next_seq("m"))
    assert path.name == "1000000000000.snapshot"
    assert store.latest("m").seq == 10**12


def test_junk_above_a_lower_explicit_seq_is_set_aside_on_save(store):
    junk = store.directory / "m" / "000000000050.snapshot"
    junk.write_bytes(b"\x00" * 64)
    store.save(_model(3), "m", seq=5)  # the engine's own seq + 1: the junk does not block it
    assert junk.with_name(junk.name + ".corrupt").exists()
    assert store.latest("m").seq == 5


@pytest.mark.timeout(60)  # a reader that opened the FIFO would block here for ever
@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink-to-fifo", "dangling-symlink"])
def test_non_regular_entries_are_skipped_unopened(store, caplog, tmp_path, kind):
    entry = store.directory / "m" / "000000000009.snapshot"
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "directory":
        entry.mkdir()
    elif kind == "symlink-to-fifo":
        os.mkfifo(tmp_path / "pipe")
        entry.symlink_to(tmp_path / "pipe")
    else:
        entry.symlink_to(tmp_path / "nowhere")
    with caplog.at_level(logging.WARNING, logger="streamk"):
        assert store.latest("m").seq == 4
        assert store.latest("m").seq == 4
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and str(entry) in warnings[0] and "not opened" in warnings[0]
    assert os.path.lexists(entry)  # not ours to move: skipped only
    assert store.next_seq("m") == 10
    assert store.save(_model(3), "m", seq=store.next_seq("m")).name == "000000000010.snapshot"
    assert store.latest("m").seq == 10
    ok, reason = store.verify(entry)  # opening non-blocking: refused, never hangs
    assert not ok


@pytest.mark.parametrize("pointer", ["000000000077.snapshot\n", "\x00\xff garbage", None])
def test_dangling_or_corrupt_latest_pointer_falls_back_to_the_directory(store, pointer):
    latest = store.directory / "m" / "LATEST"
    if pointer is None:
        latest.unlink()
    else:
        latest.write_bytes(pointer.encode("latin-1"))
    assert store.latest("m").seq == 4
    store.save(_model(3), "m", seq=store.next_seq("m"))
    assert latest.read_text() == "000000000005.snapshot\n"


def test_second_engine_on_the_same_model_gets_cause_and_fix(store):
    """Two writers: the one behind meets a valid snapshot at or above its seq."""
    with pytest.raises(SnapshotError) as err:
        store.save(_model(3), "m", seq=3)
    message = str(err.value)
    assert f"another engine is writing model 'm' to {store.directory}" in message
    assert "give each worker its own model_name" in message.lower()
    assert store.latest("m").seq == 4  # nothing was overwritten
    assert not list((store.directory / "m").glob("*.corrupt"))  # and nothing called damaged


def test_snapshot_over_the_limits_is_not_set_aside_as_damage(tmp_path):
    """A well-formed model larger than this reader's limits stops the start, untouched."""
    from streamk.snapshot import Limits, SnapshotOverLimit

    writer = SnapshotStore(tmp_path / "snaps")
    writer.save(_model(3), "m", seq=0)
    path = writer.save(_model(40), "m", seq=1)
    n_support = writer.latest("m").model.n_support
    assert n_support > 3
    reader = SnapshotStore(tmp_path / "snaps", limits=Limits(max_support=n_support - 1))
    with pytest.raises(SnapshotOverLimit, match="max_support") as err:
        reader.latest("m")
    assert "not set aside" in str(err.value)
    assert path.is_file() and not list(path.parent.glob("*.corrupt"))
    with pytest.raises(SnapshotError, match="another engine"):  # intact, so not overwritten
        reader.save(_model(3), "m", seq=1)
