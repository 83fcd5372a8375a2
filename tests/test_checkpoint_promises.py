"""What a checkpoint does, and what it refuses to do, through the real ``streamk replay``.

docs/operations.md, "Under the hood: one checkpoint" and "Common failure scenarios": a
checkpoint with nothing new does nothing; a sink that cannot flush, or a snapshot volume
that is full, stops the checkpoint before anything is committed, and the next start is
clean. Each test runs the real command line on a real event log and a real file store;
the only thing patched is the full disk (tests/helpers/disk_full_at_snapshot.py), which
a test cannot provoke without mount privileges. A sink that cannot flush is real: its
file is ``/dev/full``. The oracles: the bytes of the store before and after, the commit
journal, the ids of the events the test wrote, and a plain perceptron fed the labelled
events once, in-process.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streamk import RBF, KernelPerceptron, RemoveOldest
from streamk.sinks import read_predictions
from streamk.snapshot import SnapshotStore

pytestmark = pytest.mark.slow  # three to five CLI starts each

DISK_FULL = Path(__file__).parent / "helpers" / "disk_full_at_snapshot.py"
N, FIRST = 3000, 1000  # events in the log; events of the first run (the log then grows)
MODEL = ["--learner", "perceptron", "--kernel", "rbf:0.5", "--budget", "80", "--scale", "none"]


def events(n: int) -> list[dict]:
    """Seeded events, one in ten unlabelled (to be scored and published)."""
    rng = random.Random(24)
    out = []
    for i in range(n):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        event = {"id": f"e{i}", "x": {"a": a, "b": b}}
        if i % 10 != 9:
            event["y"] = a * b > 0
        out.append(event)
    return out


EVENTS = events(N)
UNLABELLED = [e["id"] for e in EVENTS if "y" not in e]


def write_log(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS[:n]))
    return path


def replay(log: Path, store: Path, *extra: str, helper: list[str] | None = None):
    """``streamk replay`` (through ``helper`` when given) with a snapshot every 500 events."""
    args = ["replay", str(log), "--snapshot-dir", str(store), "--snapshot-every", "500"]
    args += ["--snapshot-seconds", "0", *MODEL, *extra, "--quiet"]
    head = [sys.executable, *(helper or ["-m", "streamk.cli"])]
    return subprocess.run([*head, *args], capture_output=True, text=True, timeout=300)


def files(store: Path) -> dict[str, bytes]:
    """Every file of the model's directory (the lock file aside), by name."""
    return {
        p.name: p.read_bytes()
        for p in sorted((store / "model").iterdir())
        if p.is_file() and p.name != ".lock"
    }


def reference(n: int) -> KernelPerceptron:
    """The plain learner fed the first ``n`` events' labelled ones, once, in order."""
    model = KernelPerceptron(kernel=RBF(0.5), budget=RemoveOldest(80))
    for e in EVENTS[:n]:
        if "y" in e:
            model.learn_one(e["x"], e["y"])
    return model


