"""A predictions file on a full device: one error naming the file, no second error on close.

Before: ``FilePredictionSink.write_many`` let the ``OSError`` of a block larger than the
write buffer escape unwrapped, without marking the sink failed; ``close`` then flushed
again, failed again (logged with a traceback as "closing a sink failed"), and the CLI's
last line was ``streamk: error: [Errno 28] No space left on device``, naming no file
(audit s24/limits, F8). ``/dev/full`` fails every write with ENOSPC: the oracle.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from streamk.sinks import FilePredictionSink, SinkError
from tests.streamk_run import streamk


def _block(n: int) -> dict:
    return {
        "predictions": [i % 3 == 0 for i in range(n)],
        "ids": [f"event-{i:06d}" for i in range(n)],
        "offsets": list(range(n)),
    }


@pytest.fixture
def full(tmp_path: Path) -> Path:
    path = tmp_path / "predictions.out"
    path.symlink_to("/dev/full")  # every write: ENOSPC
    return path


@pytest.mark.parametrize("layout", ["record", "block"])
@pytest.mark.parametrize("fmt", ["jsonl", "msgpack"])
def test_a_block_over_the_buffer_fails_in_write_many_naming_the_file(full, fmt, layout):
    sink = FilePredictionSink(full, fmt, layout=layout)
    with pytest.raises(SinkError, match=f"could not write predictions to {full}.*No space left"):
        sink.write_many(**_block(2000))  # far over the 8 KiB buffer: written at once
    assert sink.count == 0
    with pytest.raises(SinkError, match=f"could not write predictions to {full}.*No space left"):
        sink.write_many(**_block(1))  # the same failure again: no record after a gap
    with pytest.raises(SinkError, match=f"could not write predictions to {full}.*No space left"):
        sink.flush()
    sink.close()  # the failure was raised once: closing raises nothing
    sink.close()


def test_a_buffered_block_fails_in_flush_and_close_stays_quiet(full):
    sink = FilePredictionSink(full)
    sink.write_many(**_block(3))  # fits the buffer: nothing reaches the device yet
    assert sink.count == 3
    with pytest.raises(SinkError, match=f"could not write predictions to {full}.*No space left"):
        sink.flush()
    sink.close()


def test_close_reports_a_failure_nothing_raised_before(full):
    """Unflushed records and no failure yet: ``close`` must raise, naming the file."""
    sink = FilePredictionSink(full)
    sink.write_many(**_block(3))
    with pytest.raises(SinkError, match=f"could not write predictions to {full}"):
        sink.close()
    sink.close()


def _event_log(path: Path, n: int) -> None:
    """Events, every other one without a label (a prediction each)."""
    rng = random.Random(11)
    with open(path, "w") as fh:
        for i in range(n):
            event = {"x": {"a": rng.random(), "b": rng.random()}, "id": f"e-{i}"}
            if i % 2 == 0:
                event["y"] = i % 4 == 0
            fh.write(json.dumps(event) + "\n")


def test_cli_predictions_on_a_full_device_exit_2_with_one_line_naming_the_file(tmp_path):
    log = tmp_path / "events.jsonl"
    _event_log(log, 3000)  # blocks of hundreds of predictions: over the write buffer
    out = tmp_path / "out"
    out.mkdir()
    predictions = out / "pred.jsonl"
    predictions.symlink_to("/dev/full")
    done = streamk("replay", str(log), "--snapshot-dir", str(tmp_path / "s"),
                   "--predictions-file", str(predictions), "--quiet")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "closing a sink failed" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("streamk: error:")]
    assert len(errors) == 1, done.stderr
    assert f"could not write predictions to {predictions}" in errors[0]
    assert "No space left" in errors[0]
    assert done.stderr.rstrip().splitlines()[-1] == errors[0]
