"""The float32 hint kernels of learn_many (``sk_hint_block``, ``sk_hint_column``,
``sk_hint_column2`` in ``streamk/_fastexp.h``) against an exact float64 oracle.

The kernels work on tiles of 16-lane groups of rows and on several support vectors at
once; these cases reach every tile shape (four vectors and a remainder, 64/32/16 rows and a
partial group, columns from any row) and check the claim the hint pass rests on,
``|H - f| <= E_r``, plus that a column update leaves the rows outside its range as they were.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk import accel

pytestmark = pytest.mark.skipif(not accel.available(), reason="compiled core not built")


def _exact(Q: np.ndarray, X: np.ndarray, coef: np.ndarray, gamma: float) -> np.ndarray:
    """f_c(q) = sum_s coef[s, c] exp(-gamma ||q - s||^2) from the differences, summed
    with fsum; shape (p, m)."""
    k = np.exp(-gamma * ((Q[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
    return np.array(
        [[math.fsum(k[r] * coef[:, c]) for r in range(Q.shape[0])] for c in range(coef.shape[1])]
    )


def _case(seed: int, m: int, n: int, w: int, p: int, zeros: float):
    """Rows and support vectors around a shared offset, coefficients of both signs with a
    share ``zeros`` of exact zeros (the block kernel skips those vectors), a width that
    keeps the bound's condition."""
    rng = np.random.default_rng(seed)
    Q = 3.0 + rng.normal(size=(m, w))
    X = 3.0 + rng.normal(size=(n, w))
    coef = rng.choice([-1.0, 1.0], size=(n, p)) * (0.1 + rng.random((n, p)))
    coef[rng.random(n) < zeros] = 0.0
    return Q, X, coef, 0.5 / w


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    m=st.integers(1, 150),
    n=st.integers(0, 23),
    w=st.sampled_from([1, 2, 5, 17, 50]),
    p=st.sampled_from([1, 3]),
    zeros=st.sampled_from([0.0, 0.3]),
)
def test_the_block_hints_are_within_their_bound(seed, m, n, w, p, zeros):
    Q, X, coef, gamma = _case(seed, m, n, w, p, zeros)
    got = accel.core.hint_values(Q, X, coef, gamma)
    assert got is not None
    H, E = got
    assert H.shape == (p, m)
    assert np.all(np.abs(H - _exact(Q, X, coef, gamma)) <= E)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    m=st.integers(1, 150),
    n=st.integers(1, 7),
    w=st.sampled_from([1, 3, 50]),
    p=st.sampled_from([1, 2]),
    bounds=st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)),
)
def test_the_columns_are_within_their_bound_and_change_only_their_rows(seed, m, n, w, p, bounds):
    Q, X, coef, gamma = _case(seed, m, n, w, p, 0.2)
    r0, r1 = sorted(int(b * m) for b in bounds)
    fill = -0.75
    got = accel.core.hint_column_values(Q, X, coef, gamma, r0, r1, fill)
    assert got is not None
    H, E = got
    f = _exact(Q, X, coef, gamma)
    inside = np.zeros(m, dtype=bool)
    inside[r0:r1] = True
    assert np.all(H[:, ~inside] == fill)  # x + 0 = x: the masked lanes add nothing
    assert np.all(np.abs(H[:, inside] - fill - f[:, inside]) <= E[inside])


def test_the_columns_cover_a_range_inside_one_group_of_rows():
    """Rows 5:9 of one group of 16: both ends masked in the same group."""
    Q, X, coef, gamma = _case(1, 40, 3, 4, 1, 0.0)
    H, E = accel.core.hint_column_values(Q, X, coef, gamma, 5, 9, 0.0)
    f = _exact(Q, X, coef, gamma)
    assert np.all(H[0, :5] == 0.0) and np.all(H[0, 9:] == 0.0)
    assert np.all(np.abs(H[0, 5:9] - f[0, 5:9]) <= E[5:9])
    assert np.all(np.abs(H[0, 5:9]) > 0.0)
