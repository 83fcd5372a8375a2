"""``streamk snapshot verify`` and ``ls`` show the files the store set aside as damaged.

Session 23 audit: when every snapshot of a model was damaged the engine renamed them
``*.corrupt`` and stopped saying "Inspect them (streamk snapshot verify DIR/NAME)", but
``verify DIR/NAME`` then said ``no snapshot files found`` (exit 2) and ``ls DIR`` said
``no snapshots under DIR``: both ignored the ``*.corrupt`` files. Stores here are made
damaged by the engine itself (a real replay, its snapshot files then bit-flipped, a second
replay) or by :meth:`SnapshotStore.latest`; the commands run through the real ``streamk``
entry point. The oracles are what the test did to the files (which were flipped, which
truncated) and the directory listing on disk.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

from river import datasets
from streamk_run import streamk

from streamk.learners import KernelPerceptron
from streamk.snapshot import SnapshotStore
from streamk.sources.replay import write_log


def _flip(path: Path) -> None:
    """Flip every bit of the middle byte: inside the body, so the checksum no longer fits."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _engine_set_aside_every_snapshot(tmp_path: Path) -> tuple[Path, str]:
    """A replay's store whose every snapshot the engine then set aside; (store, its error)."""
    log = tmp_path / "events.jsonl"
    rows = itertools.islice(datasets.Bananas(), 600)
    write_log(log, [{"x": x, "y": y} for x, y in rows])
    store = tmp_path / "snaps"
    args = ("replay", str(log), "--snapshot-dir", str(store), "--snapshot-every", "200")
    first = streamk(*args, "--quiet")
    assert first.returncode == 0, first.stderr[-2000:]
    saved = sorted((store / "model").glob("*.snapshot"))
    assert len(saved) >= 2
    for path in saved:
        _flip(path)
    second = streamk(*args, "--quiet")
    assert second.returncode == 2, second.stderr[-2000:]
    on_disk = sorted(p.name for p in (store / "model").iterdir() if p.name.endswith(".corrupt"))
    assert on_disk == [p.name + ".corrupt" for p in saved]  # the engine set them all aside
    return store, second.stderr


def test_verify_named_by_the_engine_reports_every_set_aside_file_and_why(tmp_path):
    store, error = _engine_set_aside_every_snapshot(tmp_path)
    named = re.search(r"Inspect them \(streamk snapshot verify (\S+)\)", error)
    assert named, error
    target = named.group(1)  # exactly the command the engine told the operator to run
    out = streamk("snapshot", "verify", target)
    assert out.returncode == 1, out.stdout + out.stderr  # 1: a corrupt snapshot was found
    assert "Traceback" not in out.stderr and "no snapshot files found" not in out.stderr
    corrupt = sorted((store / "model").glob("*.snapshot.corrupt"))
    for path in corrupt:
        line = next(ln for ln in out.stdout.splitlines() if ln.startswith(f"CORRUPT {path}:"))
        assert "set aside by the store as damaged" in line
        assert "checksum mismatch" in line  # checked again: the flipped byte, found anew
    assert f"0 ok, {len(corrupt) + 1} corrupt ({len(corrupt)} of them set aside" in out.stdout
    assert f"streamk snapshot reset --dir {store} --model model" in out.stdout
    assert "(the store set it aside as damaged)" in out.stdout  # what LATEST still names

    doc = json.loads(streamk("snapshot", "verify", target, "--json").stdout)
    aside = [r for r in doc["results"] if r["set_aside"]]
    assert sorted(r["path"] for r in aside) == [str(p) for p in corrupt]
    assert not any(r["ok"] for r in aside) and doc["ok"] is False
    assert doc["models_without_valid_snapshot"] == ["model"]


def test_ls_lists_set_aside_files_marked_as_damaged(tmp_path):
    store, _ = _engine_set_aside_every_snapshot(tmp_path)
    out = streamk("snapshot", "ls", str(store))
    assert out.returncode == 0, out.stderr
    assert "no snapshots under" not in out.stdout
    corrupt = sorted((store / "model").glob("*.snapshot.corrupt"))
    for path in corrupt:
        (line,) = [ln for ln in out.stdout.splitlines() if str(path) in ln]
        assert line.endswith(f"{path} (damaged, set aside)")
        assert line.split()[:2] == ["model", str(int(path.name.split(".")[0]))]  # its seq
    assert f"streamk snapshot verify {store} says why" in out.stdout

    doc = json.loads(streamk("snapshot", "ls", str(store), "--json").stdout)
    assert [(r["path"], r["set_aside"]) for r in doc["snapshots"]] == [
        (str(p), True) for p in corrupt
    ]
    show = streamk("snapshot", "show", str(store / "model"))
    assert show.returncode == 2
    assert f"only {len(corrupt)} set aside as damaged" in show.stderr
    assert f"streamk snapshot verify {store / 'model'}" in show.stderr


def test_a_store_that_healed_shows_the_valid_file_and_the_set_aside_one(tmp_path):
    """latest() sets a truncated newest file aside and falls back: both are reported."""
    store = SnapshotStore(tmp_path / "snaps")
    model = KernelPerceptron()
    for x, y in itertools.islice(datasets.Bananas(), 50):
        model.learn_one(x, y)
    store.save(model, "m")
    store.save(model, "m")
    newest = tmp_path / "snaps" / "m" / "000000000001.snapshot"
    newest.write_bytes(newest.read_bytes()[:-40])  # truncated, as by a full disk
    assert store.latest("m").seq == 0  # healed: the older file
    aside = newest.with_name(newest.name + ".corrupt")
    assert aside.is_file() and not newest.exists()

    out = streamk("snapshot", "verify", str(tmp_path / "snaps"))
    assert out.returncode == 1
    assert f"OK      {tmp_path / 'snaps' / 'm' / '000000000000.snapshot'}" in out.stdout
    assert f"CORRUPT {aside}: set aside by the store as damaged; checked again: " in out.stdout
    assert "has no valid snapshot" not in out.stdout  # the older file serves
    ls = streamk("snapshot", "ls", str(tmp_path / "snaps" / "m"), "--json")
    rows = json.loads(ls.stdout)["snapshots"]
    assert [(r["seq"], r["set_aside"]) for r in rows] == [(0, False), (1, True)]


def test_a_set_aside_file_that_verifies_now_is_not_counted_corrupt(tmp_path):
    """A file set aside after a read error may be whole: verify says so and how to use it."""
    store = SnapshotStore(tmp_path / "snaps")
    store.save(KernelPerceptron(), "m")
    whole = tmp_path / "snaps" / "m" / "000000000000.snapshot"
    whole.rename(whole.with_name(whole.name + ".corrupt-1"))
    out = streamk("snapshot", "verify", str(tmp_path / "snaps" / "m"))
    assert "verifies now" in out.stdout and "rename it to 000000000000.snapshot" in out.stdout
    assert "1 ok, 1 corrupt" in out.stdout  # the dangling LATEST is the one corrupt entry
