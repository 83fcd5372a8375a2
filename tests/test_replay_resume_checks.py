"""A replayed log changed under its snapshot is never resumed in silence, and a log still
being written loses no event (session 23's replay audit).

A log's name is the digest of its first 64 KiB, so a log rewritten past them (the same
head, other records after) kept its name and was resumed at the old offset: its records
there were never learned, without a word; a log truncated under its snapshot resumed past
its end, and the records appended later were skipped up to the old offset. The engine's
checks for a recreated topic now apply to a log: the record before the resume offset is
compared with the one the snapshot learned last. A last line still being written (no
newline, not yet valid JSON) was dead-lettered and its offset used up: the finished event
was never learned; it is now left for the next replay. Real ``streamk replay`` runs; the
oracle is the log as written here.
"""

from __future__ import annotations

import json
import time

from river import datasets
from streamk_run import streamk

from streamk.sources.replay import ReplaySource

EVENTS = [
    json.dumps({"x": x, "y": y, "id": i}) for i, (x, y) in enumerate(datasets.Bananas().take(3000))
]


def _write(path, lines, tail=b""):
    path.write_bytes(("\n".join(lines) + "\n").encode() + tail)


def _replay(tmp_path, *extra):
    done = streamk(
        "replay", "events.jsonl", "--snapshot-dir", "snaps", "--json", *extra, cwd=tmp_path
    )
    return done, (json.loads(done.stdout) if done.returncode == 0 else None)


def test_a_log_rewritten_past_its_head_is_not_resumed_at_the_old_offset(tmp_path):
    log = tmp_path / "events.jsonl"
    _write(log, EVENTS[:2000])
    assert _replay(tmp_path)[1]["records"] == 2000
    other = [line.replace('"id": ', '"id": 1') for line in EVENTS[1500:2500]]
    _write(log, EVENTS[:1500] + other)  # the same first 64 KiB: the same name
    done, _ = _replay(tmp_path)
    assert done.returncode == 2, done.stderr
    assert "offset 1999 holds other bytes" in done.stderr and "log rewritten" in done.stderr
    again, summary = _replay(tmp_path, "--on-offset-beyond-end", "earliest")
    assert again.returncode == 0, again.stderr
    assert summary["records"] == 2500 and summary["positions"] == {"0": 2500}


def test_a_log_truncated_under_its_snapshot_is_not_resumed_past_its_end(tmp_path):
    log = tmp_path / "events.jsonl"
    _write(log, EVENTS[:2000])
    _replay(tmp_path)
    _write(log, EVENTS[:1200])
    done, _ = _replay(tmp_path)
    assert done.returncode == 2 and "past the partitions' ends" in done.stderr, done.stderr


def test_a_last_line_still_being_written_is_learned_once_it_is_whole(tmp_path):
    log = tmp_path / "events.jsonl"
    _write(log, EVENTS[:1000], EVENTS[1000][:30].encode())
    done, summary = _replay(tmp_path)
    assert done.returncode == 0, done.stderr
    assert summary["records"] == 1000 and summary["dead_lettered"] == 0
    assert "ends in an incomplete record" in done.stderr
    _write(log, EVENTS[:1100])  # the line finished, and more after it
    done, summary = _replay(tmp_path)
    assert summary["records"] == 100 and summary["positions"] == {"0": 1100}
    assert summary["dead_lettered"] == 0


def test_an_idle_follow_poll_waits_instead_of_spinning(tmp_path):
    """Idle on its end, ``follow`` polled without waiting: one core at 100%."""
    log = tmp_path / "events.jsonl"
    _write(log, EVENTS[:10])
    source = ReplaySource(log, follow=True)
    assert len(source.poll(100, 0.0)) == 10
    start = time.monotonic()
    assert source.poll(100, 0.3) == []
    assert time.monotonic() - start >= 0.29
