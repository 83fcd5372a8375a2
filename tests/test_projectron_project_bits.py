"""The compiled ``d = P k`` of the Projectron has the bits of its documented order.

``sk_pjl_project`` (streamk/_dense.h) reads only ``P``'s lower triangle: ``d_a`` is the lane
sum of row ``a``'s entries ``b <= a`` (four lanes, lane ``b mod 4``, left to right, then
``(lane0 + lane1) + (lane2 + lane3)``) plus ``u_a``, the sum over the rows ``c > a`` in order
of ``P_ca k_c``; the squared projection error is ``kxx - k . d`` in the same lane order. Its
AVX-512F clone reads eight columns at a time; the bits must not move. The reference makes
the same sums one entry at a time in Python floats (the same roundings); the upper triangle
is filled with NaN, which it must never read.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk.budget import compiled

pytestmark = pytest.mark.skipif(not compiled.available(), reason="_policies is not built")


def _lane_sum(x: np.ndarray, y: np.ndarray) -> float:
    lanes = [0.0, 0.0, 0.0, 0.0]
    for b in range(x.shape[0]):
        lanes[b % 4] = lanes[b % 4] + float(x[b]) * float(y[b])
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])


def _reference(P: np.ndarray, k: np.ndarray, kxx: float) -> tuple[np.ndarray, float]:
    n = k.shape[0]
    d = np.empty(n)
    for a in range(n):
        u = 0.0
        for c in range(a + 1, n):
            u = u + float(P[c, a]) * float(k[c])
        d[a] = _lane_sum(P[a, : a + 1], k[: a + 1]) + u
    return d, kxx - _lane_sum(k, d)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 23, 31, 40, 47, 64])
def test_d_equals_the_documented_sums_bit_for_bit(n):
    rng = np.random.default_rng(n)
    P = np.full((n + 1, n + 1), np.nan)  # the upper triangle is never read
    low = np.tril_indices(n)
    P[low] = rng.normal(size=low[0].shape[0])
    k = rng.random(n)
    coef = np.ones((n, 1))
    d, col = np.empty(n), np.empty(2 * n)
    kxx = 1.0
    # eta above any error: projected, so P is only read and d = P k comes back
    slot, _ = compiled.policies.projectron_insert(
        P, coef, k.copy(), d, col, n, False, kxx, 1e300, 0.0
    )
    assert slot == -2
    want, _error = _reference(P, k, kxx)
    np.testing.assert_array_equal(d, want)
