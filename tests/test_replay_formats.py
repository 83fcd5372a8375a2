"""``streamk replay`` refuses a file that is not an event log before learning anything.

Session 23 audit: a CSV (or a ``.json`` file) was read as msgpack, one record per byte, every
record dead-lettered with a WARNING each, exit 0, and the snapshot then marked the file as
learned, so a second run did nothing. Each test runs the real ``streamk`` entry point in a
subprocess; the oracle is the file as written here (its format is known) and the snapshot
directory on disk (nothing may be written there).
"""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import msgpack
import pytest
from river import datasets
from streamk_run import streamk

from streamk.engine.events import encode_event

ROWS = list(itertools.islice(datasets.Bananas(), 200))
FORMATS = "an event log is a .jsonl/.ndjson file (one JSON event map per line"


def _csv(path: Path) -> None:
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["x1", "x2", "label"])
        out.writerows([*x.values(), y] for x, y in ROWS)


def _json_array(path: Path) -> None:
    path.write_text(json.dumps([{"x": x, "y": y} for x, y in ROWS]))


def _json_lines(path: Path) -> None:
    path.write_text("".join(json.dumps({"x": x, "y": y}) + "\n" for x, y in ROWS))


def _text(path: Path) -> None:
    path.write_text("".join(f"{x['1']} {x['2']} -> {y}\n" for x, y in ROWS))


def _binary(path: Path) -> None:
    path.write_bytes(bytes(range(1, 64)) * 20)  # control bytes: msgpack ints, not maps


CASES = {
    # name: (file, writer, what the message must say besides the formats)
    "csv": ("bananas.csv", _csv, ["is a CSV file", "streamk learn", "streamk produce"]),
    "json array": ("events.json", _json_array, ["not an event log", "a JSON array", ".jsonl"]),
    "json lines as .json": ("lines.json", _json_lines, ["not an event log", "name it .jsonl"]),
    "text": ("events.txt", _text, ["not an event log", "looks like text"]),
    "binary": ("events.log", _binary, ["not an event log", "does not open a msgpack map"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_file_that_is_not_an_event_log_is_refused_before_anything_is_learned(tmp_path, case):
    name, write, words = CASES[case]
    write(tmp_path / name)
    snaps, dead = tmp_path / "snaps", tmp_path / "dead"
    out = streamk(
        "replay", name, "--snapshot-dir", str(snaps), "--dead-letter-dir", str(dead), cwd=tmp_path
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.startswith(f"streamk: error: {name} ")
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert FORMATS in out.stderr
    for word in words:
        assert word in out.stderr
    assert len(out.stderr.splitlines()) == 1  # one error, not a warning per byte
    assert not snaps.exists() and not dead.exists()  # nothing learned, nothing marked as read


def test_the_csv_advice_names_the_file(tmp_path):
    _csv(tmp_path / "bananas.csv")
    out = streamk("replay", "bananas.csv", "--snapshot-dir", "s", cwd=tmp_path)
    assert "`streamk learn bananas.csv`" in out.stderr
    assert "`streamk produce bananas.csv --topic TOPIC`" in out.stderr


@pytest.mark.parametrize(
    "first",
    [
        b"\x81\xa2\xff\xfe\xa1x",  # a map whose key is not UTF-8 (the simulators' undecodable)
        msgpack.packb({"y": 1}),  # a map without x
        msgpack.packb({"x": "a" * 70_000, "y": 1}),  # a map 16 longer than the head looked at
    ],
)
def test_a_msgpack_log_whose_first_record_is_a_bad_map_is_still_replayed(tmp_path, first):
    """The check is on the format, not on the events: a bad first event is a dead letter."""
    good = [encode_event(x=[x["1"], x["2"]], y=y) for x, y in ROWS[:50]]
    (tmp_path / "events.msgpack").write_bytes(first + b"".join(good))
    out = streamk(
        "replay", "events.msgpack", "--snapshot-dir", "s", "--dead-letter-dir", "d", "--json",
        "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)
    assert summary["learned"] == 50 and summary["dead_lettered"] == 1


def test_an_empty_msgpack_log_is_accepted(tmp_path):
    """An empty log (one a ``--follow`` run may wait on) is not refused as a wrong format."""
    (tmp_path / "events.msgpack").write_bytes(b"")
    out = streamk("replay", "events.msgpack", "--snapshot-dir", "s", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["learned"] == 0
