"""File sinks after a fault: a torn last record, a deleted file, a full disk.

A write cut short (disk full, a crash) leaves part of a record at the end of a predictions
or dead-letter file; the resumed run must cut it off before appending, or the file can no
longer be read. A file deleted mid-run, or a full disk, must stop the engine with an error
naming the file rather than lose records silently. The expected records are the ones these
tests write themselves.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgpack
import pytest

from streamk.engine.deadletter import DeadLetter, DeadLetterFile, read_dead_letters
from streamk.errors import InvalidEvent
from streamk.sinks import FileDeadLetterSink, FilePredictionSink, SinkError, read_predictions
from tests.streamk_run import streamk

FORMATS = ["jsonl", "msgpack"]


def _torn(record: dict, fmt: str) -> bytes:
    """The first bytes of ``record`` as a writer would encode it: what a crash leaves."""
    data = json.dumps(record).encode() + b"\n" if fmt == "jsonl" else msgpack.packb(record)
    return data[: len(data) // 2]


def _letter(i: int) -> DeadLetter:
    return DeadLetter(f"bad-{i}".encode(), f"reason {i}", "events", 0, i, 1_700_000_000_000 + i)


def _write_predictions(sink: FilePredictionSink, ids: range) -> None:
    sink.write_many(
        [i % 2 == 0 for i in ids], ids=[f"e-{i}" for i in ids], offsets=list(ids), partition=0
    )


@pytest.mark.parametrize("layout", ["record", "block"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_prediction_file_torn_tail_is_cut_before_appending(tmp_path, caplog, fmt, layout):
    path = tmp_path / f"p.{fmt}"
    sink = FilePredictionSink(path, fmt, layout=layout)
    _write_predictions(sink, range(0, 5))
    sink.close()
    complete = path.stat().st_size
    torn = _torn({"id": "e-5", "prediction": False, "model_seq": 0, "offset": 5}, fmt)
    with open(path, "ab") as fh:
        fh.write(torn)
    with caplog.at_level(logging.WARNING):
        sink = FilePredictionSink(path, fmt, layout=layout)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0]
    assert f"{len(torn)} bytes" in warnings[0]
    assert path.stat().st_size == complete
    _write_predictions(sink, range(5, 9))  # the resumed run: the torn event again, then on
    sink.close()
    got = [(r["id"], r["prediction"], r["offset"]) for r in read_predictions(path)]
    assert got == [(f"e-{i}", i % 2 == 0, i) for i in range(9)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_intact_files_are_appended_to_unchanged(tmp_path, caplog, fmt):
    path = tmp_path / f"p.{fmt}"
    for ids in (range(0, 3), range(3, 6)):
        with caplog.at_level(logging.WARNING):
            sink = FilePredictionSink(path, fmt)
        _write_predictions(sink, ids)
        sink.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r["id"] for r in read_predictions(path)] == [f"e-{i}" for i in range(6)]


@pytest.mark.parametrize("opener", [DeadLetterFile, FileDeadLetterSink])
@pytest.mark.parametrize("fmt", FORMATS)
def test_dead_letter_file_torn_tail_is_cut_before_appending(tmp_path, caplog, fmt, opener):
    path = tmp_path / f"dead.{fmt}"
    out = opener(path, fmt)
    for i in range(3):
        out.write(_letter(i))
    out.close()
    letter = _letter(3)
    whole = letter.to_json().encode() + b"\n" if fmt == "jsonl" else letter.to_msgpack()
    with open(path, "ab") as fh:
        fh.write(whole[:-7])
    with caplog.at_level(logging.WARNING):
        out = opener(path, fmt)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0]
    assert f"{len(whole) - 7} bytes" in warnings[0]
    for i in range(3, 6):
        out.write(_letter(i))
    out.close()
    assert list(read_dead_letters(path)) == [_letter(i) for i in range(6)]


def test_json_lines_without_any_newline_are_all_cut(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "e-0", "predic')
    sink = FilePredictionSink(path)
    _write_predictions(sink, range(1))
    sink.close()
    assert [r["id"] for r in read_predictions(path)] == ["e-0"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_read_predictions_reports_a_torn_tail(tmp_path, fmt):
    path = tmp_path / f"p.{fmt}"
    sink = FilePredictionSink(path, fmt)
    _write_predictions(sink, range(0, 4))
    sink.close()
    complete = path.stat().st_size
    with open(path, "ab") as fh:
        fh.write(_torn({"id": "e-4", "prediction": True, "offset": 4}, fmt))
    got = []
    with pytest.raises(InvalidEvent) as caught:
        for record in read_predictions(path):
            got.append(record["id"])
    assert got == [f"e-{i}" for i in range(4)]  # the complete records come first
    where = f"{path}:5:" if fmt == "jsonl" else f"{path}: truncated prediction record at byte"
    assert where in str(caught.value)
    if fmt == "msgpack":
        assert f"byte {complete} of" in str(caught.value)


@pytest.mark.parametrize("fmt", FORMATS)
def test_deleted_prediction_file_fails_the_flush(tmp_path, fmt):
    directory = tmp_path / "out"
    directory.mkdir()
    sink = FilePredictionSink(directory / f"p.{fmt}", fmt)
    _write_predictions(sink, range(0, 2))
    sink.flush()
    shutil.rmtree(directory)  # rm -rf out/ mid-run
    _write_predictions(sink, range(2, 4))
    with pytest.raises(SinkError, match=f"{directory / f'p.{fmt}'} was deleted"):
        sink.flush()
    sink.close()  # already reported: closing does not raise it again


def test_deleted_dead_letter_file_fails_the_flush(tmp_path):
    directory = tmp_path / "dead"
    directory.mkdir()
    out = DeadLetterFile(directory / "dead-letters.jsonl")
    out.write(_letter(0))
    out.flush()
    shutil.rmtree(directory)
    out.write(_letter(1))
    with pytest.raises(SinkError, match="dead-letters.jsonl was deleted"):
        out.flush()
    out.close()


def test_full_disk_dead_letter_error_names_the_file(tmp_path):
    full = tmp_path / "dead.jsonl"
    full.symlink_to("/dev/full")  # every write: ENOSPC
    out = DeadLetterFile(full)
    with pytest.raises(SinkError, match=f"{full}.*No space left"):
        out.write(_letter(0))
    out.close()


def _event_log(path: Path, n: int, bad_every: int = 0) -> None:
    rng = random.Random(7)
    with open(path, "w") as fh:
        for i in range(n):
            if bad_every and i % bad_every == 5:
                fh.write('{"x": [1, 2\n')  # invalid JSON: a dead letter
                continue
            event = {"x": {"a": rng.random(), "b": rng.random()}, "id": f"e-{i}"}
            if i % 2 == 0:
                event["y"] = i % 4 == 0
            fh.write(json.dumps(event) + "\n")


def test_cli_full_disk_dead_letter_error_names_the_file(tmp_path):
    log = tmp_path / "events.jsonl"
    _event_log(log, 50, bad_every=20)
    dead = tmp_path / "dead"
    dead.mkdir()
    (dead / "dead-letters.jsonl").symlink_to("/dev/full")
    done = streamk("replay", str(log), "--snapshot-dir", str(tmp_path / "s"), "--dead-letter-dir",
                   str(dead), "--quiet")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("streamk: error:")]
    assert len(error) == 1 and str(dead / "dead-letters.jsonl") in error[0]
    assert "No space left" in error[0]


def test_cli_output_directory_removed_mid_run_stops_before_commit(tmp_path):
    log = tmp_path / "events.jsonl"
    _event_log(log, 60_000)
    out = tmp_path / "out"
    out.mkdir()
    predictions = out / "p.jsonl"
    args = ["replay", str(log), "--snapshot-dir", str(tmp_path / "s"), "--snapshot-every",
            "200", "--snapshot-seconds", "0", "--predictions-file", str(predictions),
            "--quiet"]  # fmt: skip
    deleted = threading.Event()
    last_seen: list[int] = []  # the last event predicted in the file when it was removed

    def remove_when_written() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if predictions.exists() and predictions.stat().st_size > 0:
                lines = predictions.read_bytes().split(b"\n")[:-1]
                shutil.rmtree(out)
                last_seen.append(int(json.loads(lines[-1])["id"][2:]))
                deleted.set()
                return
            time.sleep(0.005)

    thread = threading.Thread(target=remove_when_written, daemon=True)
    thread.start()
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", *args], capture_output=True, text=True, timeout=600
    )
    thread.join(5)
    assert deleted.is_set(), "the run ended before its first predictions were flushed"
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("streamk: error:")]
    assert len(error) == 1 and f"{predictions} was deleted" in error[0]
    out.mkdir()  # the resumed run republishes what was not committed, through to the end
    again = streamk(*args, "--snapshot-every", "20000")  # the last flag wins: 3 fsyncs, not 300
    assert again.returncode == 0, again.stderr
    ids = [int(r["id"][2:]) for r in read_predictions(predictions)]
    assert ids[0] <= last_seen[0] + 2  # nothing lost between the removed file and this one
    assert ids == list(range(ids[0], 60_000, 2))  # every unlabelled event from there, once
