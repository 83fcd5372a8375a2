"""Where kernel values come from, and which SMO runs on them (compiled core or NumPy).

A solver reads its kernel from a *source*: a precomputed Gram matrix (``ndarray``), or
:class:`KernelColumns` — rows and a kernel, evaluated column by column on demand into a cache
with a byte budget, so a window of 50k rows needs a few hundred MB instead of its 20 GB Gram.

:func:`make_solver` picks the compiled core (:mod:`streamk.solvers._smo`, LIBSVM's ``Solver`` and
``Solver_NU`` ported to C with its column cache) when it is built and ``STREAMK_NO_ACCEL`` is
unset, else the NumPy :class:`~streamk.solvers.smo.Solver` (the reference; it needs the full
Gram). Both expose the same attributes after ``solve``: ``alpha``, ``H = y * G``, ``n_iter``,
``status``, ``gap``, ``objective()``, ``calculate_rho()`` and, for nu, ``calculate_rho_r()``.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import SolverError
from ..kernels import RBF, Kernel
from ._common import check_gram
from .smo import _NEG, Solver, _rho_of
from .smo_nu import SolverNU, rho_r_of

__all__ = [
    "KernelColumns",
    "CompiledSolver",
    "make_solver",
    "compiled_available",
    "check_source",
    "uses_compiled",
    "DEFAULT_CACHE",
    "CACHE_DTYPES",
    "core_module",
]

#: Default byte budget of the compiled core's column cache (LIBSVM's ``cache_size`` in bytes).
DEFAULT_CACHE = 200 * 2**20
SHRINK_FIRST = True
_BLOCK = 2**22  # kernel entries per block when a gradient is built from rows (32 MB)


def _load() -> tuple[ModuleType | None, ModuleType | None]:
    """The compiled cores: single-precision column cache (LIBSVM's) and double."""
    if os.environ.get("STREAMK_NO_ACCEL", "").strip() not in ("", "0"):
        return None, None
    try:
        from . import _smo
    except ImportError:  # not built: the NumPy solver only
        return None, None
    try:
        from . import _smo64
    except ImportError:  # pragma: no cover - built together; float32 then serves both
        return _smo, None
    return _smo, _smo64


_core, _core64 = _load()
CACHE_DTYPES = ("float32", "float64")


def core_module(cache_dtype: str = "float32") -> ModuleType:
    """The compiled core whose column cache holds ``cache_dtype`` values.

    ``"float32"`` as LIBSVM (half the memory traffic); ``"float64"`` keeps kernel values to
    the last bit, so a solve does not depend on the order of the features beyond rounding
    (rounding to float can move a value that differs in its last double bit by 6e-8)."""
    if cache_dtype not in CACHE_DTYPES:
        raise SolverError(f"cache_dtype must be 'float32' or 'float64', got {cache_dtype!r}")
    mod = _core64 if cache_dtype == "float64" and _core64 is not None else _core
    if mod is None:
        raise SolverError("the compiled SMO core is not built (or STREAMK_NO_ACCEL is set)")
    return mod


_NON_FINITE = "K has non-finite entries (nan or inf); check the kernel and inputs"


def uses_compiled(backend: str) -> bool:
    """Whether :func:`make_solver` runs the compiled core for ``backend``."""
    return backend == "compiled" or (backend == "auto" and _core is not None)


def compiled_available() -> bool:
    """Whether the compiled SMO core is loaded (built, and ``STREAMK_NO_ACCEL`` unset)."""
    return _core is not None


class KernelColumns:
    """Kernel values of the rows ``X`` under ``kernel``, computed on demand (never the full Gram).

    Parameters
    ----------
    X : (n, d) rows.  kernel : a resolved :mod:`streamk.kernels` kernel.
    cache_bytes : budget of the compiled solver's column cache (default 200 MB).

    An :class:`~streamk.kernels.RBF` kernel is evaluated inside the compiled core; any other
    kernel through ``kernel.gram`` on blocks (one Python call per missing column).
    """

    def __init__(self, X: Any, kernel: Kernel, cache_bytes: int = DEFAULT_CACHE) -> None:
        X = np.ascontiguousarray(np.atleast_2d(np.asarray(X, dtype=np.float64)))
        if X.shape[0] == 0:
            raise SolverError("X is empty: the solver needs at least one example")
        if not np.isfinite(X).all():
            raise SolverError("X has non-finite entries (nan or inf); check the inputs")
        if not getattr(kernel, "is_resolved", True):
            raise SolverError("the kernel is not resolved (gamma='auto'): resolve it first")
        self.X = X
        self.kernel = kernel
        self.cache_bytes = int(cache_bytes)
        self.n = X.shape[0]
        self.sq = np.einsum("ij,ij->i", X, X)

    def diag(self) -> np.ndarray:
        """``k(x_i, x_i)`` for every row."""
        return np.asarray(self.kernel.diag(self.X), dtype=np.float64)

    def block(self, rows: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
        """``K[rows][:, cols]`` (all columns when ``cols`` is None)."""
        B = self.X if cols is None else self.X[cols]
        return np.asarray(self.kernel.gram(self.X[rows], B), dtype=np.float64)

    def gram(self) -> np.ndarray:
        """The full Gram matrix (the NumPy solver needs it; O(n^2) memory)."""
        return self.block(np.arange(self.n))

    def column(self, i: int, idx: np.ndarray) -> np.ndarray:
        """``k(x_i, x_idx)``: the compiled core's callback for kernels it cannot evaluate."""
        return self.kernel.gram(self.X[i : i + 1], self.X[idx])[0]

    def core_source(self) -> tuple[str, Any, Any, float]:
        if isinstance(self.kernel, RBF):
            return "rbf", self.X, self.sq, float(self.kernel.gamma)
        return "call", self.column, None, 0.0


def _gram_matvec(src: np.ndarray | KernelColumns, rows: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``sum_k w_k K[rows_k, :]`` (a length-n vector) without forming more than a block."""
    return _rows_product(src, rows, w[:, None])[:, 0]


def _rows_product(src: np.ndarray | KernelColumns, rows: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``K[:, rows] @ W`` (n x m) for distinct ``rows``, reading each needed row of K once."""
    n = src.shape[0] if isinstance(src, np.ndarray) else src.n
    if isinstance(src, np.ndarray):
        if 8 * len(rows) > n:  # dense: one BLAS pass over K (K symmetric) beats a gather-copy
            Wr = np.zeros((n, W.shape[1]))
            Wr[rows] = W
            return src @ Wr
        return (W.T @ src[rows]).T
    out = np.zeros((n, W.shape[1]))
    step = max(1, _BLOCK // n)
    for s in range(0, len(rows), step):
        out += src.block(rows[s : s + step]).T @ W[s : s + step]
    return out


def kbar_product(src: np.ndarray | KernelColumns, base: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``Kbar @ W`` over variables, ``Kbar_st = K[base_s, base_t]`` (W: l x 2)."""
    if _core is not None and W.shape[1] == 2:
        source, data, sq, gamma = _source_args(src)
        if source != "call":
            P = np.column_stack(_core.kbar_times(source, data, sq, gamma, base, W[:, 0], W[:, 1]))
            if not np.isfinite(P).all():  # an unchecked Gram's nan / inf shows here
                raise SolverError(_NON_FINITE)
            return P
    n = src.shape[0] if isinstance(src, np.ndarray) else src.n
    Wr = np.zeros((n, W.shape[1]))
    np.add.at(Wr, base, W)  # variables sharing a row (SVR's a+ and a-) add up
    rows = np.flatnonzero(np.any(Wr != 0, axis=1))
    if not len(rows):
        return np.zeros((len(base), W.shape[1]))
    return _rows_product(src, rows, Wr[rows])[base]


def gradients(
    src: np.ndarray | KernelColumns,
    base: np.ndarray,
    y: np.ndarray,
    p: np.ndarray,
    C: np.ndarray,
    a: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``G = Q a + p`` and LIBSVM's ``G_bar = sum_{a_t = C_t} C_t Q_t``, in one pass over K.

    ``Q a = Q a_free + G_bar``: a variable at its bound weighs in ``G_bar`` only and a free one
    in the first column only, so each row read costs one multiply-add per entry, not two.
    """
    upper = (a >= C) & np.isfinite(C)
    P = kbar_product(
        src, base, np.column_stack((np.where(upper, 0.0, y * a), np.where(upper, y * C, 0.0)))
    )
    G_bar = y * P[:, 1]
    return y * P[:, 0] + G_bar + p, G_bar


def _source_args(src: np.ndarray | KernelColumns) -> tuple[str, Any, Any, float]:
    """The compiled core's description of a source: kind, data, squared norms, gamma."""
    if isinstance(src, np.ndarray):
        return "gram", src, None, 0.0
    return src.core_source()


class CompiledSolver:
    """The compiled SMO core behind the NumPy :class:`Solver`'s interface."""

    def __init__(
        self,
        src: np.ndarray | KernelColumns,
        y: np.ndarray,
        p: np.ndarray,
        C: np.ndarray,
        *,
        base: np.ndarray | None = None,
        tol: float = 1e-3,
        max_iter: int = 10_000_000,
        shrinking: bool = True,
        nu: bool = False,
        cache_bytes: int | None = None,
        cache_dtype: str = "float32",
    ) -> None:
        self.core = core_module(cache_dtype)
        self.src = src
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.p = np.ascontiguousarray(p, dtype=np.float64)
        self.C = np.ascontiguousarray(C, dtype=np.float64)
        self.l = len(self.y)
        n = src.shape[0] if isinstance(src, np.ndarray) else src.n
        self.base = np.arange(self.l) if base is None else np.asarray(base, dtype=np.intp)
        diag = np.diag(src) if isinstance(src, np.ndarray) else src.diag()
        if not np.isfinite(diag).all():
            raise SolverError(_NON_FINITE)
        self.QD = np.ascontiguousarray(diag[self.base])
        self.n_rows = n
        self.tol = float(tol)
        self.max_iter = int(max_iter)
        self.shrinking = bool(shrinking)
        self.nu = bool(nu)
        if cache_bytes is None:
            cache_bytes = getattr(src, "cache_bytes", DEFAULT_CACHE)
        self.cache_bytes = int(cache_bytes)

    def initial_gradient(self, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``G = Q alpha + p`` and ``G_bar = sum_{alpha_t = C_t} C_t Q_t`` (one pass over K)."""
        return gradients(self.src, self.base, self.y, self.p, self.C, alpha)

    def solve(self, alpha: np.ndarray, grads: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Run SMO from the feasible point ``alpha`` (with its ``(G, G_bar)`` if known)."""
        alpha = np.array(alpha, dtype=np.float64)
        G, G_bar = self.initial_gradient(alpha) if grads is None else (g.copy() for g in grads)
        source, data, sq, gamma = _source_args(self.src)
        self.n_iter, self.status = self.core.solve(
            source, data, sq, gamma, self.base, self.y, self.p, self.C, alpha, G, G_bar,
            self.tol, self.max_iter, self.shrinking, self.nu, self.cache_bytes, self.QD,
            self.shrinking and SHRINK_FIRST and bool(alpha.any()),
        )  # fmt: skip
        if self.status == 2:
            raise SolverError(_NON_FINITE)
        self.alpha = alpha
        self.H = self.y * G
        self.gap = kkt_gap(self.alpha, self.y, self.H, self.C, self.nu)

    def objective(self) -> float:
        """``0.5 a'Qa + p'a = 0.5 sum_t a_t (G_t + p_t)``."""
        return float(0.5 * self.alpha @ (self.y * self.H + self.p))

    def calculate_rho(self) -> float:
        return _rho_of(self.alpha, self.y, self.H, self.C)

    def calculate_rho_r(self) -> tuple[float, float]:
        return rho_r_of(self.alpha, self.y, self.H, self.C)


def kkt_gap(alpha: np.ndarray, y: np.ndarray, H: np.ndarray, C: np.ndarray, nu: bool) -> float:
    """Largest violation ``m(a) - M(a)`` (per sign group for nu), from ``H = y * G``."""
    pos = y > 0
    below, above = alpha < C, alpha > 0
    up = np.where(pos, below, above)
    low = np.where(pos, above, below)
    if not nu:
        return float(np.where(up, -H, _NEG).max() + np.where(low, H, _NEG).max())
    gaps = [
        np.where(up & g, -H, _NEG).max() + np.where(low & g, H, _NEG).max() for g in (pos, ~pos)
    ]
    return float(max(gaps))


def make_solver(
    src: np.ndarray | KernelColumns,
    y: np.ndarray,
    p: np.ndarray,
    C: np.ndarray,
    *,
    base: np.ndarray | None = None,
    tol: float,
    max_iter: int,
    shrinking: bool,
    nu: bool = False,
    backend: str = "auto",
    cache_dtype: str = "float32",
) -> Any:
    """The SMO solver for ``backend``: ``"auto"`` (compiled when built), ``"compiled"``,
    ``"numpy"`` (the reference; builds the full Gram from :class:`KernelColumns`).
    ``cache_dtype``: the compiled core's column cache, ``"float32"`` or ``"float64"``."""
    if cache_dtype not in CACHE_DTYPES:
        raise SolverError(f"cache_dtype must be 'float32' or 'float64', got {cache_dtype!r}")
    if backend not in ("auto", "compiled", "numpy"):
        raise SolverError(f"backend must be 'auto', 'compiled' or 'numpy', got {backend!r}")
    if uses_compiled(backend):
        return CompiledSolver(src, y, p, C, base=base, tol=tol, max_iter=max_iter,
                              shrinking=shrinking, nu=nu, cache_dtype=cache_dtype)  # fmt: skip
    K = src if isinstance(src, np.ndarray) else src.gram()
    cls = SolverNU if nu else Solver
    return cls(K, y, p, C, base=base, tol=tol, max_iter=max_iter, shrinking=shrinking)


def check_source(K: Any, backend: str = "numpy") -> tuple[np.ndarray | KernelColumns, int]:
    """A solver's kernel argument as a source and its number of rows: a checked Gram matrix
    (see :func:`~streamk.solvers._common.check_gram`) or a :class:`KernelColumns` as it is.

    For the compiled core (``backend``) the Gram's finiteness is checked where the core reads
    it (every column it fetches, every row of a warm start's gradient) instead of in a pass
    over all ``n^2`` entries, which cost as long as a warm-started solve at n = 4,000; entries
    it never reads cannot change the solution (its KKT conditions involve only the columns
    of the support vectors, which it reads). A nan or inf read raises the same SolverError.
    """
    if isinstance(K, KernelColumns):
        return K, K.n
    G = check_gram(K, finite=not uses_compiled(backend))
    return G, G.shape[0]


def source_diag(src: np.ndarray | KernelColumns) -> np.ndarray:
    """``k(x_i, x_i)`` of a source."""
    return np.diag(src) if isinstance(src, np.ndarray) else src.diag()


def warm_point(
    src: np.ndarray | KernelColumns,
    a0: np.ndarray,
    z: np.ndarray,
    p: np.ndarray,
    C: np.ndarray,
    delta: float | tuple[float, float],
    *,
    base: np.ndarray | None = None,
    y: np.ndarray | None = None,
    with_gradients: bool = False,
) -> Any:
    """A feasible start near ``a0`` for ``0 <= a <= C, z'a = delta`` that changes few variables.

    The Euclidean projection (:func:`~streamk.solvers._common.project_box_equality`) shifts
    *every* free variable by the same multiplier, so a start that was optimal except for a few
    rows (a slid window, new events, dropped rows) comes back with all its free variables off
    their optimum, and SMO then spends about one pair update per free variable: measured, a
    window slid by 100 of 1000 rows took 553 iterations warm against 208 cold. Instead: clip to
    the box, then restore ``z'a = delta`` by the cheapest moves to first order — the variables
    with the best ``z_i G_i`` (``G = Q a + p`` at the clipped point, one matrix-vector product
    over its non-zeros), each moved as far as its box allows, until the equality holds (a
    fractional knapsack: a sort, O(n log n)). ``y`` are the signs of ``Q`` (default ``z``).
    With a pair ``delta = (d_plus, d_minus)`` (the nu-problems) the equalities are
    ``sum_{y=+1} a = d_plus`` and ``sum_{y=-1} a = d_minus``, each repaired the same way.
    ``with_gradients``: return ``(a, (G, G_bar))``, the gradients at the start computed in the
    same pass over K (the solver then skips its own).
    """
    y = z if y is None else y
    a = np.clip(np.asarray(a0, dtype=np.float64), 0.0, C)
    base = np.arange(len(a)) if base is None else base
    if isinstance(delta, tuple):
        ones = np.ones(len(a))
        groups = [(y > 0, ones, delta[0]), (y < 0, ones, delta[1])]
    else:
        groups = [(np.ones(len(a), dtype=bool), z, float(delta))]
    todo = []
    for mask, zz, d in groups:
        need = float(d - zz[mask] @ a[mask])
        scale = max(1.0, abs(d), float(np.abs(a[mask]).sum()))
        if abs(need) > 1e-12 * scale:
            todo.append((mask, zz, d, need))
    if not todo and not with_gradients:
        return a
    G, G_bar = gradients(src, base, y, p, C, a)
    if not todo:
        return a, (G, G_bar)
    old = a.copy()
    for mask, zz, d, need in todo:
        idx = np.flatnonzero(mask)
        a[idx] = _repair(a[idx], G[idx], zz[idx], C[idx], need, d)
    if not with_gradients:
        return a
    # the few moved variables update both gradients with their own columns only
    fin = np.isfinite(C)
    d_up = np.where(fin, (a >= C).astype(float) - (old >= C).astype(float), 0.0)
    W = np.column_stack((y * (a - old), y * np.where(fin, C, 0.0) * d_up))
    P = kbar_product(src, base, W)
    return a, (G + y * P[:, 0], G_bar + y * P[:, 1])


def _repair(a: np.ndarray, G: np.ndarray, z: np.ndarray, C: np.ndarray, need: float,
            delta: float) -> np.ndarray:  # fmt: skip
    """Move the cheapest variables (first order) until ``z'a`` changes by ``need``."""
    cost = z * G if need > 0 else -z * G  # objective change per unit of z'a
    up = (z > 0) == (need > 0)  # these variables move up, the others down
    cap = np.where(up, C - a, a)
    order = np.argsort(cost, kind="stable")
    order = order[cap[order] > 0]
    cum = np.cumsum(np.minimum(cap[order], abs(need)))
    k = int(np.searchsorted(cum, abs(need) * (1 - 1e-15)))
    if k >= len(order):
        raise SolverError(
            f"no feasible point: z'alpha = {delta:g} cannot be reached within the box; "
            "increase C (or nu) or check the labels"
        )
    take = order[: k + 1]
    moved = np.minimum(cap[take], abs(need))
    moved[-1] = abs(need) - (cum[k - 1] if k > 0 else 0.0)
    a = a.copy()
    a[take] += np.where(up[take], moved, -moved)
    return np.clip(a, 0.0, C)
