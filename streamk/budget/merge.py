"""Merging budget maintenance for RBF kernels (budgeted SGD with merging).

Wang, Crammer & Vucetic, "Breaking the curse of kernelization: budgeted stochastic
gradient descent for large-scale SVM training", JMLR 13 (2012), §4.3; BudgetedSVM's
``-m 1``. Two Gaussian support vectors become one at a point on the segment between them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError
from ..kernels import RBF
from .base import BudgetPolicy, oldest_among, register_policy
from .compiled import compiled_merge_search, merge_apply
from .removal import removal_cost

if TYPE_CHECKING:  # annotations only: learners import the policies
    from ..learners.support import SupportSet

__all__ = ["Merge", "merge_weight", "merge_search", "merge_smallest"]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0

#: Relative gap under which two grid weights of :func:`best_h` count as equal.
GRID_TIE = 1e-12


def merge_weight(h, d2, gamma, mm, nn, mn):
    """Squared norm ``||alpha_z||²`` kept when merging ``m`` and ``n`` at ``h`` (vectorised).

    ``z = h x_m + (1 - h) x_n``; for the RBF kernel ``k(x_m, z) = exp(-gamma (1-h)² d2)``
    and ``k(x_n, z) = exp(-gamma h² d2)`` with ``d2 = ||x_m - x_n||²``. The projection of
    ``alpha_m k(x_m, ·) + alpha_n k(x_n, ·)`` onto ``k(z, ·)`` has coefficient
    ``alpha_z = alpha_m k(x_m, z) + alpha_n k(x_n, z)`` (one entry per output column), and
    ``||alpha_z||² = a² mm + b² nn + 2ab mn`` with ``mm = ||alpha_m||²``,
    ``nn = ||alpha_n||²``, ``mn = alpha_m · alpha_n``.
    """
    a = np.exp(-gamma * (1.0 - h) ** 2 * d2)
    b = np.exp(-gamma * h**2 * d2)
    return a * a * mm + b * b * nn + 2.0 * a * b * mn


def _newton_step(h, d2, gamma, mm, nn, mn):
    """One Newton step on ``d/dh merge_weight = 0`` where the weight is locally concave."""
    u = gamma * d2
    a = np.exp(-u * (1.0 - h) ** 2)
    b = np.exp(-u * h**2)
    da = 2.0 * u * (1.0 - h) * a
    db = -2.0 * u * h * b
    dda = a * (4.0 * u * u * (1.0 - h) ** 2 - 2.0 * u)
    ddb = b * (4.0 * u * u * h * h - 2.0 * u)
    g = 2.0 * (a * da * mm + b * db * nn + (da * b + a * db) * mn)
    H = 2.0 * ((da * da + a * dda) * mm + (db * db + b * ddb) * nn)
    H = H + 2.0 * (dda * b + 2.0 * da * db + a * ddb) * mn
    concave = H < 0.0
    step = np.where(concave, -g / np.where(concave, H, -1.0), 0.0)
    return np.clip(h + step, 0.0, 1.0)


def best_h(
    d2, gamma, mm, nn, mn, grid: int = 11, iters: int = 20, newton: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    """``argmax_{h in [0, 1]}`` of :func:`merge_weight` for every candidate at once.

    A coarse grid (``grid`` points) picks the bracket, so a bimodal objective (far apart
    vectors) does not trap the search; golden-section search narrows it to ~1e-5 and
    ``newton`` Newton steps on the closed-form derivatives finish at the optimum to
    machine precision (golden section alone stops at ~sqrt(eps), where rounding noise in
    the inputs would decide its comparisons). Grid points within ``GRID_TIE`` of the best
    are a tie, broken towards the smaller ``h``: equal coefficients make the objective
    symmetric about ``h = 1/2``, and rounding alone must not pick between its two
    maxima. Returns ``(h, weight)`` arrays.
    """
    H = np.linspace(0.0, 1.0, grid)
    W = merge_weight(H[None, :], d2[:, None], gamma, mm, nn[:, None], mn[:, None])
    top = W.max(axis=1, keepdims=True)
    j = np.argmax(W >= top * (1.0 - GRID_TIE), axis=1)
    step = 1.0 / (grid - 1)
    lo = np.maximum(H[j] - step, 0.0)
    hi = np.minimum(H[j] + step, 1.0)
    for _ in range(iters):
        x1 = hi - _GOLDEN * (hi - lo)
        x2 = lo + _GOLDEN * (hi - lo)
        up = merge_weight(x1, d2, gamma, mm, nn, mn) < merge_weight(x2, d2, gamma, mm, nn, mn)
        lo = np.where(up, x1, lo)
        hi = np.where(up, hi, x2)
    h = 0.5 * (lo + hi)
    for _ in range(newton):
        h = _newton_step(h, d2, gamma, mm, nn, mn)
    w = merge_weight(h, d2, gamma, mm, nn, mn)
    best = W[np.arange(len(j)), j]
    better = best > w  # a grid point (e.g. an endpoint) can beat the refined one
    return np.where(better, H[j], h), np.where(better, best, w)


@register_policy
class Merge(BudgetPolicy):
    """When full, merge two support vectors into one (RBF kernel only).

    The new vector enters; then ``m``, the vector of smallest ``||alpha_m||`` (ties: the
    oldest), is merged with the partner ``n`` that minimises the weight degradation
    ``E_n = ||alpha_m φ(x_m) + alpha_n φ(x_n) - alpha_z φ(z)||²
    = ||alpha_m||² + ||alpha_n||² + 2 k(x_m, x_n) alpha_m·alpha_n - ||alpha_z||²``
    (Wang, Crammer & Vucetic 2012, eq. 14), at ``z = h x_m + (1 - h) x_n`` with ``h`` the
    maximiser of ``||alpha_z||²`` on ``[0, 1]`` (:func:`best_h`, vectorised over all
    partners). ``m`` becomes ``z`` with ``alpha_z`` and ``n`` is removed.

    Multi-output: ``alpha`` is the row of coefficient columns. One ``h`` (and so one ``z``)
    is shared by the columns and chosen on the summed squared norm; each column's
    ``alpha_z`` is its own projection, so ``E_n`` is the summed per-column degradation.
    ``h`` is searched on ``[0, 1]`` only, so vectors of opposite sign are merged
    (rarely: they degrade most) at an endpoint-like ``h``.

    Parameters
    ----------
    budget
        Maximum number of support vectors.
    """

    needs_vector_space = True

    def __init__(self, budget: int):
        super().__init__(budget)

    def insert(self, support, row, coef, k_row):
        kernel = support.kernel
        if not isinstance(kernel, RBF):
            raise ConfigError(
                f"Merge needs an RBF kernel (merging two Gaussians into one), got {kernel!r}; "
                "use RemoveSmallest or Projectron for other kernels"
            )
        full = self._full(support)
        support.append(row, coef, k_row)
        if full:
            merge_smallest(support, float(kernel.gamma))


def merge_smallest(support: SupportSet, gamma: float) -> None:
    """Merge the smallest-norm support vector with its best partner (see :class:`Merge`).

    With ``streamk/budget/_policies.pyx`` built, the whole merge is one compiled call when
    no block is tracked (:func:`~streamk.budget.compiled.merge_apply`), else the search
    alone runs compiled; :func:`merge_search` and the steps below are the NumPy reference
    both are tested against.
    """
    if merge_apply(support, gamma):
        return
    found = compiled_merge_search(support, gamma)
    m, n, h = merge_search(support, gamma) if found is None else found
    X, C = support.X, support.coef
    d2 = max(float(support.sqnorm[m] + support.sqnorm[n] - 2.0 * (X[n] @ X[m])), 0.0)
    z = h * X[m] + (1.0 - h) * X[n]
    a = math.exp(-gamma * (1.0 - h) ** 2 * d2)
    b = math.exp(-gamma * h**2 * d2)
    alpha_z = a * C[m] + b * C[n]
    support.replace(m, z, alpha_z)
    support.remove(n)


def merge_search(support: SupportSet, gamma: float) -> tuple[int, int, float]:
    """``(m, n, h)``: the vector ``m`` to merge, its partner ``n`` and the point ``h``."""
    cost = removal_cost(support)
    m = oldest_among(support, cost <= cost.min() * (1.0 + 1e-12))
    X, C, sq = support.X, support.coef, support.sqnorm
    d2 = np.maximum(sq + sq[m] - 2.0 * (X @ X[m]), 0.0)
    mm = float(C[m] @ C[m])
    nn = np.einsum("ij,ij->i", C, C)
    mn = C @ C[m]
    h, w = best_h(d2, gamma, mm, nn, mn)
    loss = mm + nn + 2.0 * np.exp(-gamma * d2) * mn - w
    loss[m] = np.inf
    n = int(np.argmin(loss))
    return m, n, float(h[n])
