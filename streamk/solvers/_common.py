"""Shared pieces of the batch solvers: the result record, input checks, feasible projection."""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConvergenceWarning, SolverError

__all__ = ["SolverResult", "project_box_equality", "convergence_notes"]

#: Where :func:`warn_max_iter` puts its message instead of warning (per thread and context).
_NOTES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "streamk_convergence_notes", default=None
)


@contextlib.contextmanager
def convergence_notes() -> Iterator[list[str]]:
    """Collect the solvers' not-converged messages in a list instead of warning.

    For a caller that reports them its own way (consolidation logs one line per solve with
    the settings its users can change). A context variable, not ``warnings.catch_warnings``:
    that swaps the process-wide filters, which a background consolidation's worker thread
    would do under the feet of the thread learning events.
    """
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


@dataclass
class SolverResult:
    """Outcome of a batch solver.

    Attributes
    ----------
    alpha : ndarray
        Dual coefficients, one per row of ``K``. For the classifiers ``alpha >= 0`` and the
        decision is ``f = K @ (alpha * y) + b``; for the regressors ``alpha`` holds
        ``beta = alpha_plus - alpha_minus`` and ``f = K @ alpha + b``.
    b : float
        Offset added to the decision (LIBSVM's ``-rho``). 0 for the no-bias solvers.
    n_iter : int
        Iterations (SMO pair updates, coordinate sweeps, ...), as the solver counts them.
    objective : float
        Dual objective at ``alpha`` in the solver's minimisation form (LIBSVM's
        ``0.5 a'Qa + p'a``; see each solver's docstring).
    status : int
        0 converged within ``tol``; 1 stopped at ``max_iter`` (a ConvergenceWarning was issued).
    gap : float
        Largest KKT violation left at ``alpha`` (the stopping quantity).
    info : dict
        Solver-specific extras (``rho``, ``r``, ``radius2``, thresholds, ...).
    """

    alpha: np.ndarray
    b: float
    n_iter: int
    objective: float
    status: int
    gap: float
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_solver(
        cls, solver: Any, alpha: np.ndarray, b: float, info: dict[str, Any]
    ) -> SolverResult:
        """The result of a finished SMO ``Solver``: its counts, objective, status and gap."""
        return cls(alpha=alpha, b=b, n_iter=solver.n_iter, objective=solver.objective(),
                   status=solver.status, gap=solver.gap, info=info)  # fmt: skip


def run_solver(name: str, solver: Any, alpha0: np.ndarray, grads: Any = None) -> None:
    """Solve from ``alpha0`` (``grads``: its ``(G, G_bar)`` if known); warn (ConvergenceWarning)
    if the iteration limit stopped it."""
    solver.solve(alpha0, grads)
    if solver.status == 1:
        warn_max_iter(name, solver.n_iter)


def check_gram(K: Any, finite: bool = True) -> np.ndarray:
    """Return ``K`` as a C-contiguous float64 square matrix, or raise SolverError.

    ``finite=False`` skips the pass over every entry for nan / inf (the compiled SMO core
    checks the entries it reads instead)."""
    K = np.asarray(K)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise SolverError(f"K must be a square Gram matrix, got shape {K.shape}")
    if K.shape[0] == 0:
        raise SolverError("K is empty: the solver needs at least one example")
    if not np.issubdtype(K.dtype, np.number):
        raise SolverError(f"K must be numeric, got dtype {K.dtype}")
    K = np.ascontiguousarray(K, dtype=np.float64)
    # one summing pass: nan/inf propagate into the sum; only an overflowing sum of finite
    # entries needs the element-wise check (it allocates an n x n mask)
    if finite and not np.isfinite(np.sum(K)) and not np.isfinite(K).all():
        raise SolverError("K has non-finite entries (nan or inf); check the kernel and inputs")
    return K


def check_targets(y: Any, n: int, *, labels: bool) -> np.ndarray:
    """Return ``y`` as float64 of length ``n``; with ``labels`` it must be in {-1, +1}."""
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.shape[0] != n:
        raise SolverError(f"y has {y.shape[0]} entries but K has {n} rows")
    if not np.isfinite(y).all():
        raise SolverError("y has non-finite entries")
    if labels and not np.all((y == 1.0) | (y == -1.0)):
        bad = np.unique(y[(y != 1.0) & (y != -1.0)])[:5]
        raise SolverError(f"y must hold labels -1 and +1 only; found {bad.tolist()}")
    return y


def check_positive(name: str, value: float, *, allow_inf: bool = False) -> float:
    """Raise SolverError unless ``value`` is a positive number (finite unless ``allow_inf``)."""
    v = float(value)
    if not (v > 0) or (np.isinf(v) and not allow_inf) or np.isnan(v):
        raise SolverError(f"{name} must be > 0{'' if allow_inf else ' and finite'}, got {value!r}")
    return v


