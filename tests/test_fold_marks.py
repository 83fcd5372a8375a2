"""The ``gamma="auto"`` warm-up's widths folded in one compiled call (``welford_marks``,
``_fold_runs``) are those of the row-by-row fold, to the bit."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from streamk import RBF, KernelPerceptron, Laplacian, accel

needs_core = pytest.mark.skipif(
    accel.core is None or not hasattr(accel.core, "welford_marks"), reason="needs the core"
)


@needs_core
@pytest.mark.parametrize("width", [1, 3, 7])
@pytest.mark.parametrize("n0", [0, 1, 57])
def test_welford_marks_is_welford_each_up_to_each_mark(width: int, n0: int) -> None:
    rng = np.random.default_rng(width * 100 + n0)
    rows = rng.normal(size=(90, width)) * rng.uniform(0.1, 30.0, size=width) + 5.0
    mean0, m20 = rng.normal(size=width), rng.uniform(0.0, 3.0, size=width)
    marks = np.array([1, 2, 3, 10, 11, 40, 89], dtype=np.int64)
    mean, m2, out = mean0.copy(), m20.copy(), np.empty((len(marks), width))
    n = accel.core.welford_marks(rows, n0, mean, m2, marks, out)
    ref_mean, ref_m2, count, done = mean0.copy(), m20.copy(), n0, 0
    for r, mark in enumerate(marks):
        count = accel.core.welford_each(rows[done:mark], count, ref_mean, ref_m2)
        done = mark
        assert out[r].tobytes() == ref_m2.tobytes()
    count = accel.core.welford_each(rows[done:], count, ref_mean, ref_m2)
    assert n == count == n0 + len(rows)
    assert mean.tobytes() == ref_mean.tobytes() and m2.tobytes() == ref_m2.tobytes()


@needs_core
@pytest.mark.parametrize(
    "marks", [[0], [5, 5], [7, 3], [91]], ids=["zero", "repeat", "down", "past"]
)
def test_welford_marks_refuses_bad_marks(marks: list[int]) -> None:
    rows, mean, m2 = np.ones((90, 2)), np.zeros(2), np.zeros(2)
    with pytest.raises(ValueError):
        accel.core.welford_marks(
            rows, 0, mean, m2, np.array(marks, dtype=np.int64), np.empty((len(marks), 2))
        )
    assert not mean.any() and not m2.any()  # refused before folding


def _warming(kernel, width: int, seen: int, seed: int) -> tuple[KernelPerceptron, np.ndarray]:
    """A perceptron ``seen`` rows into its warm-up, and 300 more rows of its width."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(seen + 300, width)) * rng.uniform(0.5, 4.0, size=width)
    model = KernelPerceptron(kernel=kernel)
    if seen:
        frame = pd.DataFrame(X[:seen], columns=[f"f{j}" for j in range(width)])
        model.learn_many(frame, pd.Series(X[:seen, 0] > 0))
    return model, np.ascontiguousarray(X[seen:])


def _folded(model: KernelPerceptron, rows: np.ndarray, start: int, stop: int) -> tuple:
    scale = model._scale.copy()
    bounds, kernels = model._fold_runs(scale, rows, start, stop)
    gammas = [None if k is None else k.gamma for k in kernels]
    return bounds, gammas, scale.n, scale.mean.tobytes(), scale._m2.tobytes()


@needs_core
@pytest.mark.parametrize("kernel", [RBF, Laplacian])
@pytest.mark.parametrize("seen", [0, 1, 9, 10, 57, 190, 199])
@pytest.mark.parametrize("start,stop", [(0, 300), (0, 37), (3, 300), (11, 12), (40, 40)])
def test_fold_runs_in_one_call_is_the_run_by_run_fold(
    kernel, seen: int, start: int, stop: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for width in (1, 4):
        model, rows = _warming(kernel(gamma="auto"), width, seen, seed=seen + width)
        fast = _folded(model, rows, start, stop)
        core = types.SimpleNamespace(welford_each=accel.core.welford_each)  # no welford_marks
        monkeypatch.setattr(accel, "core", core)
        slow = _folded(model, rows, start, stop)
        monkeypatch.undo()
        assert fast == slow
