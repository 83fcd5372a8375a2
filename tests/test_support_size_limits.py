"""Support sets no snapshot could hold: refused by the writer, and up front by the engine
(session 26).

The writer checked a snapshot's bytes against ``max_bytes`` but not the counts and implied
allocation the reader checks (``check_implied``): an unbounded learner past
``max_support`` (2²⁰) support vectors of a few features wrote snapshots every reader
refused, so the engine could not restart from them. And an engine whose budget could never
fit (``budget`` above ``max_support``, or ``budget`` rows of ``max_feature_names``
features above the 256 MiB a snapshot may hold) ran until the checkpoint after the set
outgrew it, stopped (exit 2), and did the same after every restart. Oracle: the reader's
own verdict on the same state (``loads`` with the same limits).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from streamk import KernelAdatron, KernelPerceptron, MarginPerceptron, OnlineSVR, Projectron
from streamk.errors import SnapshotError
from streamk.kernels import RBF, Spectrum
from streamk.snapshot import Limits, dumps, loads
from streamk.snapshot.limits import SnapshotOverLimit


def _vectors(seed: int, n: int = 300, d: int = 6) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, d)), columns=[f"f{j}" for j in range(d)])
    return X, rng.random(n)


def _models() -> dict[str, object]:
    X, u = _vectors(0)
    out: dict[str, object] = {}
    for name, model, y in [
        ("perceptron", KernelPerceptron(kernel=RBF(1.0)), pd.Series(u < 0.5)),
        ("multiclass", KernelPerceptron(kernel=RBF(1.0)), pd.Series((u * 5).astype(int))),
        ("adatron-gram", KernelAdatron(C=1.0, resweeps=1), pd.Series(u < 0.5)),
        ("projectron", MarginPerceptron(budget=Projectron(80)), pd.Series(u < 0.5)),
        ("svr", OnlineSVR(budget=60), pd.Series(u)),
    ]:
        model.learn_many(X, y)
        out[name] = model
    strings = KernelPerceptron(kernel=Spectrum(2))
    rng = np.random.default_rng(1)
    for i in range(150):
        strings.learn_one("".join(rng.choice(list("acgt"), 12)), i % 3 == 0)
    out["strings"] = strings
    return out


MODELS = _models()
LIMITS = {
    "support-40": Limits(max_support=40),
    "support-100": Limits(max_support=100),
    "support-1000": Limits(max_support=1000),
    "features-4": Limits(max_features=4),
    "outputs-3": Limits(max_outputs=3),
    "implied-64KiB": Limits(max_implied_bytes=64 << 10),
    "implied-1MiB": Limits(max_implied_bytes=1 << 20),
}


@pytest.mark.parametrize("limits", sorted(LIMITS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_writer_refuses_exactly_what_the_reader_refuses(name, limits):
    model, lim = MODELS[name], LIMITS[limits]
    data = dumps(model, {"t": {0: 1}}, 1)  # default limits: always written
    try:
        loads(data, limits=lim)
        reader_refuses = False
    except SnapshotOverLimit:
        reader_refuses = True
    if reader_refuses:
        with pytest.raises(SnapshotError, match="readers would refuse this snapshot"):
            dumps(model, {"t": {0: 1}}, 1, limits=lim)
    else:
        assert loads(dumps(model, {"t": {0: 1}}, 1, limits=lim), limits=lim).seq == 1


def test_the_limits_above_split_the_models():
    """Both verdicts occur for every limit kind used above (else the test above could pass
    with a writer that never checks, or one that always refuses)."""
    verdicts: dict[str, set[bool]] = {}
    for key, lim in LIMITS.items():
        for model in MODELS.values():
            try:
                loads(dumps(model, {}), limits=lim)
                refused = False
            except SnapshotOverLimit:
                refused = True
            verdicts.setdefault(key.split("-")[0], set()).add(refused)
    assert all(v == {True, False} for v in verdicts.values()), verdicts


def _replay(tmp_path, *args):
    log = tmp_path / "events.jsonl"
    if not log.exists():
        log.write_text("".join(f'{{"x": [{i % 7}, {i % 5}], "y": {i % 2}}}\n' for i in range(50)))
    return subprocess.run(
        [sys.executable, "-m", "streamk.cli", "replay", str(log), "--snapshot-dir",
         str(tmp_path / "s"), "--quiet", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    "args, words",
    [
        (["--budget", "1048577"], "budget must be >= 0 and <= 1048576"),
        (["--budget", "3356"], "max_feature_names = 10,000 features would take 256 MiB"),
        (["--budget", "700", "--max-feature-names", "50000"], "above the 256 MiB"),
    ],
    ids=["past-max-support", "default-names", "wide-names"],
)
def test_a_budget_no_snapshot_could_hold_is_refused_at_start(tmp_path, args, words):
    done = _replay(tmp_path, *args)
    assert done.returncode == 2, done.stderr[-2000:]
    assert words in done.stderr
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").glob("*.snapshot"))


@pytest.mark.parametrize(
    "args",
    [["--budget", "3355"], ["--budget", "1048576", "--max-feature-names", "32"]],
    ids=["largest-at-default-names", "max-support-narrow"],
)
def test_the_largest_budgets_that_fit_run(tmp_path, args):
    done = _replay(tmp_path, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "budget = 0" not in done.stderr


def test_no_budget_warns_except_under_the_projectron(tmp_path):
    unbounded = _replay(tmp_path, "--budget", "0")
    assert unbounded.returncode == 0, unbounded.stderr[-2000:]
    assert "budget = 0: the support set has no bound" in unbounded.stderr
    assert "3,355 vectors of max_feature_names = 10,000" in unbounded.stderr
    projectron = _replay(tmp_path, "--budget", "0", "--policy", "Projectron", "--model-name", "p")
    assert projectron.returncode == 0, projectron.stderr[-2000:]
    assert "budget = 0" not in projectron.stderr
