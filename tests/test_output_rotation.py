"""Output files rotated while the engine writes them: renamed away, the next sync reopens.

docs/user-guide.md ("Outputs"): a prediction or dead-letter file renamed while the engine
runs (logrotate's default ``create`` mode) keeps the records written so far, and the
engine appends to a new file at the path from its next sync on; no restart, nothing lost
or written twice. A file deleted still stops the engine (tests/test_file_sink_tails.py).
The expected records are the ones these tests write themselves.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streamk.engine.deadletter import DeadLetter, DeadLetterFile, read_dead_letters
from streamk.sinks import FilePredictionSink, read_predictions

FORMATS = ["jsonl", "msgpack"]


def _letter(i: int) -> DeadLetter:
    return DeadLetter(f"bad-{i}".encode(), f"reason {i}", "events", 0, i, 1_700_000_000_000 + i)


def _letters(path: Path) -> list[int]:
    return [record.offset for record in read_dead_letters(path)]


def _predicted(path: Path) -> list[int]:
    return [int(record["id"][2:]) for record in read_predictions(path)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("new_file", ["left to the engine", "created by the rotator"])
def test_a_moved_dead_letter_file_keeps_its_records_and_a_new_one_takes_the_rest(
    tmp_path, caplog, fmt, new_file
):
    path = tmp_path / f"dead-letters.{fmt}"
    out = DeadLetterFile(path, fmt)
    for i in range(3):
        out.write(_letter(i))
    out.flush()
    path.rename(tmp_path / "rotated.1")  # logrotate: rename, then (create mode) a new file
    if new_file == "created by the rotator":
        path.touch()
    for i in range(3, 5):  # before the engine's next sync: still the moved file's
        out.write(_letter(i))
    with caplog.at_level("INFO", logger="streamk.engine.deadletter"):
        out.flush()
    for i in range(5, 8):
        out.write(_letter(i))
    out.close()
    assert _letters(tmp_path / "rotated.1") == [0, 1, 2, 3, 4]
    assert _letters(path) == [5, 6, 7]
    said = [r.getMessage() for r in caplog.records]
    assert any("was moved" in line and str(path) in line for line in said)


@pytest.mark.parametrize("layout", ["record", "block"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_moved_prediction_file_is_reopened_at_the_next_flush(tmp_path, fmt, layout):
    path = tmp_path / f"p.{fmt}"
    sink = FilePredictionSink(path, fmt, layout=layout)
    seen = []
    for segment in range(3):  # two rotations
        ids = range(10 * segment, 10 * segment + 10)
        sink.write_many([True] * 10, ids=[f"e-{i}" for i in ids], offsets=list(ids))
        sink.flush()
        if segment < 2:
            path.rename(tmp_path / f"p.{segment}")
            seen.append(tmp_path / f"p.{segment}")
            sink.flush()  # the engine's next sync: a new file from here
    sink.close()
    assert [_predicted(p) for p in [*seen, path]] == [
        list(range(0, 10)),
        list(range(10, 20)),
        list(range(20, 30)),
    ]


def _event_log(path: Path, n: int, bad_every: int) -> list[int]:
    """``n`` events, every second unlabelled, one line in ``bad_every`` invalid JSON;
    returns the line numbers of the bad lines."""
    rng = random.Random(11)
    bad = []
    with open(path, "w") as fh:
        for i in range(n):
            if i % bad_every == 7:
                fh.write('{"x": [1, 2\n')
                bad.append(i)
                continue
            event = {"x": {"a": rng.random(), "b": rng.random()}, "id": f"e-{i}"}
            if i % 2 == 0:
                event["y"] = i % 4 == 0
            fh.write(json.dumps(event) + "\n")
    return bad


def test_cli_outputs_rotated_mid_run_lose_nothing_and_repeat_nothing(tmp_path):
    n = 60_000
    log = tmp_path / "events.jsonl"
    bad = _event_log(log, n, bad_every=500)
    predictions = tmp_path / "p.jsonl"
    dead = tmp_path / "dead"
    letters = dead / "dead-letters.jsonl"
    args = ["replay", str(log), "--snapshot-dir", str(tmp_path / "s"), "--snapshot-every",
            "1000", "--snapshot-seconds", "0", "--predictions-file", str(predictions),
            "--dead-letter-dir", str(dead), "--quiet"]  # fmt: skip
    moved: dict[Path, list[Path]] = {predictions: [], letters: []}
    stop = threading.Event()

    def rotate() -> None:  # each output: rename it away once written, up to 3 times
        deadline = time.monotonic() + 300
        while not stop.is_set() and time.monotonic() < deadline:
            for path, segments in moved.items():
                if len(segments) < 3 and path.exists() and path.stat().st_size > 0:
                    segment = path.with_name(f"{path.name}.{len(segments) + 1}")
                    path.rename(segment)
                    segments.append(segment)
            time.sleep(0.002)

    thread = threading.Thread(target=rotate, daemon=True)
    thread.start()
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", *args], capture_output=True, text=True, timeout=600
    )
    stop.set()
    thread.join(5)
    assert done.returncode == 0, done.stderr
    assert moved[predictions] and moved[letters], "no rotation happened while the engine ran"
    # every segment, then the file at the path: each record once, in order
    scored = [i for p in [*moved[predictions], predictions] for i in _predicted(p)]
    assert scored == [i for i in range(1, n, 2) if i not in bad]
    assert all(_predicted(p) for p in moved[predictions][1:])  # later segments were written to
    dead_lines = [r.offset for p in [*moved[letters], letters] for r in read_dead_letters(p)]
    assert dead_lines == bad
