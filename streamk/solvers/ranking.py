"""Batch soft ranking: the dual of Computation 8.8 / Code Fragment 8.1 (Shawe-Taylor & Cristianini).

Ranks ``y`` in levels ``1..R``; one variable ``al_i`` per example below the top level and ``au_i``
per example above the bottom level. With ``s = au - al`` the solver minimises ``0.5 s'Ks`` (the
book maximises ``W = -s'Ks``; same optimum) subject to

* box ``0 <= au, al <= C`` (``C = 1/(nu n)`` for the nu-form of CF 8.1),
* ``sum(au + al) = 1``,
* threshold balance for every ``y = 1..R-1``: ``sum_{y_i = y} al_i = sum_{y_i = y+1} au_i``.

Method: a feasible-direction (maximal violating move) solver in the spirit of SMO. The elementary
feasible directions (the circuits of the constraint matrix) are (A) moving mass between two
variables of the same kind in one balance group (partner chosen by the second-order rule of Fan et
al. 2005), and (B) raising one ``al`` and one ``au`` of a group while lowering one of each in
another group. The most violating move is taken with an exact, box-clipped line search; each step
is O(n) NumPy work plus up to four rows of ``K``. With no violating move left the KKT conditions
hold (every feasible direction is a conformal sum of circuits). Convergence is first-order: slow
when the optimum is degenerate (``s`` near 0, i.e. nu too large for the data).
"""

from __future__ import annotations

import numpy as np

from ..errors import SolverError
from ._common import SolverResult, check_gram, check_nu, check_positive, warn_max_iter

__all__ = ["rank"]


def _layout(levels: np.ndarray, R: int) -> tuple[np.ndarray, ...]:
    """Variables sorted by (group, kind): point, sign (+1 au, -1 al), segment starts."""
    pts, sig, seg = [], [], []
    for g in range(R - 1):  # group g balances al of level g with au of level g+1
        lo = np.flatnonzero(levels == g)
        hi = np.flatnonzero(levels == g + 1)
        if len(lo) == 0 or len(hi) == 0:
            continue  # this threshold has an empty side: its variables are forced to 0
        seg.append((len(pts) and sum(len(p) for p in pts), g))
        pts.append(lo)
        sig.append(-np.ones(len(lo)))
        pts.append(hi)
        sig.append(np.ones(len(hi)))
    if not pts:
        raise SolverError("ranking needs two adjacent levels that both hold examples")
    sizes = np.array([len(p) for p in pts])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    groups = np.array([g for _, g in seg])
    return np.concatenate(pts), np.concatenate(sig), starts, sizes, groups


