"""Classification and novelty duals solved by SMO: C-SVC, nu-SVC, one-class SVM, hypersphere."""

from __future__ import annotations

import numpy as np

from ..errors import SolverError
from ._common import (
    SolverResult,
    check_alpha0,
    check_nu,
    check_positive,
    check_targets,
    run_solver,
)
from .core import KernelColumns, check_source, make_solver, source_diag, warm_point

__all__ = ["svc", "nu_svc", "one_class", "hypersphere"]


def _max_iter(max_iter: int | None, n_var: int) -> int:
    return max(10_000_000, 100 * n_var) if max_iter is None else int(max_iter)


def svc(
    K: np.ndarray | KernelColumns,
    y: np.ndarray,
    C: float = 1.0,
    tol: float = 1e-3,
    alpha0: np.ndarray | None = None,
    max_iter: int | None = None,
    shrinking: bool = True,
    backend: str = "auto",
    cache_dtype: str = "float32",
) -> SolverResult:
    """C-SVC with bias by SMO with second-order working-set selection (Fan, Chen & Lin 2005).

    Solves ``min 0.5 a'Qa - sum(a)  s.t.  y'a = 0, 0 <= a <= C`` with ``Q_ij = y_i y_j K_ij``
    (the book's CF 7.5 with a box, Shawe-Taylor & Cristianini Alg. 7.26/7.29; ``C=inf`` is the hard
    margin). ``objective`` is that minimisation form (LIBSVM's ``obj``); ``b = -rho`` so the
    decision is ``f = K @ (alpha * y) + b``.

    Parameters
    ----------
    K : (n, n) Gram matrix.  y : labels in {-1, +1}.  C : box (> 0, may be ``inf``).
    tol : stopping tolerance on the maximal violating pair (LIBSVM's ``eps``).
    alpha0 : warm start; clipped to the box and made feasible with few moves (``warm_point``).
    max_iter : default ``max(10_000_000, 100 n)`` as LIBSVM.  shrinking : LIBSVM's heuristic.
    cache_dtype : the compiled core's column cache, ``"float32"`` (LIBSVM's) or ``"float64"``
    (results independent of the feature order to rounding; twice the memory per column).
    """
    src, n = check_source(K, backend)
    y = check_targets(y, n, labels=True)
    C = check_positive("C", C, allow_inf=True)
    a0 = check_alpha0(alpha0, n)
    Cv = np.full(n, C)
    alpha, grads = (
        (np.zeros(n), None)
        if a0 is None
        else warm_point(src, a0, y, -np.ones(n), Cv, 0.0, with_gradients=True)
    )
    solver = make_solver(src, y, -np.ones(n), Cv, tol=tol, max_iter=_max_iter(max_iter, n),
                         shrinking=shrinking, backend=backend, cache_dtype=cache_dtype)  # fmt: skip
    run_solver("svc", solver, alpha, grads)
    rho = solver.calculate_rho()
    return SolverResult.from_solver(solver, solver.alpha, -rho, {"rho": rho})


def nu_svc(
    K: np.ndarray | KernelColumns,
    y: np.ndarray,
    nu: float = 0.5,
    tol: float = 1e-3,
    alpha0: np.ndarray | None = None,
    max_iter: int | None = None,
    shrinking: bool = True,
    backend: str = "auto",
) -> SolverResult:
    """nu-SVC (Schölkopf et al. 2000; the book's CF 7.6/7.7 with ``C = 1/(nu l)``), LIBSVM-style.

    Solves ``min 0.5 a'Qa  s.t.  sum_{y=+1} a = sum_{y=-1} a = nu l / 2, 0 <= a <= 1`` and rescales
    as LIBSVM does: ``alpha = a / r`` and ``b = -rho / r`` so ``f = K @ (alpha * y) + b``.
    ``objective`` is ``0.5 a'Qa`` of the unscaled ``a``; ``info`` holds ``r``, ``alpha_raw`` (the
    unscaled ``a``, the form ``alpha0`` takes) and ``alpha_book = a / (nu l)`` (the book's
    ``sum alpha = 1`` normalisation, box ``1/(nu l)``).
    """
    src, n = check_source(K, backend)
    y = check_targets(y, n, labels=True)
    nu = check_nu(nu)
    n_pos, n_neg = int((y > 0).sum()), int((y < 0).sum())
    half = nu * n / 2.0
    if half > min(n_pos, n_neg):
        raise SolverError(
            f"nu={nu} is infeasible for {n_pos} positive and {n_neg} negative examples; "
            f"nu must be <= {2 * min(n_pos, n_neg) / n:.4g}"
        )
    a0 = check_alpha0(alpha0, n)
    ones = np.ones(n)
    grads = None
    if a0 is None:
        alpha = np.zeros(n)
        for g in (y > 0, y < 0):
            cum = np.minimum(np.arange(1, g.sum() + 1), half)
            alpha[g] = np.diff(np.concatenate(([0.0], cum)))
    else:
        alpha, grads = warm_point(src, a0, y, np.zeros(n), ones, (half, half), with_gradients=True)
    solver = make_solver(src, y, np.zeros(n), ones, tol=tol, max_iter=_max_iter(max_iter, n),
                         shrinking=shrinking, nu=True, backend=backend)  # fmt: skip
    run_solver("nu_svc", solver, alpha, grads)
    rho, r = solver.calculate_rho_r()
    if not r > 0:
        raise SolverError("nu-SVC found r <= 0 (degenerate problem); try a larger nu")
    raw = solver.alpha
    return SolverResult.from_solver(
        solver,
        raw / r,
        -rho / r,
        {"rho": rho, "r": r, "alpha_raw": raw, "alpha_book": raw / (nu * n)},
    )


