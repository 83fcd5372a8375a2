"""The ``gamma="auto"`` warm-up's cheap steps against what they stand for: a resolved
stationary kernel built without its constructor equals the constructor's, and
``ScaleEstimator.copy`` equals ``from_state(state())``, to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from streamk import RBF, KernelPerceptron, Laplacian, RemoveOldest, accel
from streamk.errors import ConfigError
from streamk.kernels import ScaleEstimator
from streamk.learners import fastpass


def _estimator(rows: np.ndarray) -> ScaleEstimator:
    scale = ScaleEstimator()
    scale.update_each(rows)
    return scale


@pytest.mark.parametrize("kind", [RBF, Laplacian])
@pytest.mark.parametrize("n", [1, 2, 7, 60])
def test_resolved_kernel_is_the_constructors(kind: type, n: int) -> None:
    scale = _estimator(np.random.default_rng(n).normal(size=(n, 3)) * [1.0, 5.0, 0.1])
    auto = kind(gamma="auto")
    got = auto.resolve(scale)
    want = kind(gamma=auto._auto_gamma(scale))
    assert type(got) is kind and got.is_resolved
    assert got == want and repr(got) == repr(want) and hash(got) == hash(want)
    assert type(got.gamma) is float and got.gamma == want.gamma
    assert vars(got) == vars(want)
    assert got.resolve(scale) is got  # resolved: kept as it is


def test_a_subclass_keeps_its_constructor() -> None:
    class Wide(RBF):
        def __init__(self, gamma="auto"):
            super().__init__(gamma)
            self.seen = True

    assert Wide().resolve(_estimator(np.ones((3, 2)) * [[1.0], [2.0], [4.0]])).seen


def test_an_infinite_width_is_still_refused() -> None:
    scale = _estimator(np.array([[0.0], [1e-160]]))  # variance ~1e-321: 2 / var overflows
    with pytest.raises(ConfigError):
        RBF(gamma="auto").resolve(scale)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_scale_copy_is_from_state_of_state(n: int) -> None:
    scale = _estimator(np.random.default_rng(n).normal(size=(n, 4)))
    copy, rebuilt = scale.copy(), ScaleEstimator.from_state(scale.state())
    for a in (copy, rebuilt):
        assert a.n == scale.n
        assert a.mean.tobytes() == scale.mean.tobytes() and a._m2.tobytes() == scale._m2.tobytes()
        assert a.mean.dtype == np.float64 and a.mean.flags.c_contiguous and a.mean.flags.writeable
        assert a.mean is not scale.mean and a._m2 is not scale._m2
    copy.update(np.ones((1, 4)))
    assert copy.n == scale.n + 1 and rebuilt.n == scale.n  # independent of the original


@pytest.mark.parametrize("kind", [RBF, Laplacian])
@pytest.mark.parametrize("width", [1, 3, 40])
def test_resolve_each_is_resolve_at_each_count(kind: type, width: int) -> None:
    rows = np.random.default_rng(width).normal(size=(60, width)) * np.geomspace(1e-3, 1e3, width)
    scale, counts, m2, want = ScaleEstimator(), [], [], []
    for i, row in enumerate(rows):
        scale.update(row[None, :])
        if i in (0, 1, 2, 9, 10, 19, 59):
            counts.append(scale.n)
            m2.append(scale._m2.copy())
            want.append(kind(gamma="auto").resolve(scale))
    got = kind(gamma="auto").resolve_each(counts, np.array(m2))
    assert [type(k) for k in got] == [kind] * len(want)
    assert [k.gamma.hex() for k in got] == [k.gamma.hex() for k in want]
    fixed = kind(gamma=0.5)
    assert fixed.resolve_each(counts, np.array(m2)) == [fixed] * len(counts)


@pytest.mark.skipif(accel.core is None, reason="needs the compiled core")
@pytest.mark.parametrize("middle", ["fits", "too-wide", "laplacian"])
def test_warm_pass_declines_when_any_runs_kernel_would(middle: str) -> None:
    """``perceptron_run`` checks the widest run's kernel only: a kernel too wide for the
    rows' norms (or not an RBF) in any run still declines the whole warm pass."""
    rows = np.random.default_rng(0).normal(size=(30, 2)) * 3.0
    wide = {"fits": RBF(gamma=0.5), "too-wide": RBF(gamma=1e8), "laplacian": Laplacian(0.5)}
    kernels = [RBF(gamma=0.4), wide[middle], RBF(gamma=0.3)]
    model = KernelPerceptron(kernel=RBF(gamma=0.4), budget=RemoveOldest(10))
    support, policy = model.support_, model._policy
    bound = 2 * float((rows**2).sum(axis=1).max())
    assert RBF(gamma=0.5).expansion_exact(bound) and not RBF(gamma=1e8).expansion_exact(bound)
    T = np.where(rows[:, :1] > 0, 1.0, -1.0)
    codes = np.zeros(30, dtype=np.int64)
    done = fastpass.perceptron_run(
        support, policy, rows, T, codes, 0.0, None, ([0, 1, 2, 30], kernels)
    )
    if middle == "fits":
        assert done is not None and done[1] == 3 and support.n > 0
    else:
        assert done is None and support.n == 0
