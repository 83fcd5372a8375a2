"""Dead letters with no destination: logged without flooding the log (session 26).

With neither ``dead_letter_dir`` nor ``dead_letter_topic``, every rejected record was one
WARNING: a regression log replayed into the default classifier wrote 2,000 WARNING lines
for 2,000 events, and a bad producer on a topic would write one per event for as long as
it ran. Now the first letters of each reason are logged in full, the first saying how to
keep the records, then a count by reason at most once a minute and at the end; the run's
summary gives the counts by reason. Oracle: the reasons the test wrote into the log.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from streamk.engine.deadletter import DeadLetter, DeadLetterLog

N_REGRESSION, N_BROKEN = 300, 40


def _write_log(path):
    """Real-valued targets (the default classifier refuses them) and broken JSON lines."""
    with open(path, "w") as f:
        for i in range(N_REGRESSION):
            f.write(json.dumps({"x": [i % 7 * 0.5, i % 3], "y": i + 0.5}) + "\n")
            if i < N_BROKEN:
                f.write("{not json\n")


def _replay(tmp_path, *extra):
    return subprocess.run(
        [sys.executable, "-m", "streamk.cli", "replay", "log.jsonl", "--snapshot-dir", "s",
         "--quiet", "--json", *extra],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_log_of_rejected_events_is_summed_up_not_flooded(tmp_path):
    _write_log(tmp_path / "log.jsonl")
    done = _replay(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    expected = {"rejected_by_model": N_REGRESSION, "undecodable": N_BROKEN}
    assert out["learned"] == 0 and out["dead_lettered"] == N_REGRESSION + N_BROKEN
    assert out["dead_letter_reasons"] == expected

    lines = done.stderr.splitlines()
    hint = [s for s in lines if "dead letters are logged, not kept" in s]
    assert len(hint) == 1 and "dead_letter_dir" in hint[0]
    one_by_one = [s for s in lines if "dead letter at" in s]
    assert len(one_by_one) == 2 * 5  # the first five of each reason
    assert sum("class label must be a class" in s for s in one_by_one) == 5
    (summary,) = [s for s in lines if "more dead letters" in s]
    held = {code: n - 5 for code, n in expected.items()}
    assert f"{sum(held.values()):,} more dead letters" in summary
    for code, n in held.items():
        assert f"{code} {n:,}" in summary


def test_with_a_dead_letter_dir_nothing_is_logged_one_by_one(tmp_path):
    _write_log(tmp_path / "log.jsonl")
    done = _replay(tmp_path, "--dead-letter-dir", "dead")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dead letter at" not in done.stderr and "more dead letters" not in done.stderr
    kept = (tmp_path / "dead" / "dead-letters.jsonl").read_text().splitlines()
    assert len(kept) == N_REGRESSION + N_BROKEN


def _letter(code: str, offset: int) -> DeadLetter:
    return DeadLetter(b"x", "why", "src", 0, offset, 0, code)


def test_summaries_come_at_most_every_interval_and_at_close(caplog):
    now = [0.0]
    sink = DeadLetterLog(in_full=2, every=60.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="streamk.engine.deadletter")

    def summaries() -> list[str]:
        return [r.getMessage() for r in caplog.records if "more dead letter" in r.getMessage()]

    for i in range(12):  # 2 in full, 10 held
        sink.write(_letter("a", i))
    now[0] = 59.0
    sink.flush()
    assert summaries() == []
    now[0] = 60.0
    sink.write(_letter("b", 12))  # b's first: in full, so not the trigger
    assert summaries() == []
    sink.write(_letter("a", 13))  # held, and the interval has passed
    assert summaries() == ["11 more dead letters, not logged one by one: a 11"]
    now[0] = 130.0
    sink.flush()  # nothing held since: no summary
    sink.write(_letter("a", 14))  # held, and due again: summed up at once
    sink.write(_letter("a", 15))  # held, the last summary just now
    assert summaries()[1:] == ["1 more dead letter, not logged one by one: a 1"]
    sink.close()  # what is held
    assert summaries()[2:] == ["1 more dead letter, not logged one by one: a 1"]
    in_full = [r for r in caplog.records if "dead letter at" in r.getMessage()]
    assert len(in_full) == 3 and sink.count == 16  # 11 + 1 + 1 summed up
    sink.close()
    assert len(summaries()) == 3