def one_class(
    K: np.ndarray | KernelColumns,
    nu: float = 0.5,
    tol: float = 1e-3,
    alpha0: np.ndarray | None = None,
    max_iter: int | None = None,
    shrinking: bool = True,
    backend: str = "auto",
) -> SolverResult:
    """Schölkopf's nu one-class SVM as LIBSVM solves it.

    ``min 0.5 a'Ka  s.t.  sum(a) = nu n, 0 <= a <= 1``; ``f = K @ alpha + b`` with ``b = -rho``
    (positive inside the support). The book's Remark 7.16: for a normalised kernel this is the
    hypersphere. ``objective`` is ``0.5 a'Ka``.
    """
    src, n = check_source(K, backend)
    nu = check_nu(nu)
    a0 = check_alpha0(alpha0, n)
    ones = np.ones(n)
    total = nu * n
    grads = None
    if a0 is None:
        alpha = np.diff(np.concatenate(([0.0], np.minimum(np.arange(1, n + 1), total))))
    else:
        alpha, grads = warm_point(src, a0, ones, np.zeros(n), ones, total, with_gradients=True)
    solver = make_solver(src, ones, np.zeros(n), ones, tol=tol, max_iter=_max_iter(max_iter, n),
                         shrinking=shrinking, backend=backend)  # fmt: skip
    run_solver("one_class", solver, alpha, grads)
    rho = solver.calculate_rho()
    return SolverResult.from_solver(solver, solver.alpha, -rho, {"rho": rho})


def hypersphere(
    K: np.ndarray | KernelColumns,
    C: float | None = None,
    tol: float = 1e-6,
    alpha0: np.ndarray | None = None,
    max_iter: int | None = None,
    shrinking: bool = True,
    backend: str = "auto",
) -> SolverResult:
    """Minimal enclosing hypersphere (Shawe-Taylor & Cristianini §7.1, CF 7.1 hard / CF 7.2 soft).

    The book maximises ``W(a) = sum a_i K_ii - a'Ka`` s.t. ``sum a = 1, 0 <= a <= C``
    (``C=None``: no upper bound, the hard sphere; the soft sphere needs ``C >= 1/n``; the
    nu-sphere of CF 7.3 is ``C = 1/(nu n)``). SMO minimises the equivalent
    ``0.5 a'Ka - 0.5 sum a_i K_ii`` (= ``-W/2``, reported as ``objective``).

    Recovery as in the book, averaged over the free support vectors: with ``G = Ka - diag(K)/2``
    equal to ``rho`` on free SVs, ``r^2 = K_ii - 2 (Ka)_i + a'Ka = a'Ka - 2 rho`` and
    ``D = a'Ka - r^2 = 2 rho``. ``b`` holds ``D`` so a point is novel when
    ``k(x,x) - 2 sum_i a_i k(x_i,x) + b >= 0`` (add the book's margin ``gamma`` to ``b`` yourself).
    ``info``: ``radius2``, ``center_norm2`` (``a'Ka``), ``W`` and, soft, ``slack_sum``
    ``= (W - r^2)/C``.
    """
    src, n = check_source(K, backend)
    if C is None:
        c = np.inf
    else:
        c = check_positive("C", C, allow_inf=True)
        if c * n < 1.0 - 1e-12:
            raise SolverError(f"C={C} < 1/n={1 / n:.4g}: no feasible point (sum alpha = 1)")
    a0 = check_alpha0(alpha0, n)
    ones = np.ones(n)
    Cv = np.full(n, c)
    diag = source_diag(src)
    alpha, grads = (
        (np.full(n, 1.0 / n), None)
        if a0 is None
        else warm_point(src, a0, ones, -0.5 * diag, Cv, 1.0, with_gradients=True)
    )
    solver = make_solver(src, ones, -0.5 * diag, Cv, tol=tol, max_iter=_max_iter(max_iter, n),
                         shrinking=shrinking, backend=backend)  # fmt: skip
    run_solver("hypersphere", solver, alpha, grads)
    rho = solver.calculate_rho()
    a = solver.alpha
    cn2 = float(a @ (solver.H + 0.5 * diag))  # H = Ka - diag/2 (y = 1)
    r2 = cn2 - 2.0 * rho
    W = float(a @ diag) - cn2
    info = {"rho": rho, "radius2": r2, "center_norm2": cn2, "W": W}
    if np.isfinite(c):
        info["slack_sum"] = (W - r2) / c
    return SolverResult.from_solver(solver, a, 2.0 * rho, info)
