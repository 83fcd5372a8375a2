"""One consolidation step: (support set ∪ window) -> batch solver -> a learner holding the solution.

The learner is rebuilt through its public plain-data contract only: ``state()`` is edited
(support rows, coefficients, ids, and the per-row extras a learner keeps) and
``type(learner).from_state`` builds the result, so no learner internals are rewritten.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..kernels import RBF, Kernel, Laplacian, Linear, Polynomial
from ..learners.support import SupportSet
from ..solvers import adatron_dual, rank, svc, svr_dual_no_bias
from .limits import check_gram_rows

__all__ = [
    "COMPRESSIONS",
    "SOLVERS",
    "Outcome",
    "adopt_state",
    "check_solve_options",
    "compress_project",
    "learner_budget",
    "solve_learner",
]


@dataclass
class Outcome:
    """What one consolidation produced: the new learner state and figures for metrics."""

    state: dict[str, Any] | None
    objective: float = math.nan
    n_iter: int = 0
    status: int = 0
    n_train: int = 0
    n_solution: int = 0  # non-zero rows before the budget
    skipped: str = ""
    kernel: Kernel | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def learner_budget(learner: Any) -> int | None:
    """The learner's budget as an int (``None``: unbounded), from its ``budget`` parameter."""
    b = learner.budget
    if b is None or isinstance(b, (int, np.integer)):
        return None if b is None else int(b)
    return getattr(b, "budget", None)


def _pad(A: np.ndarray, width: int) -> np.ndarray:
    if A.shape[1] == width:
        return A
    out = np.zeros((A.shape[0], width))
    out[:, : A.shape[1]] = A
    return out