def rank(
    K: np.ndarray,
    y: np.ndarray,
    C: float | None = None,
    nu: float | None = None,
    tol: float = 1e-4,
    max_iter: int | None = None,
) -> SolverResult:
    """Batch soft ranking dual (Code Fragment 8.1) with per-threshold balance constraints.

    ``tol`` is relative: stop when the largest violation (directional derivative of the most
    violating elementary move) is below ``tol * max|gradient|`` (the gradients scale with the
    margin, since ``sum(au + al) = 1``); ``gap`` reports that relative value.

    Give ``C`` (box) or ``nu`` (``C = 1/(nu n)``). ``y`` holds ordered levels (any sortable values).
    Returns ``alpha = au - al`` with ``f = K @ alpha``; ``info['thresholds']`` holds
    ``b_1 <= ... <= b_{R-1}, b_R = +inf`` (rank = least level with ``f(x) < b_y``), ``b`` is 0,
    ``info['gamma']`` the margin in the scale of ``f``, ``info['levels']`` the sorted level values,
    ``info['au']``, ``info['al']`` and ``info['W'] = -s'Ks``; ``objective`` is ``0.5 s'Ks``.
    """
    K = check_gram(K)
    n = K.shape[0]
    y = np.asarray(y).ravel()
    if y.shape[0] != n:
        raise SolverError(f"y has {y.shape[0]} entries but K has {n} rows")
    if (C is None) == (nu is None):
        raise SolverError("give exactly one of C and nu")
    box = 1.0 / (check_nu(nu) * n) if nu is not None else check_positive("C", C, allow_inf=True)
    values, levels = np.unique(y, return_inverse=True)
    R = len(values)
    if R < 2:
        raise SolverError("ranking needs at least two distinct levels in y")
    pt, sig, starts, sizes, groups = _layout(levels, R)
    ng = len(groups)
    cap = box * np.minimum(sizes[0::2], sizes[1::2])
    if cap.sum() < 0.5 * (1 - 1e-12):
        raise SolverError(f"C={box:g} is too small (nu too large): sum(au + al) = 1 is infeasible")
    t = (
        np.minimum(cap / (2.0 * cap.sum()), cap)
        if np.isfinite(cap.sum())
        else np.full(ng, 0.5 / ng)
    )
    a = np.repeat(np.repeat(t, 2) / sizes, sizes)
    F = (sig * a) @ K[pt]
    max_iter = max(100_000, 50 * len(pt)) if max_iter is None else int(max_iter)
    seg_group = np.repeat(np.arange(ng), 2)
    status, it, gap = 1, 0, np.inf
    for it in range(max_iter + 1):
        grad = sig * F[pt]
        inc = np.where(a < box, grad, np.inf)
        dec = np.where(a > 0, grad, -np.inf)
        mn = np.minimum.reduceat(inc, starts)
        mx = np.maximum.reduceat(dec, starts)
        same = mx - mn  # per segment: move from the largest to the smallest gradient
        s_best = int(np.argmax(same))
        v_same = same[s_best]
        up = mn[0::2] + mn[1::2]  # per group: raise one al and one au
        down = mx[0::2] + mx[1::2]  # per group: lower one al and one au
        g_dn = int(np.argmax(down))
        up_o = up.copy()
        up_o[g_dn] = np.inf
        g_up = int(np.argmin(up_o))
        v_cross = down[g_dn] - up_o[g_up] if ng > 1 else -np.inf
        gap = float(max(v_same, v_cross)) / max(float(np.abs(grad).max()), 1e-300)
        if gap < tol or it == max_iter:
            status = 0 if gap < tol else 1
            break

        def pick(segment: int, values: np.ndarray, best: str) -> int:
            lo = starts[segment]
            part = values[lo : lo + sizes[segment]]
            return int(lo + (np.argmin(part) if best == "min" else np.argmax(part)))

        if v_same >= v_cross:
            d_idx = [
                pick(s_best, inc, "min"),
                _second_order(K, pt, grad, dec, starts, sizes, s_best, pick(s_best, inc, "min")),
            ]
            d_dir = [1.0, -1.0]
        else:
            d_idx = [pick(2 * g_up, inc, "min"), pick(2 * g_up + 1, inc, "min")]
            d_idx += [pick(2 * g_dn, dec, "max"), pick(2 * g_dn + 1, dec, "max")]
            d_dir = [1.0, 1.0, -1.0, -1.0]
        d_idx_a = np.array(d_idx)
        d_dir_a = np.array(d_dir)
        slope = float(d_dir_a @ grad[d_idx_a])
        ds_pts, inv = np.unique(pt[d_idx_a], return_inverse=True)
        ds = np.zeros(len(ds_pts))
        np.add.at(ds, inv, d_dir_a * sig[d_idx_a])
        curv = float(ds @ K[np.ix_(ds_pts, ds_pts)] @ ds)
        room = np.where(d_dir_a > 0, box - a[d_idx_a], a[d_idx_a])
        step = min(-slope / curv if curv > 1e-15 else np.inf, float(room.min()))
        if not np.isfinite(step):
            raise SolverError(
                "ranking dual is unbounded along a feasible direction; give a finite C"
            )
        np.add.at(a, d_idx_a, step * d_dir_a)
        np.clip(a, 0.0, box, out=a)
        F += (step * ds) @ K[ds_pts]  # K symmetric: contiguous rows, not strided columns
    if status == 1:
        warn_max_iter("rank", it)
    au, al = np.zeros(n), np.zeros(n)
    up_var = sig > 0
    au[pt[up_var]] = a[up_var]
    al[pt[~up_var]] = a[~up_var]
    s = au - al
    F = K @ s
    thresholds, gamma = _thresholds(F, pt, sig, a, box, starts, sizes, groups, seg_group, R)
    obj = float(0.5 * s @ F)
    info = {"thresholds": thresholds, "gamma": gamma, "levels": values, "au": au, "al": al,
            "W": -2.0 * obj}  # fmt: skip
    return SolverResult(s, 0.0, it, obj, status, gap, info)


