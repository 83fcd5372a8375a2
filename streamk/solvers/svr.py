"""Regression duals solved by SMO on the 2n-variable form: epsilon-SVR and nu-SVR (as LIBSVM)."""

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
from .core import KernelColumns, check_source, make_solver, warm_point

__all__ = ["svr", "nu_svr"]


def _split(beta: np.ndarray) -> np.ndarray:
    return np.concatenate((np.maximum(beta, 0.0), np.maximum(-beta, 0.0)))


def _signs(n: int) -> np.ndarray:
    return np.concatenate((np.ones(n), -np.ones(n)))


def svr(
    K: np.ndarray | KernelColumns,
    y: np.ndarray,
    C: float = 1.0,
    epsilon: float = 0.1,
    tol: float = 1e-3,
    alpha0: np.ndarray | None = None,
    max_iter: int | None = None,
    shrinking: bool = True,
    backend: str = "auto",
) -> SolverResult:
    """epsilon-SVR with bias (the book's CF 7.10, Alg. 7.47; LIBSVM's ``solve_epsilon_svr``).

    Variables ``a = (a+, a-)`` (2n): ``min 0.5 (a+ - a-)'K(a+ - a-) + eps sum(a+ + a-)
    - y'(a+ - a-)``  s.t.  ``sum(a+ - a-) = 0, 0 <= a+-  <= C``, by the SMO core with
    ``Kbar = K[base][:, base]`` read through an index (no 2n x 2n matrix). Returns
    ``alpha = beta = a+ - a-`` with ``f = K @ beta + b``; ``objective`` is the minimisation form
    above. ``alpha0`` is a warm start ``beta0`` (split into ``a+ = max(beta, 0)``,
    ``a- = max(-beta, 0)``, then made feasible by :func:`~streamk.solvers.core.warm_point`).
    """
    src, n = check_source(K, backend)
    y = check_targets(y, n, labels=False)
    C = check_positive("C", C, allow_inf=True)
    eps = float(epsilon)
    if not (eps >= 0) or not np.isfinite(eps):
        raise SolverError(f"epsilon must be >= 0 and finite, got {epsilon!r}")
    b0 = check_alpha0(alpha0, n)
    z = _signs(n)
    Cv = np.full(2 * n, C)
    p = np.concatenate((eps - y, eps + y))
    base = np.concatenate((np.arange(n), np.arange(n)))
    a, grads = (
        (np.zeros(2 * n), None)
        if b0 is None
        else warm_point(src, _split(b0), z, p, Cv, 0.0, base=base, with_gradients=True)
    )
    max_it = max(10_000_000, 200 * n) if max_iter is None else int(max_iter)
    solver = make_solver(src, z, p, Cv, base=base, tol=tol, max_iter=max_it, shrinking=shrinking,
                         backend=backend)  # fmt: skip
    run_solver("svr", solver, a, grads)
    rho = solver.calculate_rho()
    beta = solver.alpha[:n] - solver.alpha[n:]
    return SolverResult.from_solver(
        solver,
        beta,
        -rho,
        {"rho": rho, "alpha_plus": solver.alpha[:n], "alpha_minus": solver.alpha[n:]},
    )


def nu_svr(
    K: np.ndarray | KernelColumns,
    y: np.ndarray,
    C: float = 1.0,
    nu: float = 0.5,
    tol: float = 1e-3,
    alpha0: np.ndarray | None = None,
    max_iter: int | None = None,
    shrinking: bool = True,
    backend: str = "auto",
) -> SolverResult:
    """nu-SVR (Schölkopf et al. 2000; the book's CF 7.11 with the corrected dual, errata §10).

    ``min 0.5 (a+ - a-)'K(a+ - a-) - y'(a+ - a-)``  s.t.  ``sum a+ = sum a- = C nu n / 2``,
    ``0 <= a+- <= C`` (LIBSVM's scaling: the book's box ``C/l`` is LIBSVM's ``C``). The tube
    width is recovered with the offset: ``info['epsilon'] = -r`` (LIBSVM), ``b = -rho``,
    ``f = K @ alpha + b`` with ``alpha = a+ - a-``.
    """
    src, n = check_source(K, backend)
    y = check_targets(y, n, labels=False)
    C = check_positive("C", C)
    nu = check_nu(nu)
    b0 = check_alpha0(alpha0, n)
    half = C * nu * n / 2.0
    z = _signs(n)
    p = np.concatenate((-y, y))
    base = np.concatenate((np.arange(n), np.arange(n)))
    Cv = np.full(2 * n, C)
    grads = None
    if b0 is None:
        first = np.diff(np.concatenate(([0.0], np.minimum(C * np.arange(1, n + 1), half))))
        a = np.concatenate((first, first))
    else:
        a, grads = warm_point(
            src, _split(b0), z, p, Cv, (half, half), base=base, with_gradients=True
        )
    max_it = max(10_000_000, 200 * n) if max_iter is None else int(max_iter)
    solver = make_solver(src, z, p, Cv, base=base, tol=tol, max_iter=max_it, shrinking=shrinking,
                         nu=True, backend=backend)  # fmt: skip
    run_solver("nu_svr", solver, a, grads)
    rho, r = solver.calculate_rho_r()
    beta = solver.alpha[:n] - solver.alpha[n:]
    info = {"rho": rho, "epsilon": -r, "alpha_plus": solver.alpha[:n],
            "alpha_minus": solver.alpha[n:]}  # fmt: skip
    return SolverResult.from_solver(solver, beta, -rho, info)
