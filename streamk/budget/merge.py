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
from ..kernels import RBF, Kernel
from .base import BudgetPolicy, oldest_among, register_policy
from .compiled import compiled_merge_search, merge_apply
from .removal import removal_cost

if TYPE_CHECKING:  # annotations only: learners import the policies
    from ..learners.support import SupportSet

__all__ = ["Merge", "merge_weight", "merge_search", "merge_smallest"]

#: Relative gap under which two grid weights of :func:`best_h` count as equal.
GRID_TIE = 1e-12
#: Most steps (Newton or bisection) :func:`best_h` takes per candidate after its grid.
REFINE_STEPS = 40
#: An accepted Newton step this short ends the search: the error after it is ~its square.
STEP_TOL = 1e-8
#: ``|d/dh weight|`` under this fraction of its terms' size counts as zero (rounding) at a
#: grid point where the weight is not concave: the centre of a symmetric objective.
FLAT_SLOPE = 1e-10


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


def _grid_weights(u, mm, nn, mn, grid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A, B, W)`` at the grid ``h_j = j / (grid - 1)``: ``b = exp(-u h_j²)`` per point
    and candidate (``u = gamma d2``), ``a`` at ``h_j`` is ``b`` at ``h_{grid-1-j} = 1 - h_j``
    (the grid is symmetric: one exponential per point, not two), ``W`` the weights."""
    H = np.arange(grid) / (grid - 1)
    B = np.exp(u[:, None] * (H * H)[None, :] * -1.0)
    A = B[:, ::-1]
    return A, B, A * A * mm + B * B * nn[:, None] + 2.0 * A * B * mn[:, None]


def _at(x, u, mm, nn, mn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, b, weight)`` at the points ``x`` (two exponentials per candidate)."""
    a = np.exp(u * ((1.0 - x) * (1.0 - x)) * -1.0)
    b = np.exp(u * (x * x) * -1.0)
    return a, b, a * a * mm + b * b * nn + 2.0 * a * b * mn


def _slopes(x, u, a, b, mm, nn, mn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(g, H, S)``: the weight's first and second derivatives in ``h`` at ``x`` from its
    ``a`` and ``b``, and ``S`` bounding ``|g|``'s terms (what rounding in ``g`` scales with)."""
    da = 2.0 * u * (1.0 - x) * a
    db = -2.0 * u * x * b
    dda = a * (4.0 * u * u * (1.0 - x) * (1.0 - x) - 2.0 * u)
    ddb = b * (4.0 * u * u * x * x - 2.0 * u)
    g = 2.0 * (a * da * mm + b * db * nn + (da * b + a * db) * mn)
    H = 2.0 * ((da * da + a * dda) * mm + (db * db + b * ddb) * nn)
    H = H + 2.0 * (dda * b + 2.0 * da * db + a * ddb) * mn
    S = 4.0 * u * (a * a * mm + b * b * nn + a * b * np.abs(mn))
    return g, H, S


def best_h(
    d2, gamma, mm, nn, mn, grid: int = 11, steps: int = REFINE_STEPS
) -> tuple[np.ndarray, np.ndarray]:
    """``argmax_{h in [0, 1]}`` of :func:`merge_weight` for every candidate at once.

    A coarse grid (``grid`` points) picks the bracket, so a bimodal objective (far apart
    vectors) does not trap the search; grid points within ``GRID_TIE`` of the best are a
    tie, broken towards the smaller ``h`` (equal coefficients make the objective symmetric
    about ``h = 1/2``, and rounding alone must not pick between its two maxima). From the
    best grid point, a safeguarded Newton iteration on the closed-form derivatives finds
    the maximum inside the bracket of its neighbours: the derivative's sign moves one end
    of the bracket to each point, a Newton step that is not uphill-concave or leaves the
    bracket is replaced by bisection, and a Newton step under ``STEP_TOL`` ends the search
    (quadratic convergence: the next would change ``h`` below rounding). Where the grid
    point is not concave and the derivative is rounding there (the symmetric objective's
    centre) the search goes towards the smaller ``h``; where the whole grid is a tie (the
    vectors coincide to rounding) the first point is kept. Returns ``(h, weight)`` arrays.
    """
    u = gamma * d2
    A, B, W = _grid_weights(u, mm, nn, mn, grid)
    rows = np.arange(len(u))
    top = W.max(axis=1, keepdims=True)
    j = np.argmax(W >= top * (1.0 - GRID_TIE), axis=1)
    step = 1.0 / (grid - 1)
    x = j / (grid - 1)
    a, b, w = A[rows, j], B[rows, j], W[rows, j]
    best = w.copy()
    lo = np.maximum(x - step, 0.0)
    hi = np.minimum(x + step, 1.0)
    g, H, S = _slopes(x, u, a, b, mm, nn, mn)
    g = np.where((H >= 0.0) & (np.abs(g) <= FLAT_SLOPE * S), -1.0, g)
    act = rows[W.min(axis=1) < top[:, 0] * (1.0 - GRID_TIE)]  # a flat grid: nothing to refine
    for _ in range(steps):
        ga, Ha, xa = g[act], H[act], x[act]
        lo[act] = np.where(ga > 0.0, xa, lo[act])
        hi[act] = np.where(ga < 0.0, xa, hi[act])
        la, ha = lo[act], hi[act]
        newton = Ha < 0.0
        xn = xa - ga / np.where(newton, Ha, -1.0)
        ok = newton & (xn >= la) & (xn <= ha)
        xn = np.where(ok, xn, 0.5 * (la + ha))
        moved = xn != xa
        last = ok & (np.abs(xn - xa) <= STEP_TOL)
        act, xn, last = act[moved], xn[moved], last[moved]
        if not len(act):
            break
        x[act] = xn
        a[act], b[act], w[act] = _at(xn, u[act], mm, nn[act], mn[act])
        act = act[~last]
        if not len(act):
            break
        g[act], H[act], _ = _slopes(x[act], u[act], a[act], b[act], mm, nn[act], mn[act])
    better = best > w  # a grid point (e.g. an endpoint) can beat the refined one
    return np.where(better, j / (grid - 1), x), np.where(better, best, w)


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

    def check_kernel(self, kernel: Kernel) -> None:
        """Refuse a kernel other than :class:`~streamk.kernels.RBF` (``gamma="auto"`` too).

        The merge point and its coefficient are the RBF's closed form (two Gaussians into
        one); learners call this at construction, so a wrong pairing is refused before the
        first event rather than at the first merge.

        Raises
        ------
        ConfigError
            Naming the kernel and the policies that take it.
        """
        super().check_kernel(kernel)
        if not isinstance(kernel, RBF):
            raise ConfigError(
                f"Merge needs an RBF kernel (merging two Gaussians into one), got {kernel!r}; "
                "use RemoveSmallest or Projectron for other kernels"
            )

    def insert(self, support, row, coef, k_row):
        kernel = support.kernel
        self.check_kernel(kernel)
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