def _second_order(
    K: np.ndarray,
    pt: np.ndarray,
    grad: np.ndarray,
    dec: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    seg: int,
    i: int,
) -> int:
    """WSS2 inside one segment (Fan et al. 2005): the partner ``j`` of ``i`` that maximises the
    exact decrease ``b_j^2 / (K_ii + K_jj - 2 K_ij)``, ``b_j = grad_j - grad_i > 0``."""
    lo = starts[seg]
    sl = slice(lo, lo + sizes[seg])
    pj = pt[sl]
    ki = K[pt[i]][pj]
    quad = np.maximum(K[pt[i], pt[i]] + K[pj, pj] - 2.0 * ki, 1e-12)
    b = np.maximum(dec[sl] - grad[i], 0.0)
    return int(lo + np.argmax(b * b / quad))


def _thresholds(
    F: np.ndarray,
    pt: np.ndarray,
    sig: np.ndarray,
    a: np.ndarray,
    box: float,
    starts: np.ndarray,
    sizes: np.ndarray,
    groups: np.ndarray,
    seg_group: np.ndarray,
    R: int,
) -> tuple[np.ndarray, float]:
    """Thresholds and margin from free variables (CF 8.1), else from the KKT intervals.

    Free ``al_i`` of group ``g``: ``f(x_i) = b_g - gamma``; free ``au_j``: ``f(x_j) = b_g + gamma``.
    A group with no free variable on one side takes the midpoint of its KKT interval; thresholds of
    empty groups and any crossing are repaired by a running maximum, so ``b`` is monotone.
    """
    f = F[pt]
    free = (a > 1e-12 * max(box, 1.0) if np.isfinite(box) else a > 0) & (a < box * (1 - 1e-12))
    ng = len(groups)
    fl = np.full(ng, np.nan)
    fu = np.full(ng, np.nan)
    for k in range(ng):
        for side, out in ((0, fl), (1, fu)):
            lo = starts[2 * k + side]
            sl = slice(lo, lo + sizes[2 * k + side])
            if free[sl].any():
                out[k] = f[sl][free[sl]].mean()
    both = ~np.isnan(fl) & ~np.isnan(fu)
    if both.any():
        gamma = float(np.mean(0.5 * (fu[both] - fl[both])))
    else:  # no free pair anywhere: the gap between the closest support vectors of each group
        gaps = []
        for k in range(ng):
            lo, hi = starts[2 * k], starts[2 * k + 1]
            gaps.append(
                0.5 * (f[hi : hi + sizes[2 * k + 1]].min() - f[lo : lo + sizes[2 * k]].max())
            )
        gamma = float(np.mean(gaps))
    b = np.full(R - 1, np.nan)
    for k, g in enumerate(groups):
        if both[k]:
            b[g] = 0.5 * (fl[k] + fu[k])
        elif not np.isnan(fl[k]):
            b[g] = fl[k] + gamma
        elif not np.isnan(fu[k]):
            b[g] = fu[k] - gamma
        else:  # all at bounds: lambda_g lies in [lo, hi] from the KKT inequalities
            sl_l = slice(starts[2 * k], starts[2 * k] + sizes[2 * k])
            sl_u = slice(starts[2 * k + 1], starts[2 * k + 1] + sizes[2 * k + 1])
            al_, au_ = a[sl_l], a[sl_u]
            lo_c = np.concatenate(
                (f[sl_l][al_ <= 0] + gamma, f[sl_u][au_ >= box] - gamma, [-np.inf])
            )
            hi_c = np.concatenate(
                (f[sl_l][al_ >= box] + gamma, f[sl_u][au_ <= 0] - gamma, [np.inf])
            )
            lo_v, hi_v = lo_c.max(), hi_c.min()
            b[g] = 0.5 * (lo_v + hi_v) if np.isfinite(lo_v + hi_v) else min(max(0.0, lo_v), hi_v)
    if np.isnan(b).all():
        b[:] = 0.0
    b = np.where(np.isnan(b), -np.inf, b)
    b = np.maximum.accumulate(b)
    b = np.where(np.isinf(b), np.nanmin(np.where(np.isinf(b), np.nan, b)), b)
    return np.concatenate((b, [np.inf])), gamma
