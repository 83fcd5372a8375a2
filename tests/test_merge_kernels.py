"""``Merge`` is refused at construction with any kernel but the RBF, for every learner.

Audit s23 (t24): ``KernelPerceptron(kernel=Linear(), budget=Merge(50))`` was built, and
``ConfigError: Merge needs an RBF kernel`` came only at the first merge (event 4 of
Phishing); a string kernel with Merge was already refused at construction. The oracle is
the closed form Merge relies on (two Gaussians into one): the RBF, and nothing else, has it.
"""

from __future__ import annotations

import argparse
import itertools
import json

import numpy as np
import pytest
from river import datasets
from sealed import sealed
from streamk_run import streamk

from benchmarks import online_grid as grid
from streamk import (
    RBF,
    Constant,
    Cosine,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    Laplacian,
    Linear,
    MarginPerceptron,
    Merge,
    Normalized,
    OnlineRanker,
    OnlineSVR,
    Polynomial,
    Product,
    RemoveOldest,
    Scaled,
    Spectrum,
    Sum,
)
from streamk.errors import ConfigError, SnapshotError
from streamk.snapshot import loads

LEARNERS = {
    "perceptron": lambda k, b: KernelPerceptron(kernel=k, budget=b),
    "margin": lambda k, b: MarginPerceptron(kernel=k, budget=b),
    "adatron": lambda k, b: KernelAdatron(kernel=k, budget=b),
    "svr": lambda k, b: OnlineSVR(kernel=k, budget=b),
    "ranker": lambda k, b: OnlineRanker(kernel=k, ranks=(0, 1, 2), budget=b),
    "novelty": lambda k, b: KernelNovelty(kernel=k, budget=b),
}
NOT_RBF = {
    "linear": Linear,
    "laplacian": lambda: Laplacian(0.5),
    "laplacian auto": lambda: Laplacian(gamma="auto"),
    "polynomial": lambda: Polynomial(degree=2),
    "cosine": Cosine,
    "rbf + constant": lambda: Sum(RBF(0.5), Constant(1.0)),
    "rbf * rbf": lambda: Product(RBF(0.5), RBF(1.0)),
    "scaled rbf": lambda: Scaled(RBF(0.5), 2.0),
    "normalized rbf": lambda: Normalized(RBF(0.5)),
}
RBFS = {"default (None)": lambda: None, "auto": lambda: RBF(gamma="auto"), "0.5": lambda: RBF(0.5)}
EVENTS = [
    ({"a": float(a), "b": float(b)}, i % 3)
    for i, (a, b) in enumerate(np.random.default_rng(3).normal(size=(60, 2)).tolist())
]


@pytest.mark.parametrize("learner", list(LEARNERS))
@pytest.mark.parametrize("kernel", list(NOT_RBF))
def test_merge_with_a_kernel_that_is_not_the_rbf_is_refused_at_construction(learner, kernel):
    k = NOT_RBF[kernel]()
    with pytest.raises(ConfigError) as info:
        LEARNERS[learner](k, Merge(50))
    assert f"Merge needs an RBF kernel (merging two Gaussians into one), got {k!r}" in str(
        info.value
    )
    assert "use RemoveSmallest or Projectron" in str(info.value)


@pytest.mark.parametrize("learner", list(LEARNERS))
@pytest.mark.parametrize("kernel", list(RBFS))
def test_merge_with_the_rbf_is_built_and_merges(learner, kernel):
    model = LEARNERS[learner](RBFS[kernel](), Merge(5))
    target = {"ranker": lambda y: y, "svr": float}.get(learner, lambda y: y > 0)
    for x, y in EVENTS:
        if learner == "novelty":
            model.learn_one(x)
        else:
            model.learn_one(x, target(y))
    assert 0 < model.n_support <= 5


@pytest.mark.parametrize("learner", list(LEARNERS))
def test_a_string_kernel_with_merge_is_still_refused(learner):
    with pytest.raises(ConfigError, match="needs a vector space"):
        LEARNERS[learner](Spectrum(2), Merge(10))


def test_a_snapshot_pairing_merge_with_a_linear_kernel_is_refused_on_load():
    """A state whose policy is Merge but whose kernel is not the RBF (hand-made: the params
    say RemoveOldest) is refused on restore, not at its first merge."""
    model = KernelPerceptron(kernel=Linear(), budget=RemoveOldest(5))
    for x, y in EVENTS[:20]:
        model.learn_one(x, y > 0)
    state = model.state()
    state["policy"] = Merge(5).to_spec()
    with pytest.raises(SnapshotError, match="'policy'.*Merge needs an RBF kernel"):
        KernelPerceptron.from_state(state)
    with pytest.raises(SnapshotError, match="Merge needs an RBF kernel"):
        loads(sealed(state, "KernelPerceptron"))


def test_the_engine_refuses_merge_with_a_linear_kernel_at_start_up(tmp_path):
    log = tmp_path / "events.jsonl"
    rows = itertools.islice(datasets.Phishing(), 50)
    log.write_text("".join(json.dumps({"x": x, "y": y}) + "\n" for x, y in rows))
    snaps = tmp_path / "snaps"
    out = streamk(
        "replay", str(log), "--policy", "Merge", "--kernel", "linear", "--snapshot-dir", str(snaps)
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.startswith("streamk: error: Merge needs an RBF kernel")
    assert "got Linear()" in out.stderr and "Traceback" not in out.stderr
    assert not snaps.exists()  # refused before anything was learned or saved


def test_learn_refuses_merge_with_a_laplacian_kernel_before_the_first_event():
    out = streamk(
        "learn", "Phishing", "--policy", "Merge", "--budget", "50", "--kernel", "laplacian:0.5"
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Merge needs an RBF kernel" in out.stderr and "Traceback" not in out.stderr


def test_the_throughput_grid_still_marks_merge_with_a_linear_kernel_not_applicable(
    monkeypatch, tmp_path
):
    """benchmarks/online_grid.py's probe catches the refusal, now made at construction."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    rows = [dict(zip(("a", "b", "c"), r)) for r in X.tolist()]
    stream = {"Tiny": ("clf", list(zip(rows, (X[:, 0] * X[:, 1] > 0).tolist())))}
    monkeypatch.setattr(grid, "streams", lambda quick: stream)
    configs = grid._configs
    monkeypatch.setattr(
        grid, "_configs", lambda budgets: [c for c in configs(budgets) if c[0] == "Merge"]
    )
    monkeypatch.setattr(grid, "_repeat", lambda fresh, learn, events: (1e-6, events))
    args = argparse.Namespace(quick=True, repeats=1, kernel="linear", only="perceptron")
    assert grid.run(args, tmp_path) == 0
    doc = json.loads(next(tmp_path.glob("online_grid*_only_perceptron.json")).read_text())
    cells = [r for r in doc["rows"] if r.get("policy") == "Merge"]
    assert cells and all(r["status"].startswith("n/a: Merge needs an RBF kernel") for r in cells), (
        cells
    )
