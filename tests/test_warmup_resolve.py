"""The ``gamma="auto"`` warm-up's cheap steps against what they stand for: a resolved
stationary kernel built without its constructor equals the constructor's, and
``ScaleEstimator.copy`` equals ``from_state(state())``, to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from streamk import RBF, Laplacian
from streamk.errors import ConfigError
from streamk.kernels import ScaleEstimator


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