def _merge_rows(Xs: np.ndarray, Xw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Support rows that reappear in the window: ``(keep_support, dup_of_window)``.

    Returns ``keep`` (support rows not in the window, kept as training rows), ``src`` (for each
    window row, the support slot it duplicates or -1) and the padded stacked rows. Rows are
    matched by their bytes in a dict (``-0.0`` made ``0.0`` first), not by sorting all rows.
    """
    ns, nw = Xs.shape[0], Xw.shape[0]
    width = max(Xs.shape[1], Xw.shape[1])
    allrows = np.vstack([_pad(Xs, width), _pad(Xw, width)])
    src = np.full(nw, -1, dtype=np.intp)
    keep = np.ones(ns, bool)
    if ns == 0 or nw == 0:
        return keep, src, allrows
    canon = allrows + 0.0  # -0.0 -> 0.0: equal rows, equal bytes
    first: dict[bytes, int] = {}
    for i in range(ns):  # the first support slot of each distinct row
        first.setdefault(canon[i].tobytes(), i)
    owner: dict[int, int] = {}
    for j in range(nw):  # one window row per support slot inherits it (the newest)
        slot = first.get(canon[ns + j].tobytes())
        if slot is not None:
            owner[slot] = j
    if owner:
        slots = np.fromiter(owner.keys(), dtype=np.intp, count=len(owner))
        src[np.fromiter(owner.values(), dtype=np.intp, count=len(owner))] = slots
        keep[slots] = False
    return keep, src, allrows


#: Kernels whose value does not depend on the order of the features (sums over features).
_ORDER_FREE = (Linear, Polynomial, RBF, Laplacian)


def _gram(kernel: Kernel, X: np.ndarray) -> np.ndarray:
    """The training Gram, computed on the columns in a canonical order when the kernel allows.

    A learner numbers features in their order of arrival, so two learners fed the same events
    with the keys of each dict in another order hold the same rows with permuted columns; the
    sums inside the kernel then round differently (last bit), and the solver's greedy
    selection can follow another path from such a difference, stopping at another point within
    ``tol``: river's shuffled-features check failed in about a third of runs with a float
    column cache and in 7 of 10 with a double one. Sorting the columns by their values
    (``lexsort`` over the rows; identical columns are interchangeable) gives both the same
    matrix, bit for bit, for any kernel in ``_ORDER_FREE``.
    """
    if type(kernel) in _ORDER_FREE and X.ndim == 2 and X.dtype.kind == "f" and X.shape[1] > 1:
        X = np.ascontiguousarray(X[:, np.lexsort(X[::-1])])
    return kernel.gram(X, X)


#: The largest single-precision value: a warm start beyond it is not rounded.
_F32_MAX = float(np.finfo(np.float32).max)


def _canonical_start(warm: np.ndarray) -> np.ndarray:
    """The warm start rounded to single precision (and back to double).

    The on-line coefficients carry the order of the features in their last bits (the
    learner's kernel rows sum over its columns in their order of arrival), and a solver
    stopping at ``tol`` turns a last-bit difference in its start into one of ``tol``'s size
    in its solution: an adatron fed the same Phishing events with shuffled keys adopted
    coefficients 9e-4 apart. Rounded, both starts are the same unless a coefficient sits
    within an ulp of a single-precision boundary (about 2^-29 a coefficient), and a start
    to seven digits warms the solver as well. Only what single precision can hold is
    rounded: a coefficient beyond its range (3.4e38, an SVR on targets of 1e40 that the
    learner accepts) is kept as it is, where the cast made it infinite and failed the solve.
    """
    start = warm.astype(np.float64, copy=True)
    small = np.abs(start) <= _F32_MAX  # (NaN is not: left for the solver to refuse)
    start[small] = start[small].astype(np.float32)
    return start


def _block(K: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``K[rows][:, rows]``: ``K`` itself when ``rows`` is every row (the usual binary case),
    so the window's Gram is not copied (the copy cost as much as the solve at 1,000 rows)."""
    if rows.size == K.shape[0]:
        return K
    return K[np.ix_(rows, rows)]


def compress_project(K_all: np.ndarray, coef: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Coefficients on rows ``keep`` whose function is the RKHS projection of ``K_all @ coef``.

    ``beta = (K_kk + lam I)^-1 K_k. coef`` (least RKHS-norm distance to the full function; a
    tiny ridge ``lam = 1e-10 tr(K_kk)/|k|`` guards a singular block).
    """
    Kk = K_all[keep]  # one gather of |k| rows; the |k| x |k| block is taken from it
    Kkk = Kk[:, keep]
    lam = 1e-10 * max(float(np.trace(Kkk)) / max(Kkk.shape[0], 1), 1e-300)
    rhs = Kk @ coef
    Kkk.flat[:: Kkk.shape[0] + 1] += lam  # the diagonal
    # LAPACK's gesv through NumPy: scipy's wrapper cost 3 ms of checks on a 100 x 100 block
    return np.linalg.solve(Kkk, rhs)


def _classifier_problem(learner, Xw, yw, src, keep_s, coef_s) -> tuple[np.ndarray, np.ndarray]:
    """±1 targets per column (0 = row not in that column's problem) and warm starts."""
    Tw = learner._labels.target_matrix(list(yw))
    Ts = np.sign(coef_s[keep_s])
    T = np.vstack([Ts, Tw])
    A0w = np.zeros_like(Tw)
    has = src >= 0
    A0w[has] = np.abs(coef_s[src[has]])
    A0 = np.vstack([np.abs(coef_s[keep_s]), A0w])
    return T, A0


#: The ``solver`` and ``compress`` values :func:`solve_learner` takes.
SOLVERS = ("adatron", "svc")
COMPRESSIONS = ("auto", "project", "resolve", "largest")


def check_solve_options(solver: Any, compress: Any) -> None:
    """Refuse a ``solver`` or ``compress`` :func:`solve_learner` does not know (a
    :class:`~streamk.consolidation.Consolidator` checks them at construction, where a solve
    would only fail later, logged)."""
    if solver not in SOLVERS:
        raise ConfigError(f"solver must be 'adatron' or 'svc', got {solver!r}")
    if compress not in COMPRESSIONS:
        raise ConfigError(
            f"compress must be 'auto', 'project', 'resolve' or 'largest', got {compress!r}"
        )


def solve_learner(
    learner: Any,
    Xw: np.ndarray,
    yw: list[Any],
    *,
    C: float = 1.0,
    solver: str = "adatron",
    compress: str = "auto",
    tol: float = 1e-3,
    max_epochs: int = 1000,
    kernel: Kernel | None = None,
    fill: float | None = 0.5,
    nu: float = 0.3,
    cache_dtype: str = "float64",
) -> Outcome:
    """Solve the learner's batch problem on its support set plus the window ``(Xw, yw)``.

    Perceptron-family and adatron classifiers: each one-vs-rest column is the C-SVM dual on
    its rows (the adatron's own ``C`` and norm where its ``C`` is finite, else ``C``);
    ``solver="adatron"`` solves it without bias (:func:`adatron_dual`, exactly the
    learners' model class), ``"svc"`` with a bias (:func:`svc`) whose offset cannot be held
    by a bias-free learner and is dropped (``extra['bias']`` records it). ``OnlineSVR``: the
    no-bias ε-SVR (:func:`svr_dual_no_bias`). ``OnlineRanker``: the soft-ranking dual
    (:func:`rank`, CF 8.1, ν-form with ``nu``: its normalised dual, ``sum(au + al) = 1``, makes
    a box ``C = 1`` a hard margin, which did not converge in 10^5 moves on 800 Bananas rows) on
    the window, rescaled to margin 1. Warm starts come from the
    learner's coefficients. ``kernel`` overrides the learner's kernel (kernel selection).

    Budget: the solution may use ``fill * budget`` rows (``fill=None``: no limit). If it has
    more, the rows with the largest ``||coef_i|| sqrt(k(x_i, x_i))`` are kept, then
    ``compress="project"`` projects the full solution onto their span (:func:`compress_project`:
    the closest function, in RKHS norm,
    that they can express), ``"resolve"`` solves the problem again on those rows only (warm), and
    ``"largest"`` just truncates. ``"auto"``: ``"resolve"`` for learners whose problem has a box
    (adatron with ``norm=1``, SVR with finite ``C``: a projection can leave the box), otherwise
    ``"project"`` (the perceptron's coefficients are unbounded anyway).

    ``cache_dtype``: the compiled SMO core's column cache. Double by default: the window's
    Gram is in memory anyway, and a float cache made the adopted coefficients depend on the
    order of the features at 1e-7 (river's shuffled-features check failed in a third of runs).
    With the Gram on canonically ordered columns (:func:`_gram`) the adatron solves to ``tol``
    itself, not to the 1e-6 ceiling :func:`adatron_dual` keeps for other callers: at 630
    rows that halved its iterations (899 -> 428) and its solve time.

    Leaving room (``fill < 1``) lets the on-line learner add its mistakes until the next
    consolidation without evicting the solution's support vectors. On Bananas (perceptron,
    budget 200, every 500) ``fill=1`` fell to 0.60 prequential accuracy, below the plain
    learner's 0.84, and ``fill=0.5`` rose to 0.87 (evicting SVs unbalances an SVM).
    """
    check_solve_options(solver, compress)
    name = type(learner).__name__
    S = learner.support_
    kern = kernel if kernel is not None else S.kernel
    Xs, coef_s, ids_s = S.X.copy(), S.coef.copy(), S.ids.copy()
    keep_s, src, allrows = _merge_rows(Xs, Xw)
    ns = Xs.shape[0]
    Xtr = np.vstack([allrows[:ns][keep_s], allrows[ns:]])
    dup = src >= 0  # window rows that repeat a support row (none when the support set is empty)
    ids_w = np.full(src.shape[0], -1, dtype=ids_s.dtype)
    ids_w[dup] = ids_s[src[dup]]  # (indexing only the duplicates: an empty ids_s stays unread)
    ids = np.concatenate([ids_s[keep_s], ids_w])
    if Xtr.shape[0] == 0:
        return Outcome(None, skipped="empty")
    check_gram_rows(Xtr.shape[0])
    K = _gram(kern, Xtr)
    out = Outcome(None, n_train=Xtr.shape[0], kernel=kern)
    extra_rows: dict[str, np.ndarray] = {}
    n = Xtr.shape[0]
    if name == "OnlineSVR":
        targets = learner._targets.align(S.ids)[:, 0]
        y = np.concatenate([targets[keep_s], np.asarray(yw, dtype=np.float64)])
        b0_w = np.zeros(src.shape[0])
        b0_w[dup] = coef_s[src[dup], 0]
        b0 = np.concatenate([coef_s[keep_s, 0], b0_w])
        # the resolved values: "auto" epsilon/C and the "mean" offset follow the target
        learner_C, offset = learner.C_, learner.offset_
        box = learner_C if math.isfinite(learner_C) else C
        if not box > 0:  # C="auto" before the targets spread: no coefficient can move
            return Outcome(None, n_train=n, skipped="targets have no spread yet (C_ = 0)")
        extra_rows["sv_target"] = y
        has_box = math.isfinite(learner_C)

        def solve_rows(use: np.ndarray, warm: np.ndarray) -> np.ndarray:
            ok = np.flatnonzero(use & ~np.isnan(y))
            r = svr_dual_no_bias(
                _block(K, ok), y[ok] - offset, learner.epsilon_, box, warm[ok, 0], tol=tol,
                max_epochs=max_epochs,
            )  # fmt: skip
            out.objective, out.n_iter, out.status = r.objective, r.n_iter, r.status
            coef = np.zeros((n, 1))
            coef[ok, 0] = r.alpha
            return coef

        warm0 = b0[:, None]
    elif name == "OnlineRanker":
        levels = np.r_[np.full(int(keep_s.sum()), -1), [learner._rank_index(v) for v in yw]]
        known = len(learner.ranks_)  # (ranks=None: the ranks seen so far)
        if known < 2 or np.unique(levels[levels >= 0]).shape[0] != known:
            return Outcome(None, n_train=n, skipped="window lacks some ranks")
        has_box = False

        def solve_rows(use: np.ndarray, warm: np.ndarray) -> np.ndarray:
            ok = np.flatnonzero(use & (levels >= 0))  # support rows carry no rank: window only
            r = rank(_block(K, ok), levels[ok], nu=nu, tol=tol)
            gamma = float(r.info["gamma"])
            scale = 1.0 / gamma if gamma > 0 else 1.0  # margin 1, the on-line rule's scale
            out.objective, out.n_iter, out.status = r.objective, r.n_iter, r.status
            out.extra["thresholds"] = np.asarray(r.info["thresholds"])[:-1] * scale
            coef = np.zeros((n, 1))
            coef[ok, 0] = r.alpha * scale
            return coef

        warm0 = np.zeros((n, 1))
    else:
        if len(learner.classes_) < 2:
            return Outcome(None, n_train=n, skipped="fewer than two classes")
        T, warm0 = _classifier_problem(learner, Xw, yw, src, keep_s, coef_s)
        if name == "KernelAdatron":
            # an infinite C (the hard margin, the default) is solved with ``C``, as the
            # SVR's: a window of real data is rarely separable without a bias (conflicting
            # duplicates never are), and the hard-margin dual is then unbounded (it ran to
            # 10^7 coordinate steps, 15-28 s on Phishing, to an objective of -1.9e20)
            norm = learner.norm
            box = float(learner.C) if math.isfinite(learner.C) else C
            has_box = norm == 1
            extra_rows["sv_class"] = _class_index(learner, T)
        else:
            box, norm, has_box = C, 1, False

        def solve_rows(use: np.ndarray, warm: np.ndarray) -> np.ndarray:
            coef = np.zeros_like(T)
            out.objective, out.n_iter, out.status, bias = 0.0, 0, 0, []
            for c in range(T.shape[1]):
                rows = np.flatnonzero(use & (T[:, c] != 0))
                if rows.size == 0:
                    continue
                Kc, yc, a0 = _block(K, rows), T[rows, c], np.abs(warm[rows, c])
                if solver == "svc" and norm == 1 and np.unique(yc).shape[0] == 2:
                    r = svc(Kc, yc, C=box, tol=tol, alpha0=a0, cache_dtype=cache_dtype)
                    bias.append(r.b)
                else:
                    r = adatron_dual(Kc, yc, box, norm, a0, tol=tol, max_epochs=max_epochs,
                                     cache_dtype=cache_dtype, max_tol=None)  # fmt: skip
                coef[rows, c] = r.alpha * yc
                out.objective += r.objective
                out.n_iter += r.n_iter
                out.status = max(out.status, r.status)
            out.extra["bias"] = bias
            return coef

    coef = solve_rows(np.ones(n, bool), _canonical_start(warm0))
    nz = np.flatnonzero(np.any(coef != 0, axis=1))
    out.n_solution = int(nz.size)
    budget = None if fill is None else learner_budget(learner)
    if budget is not None and fill is not None:
        budget = max(1, int(fill * budget))
    if budget is not None and nz.size > budget:
        score = np.linalg.norm(coef[nz], axis=1) * np.sqrt(np.abs(np.diag(K)[nz]))
        kept = nz[np.sort(np.argsort(-score, kind="stable")[:budget])]
        how = compress if compress != "auto" else ("resolve" if has_box else "project")
        if how == "project":
            coef_k = compress_project(K, coef, kept)  # coef is zero off nz
        elif how == "resolve":
            use = np.zeros(n, bool)
            use[kept] = True
            coef_k = solve_rows(use, coef)[kept]
        else:  # "largest" (the values are checked before the solve)
            coef_k = coef[kept]
        out.extra["compress"] = how
        nz, coef_nz = kept, coef_k
    else:
        coef_nz = coef[nz]
    out.state = adopt_state(
        learner, Xtr[nz], coef_nz, ids[nz], kern, {k: v[nz] for k, v in extra_rows.items()}
    )
    if "thresholds" in out.extra:
        out.state["thresholds"] = out.extra["thresholds"].tolist()
    return out


def _class_index(learner, T: np.ndarray) -> np.ndarray:
    """Class index per training row from its ±1 targets (binary: by sign; else the +1 column)."""
    if T.shape[1] == 1:
        signs = list(learner._labels.signs)
        return np.where(T[:, 0] > 0, signs.index(1), signs.index(-1)).astype(np.float64)
    pos = T > 0
    return np.where(pos.any(axis=1), np.argmax(pos, axis=1), np.nan)


def adopt_state(
    learner: Any,
    X: np.ndarray,
    coef: np.ndarray,
    ids: np.ndarray,
    kernel: Kernel,
    extra_rows: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """``learner.state()`` with the support set replaced by ``(X, coef)``.

    Rows with ``ids >= 0`` keep their id (their age, for age-based budget policies); the others
    get fresh ids after ``next_id``. Rows are stored oldest first.
    """
    state = learner.state()
    ids = np.asarray(ids, dtype=np.int64).copy()
    old = state["support"]
    fresh = ids < 0
    nxt = int(old["next_id"])
    ids[fresh] = nxt + np.arange(int(fresh.sum()))
    order = np.argsort(ids, kind="stable")
    state["support"] = {
        "kernel": kernel.to_spec(),
        "X": np.ascontiguousarray(X[order], dtype=np.float64),
        "coef": np.ascontiguousarray(coef[order], dtype=np.float64),
        "ids": ids[order],
        "next_id": nxt + int(fresh.sum()),
        "keep_gram": bool(old["keep_gram"]),
    }
    for key, values in (extra_rows or {}).items():
        rows = np.asarray(values, dtype=np.float64)[order]  # (an empty solution: no rows)
        state[key] = (rows[:, None] if rows.ndim == 1 else rows.reshape(len(order), -1)).tolist()
    return state


def build(learner: Any, state: dict[str, Any]) -> Any:
    """A learner from an edited state (``type(learner).from_state``)."""
    model = type(learner).from_state(state)
    if not isinstance(model.support_, SupportSet):  # pragma: no cover - contract check
        raise ConfigError("from_state did not rebuild a SupportSet")
    return model
