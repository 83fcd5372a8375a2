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
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk import RBF, KernelPerceptron, accel

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
    weigh=st.booleans(),
)
def test_the_block_hints_are_within_their_bound(seed, m, n, w, p, zeros, weigh):
    """Both bounds: from k <= 1, and weighted by the float32 kernel values (weigh)."""
    Q, X, coef, gamma = _case(seed, m, n, w, p, zeros)
    got = accel.core.hint_values(Q, X, coef, gamma, weigh)
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


def test_the_weighted_bound_is_never_looser_and_much_tighter_in_fifty_dimensions():
    """Kernel values ~0.02 (d = 50, gamma = 0.04, as on Synth50): the bound weighted by them is far
    below the one from k <= 1, which it never exceeds (the pass takes the smaller)."""
    rng = np.random.default_rng(5)
    Q, X = rng.normal(size=(200, 50)), rng.normal(size=(300, 50))
    coef = rng.choice([-1.0, 1.0], size=(300, 1))
    flat = accel.core.hint_values(Q, X, coef, 0.04, False)[1]
    H, weighted = accel.core.hint_values(Q, X, coef, 0.04, True)
    assert np.all(weighted <= flat)
    assert np.median(weighted) < 0.2 * np.median(flat)
    assert np.all(np.abs(H - _exact(Q, X, coef, 0.04)) <= weighted)


def _blocks(stream: list, size: int):
    for i in range(0, len(stream), size):
        chunk = stream[i : i + size]
        yield pd.DataFrame([x for x, _ in chunk]), [y for _, y in chunk]


@pytest.mark.parametrize("budget", [None, 60])
def test_learn_many_in_fifty_dimensions_is_the_plain_algorithm(monkeypatch, budget):
    """d = 50, kernel values ~0.02 (as on Synth50): the pass weighs its bound by them (16
    features or more), so next to no row is decided afresh (37 of 900 with the bound from
    k <= 1 alone); the model is still the plain algorithm's (Code Fragment 7.12)."""
    from streamk.learners import fastpass
    from tests.test_perceptron import plain_perceptron, random_stream, rbf

    stream = random_stream(900, 50, seed=8)
    expected, support = plain_perceptron(stream, rbf(0.04), budget=budget)
    runs = []
    run = fastpass.perceptron_run

    def counted(*args, **kwargs):
        out = run(*args, **kwargs)
        runs.append((args[2].shape[0], out))
        return out

    monkeypatch.setattr(fastpass, "perceptron_run", counted)
    model = KernelPerceptron(kernel=RBF(0.04), budget=budget)
    got = []
    for X, y in _blocks(stream, 300):
        got += model.learn_predict_many(X, y)
    assert got[1:] == expected[1:]
    order = np.argsort(model.support_.ids)
    want = np.array([[x[f"f{j}"] for j in range(50)] for x, _ in support])
    assert np.array_equal(model.support_.X[order], want)
    assert np.array_equal(model.support_.coef[order, 0], [y for _, y in support])
    used = [(rows, out) for rows, out in runs if out is not None]
    assert sum(rows for rows, _ in used) >= 600
    assert sum(out[1] for _, out in used) <= 9
