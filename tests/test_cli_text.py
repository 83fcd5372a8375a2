"""Text on the command line: ``streamk learn --text-column``, ``replay`` of a text log, and
``streamk demo --text``, each through the real entry point in a subprocess.

Oracle for the learning figures: the book's kernel perceptron (Alg. 7.52) with a sliding
window budget, on a p-spectrum kernel computed from ``Counter``s, written plainly here.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, deque

import pytest
from streamk_run import streamk

from streamk.snapshot import SnapshotStore
from streamk.sources.motifs import motif_stream
from streamk.sources.replay import write_log


def grams(s: str, p: int) -> Counter:
    return Counter(s[i : i + p] for i in range(len(s) - p + 1))


def book_accuracy(data: list[tuple[str, bool]], p: int, budget: int) -> tuple[int, int]:
    """Test-then-train mistakes of Alg. 7.52 with the oldest support string dropped at the
    budget: ``(correct, scored)``, scoring from the first event after both classes were seen."""
    window: deque = deque()
    seen: set = set()
    correct = scored = 0
    for s, y in data:
        g = grams(s, p)
        f = sum((1 if yi else -1) * sum(c * gi[u] for u, c in g.items()) for gi, yi in window)
        pred = f >= 0
        if len(seen) == 2:
            scored += 1
            correct += pred == y
        seen.add(y)
        if pred != y:
            if len(window) == budget:
                window.popleft()
            window.append((g, y))
    return correct, scored


def test_learn_a_text_column_of_a_csv_file_is_the_book_perceptron(tmp_path):
    data = motif_stream(600, seed=11)
    path = tmp_path / "reads.csv"
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["id", "read", "label"])
        out.writerows([i, s, str(y)] for i, (s, y) in enumerate(data))
    run = streamk(
        "learn", str(path), "--text-column", "read", "--kernel", "spectrum:3",
        "--budget", "40", "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["kernel"] == "Spectrum(p=3)" and got["n_events"] == 600 and got["skipped"] == 0
    correct, scored = book_accuracy(data, 3, 40)
    # river's Accuracy scores every prediction streamk makes; the book's from the 2nd class on
    assert abs(got["metric"] - correct / scored) <= 3 / scored
    assert got["n_support"] == 40


def test_learn_a_jsonl_file_skips_and_counts_bad_rows(tmp_path):
    data = motif_stream(200, seed=12)
    rows = [{"read": s, "y": y} for s, y in data]
    rows[10]["read"] = 17  # not text
    rows[20]["read"] = "acgt" * 2_600  # over the string kernels' 10,000 characters
    path = tmp_path / "reads.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = streamk("learn", str(path), "--text-column", "read", "--batch-size", "16", "--json")
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["skipped"] == 2 and got["n_events"] == 198
    assert got["kernel"] == "Normalized(Spectrum(p=3))"  # the default with --text-column


def test_learn_trees_from_jsonl(tmp_path):
    rows = [{"t": ["S", ["A" if i % 2 else "B"], ["C"]], "y": i % 2 == 0} for i in range(60)]
    path = tmp_path / "trees.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = streamk("learn", str(path), "--text-column", "t", "--kernel", "subtree", "--json")
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["n_events"] == 60 and got["metric"] > 0.9  # separable by one leaf label


@pytest.mark.parametrize(
    "args, words",
    [
        (["--kernel", "spectrum:3"], "--text-column"),
        (["--text-column", "read", "--kernel", "rbf"], "string or tree kernel"),
        (["--text-column", "read", "--kernel", "spectrum"], "spectrum:p"),
    ],
)
def test_learn_text_mistakes_are_clear_errors(tmp_path, args, words):
    path = tmp_path / "reads.csv"
    path.write_text("read,label\nacgt,1\nttga,0\n")
    run = streamk("learn", str(path), *args)
    assert run.returncode != 0 and words in run.stderr
    assert "Traceback" not in run.stderr


def test_learn_help_shows_a_text_example():
    run = streamk("learn", "--help")
    assert "--text-column" in run.stdout and "spectrum:4" in run.stdout


def test_replay_a_text_log_learns_snapshots_and_resumes(tmp_path):
    data = motif_stream(300, seed=13)
    events = [{"x": s, "y": y, "id": i} for i, (s, y) in enumerate(data)]
    events.insert(100, {"x": 42, "y": True})  # not text: a dead letter
    events.insert(200, {"x": "acgt" * 2_600, "y": False})  # too long: a dead letter
    log = tmp_path / "text.jsonl"
    write_log(log, events)
    args = ["replay", "text.jsonl", "--kernel", "spectrum:3", "--budget", "40"]
    run = streamk(*args, "--dead-letter-dir", "dead", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["learned"] == 300 and got["dead_lettered"] == 2 and got["support"] == 40
    letters = [json.loads(line) for line in open(tmp_path / "dead" / "dead-letters.jsonl")]
    assert sorted(letter["code"] for letter in letters) == ["bad_x", "too_long"]
    model = SnapshotStore(tmp_path / "snapshots").latest("model").model
    window = [s for s, _ in _book_window(data, 3, 40)]
    assert sorted(model.support_.X) == sorted(window)
    show = streamk("snapshot", "show", "snapshots/model", cwd=tmp_path)
    assert show.returncode == 0 and "40 vectors" in show.stdout, show.stderr
    verify = streamk("snapshot", "verify", "snapshots/model", cwd=tmp_path)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    again = streamk(*args, "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["learned"] == 0  # resumed after the snapshot
    assert "restored" in again.stderr


def _book_window(data, p, budget):
    window: deque = deque()
    for s, y in data:
        g = grams(s, p)
        f = sum((1 if yi else -1) * sum(c * gi[u] for u, c in g.items()) for gi, yi, _ in window)
        if (f >= 0) != y:
            if len(window) == budget:
                window.popleft()
            window.append((g, y, s))
    return [(s, y) for _, y, s in window]


@pytest.mark.kafka
def test_demo_text_accounts_for_every_event(tmp_path):
    run = streamk("demo", "--text", "--n", "3000", "--dir", str(tmp_path), "--json")
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    # 3,000 reads plus one malformed event after the 2,500th
    assert got["produced"] == got["records"] == 3001
    assert got["dead_lettered"] == 1
    assert got["learned"] + got["scored"] == 3000
    model = SnapshotStore(tmp_path / "snapshots").latest("demo-text").model
    assert len(model.support_) == 500 and all(isinstance(s, str) for s in model.support_.X)
