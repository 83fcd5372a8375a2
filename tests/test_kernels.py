"""Kernels against their formulas computed pair by pair, plus symmetry, PSD and spec round trips."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from streamk.errors import ConfigError
from streamk.kernels import (
    RBF,
    Constant,
    Cosine,
    Laplacian,
    Linear,
    Normalized,
    Polynomial,
    Product,
    Scaled,
    ScaleEstimator,
    Sum,
    kernel_from_spec,
)


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


# Each kernel next to its formula written for one pair, with plain Python arithmetic.
CASES = [
    (Linear(), lambda a, b: dot(a, b)),
    (Polynomial(2, 1.0, 1.0), lambda a, b: (dot(a, b) + 1.0) ** 2),
    (Polynomial(3, 0.5, 2.0), lambda a, b: (0.5 * dot(a, b) + 2.0) ** 3),
    (RBF(0.7), lambda a, b: math.exp(-0.7 * sum((x - y) ** 2 for x, y in zip(a, b)))),
    (Laplacian(0.3), lambda a, b: math.exp(-0.3 * sum(abs(x - y) for x, y in zip(a, b)))),
    (Constant(2.5), lambda a, b: 2.5),
    (
        Sum(RBF(1.0), Constant(1.0)),
        lambda a, b: math.exp(-sum((x - y) ** 2 for x, y in zip(a, b))) + 1.0,
    ),
    (
        Product(Linear(), Polynomial(2)),
        lambda a, b: dot(a, b) * (dot(a, b) + 1.0) ** 2,
    ),
    (
        Scaled(RBF(0.2), 3.0),
        lambda a, b: 3.0 * math.exp(-0.2 * sum((x - y) ** 2 for x, y in zip(a, b))),
    ),
    (
        Normalized(Polynomial(2)),
        lambda a, b: (dot(a, b) + 1) ** 2 / math.sqrt((dot(a, a) + 1) ** 2 * (dot(b, b) + 1) ** 2),
    ),
    (Cosine(), lambda a, b: dot(a, b) / math.sqrt(dot(a, a) * dot(b, b))),
]


@pytest.mark.parametrize("kernel,formula", CASES, ids=[repr(k) for k, _ in CASES])
def test_gram_matches_formula_pair_by_pair(kernel, formula):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(7, 4))
    B = rng.normal(size=(5, 4))
    K = kernel.gram(A, B)
    expected = np.array([[formula(a.tolist(), b.tolist()) for b in B] for a in A])
    np.testing.assert_allclose(K, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        kernel.diag(A), [formula(a.tolist(), a.tolist()) for a in A], rtol=1e-10
    )


@pytest.mark.parametrize("kernel,formula", CASES, ids=[repr(k) for k, _ in CASES])
def test_spec_round_trip(kernel, formula):
    spec = kernel.to_spec()
    rebuilt = kernel_from_spec(spec)
    assert rebuilt == kernel
    A = np.random.default_rng(1).normal(size=(4, 3))
    np.testing.assert_array_equal(rebuilt.gram(A, A), kernel.gram(A, A))


def test_book_numbers():
    # algorithms.md §9.2 item 15: x = (1, 2), z = (3, 4): (<x,z> + 1)^2 = 144.
    assert Polynomial(2, 1.0, 1.0)([1, 2], [3, 4]) == pytest.approx(144.0)
    # Normalisation of K = [[4, 2], [2, 1]] gives all ones (item 3): points 2 and 1 in 1-D.
    K = Normalized(Linear()).gram([[2.0], [1.0]], [[2.0], [1.0]])
    np.testing.assert_allclose(K, np.ones((2, 2)))


def test_blocks_of_different_widths_read_absent_features_as_zero():
    A = np.array([[1.0, 2.0, 3.0]])
    B = np.array([[1.0, 2.0]])
    for k in (RBF(0.5), Linear(), Laplacian(1.0), Polynomial(2)):
        assert k.gram(A, B)[0, 0] == pytest.approx(k.gram(A, [[1.0, 2.0, 0.0]])[0, 0])


def test_cached_norms_give_the_same_block():
    rng = np.random.default_rng(2)
    A, B = rng.normal(size=(6, 3)), rng.normal(size=(4, 3))
    k = RBF(0.8)
    np.testing.assert_allclose(
        k.gram(A, B, a_sqnorm=(A**2).sum(1), b_sqnorm=(B**2).sum(1)), k.gram(A, B)
    )


finite_rows = arrays(
    np.float64,
    st.tuples(st.integers(2, 12), st.integers(1, 5)),
    elements=st.floats(-10, 10, allow_nan=False),
)

PSD_KERNELS = [
    Linear(),
    Polynomial(2),
    Polynomial(3, 0.3, 1.0),
    RBF(0.5),
    Laplacian(0.5),
    Constant(1.0),
    Sum(RBF(1.0), Linear()),
    Product(RBF(2.0), Polynomial(2)),
    Scaled(Laplacian(1.0), 2.0),
    Normalized(Polynomial(2)),
]


@settings(max_examples=60, deadline=None)
@given(X=finite_rows, which=st.integers(0, len(PSD_KERNELS) - 1))
def test_gram_is_symmetric_and_positive_semidefinite(X, which):
    k = PSD_KERNELS[which]
    K = k.gram(X, X)
    np.testing.assert_allclose(K, K.T, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(K).max()))
    eig = np.linalg.eigvalsh((K + K.T) / 2)
    assert eig.min() >= -1e-7 * max(1.0, np.abs(eig).max())


def test_rbf_auto_resolves_from_data_and_then_is_a_number():
    rng = np.random.default_rng(3)
    X = rng.normal(scale=[1.0, 3.0], size=(500, 2))
    scale = ScaleEstimator()
    scale.update(X[:250])
    scale.update(X[250:])
    np.testing.assert_allclose(scale.variance, X.var(axis=0), rtol=1e-10)
    k = RBF().resolve(scale)
    assert k.gamma == pytest.approx(2.0 / X.var(axis=0).sum())
    assert kernel_from_spec(k.to_spec()).gamma == k.gamma
    with pytest.raises(ConfigError, match="not resolved"):
        RBF().gram(X, X)


def test_scale_estimator_grows_with_new_features():
    scale = ScaleEstimator()
    scale.update(np.array([[1.0], [3.0]]))
    scale.update(np.array([[2.0, 5.0]]))  # a feature that the first rows did not have (read 0)
    full = np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 5.0]])
    np.testing.assert_allclose(scale.variance, full.var(axis=0))


@pytest.mark.parametrize("compiled", [True, False])
def test_scale_estimator_folds_rows_one_at_a_time_to_the_bit(compiled, monkeypatch):
    """update_each(rows) gives exactly the numbers of update(row) row after row (a
    learner's warm-up relies on it), and the variance numpy computes."""
    from streamk import accel

    if compiled and not accel.available():
        pytest.skip("compiled core not built")
    if not compiled:
        monkeypatch.setattr(accel, "core", None)
    rng = np.random.default_rng(3)
    X = rng.normal(loc=[0.0, 1e3, -5.0], scale=[1.0, 0.1, 30.0], size=(150, 3))
    one, each = ScaleEstimator(), ScaleEstimator()
    one.update(X[:7, :2])
    each.update(X[:7, :2])
    for row in X[7:]:
        one.update(row[None, :])
    each.update_each(X[7:])  # a third feature appears here: the vectors grow
    assert each.n == one.n == 150
    assert np.array_equal(each.mean, one.mean) and np.array_equal(each._m2, one._m2)
    padded = X.copy()
    padded[:7, 2] = 0.0
    np.testing.assert_allclose(each.variance, padded.var(axis=0), rtol=1e-9)


@pytest.mark.parametrize(
    "bad",
    [
        lambda: RBF(-1.0),
        lambda: RBF("wide"),
        lambda: Polynomial(0),
        lambda: Constant(0.0),
        lambda: Sum(RBF(1.0)),
        lambda: Scaled(RBF(1.0), -2.0),
        lambda: Laplacian(float("nan")),
    ],
)
def test_bad_parameters_raise_config_error(bad):
    with pytest.raises(ConfigError):
        bad()


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "Pickle"},
        {"nom": "RBF"},
        {"name": "RBF", "gama": 1},
        {"name": "Sum", "kernels": "RBF"},
        "RBF",
    ],
)
def test_unknown_or_malformed_specs_raise_config_error(spec):
    with pytest.raises(ConfigError):
        kernel_from_spec(spec)


def test_rbf_stays_accurate_on_features_of_large_magnitude():
    """Dates as day numbers (~7e5): the norm expansion would cancel; values must not drift."""
    rng = np.random.default_rng(4)
    A = 7e5 + rng.normal(size=(6, 3))
    B = 7e5 + rng.normal(size=(5, 3))
    k = RBF(0.5)
    expected = np.array(
        [[math.exp(-0.5 * sum((x - y) ** 2 for x, y in zip(a, b))) for b in B] for a in A]
    )
    np.testing.assert_allclose(k.gram(A, B), expected, rtol=1e-9, atol=1e-12)