def assert_learned_once(store: Path) -> None:
    """The newest snapshot covers the whole log and holds each labelled event once."""
    snap = SnapshotStore(store).latest("model")
    assert list(snap.offsets.values()) == [{0: N}]
    ref = reference(N)
    assert snap.model.n_learned == ref.n_learned == N - len(UNLABELLED)
    for e in EVENTS[::37]:
        got, want = snap.model.predict_proba_one(e["x"]), ref.predict_proba_one(e["x"])
        assert got == pytest.approx(want, abs=1e-9)


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> Path:
    """A directory with the log of the first 1,000 events and the store a replay of it left
    (snapshots seq 1 and 2, at 500 and 1,000, both committed): made once, copied per test."""
    where = tmp_path_factory.mktemp("learned")
    log, store = write_log(where / "events.jsonl", FIRST), where / "snapshots"
    first = replay(log, store, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["snapshots"] == 2
    assert json.loads((store / "model" / ".commits.json").read_text()) == {
        SnapshotStore(store).latest("model").offsets.popitem()[0]: {"0": [500, FIRST]}
    }
    return where


def copy_of(learned: Path, tmp_path: Path) -> tuple[Path, Path]:
    """This test's own copy of the log and the store: ``(log, store)``."""
    shutil.copy2(learned / "events.jsonl", tmp_path / "events.jsonl")
    shutil.copytree(learned / "snapshots", tmp_path / "snapshots")
    return tmp_path / "events.jsonl", tmp_path / "snapshots"


def test_a_checkpoint_with_no_record_since_the_last_one_does_nothing(learned, tmp_path):
    """docs/operations.md, "Under the hood: one checkpoint": "A checkpoint runs ... on
    shutdown (SIGTERM, SIGINT, end of a replay). It does nothing if no record arrived since
    the last one."

    The log replayed a second time has nothing new: its shutdown checkpoint must write no
    snapshot, move no ``LATEST`` and record no commit: every byte of the store stays."""
    log, store = copy_of(learned, tmp_path)
    before = files(store)
    assert sorted(n for n in before if n.endswith(".snapshot")) == [
        f"{seq:012d}.snapshot" for seq in (1, 2)
    ]
    again = replay(log, store, "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["records"], summary["snapshots"], summary["seq"]) == (0, 0, 2)
    assert files(store) == before  # no snapshot, no LATEST, no journal entry


def _stopped_before_commit(
    learned: Path, tmp_path: Path, fault: list[str], helper: list[str] | None
):
    """The store of the first 1,000 events (seq 1 and 2); the log grows to 3,000 and the
    next run meets ``fault`` at its first checkpoint. Returns the log, the store, the
    store's files before that run, and the run."""
    log, store = copy_of(learned, tmp_path)
    before = files(store)
    write_log(log, N)  # the same log, grown: the next replay resumes at 1,000
    failed = replay(log, store, *fault, helper=helper)
    return log, store, before, failed


def _resumes_cleanly(tmp_path: Path, log: Path, store: Path) -> None:
    """The next start restores seq 2, learns the other 2,000 events once, and scores every
    unlabelled one of them: nothing was committed past what the store holds."""
    (tmp_path / "out3").mkdir()
    predictions = tmp_path / "out3" / "p.jsonl"
    after = replay(log, store, "--predictions-file", str(predictions), "--json")
    assert after.returncode == 0, after.stderr
    assert "restored seq 2" in after.stderr and "WARNING" not in after.stderr
    assert json.loads(after.stdout)["records"] == N - FIRST
    assert_learned_once(store)
    ids = [r["id"] for r in read_predictions(predictions)]
    assert ids == [i for i in UNLABELLED if int(i[1:]) >= FIRST]
    assert not list((store / "model").glob(".*.tmp"))


def test_a_sink_that_cannot_flush_stops_the_checkpoint_before_snapshot_and_commit(
    learned, tmp_path
):
    """docs/operations.md, "Under the hood: one checkpoint", step 2: "Flush the sinks.
    Predictions and dead letters are flushed and acknowledged (Kafka `acks`) or fsynced
    (files). A failure raises and stops here: nothing is committed past an output that may
    be lost." and "A failure in any of them makes the engine exit with an error (non-zero
    exit code)".

    The predictions file is ``/dev/full`` (every flush: ENOSPC). The run must stop at its
    first checkpoint with no snapshot written and no commit recorded."""
    (tmp_path / "out2").mkdir()
    full = tmp_path / "out2" / "p.jsonl"
    full.symlink_to("/dev/full")
    log, store, before, failed = _stopped_before_commit(
        learned, tmp_path, ["--predictions-file", str(full)], None
    )
    assert failed.returncode == 2, failed.stderr
    assert files(store) == before  # no snapshot (seq 3), LATEST and the journal unchanged
    assert "Traceback" not in failed.stderr
    (error,) = [line for line in failed.stderr.splitlines() if line.startswith("streamk: error:")]
    assert f"could not write predictions to {full}" in error and "No space left" in error
    _resumes_cleanly(tmp_path, log, store)


def test_a_full_snapshot_volume_exits_2_before_committing_and_the_next_start_is_clean(
    learned, tmp_path
):
    """docs/operations.md, "Common failure scenarios", disk full: "the previous snapshots;
    a temp file may be left, and is removed by the next save | the previous snapshot: the
    engine exits before committing | as for a crash; free space or grow the volume, the
    next start is clean"; and "Steps 2-5 must all succeed before step 6. A failure in any
    of them makes the engine exit with an error (non-zero exit code)".

    The volume is full from the second run's first snapshot file on
    (tests/helpers/disk_full_at_snapshot.py): exit 2 naming the cause, the commit journal
    and every snapshot unchanged; the next start restores seq 2 and learns each event once.
    """
    log, store, before, failed = _stopped_before_commit(
        learned, tmp_path, [], [str(DISK_FULL), "1"]
    )
    assert failed.returncode == 2, failed.stderr
    assert files(store) == before  # the journal (.commits.json) above all: nothing committed
    assert "Traceback" not in failed.stderr
    (error,) = [line for line in failed.stderr.splitlines() if line.startswith("streamk: error:")]
    assert "000000000003.snapshot" in error and "No space left on device" in error
    _resumes_cleanly(tmp_path, log, store)
