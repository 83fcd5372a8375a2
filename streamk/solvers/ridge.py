"""Kernel ridge regression by Cholesky, with a growing window updated by block Cholesky.

``alpha = (K + lam I)^{-1} y`` (Shawe-Taylor & Cristianini Comp. 2.5 / Alg. 7.41; no bias,
``f = K @ alpha``). :class:`RidgeWindow` appends ``k`` examples at a time in O(n^2 k): with
``L L' = K11 + lam I`` kept, the new factor is ``[[L, 0], [L21, L22]]`` where ``L L21' = K12`` (a
triangular solve) and ``L22 L22' = K22 + lam I - L21 L21'``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, cholesky, solve_triangular

from ..errors import SolverError
from ._common import SolverResult, check_gram, check_positive

__all__ = ["ridge", "RidgeWindow"]


def _check_y(y: np.ndarray, n: int) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise SolverError(f"y must have {n} rows (1-D or 2-D), got shape {y.shape}")
    if not np.isfinite(y).all():
        raise SolverError("y has non-finite entries")
    return y


def ridge(K: np.ndarray, y: np.ndarray, lam: float) -> SolverResult:
    """Kernel ridge regression ``alpha = (K + lam I)^{-1} y`` by Cholesky (``cho_factor``).

    ``y`` may be 2-D (one column per output). ``objective`` is the book's primal value
    ``lam ||w||^2 + ||y - K alpha||^2`` with ``||w||^2 = alpha'K alpha``; ``gap`` the largest
    residual of the linear system.
    """
    K = check_gram(K)
    n = K.shape[0]
    y = _check_y(y, n)
    lam = check_positive("lam", lam)
    A = K + lam * np.eye(n)
    try:
        factor = cho_factor(A, lower=True, check_finite=False)
    except LinAlgError as exc:
        raise SolverError(f"K + lam I is not positive definite (is K PSD?): {exc}") from exc
    alpha = cho_solve(factor, y, check_finite=False)
    fit = K @ alpha
    obj = float(lam * np.sum(alpha * fit) + np.sum((y - fit) ** 2))
    gap = float(np.abs(A @ alpha - y).max())
    return SolverResult(alpha, 0.0, 0, obj, 0, gap, {"lam": lam})


class RidgeWindow:
    """Kernel ridge regression over a growing window, refactored by block Cholesky updates.

    Parameters
    ----------
    lam : float
        Ridge parameter (> 0).

    Use ``append(K_new_old, K_new_new, y_new)`` with the kernel block between the ``k`` new examples
    and the current window (``k x n``) and among the new examples (``k x k``); ``alpha`` then solves
    ``(K + lam I) alpha = y`` for the whole window. The factor lives in a capacity-doubling buffer.
    """

    def __init__(self, lam: float) -> None:
        self.lam = check_positive("lam", lam)
        self._L = np.zeros((0, 0))
        self._y = np.zeros(0)
        self.n = 0

    @property
    def L(self) -> np.ndarray:
        """Lower Cholesky factor of ``K + lam I`` for the current window (a view)."""
        return self._L[: self.n, : self.n]

    def _grow(self, need: int) -> None:
        cap = self._L.shape[0]
        if need <= cap:
            return
        new_cap = max(need, 2 * cap, 16)
        L = np.zeros((new_cap, new_cap))
        L[: self.n, : self.n] = self.L
        yb = np.zeros(new_cap)
        yb[: self.n] = self._y[: self.n]
        self._L, self._y = L, yb

    def append(self, K_new_old: np.ndarray, K_new_new: np.ndarray, y_new: np.ndarray) -> None:
        """Add ``k`` examples in O(n^2 k + n k^2 + k^3)."""
        B = np.atleast_2d(np.asarray(K_new_old, dtype=np.float64))
        D = np.atleast_2d(np.asarray(K_new_new, dtype=np.float64))
        yn = np.asarray(y_new, dtype=np.float64).ravel()
        k = D.shape[0]
        if D.shape != (k, k) or yn.shape[0] != k or B.shape != (k, self.n):
            raise SolverError(
                f"append needs K_new_old ({k}, {self.n}), K_new_new ({k}, {k}) and {k} targets; "
                f"got {B.shape}, {D.shape}, {yn.shape}"
            )
        if not (np.isfinite(B).all() and np.isfinite(D).all() and np.isfinite(yn).all()):
            raise SolverError("append got non-finite kernel entries or targets")
        n = self.n
        self._grow(n + k)
        if n:
            L21 = solve_triangular(self.L, B.T, lower=True, check_finite=False).T
        else:
            L21 = np.zeros((k, 0))
        S = D + self.lam * np.eye(k) - L21 @ L21.T
        try:
            L22 = cholesky(S, lower=True, check_finite=False)
        except LinAlgError as exc:
            raise SolverError(
                f"block update lost positive definiteness (is K PSD?): {exc}"
            ) from exc
        self._L[n : n + k, :n] = L21
        self._L[n : n + k, n : n + k] = L22
        self._y[n : n + k] = yn
        self.n = n + k

    @property
    def alpha(self) -> np.ndarray:
        """Dual coefficients ``(K + lam I)^{-1} y`` for the window (two triangular solves)."""
        L = self.L
        z = solve_triangular(L, self._y[: self.n], lower=True, check_finite=False)
        return solve_triangular(L.T, z, lower=False, check_finite=False)
