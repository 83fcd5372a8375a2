"""The compiled rebuild of the Projectron's ``P`` has the bits of its documented steps.

``_policies.inverse_by_cholesky`` (``sk_pjl_inverse`` in streamk/_dense.h) inverts the Gram
matrix by Cholesky, ``N = L^-T`` and ``P = N Nᵀ``, every dot in ``sk_dots``'s order: four lane
sums (lane ``l`` over the entries ``k = l mod 4`` of the slice, left to right), then
``(lane0 + lane1) + (lane2 + lane3)``. It computes two dots per load of a row, which must not
change a bit. The reference here makes the same steps one dot at a time in NumPy (element by
element float64 operations: the same roundings), so ``P`` must equal it exactly, on whatever
clone (AVX-512F, AVX2, baseline) the machine runs, and whatever its scratch held before
(a caller's reused buffer: here NaN, which any entry read before it is written would spread).
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk.budget import compiled
from streamk.budget.projectron import MIN_REL_DELTA
from streamk.kernels import RBF

pytestmark = pytest.mark.skipif(not compiled.available(), reason="_policies is not built")


def _dots(A: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``A @ q`` row by row in ``sk_dots``'s lane order."""
    lanes = np.zeros((A.shape[0], 4))
    for k in range(q.shape[0]):
        lanes[:, k % 4] = lanes[:, k % 4] + A[:, k] * q[k]
    return (lanes[:, 0] + lanes[:, 1]) + (lanes[:, 2] + lanes[:, 3])


def _reference(G: np.ndarray) -> np.ndarray:
    """``G^-1`` by the documented steps, one dot at a time."""
    n = G.shape[0]
    L, N, P = np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))
    for j in range(n):  # Cholesky, column by column
        ljj = np.sqrt(G[j, j] - _dots(L[j : j + 1, :j], L[j, :j])[0])
        L[j, j] = ljj
        L[j + 1 :, j] = (G[j + 1 :, j] - _dots(L[j + 1 :, :j], L[j, :j])) / ljj
    for i in range(n):  # N = L^-T, column by column, rows in blocks of eight
        t = np.zeros(i)
        for j0 in range(0, i, 8):
            j1 = min(j0 + 8, i)
            t[j0:j1] = _dots(N[j0:j1, j0:i], L[i, j0:i])
        N[:i, i] = -t / L[i, i]
        N[i, i] = 1.0 / L[i, i]
    for i in range(n):  # P = N Nᵀ, row by row from column i & ~3
        i0 = i & ~3
        P[i, : i + 1] = _dots(N[: i + 1, i0:], N[i, i0:])
    return np.tril(P) + np.tril(P, -1).T


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9, 15, 16, 17, 23, 31, 40, 57])
def test_the_compiled_inverse_has_the_bits_of_its_steps(n):
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, 3))
    G = RBF(gamma=0.4).gram(X, X)
    P = np.zeros((n + 3, n + 3))
    assert compiled.inverse_gram(G, P, MIN_REL_DELTA)
    want = _reference(G)
    np.testing.assert_array_equal(P[:n, :n], want)
    Q = np.zeros((n + 3, n + 3))
    assert compiled.inverse_gram(G, Q, MIN_REL_DELTA, np.full(2 * n * n + 9 * n + 5, np.nan))
    np.testing.assert_array_equal(Q, P)
    R = np.full((n + 3, n + 3), 7.0)  # the lower triangle only: what the per-event steps read
    assert compiled.inverse_gram(G, R, MIN_REL_DELTA, lower=True)
    np.testing.assert_array_equal(np.tril(R[:n, :n]), np.tril(want))
    assert (R[n:] == 7.0).all() and (R[:, n:] == 7.0).all()
    np.testing.assert_allclose(want, np.linalg.inv(G), rtol=1e-7, atol=1e-7 * np.abs(want).max())
    assert not P[n:].any() and not P[:, n:].any()