def check_nu(nu: float) -> float:
    """Raise SolverError unless ``0 < nu <= 1``."""
    v = float(nu)
    if not (0.0 < v <= 1.0):
        raise SolverError(f"nu must lie in (0, 1], got {nu!r}")
    return v


def check_alpha0(alpha0: Any, n: int) -> np.ndarray | None:
    """Return a float64 copy of a warm start of length ``n`` (or None), or raise SolverError."""
    if alpha0 is None:
        return None
    a = np.array(alpha0, dtype=np.float64).ravel()
    if a.shape[0] != n:
        raise SolverError(f"warm start has {a.shape[0]} entries, expected {n}")
    if not np.isfinite(a).all():
        raise SolverError("warm start has non-finite entries")
    return a


def warn_max_iter(
    name: str, n_iter: int, hint: str = "", *, limit: str = "max_iter", unit: str = ""
) -> None:
    """Issue the ConvergenceWarning shared by all solvers (``hint``: a sentence on why this
    problem may never converge, appended; ``limit``: the solver's parameter that bounds
    the work; ``unit``: what ``n_iter`` counts when it is not that parameter's value).
    Inside :func:`convergence_notes` the message (without the advice) is collected instead."""
    at = f"its {limit} bound ({n_iter} {unit})" if unit else f"{limit}={n_iter}"
    stop = f"{name} stopped at {at}"
    why = f"; {hint}" if hint else ""
    notes = _NOTES.get()
    if notes is not None:  # the collector gives its own advice
        notes.append(f"{stop} before reaching tol{why}")
        return
    warnings.warn(
        f"{stop} before reaching tol; raise {limit} or loosen tol "
        f"(the result is feasible but not optimal){why}",
        ConvergenceWarning,
        stacklevel=3,
    )


def project_box_equality(a: np.ndarray, z: np.ndarray, C: np.ndarray, delta: float) -> np.ndarray:
    """Euclidean projection of ``a`` onto ``{x : 0 <= x <= C, z'x = delta}``, ``z`` in {-1, +1}.

    The KKT conditions of ``min 0.5 ||x - a||^2`` give ``x(lam) = clip(a - lam z, 0, C)`` for the
    multiplier ``lam`` of the equality. ``g(lam) = z'x(lam)`` is continuous and non-increasing
    (each term ``z_i clip(a_i - lam z_i, 0, C_i)`` is, since ``z_i^2 = 1``), so ``lam`` is found by
    bisection on a bracket; then, with the free set ``F`` of that ``lam`` fixed, the equality is
    linear in ``lam`` and is solved exactly. ``C`` may hold ``inf`` (no upper bound).

    Raises SolverError when the set is empty (``delta`` outside ``[-sum_{z<0} C, sum_{z>0} C]``).
    """
    a = np.asarray(a, dtype=np.float64)
    z = np.asarray(z, dtype=np.float64)
    C = np.broadcast_to(np.asarray(C, dtype=np.float64), a.shape)
    hi_sum = C[z > 0].sum()
    lo_sum = -C[z < 0].sum()
    tol = 1e-12 * max(1.0, abs(delta), float(np.abs(a).sum()))
    if delta > hi_sum + tol or delta < lo_sum - tol:
        raise SolverError(
            f"no feasible point: z'alpha = {delta:g} is outside [{lo_sum:g}, {hi_sum:g}] "
            "for the box; increase C (or nu) or check the labels"
        )

    def g(lam: float) -> float:
        return float(z @ np.clip(a - lam * z, 0.0, C))

    if abs(g(0.0) - delta) <= tol and np.all((a >= 0) & (a <= C)):
        return a.copy()
    span = float(np.abs(a).max()) + float(np.abs(C[np.isfinite(C)]).max(initial=0.0)) + 1.0
    lo, hi = -span, span  # g(lo) >= delta >= g(hi) after expansion
    for _ in range(200):
        if g(lo) >= delta:
            break
        lo *= 2.0
    for _ in range(200):
        if g(hi) <= delta:
            break
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if g(mid) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, abs(lo)):
            break
    lam = 0.5 * (lo + hi)
    v = a - lam * z
    free = (v > 0) & (v < C)
    if free.any():
        x = np.clip(v, 0.0, C)
        fixed = float(z[~free] @ x[~free])
        lam = (fixed + float(z[free] @ a[free]) - delta) / free.sum()
        v = a - lam * z
        x_new = np.clip(v, 0.0, C)
        # keep the exact solve only if it did not change the free set
        if np.array_equal((v > 0) & (v < C), free):
            return x_new
        return x
    return np.clip(v, 0.0, C)
