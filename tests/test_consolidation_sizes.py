"""Consolidation sizes that could only fail later are refused up front (session 25).

Before: a ``consolidate_window`` whose rows, at the widths ``max_feature_names`` allows,
take more than the 512 MiB a snapshot's window may hold was accepted, and the first
checkpoint after the features grew stopped the engine (exit 2), again after every restart;
a window plus budget of 29,000 rows had each solve allocate a 6.7 GB Gram and end in a
segfault inside the BLAS. Now both are refused at start-up naming the keys, and a solve
whose Gram would pass ``MAX_GRAM_BYTES`` (an unbounded learner's support set grows) is not
tried: a failed consolidation, logged and counted, the on-line model kept.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys

import numpy as np
import pytest
from river import datasets

from streamk import RBF, Consolidated, KernelPerceptron
from streamk.consolidation import limits


def _log(path, n: int = 600) -> None:
    with open(path, "w") as f:
        for x, y in datasets.Bananas().take(n):
            f.write(json.dumps({"x": x, "y": y}) + "\n")


def _replay(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "streamk.cli", "replay", "log.jsonl", "--snapshot-dir", "s",
            "--consolidate-every", "200", "--quiet", "--json", *extra]  # fmt: skip
    return subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "extra,message",
    [
        (
            ["--consolidate-window", "7000"],
            r"consolidate_window = 7000 rows of up to max_feature_names = 10000 features "
            r"would take 534 MiB, above the 512 MiB",
        ),
        (
            ["--consolidate-window", "6000", "--budget", "11000", "--max-feature-names", "50"],
            r"consolidate_window \+ budget = 17000 training rows: each consolidation's Gram "
            r"would take 2,205 MiB, above the 2048 MiB",
        ),
    ],
)
def test_sizes_that_fail_later_are_refused_at_start_up(tmp_path, extra, message):
    _log(tmp_path / "log.jsonl")
    done = _replay(tmp_path, *extra)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(re.findall(message, done.stderr)) == 1, done.stderr[-2000:]
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").rglob("*.snapshot"))


def test_the_same_window_with_fewer_feature_names_runs(tmp_path):
    # 7,000 rows of at most 2,000 features: 107 MiB
    _log(tmp_path / "log.jsonl")
    done = _replay(tmp_path, "--consolidate-window", "7000", "--max-feature-names", "2000")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["learned"] == 600


def test_an_unbounded_learners_solve_past_the_gram_limit_is_not_tried(monkeypatch, caplog):
    rows = 150  # every solve has more: the window alone holds up to 200
    monkeypatch.setattr(limits, "MAX_GRAM_BYTES", 8 * rows * rows)
    data = list(datasets.Bananas().take(800))
    model = Consolidated(KernelPerceptron(kernel=RBF(1.0), budget=None), every=200, guard=0)
    plain = KernelPerceptron(kernel=RBF(1.0), budget=None)
    with caplog.at_level(logging.WARNING, logger="streamk.consolidation"):
        for x, y in data:
            model.learn_one(x, y)
            plain.learn_one(x, y)
    c = model.consolidator_
    assert c.n_failed >= 3 and c.n_consolidations == 0
    assert any("training rows would take" in r.getMessage() for r in caplog.records)
    probe = [x for x, _ in datasets.Bananas().take(900)][800:]
    assert [model.predict_one(x) for x in probe] == [plain.predict_one(x) for x in probe]
    assert np.isfinite([model.predict_proba_one(x)[True] for x in probe]).all()


def test_a_solve_within_the_limit_is_still_tried(monkeypatch):
    monkeypatch.setattr(limits, "MAX_GRAM_BYTES", 8 * 5000 * 5000)
    model = Consolidated(KernelPerceptron(kernel=RBF(1.0), budget=None), every=200, guard=0)
    for x, y in datasets.Bananas().take(800):
        model.learn_one(x, y)
    assert model.consolidator_.n_failed == 0 and model.consolidator_.n_consolidations >= 3
