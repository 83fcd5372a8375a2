"""Merging promises of docs/operations.md not held elsewhere: which compression
``compress="auto"`` picks for each learner, and ``adopt_merged`` refusing consolidation.

The learners are real, trained on Bananas split round-robin over three workers
(tests/test_merge.py's helpers); the refusal goes through the real ``streamk replay``.
The ranker's ``compress="solve"`` refusal is held by tests/test_merge.py
(``test_solve_compression_needs_labelled_support_rows``).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from streamk_run import streamk
from test_merge import BANANAS, PROBES, decision, split, workers

from streamk import RBF, KernelNovelty, RemoveOldest, snapshot
from streamk.errors import MergeError
from streamk.merge import merge_models, merge_snapshots

BUDGET = 40  # below each union (3 workers x 60): every merge compresses


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _novelty_workers() -> list[KernelNovelty]:
    out = []
    for part in split(BANANAS[:900], 3):
        model = KernelNovelty(kernel=RBF(1.0), budget=RemoveOldest(60))
        for x, _ in part:
            model.learn_one(x)
        out.append(model)
    return out


def _outputs(model) -> np.ndarray:
    """The model's real-valued output on the probes (a detector's: its score)."""
    if isinstance(model, KernelNovelty):
        return np.array([model.score_one(x) for x in PROBES])
    return np.concatenate([decision(model, x) for x in PROBES])


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("perceptron", "solve"),
        ("margin", "project"),
        ("adatron", "project"),
        ("svr", "project"),
        ("ranker", "project"),
        ("novelty", "project"),
    ],
)
def test_auto_compression_is_solve_for_the_perceptron_and_project_for_every_other(kind, expected):
    """docs/operations.md, "Merging models": "`compress="auto"` (the default) is `solve` for
    `KernelPerceptron` and `project` for every other learner."

    Three workers over the budget are merged with the default, through their snapshots as
    the merger does: the result names the method, and its function is the one the named
    method gives when asked for explicitly (and not the other's, where both exist)."""
    ws = _novelty_workers() if kind == "novelty" else workers(kind, 60)
    assert sum(w.n_support for w in ws) > BUDGET
    snaps = {
        f"w{i}": snapshot.loads(snapshot.dumps(w, offsets={"events": {i: 300}}, seq=1))
        for i, w in enumerate(ws)
    }
    result = merge_snapshots(snaps, budget=BUDGET)
    assert result.method == expected
    assert result.model.n_support <= BUDGET
    chosen = merge_models(ws, budget=BUDGET, compress=expected)
    np.testing.assert_allclose(_outputs(result.model), _outputs(chosen), rtol=1e-9, atol=1e-12)
    other = "project" if expected == "solve" else "solve"
    try:
        alternative = merge_models(ws, budget=BUDGET, compress=other)
    except MergeError:  # the ranker's and the detector's rows carry no labels to solve on
        assert kind in ("ranker", "novelty")
        return
    assert not np.allclose(_outputs(result.model), _outputs(alternative), rtol=1e-6, atol=1e-9)


def test_adopt_merged_refuses_a_consolidated_worker_at_start(tmp_path):
    """docs/operations.md, "Adopting the merged model": "`adopt_merged = true` (off by
    default; needs `scale = "none"` and no consolidation, as merging does)";
    docs/configuration.md, `adopt_merged`: "(needs scale = none, no consolidation ...)".

    ``streamk replay --adopt-merged`` with ``--consolidate-every 500`` (and ``--scale none``,
    so consolidation is the only cause) stops at start-up: exit 2, the message naming the
    fix, nothing learned, no snapshot written."""
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps({"x": x, "y": y}) + "\n" for x, y in BANANAS[:600]))
    store = tmp_path / "snapshots"
    done = streamk(
        "replay", str(log), "--snapshot-dir", str(store), "--adopt-merged", "--scale", "none",
        "--consolidate-every", "500", "--quiet",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (error,) = [ln for ln in done.stderr.splitlines() if ln.startswith("streamk: error:")]
    assert "adopt_merged needs a plain learner" in error and "consolidate_every = 0" in error
    assert "Traceback" not in done.stderr
    assert not list(store.rglob("*.snapshot"))
