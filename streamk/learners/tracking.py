"""BlockTracker: the kernel block of a micro-batch, kept current as the support set changes.

:meth:`streamk.learners.support.SupportSet.track` creates one; every change to the set then calls
the tracker method of the same name (``drop``, ``add_column``, ``add_coef``, ...), so the
block ``K(Q, S)`` is computed once per micro-batch and ``learn_many`` still reproduces
``learn_one`` row by row. The one-row RBF helper lives here because both the per-event
path (a new event against the set) and the tracker (a new support vector against the
block) use it.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ..accel import scaled_exp
from ..kernels import RBF, Kernel

__all__ = ["BlockTracker", "rbf_rows", "pad_cols"]


def rbf_rows(
    kernel: Kernel, X: np.ndarray, x_sq: np.ndarray, x_sq_max: float, row: np.ndarray, row_sq: float
) -> np.ndarray | None:
    """``k(X[i], row)`` for every ``i`` as one matrix-vector product and six vector passes.

    ``None`` unless ``kernel`` is an :class:`~streamk.kernels.RBF` and the expansion
    ``||x||^2 + ||row||^2 - 2 x.row`` is exact to 1e-10 (see ``RBF._gram``): the caller
    then takes the general path.
    """
    if type(kernel) is not RBF:
        return None
    gamma = cast(float, kernel.gamma)  # a kernel in use is resolved: never "auto"
    if not kernel.expansion_exact(x_sq_max + row_sq):
        return None
    d = X @ row
    d *= -2.0
    d += x_sq
    d += row_sq
    np.maximum(d, 0.0, out=d)
    return scaled_exp(d, -gamma)


def pad_cols(A: np.ndarray, width: int) -> np.ndarray:
    """``A`` with zero columns appended up to ``width`` (absent features read as 0)."""
    if A.shape[1] >= width:
        return A
    out = np.zeros((A.shape[0], width))
    out[:, : A.shape[1]] = A
    return out


class BlockTracker:
    """Kernel block of a micro-batch and its decision values, kept current as the set changes.

    ``F`` is updated incrementally (one vector operation per change), so it carries
    rounding residue: where a column has no non-zero coefficient left, ``F`` may read
    ``-2.8e-17`` where ``learn_one`` computes exactly 0. Use ``F`` only as a hint to find
    the rows that need attention, and decide those rows with the fresh dot
    ``K[j, :n] @ support.coef`` (the arithmetic ``learn_one`` does), so that ties such
    as the book's ``sgn(0) = +1`` are decided exactly as ``learn_one`` decides them.

    Attributes
    ----------
    Q
        The block's rows, ``(m, w)``.
    K
        ``K[i, s] = k(Q[i], support row in slot s)`` for the slots in use, ``(m, capacity)``.
    F
        Decision values ``F[i] ~= K[i, :n] @ coef[:n]`` (a hint: see above), ``(m, n_outputs)``.
    start
        Rows before ``start`` are done; updates skip them. The learner advances it.
    coef_l1
        An upper bound on the largest column sum of ``|coef|``, raised by every change
        (never lowered), so that :meth:`tolerance` costs no pass over the coefficients.
    """

    __slots__ = ("Q", "sq", "sq_max", "K", "F", "start", "kmax", "bound", "coef_l1")

    def __init__(
        self,
        Q: np.ndarray,
        sq: np.ndarray,
        K: np.ndarray,
        F: np.ndarray,
        bound: float | None,
        coef: np.ndarray,
    ):
        self.Q = Q
        self.sq = sq
        self.sq_max = float(sq.max(initial=0.0))
        self.K = K
        self.F = F
        self.start = 0
        self.bound = bound  # the kernel's bound on |k|, if it has one
        self.kmax = bound if bound is not None else (float(np.abs(K).max()) if K.size else 0.0)
        self.coef_l1 = float(np.abs(coef).sum(axis=0).max()) if coef.size else 0.0

    def tolerance(self) -> float:
        """A bound well above the rounding residue in ``F``: rows with ``|F| > tolerance``
        have the sign their fresh dot would give."""
        return 1e-9 * (1.0 + self.kmax * self.coef_l1)

    def exact(self, j: int, coef: np.ndarray) -> np.ndarray:
        """Row ``j``'s decision values computed afresh (``coef`` is ``support.coef``)."""
        return self.K[j, : coef.shape[0]] @ coef

    # -- the set's changes, mirrored --------------------------------------------------------
    def grow(self, capacity: int) -> None:
        K = np.zeros((self.K.shape[0], capacity))
        K[:, : self.K.shape[1]] = self.K
        self.K = K

    def add_outputs(self, count: int) -> None:
        self.F = np.hstack([self.F, np.zeros((self.F.shape[0], count))])

    def remap(self, M: np.ndarray) -> None:
        self.F = self.F @ M
        self.coef_l1 *= float(np.abs(M).sum(axis=0).max())

    def drop(self, slot: int, coef: np.ndarray) -> None:
        """The vector in ``slot`` (coefficients ``coef``) leaves ``f``."""
        s = self.start
        self.F[s:] -= self.K[s:, slot, None] * coef

    def move(self, src: int, dst: int) -> None:
        self.K[:, dst] = self.K[:, src]

    def add_coef(self, slot: int, delta: np.ndarray) -> None:
        s = self.start
        self.F[s:] += self.K[s:, slot, None] * delta
        self.coef_l1 += float(np.abs(delta).max())

    def add_coefs(self, D: np.ndarray) -> None:
        s = self.start
        self.F[s:] += self.K[s:, : D.shape[0]] @ D
        self.coef_l1 += float(np.abs(D).sum(axis=0).max())

    def scale(self, factor: float) -> None:
        self.F[self.start :] *= factor
        self.coef_l1 *= abs(factor)

    def add_column(
        self, kernel: Kernel, slot: int, row: np.ndarray, row_sq: float, coef: np.ndarray
    ) -> None:
        """A new vector ``row`` (coefficients ``coef``) entered ``f`` in ``slot``."""
        s = self.start
        self.coef_l1 += float(np.abs(coef).max(initial=0.0))
        if s >= self.Q.shape[0]:
            return
        Q = self.Q[s:]
        w = min(Q.shape[1], row.shape[0])  # absent trailing features are 0: they add nothing
        col = rbf_rows(kernel, Q[:, :w], self.sq[s:], self.sq_max, row[:w], row_sq)
        if col is None:
            R = row[None, :]
            if Q.shape[1] != R.shape[1]:
                w = max(Q.shape[1], R.shape[1])
                Q, R = pad_cols(Q, w), pad_cols(R, w)
            col = kernel._gram(Q, R, self.sq[s:], np.array([row_sq]))[:, 0]
        self.K[s:, slot] = col
        self.F[s:] += col[:, None] * coef[None, :]
        if self.bound is None and col.size:
            self.kmax = max(self.kmax, float(np.abs(col).max()))
