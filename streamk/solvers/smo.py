"""SMO core with second-order working-set selection, shrinking and gradient reconstruction.

Solves ``min_a 0.5 a'Qa + p'a  s.t.  y'a = delta, 0 <= a_t <= C_t`` with ``Q_st = y_s y_t Kbar_st``
and ``y_t`` in {-1, +1}: the problem of LIBSVM's ``Solver`` (Fan, Chen & Lin, "Working set selection
using second order information for training support vector machines", JMLR 6, 2005; Chang & Lin,
LIBSVM). ``Kbar`` is the caller's Gram matrix ``K``, indexed through ``base`` when the problem has
more variables than examples (the 2n-variable epsilon-SVR: ``Kbar_st = K[base_s, base_t]``), so no
second n x n matrix is formed.

Structure and names follow LIBSVM (``select_working_set``, ``update_alpha_status``,
``do_shrinking``, ``reconstruct_gradient``, ``calculate_rho``); the work is vectorised instead:

* the solver keeps ``H = y * G`` (G the gradient) so every update is
  ``H += Kbar_i (y_i da_i) + Kbar_j (y_j da_j)`` on rows of ``K`` taken as they are;
* selection is a masked ``argmax`` over ``I_up`` and a vector of second-order decreases over
  ``I_low`` (WSS2);
* shrinking first masks variables out of selection; when the active set falls to half of the
  working block, the block is compacted to a contiguous sub-matrix of ``K`` (a geometric schedule,
  so the copies cost less than one pass over ``K``);
* gradients of variables outside the block are rebuilt with one gather-and-matvec over the support
  (instead of LIBSVM's ``G_bar`` bookkeeping, which would cost a full row per bound change).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Solver", "TAU"]

TAU = 1e-12
_NEG = -np.inf


class Solver:
    """LIBSVM-style SMO on a precomputed Gram matrix (Fan, Chen & Lin 2005, WSS2).

    Parameters
    ----------
    K : ndarray (n, n)
        Gram matrix, float64, C-contiguous, symmetric PSD.
    y : ndarray (l,)
        Signs of the variables, in {-1, +1}.
    p : ndarray (l,)
        Linear term of the objective.
    C : ndarray (l,)
        Upper bounds (may be ``inf``).
    base : ndarray of int (l,) or None
        Row of ``K`` behind each variable; None means variable ``t`` is row ``t``.
    tol : float
        Stop when ``m(a) - M(a) < tol`` (LIBSVM's ``eps``).
    max_iter : int
        Iteration limit.
    shrinking : bool
        Use LIBSVM's shrinking heuristic.
    """

    def __init__(
        self,
        K: np.ndarray,
        y: np.ndarray,
        p: np.ndarray,
        C: np.ndarray,
        *,
        base: np.ndarray | None = None,
        tol: float = 1e-3,
        max_iter: int = 10_000_000,
        shrinking: bool = True,
    ) -> None:
        self.K = K
        self.y = np.asarray(y, dtype=np.float64)
        self.p = np.asarray(p, dtype=np.float64)
        self.C = np.asarray(C, dtype=np.float64)
        self.l = len(self.y)
        self.base = base
        diag = np.diag(K)
        self.QD = diag if base is None else diag[base]
        self.tol = float(tol)
        self.max_iter = int(max_iter)
        self.shrinking = bool(shrinking)

    # ------------------------------------------------------------------ kernel access
    def _rows_of(self, idx: np.ndarray) -> np.ndarray:
        return idx if self.base is None else self.base[idx]

    def _set_work(self, act: np.ndarray) -> None:
        """Make ``act`` (variable indices) the working block: arrays and row access."""
        self.act = act
        m = len(act)
        if self.base is None and m == self.l:
            self.Kw, self.direct = self.K, True
        elif m <= self.K.shape[0]:
            b = self._rows_of(act)
            self.Kw, self.direct = self.K[np.ix_(b, b)], True
        else:  # more variables than rows of K (SVR): gather each row on demand
            self.rb = self._rows_of(act)
            self.direct = False
        self.a = self.alpha[act].copy()
        self.h = self.H[act].copy()
        self.yw = self.y[act]
        self.Cw = self.C[act]
        self.QDw = self.QD[act]
        self.alive = np.ones(m, dtype=bool)
        self.up = np.empty(m, dtype=bool)
        self.low = np.empty(m, dtype=bool)
        self._status_all()

    def row(self, r: int) -> np.ndarray:
        """Row ``r`` of ``Kbar`` restricted to the working block (LIBSVM's ``get_Q`` without y)."""
        if self.direct:
            return self.Kw[r]
        return self.K[self.rb[r]].take(self.rb)

    def _sync(self) -> None:
        self.alpha[self.act] = self.a
        self.H[self.act] = self.h

    # ------------------------------------------------------------------ status
    def _status_all(self) -> None:
        pos = self.yw > 0
        below = self.a < self.Cw
        above = self.a > 0
        self.up[:] = np.where(pos, below, above)
        self.low[:] = np.where(pos, above, below)
        self._penalties()

    def _penalties(self) -> None:
        self.pen_up = np.where(self.up & self.alive, 0.0, _NEG)
        self.pen_low = np.where(self.low & self.alive, 0.0, _NEG)

    def update_alpha_status(self, r: int) -> None:
        """Recompute whether variable ``r`` is in I_up / I_low (LIBSVM's three-way box test)."""
        a, c = self.a[r], self.Cw[r]
        below, above = a < c, a > 0
        if self.yw[r] > 0:
            self.up[r], self.low[r] = below, above
        else:
            self.up[r], self.low[r] = above, below
        alive = self.alive[r]
        self.pen_up[r] = 0.0 if (alive and self.up[r]) else _NEG
        self.pen_low[r] = 0.0 if (alive and self.low[r]) else _NEG

    # ------------------------------------------------------------------ WSS2
    def select_working_set(self) -> tuple[int, int, np.ndarray | None]:
        """Return ``(i, j, K_i)``, or ``(-1, -1, None)`` when ``m(a) - M(a) < tol``.

        ``i = argmax_{t in I_up} -y_t G_t``; ``j`` minimises ``-b_t^2 / a_t`` over ``t in I_low``
        with ``b_t = -y_i G_i + y_t G_t > 0`` and ``a_t = K_ii + K_tt - 2 K_it`` (Fan et al. WSS2).
        """
        h = self.h
        v = self.pen_up - h
        i = int(v.argmax())
        gmax = v[i]
        hl = h + self.pen_low
        gmax2 = hl.max()
        self.gap = gmax + gmax2
        if self.gap < self.tol:
            return -1, -1, None
        ki = self.row(i)
        b = hl + gmax
        np.maximum(b, 0.0, out=b)
        quad = self.QDw - 2.0 * ki
        quad += self.QDw[i]
        np.maximum(quad, TAU, out=quad)
        b *= b
        b /= quad
        return i, int(b.argmax()), ki

    # ------------------------------------------------------------------ pair update
    def _update_pair(self, i: int, j: int, ki: np.ndarray) -> None:
        a, yw, Cw = self.a, self.yw, self.Cw
        kj = self.row(j)
        ci, cj = Cw[i], Cw[j]
        ai, aj = a[i], a[j]
        gi, gj = yw[i] * self.h[i], yw[j] * self.h[j]
        quad = self.QDw[i] + self.QDw[j] - 2.0 * ki[j]
        if quad <= 0:
            quad = TAU
        if yw[i] != yw[j]:
            delta = (-gi - gj) / quad
            diff = ai - aj
            ai += delta
            aj += delta
            if diff > 0:
                if aj < 0:
                    aj, ai = 0.0, diff
            elif ai < 0:
                ai, aj = 0.0, -diff
            cdiff = ci - cj if ci != cj else 0.0  # inf - inf would be nan
            if diff > cdiff:
                if ai > ci:
                    ai, aj = ci, ci - diff
            elif aj > cj:
                aj, ai = cj, cj + diff
        else:
            delta = (gi - gj) / quad
            s = ai + aj
            ai -= delta
            aj += delta
            if s > ci:
                if ai > ci:
                    ai, aj = ci, s - ci
            elif aj < 0:
                aj, ai = 0.0, s
            if s > cj:
                if aj > cj:
                    aj, ai = cj, s - cj
            elif ai < 0:
                ai, aj = 0.0, s
        dai, daj = ai - a[i], aj - a[j]
        a[i], a[j] = ai, aj
        h = self.h
        h += ki * (yw[i] * dai)
        h += kj * (yw[j] * daj)
        self.update_alpha_status(i)
        self.update_alpha_status(j)

    # ------------------------------------------------------------------ shrinking
    def _violation_bounds(self) -> tuple[float, float]:
        return float((self.pen_up - self.h).max()), float((self.h + self.pen_low).max())

    def _shrink_mask(self) -> np.ndarray:
        gmax1, gmax2 = self._violation_bounds()
        up_only = self.up & ~self.low
        low_only = self.low & ~self.up
        return (up_only & (self.h > gmax2)) | (low_only & (-self.h > gmax1))

    def _near_optimal(self) -> bool:
        gmax1, gmax2 = self._violation_bounds()
        return gmax1 + gmax2 <= 10.0 * self.tol

    def do_shrinking(self) -> None:
        """Mask out bound variables that cannot be selected soon (LIBSVM's ``be_shrunk``)."""
        if not self.unshrink and self._near_optimal():
            self.unshrink = True
            self.reconstruct_gradient()
        self.alive &= ~self._shrink_mask()
        self._penalties()
        m = len(self.act)
        n_alive = int(self.alive.sum())
        if m > 64 and n_alive <= m // 2:
            self._sync()
            self._set_work(self.act[self.alive])

    def reconstruct_gradient(self) -> None:
        """Rebuild ``H`` for the variables outside the working block and make all active."""
        self._sync()
        if len(self.act) < self.l:
            stale = np.ones(self.l, dtype=bool)
            stale[self.act] = False
            stale_idx = np.flatnonzero(stale)
            nz = np.flatnonzero(self.alpha)
            s = self.y[nz] * self.alpha[nz]
            rows = self._rows_of(stale_idx)
            cols = self._rows_of(nz)
            self.H[stale_idx] = (
                self.K[np.ix_(rows, cols)] @ s + self.y[stale_idx] * self.p[stale_idx]
            )
            self._set_work(np.arange(self.l))
        else:
            self.alive[:] = True
            self._penalties()

    # ------------------------------------------------------------------ driver
    def initial_gradient(self, alpha: np.ndarray) -> np.ndarray:
        """``H = y * (Q alpha + p) = Kbar (y * alpha) + y * p`` with one matrix-vector product."""
        nz = np.flatnonzero(alpha)
        H = self.y * self.p
        if len(nz):
            s = self.y[nz] * alpha[nz]
            rows = self._rows_of(nz)  # K symmetric: gather contiguous rows, not columns
            t = s @ self.K[rows]
            H = H + (t if self.base is None else t[self.base])
        return H

    def solve(self, alpha: np.ndarray, grads: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Run SMO from the feasible point ``alpha``; results in ``alpha``, ``H``, ``n_iter``.
        ``grads = (G, G_bar)`` at ``alpha``, if known, saves the initial matrix-vector product."""
        self.alpha = np.array(alpha, dtype=np.float64)
        self.H = self.initial_gradient(self.alpha) if grads is None else self.y * grads[0]
        self.unshrink = False
        self.gap = np.inf
        self._set_work(np.arange(self.l))
        n_iter = 0
        counter = min(self.l, 1000) + 1
        self.status = 0
        while True:
            if n_iter >= self.max_iter:
                self.status = 1
                break
            counter -= 1
            if counter == 0:
                counter = min(self.l, 1000)
                if self.shrinking:
                    self.do_shrinking()
            i, j, ki = self.select_working_set()
            if i < 0:
                if len(self.act) < self.l or not self.alive.all():
                    self.reconstruct_gradient()
                    i, j, ki = self.select_working_set()
                    if i < 0:
                        break
                    counter = 1
                else:
                    break
            n_iter += 1
            self._update_pair(i, j, ki)
        self._sync()
        if len(self.act) < self.l:
            self.reconstruct_gradient()
            self._sync()
        self.n_iter = n_iter
        self.gap = float(self._final_gap())

    def _final_gap(self) -> float:
        self._set_work(np.arange(self.l))
        return sum(self._violation_bounds())

    # ------------------------------------------------------------------ results
    def objective(self) -> float:
        """``0.5 a'Qa + p'a = 0.5 sum_t a_t (G_t + p_t)`` with ``G = y * H``."""
        return float(0.5 * self.alpha @ (self.y * self.H + self.p))

    def calculate_rho(self) -> float:
        """Offset ``rho`` (decision ``sum y a K - rho``): mean of ``y_t G_t`` over free variables,
        else the midpoint of the KKT bounds (LIBSVM's ``calculate_rho``)."""
        return _rho_of(self.alpha, self.y, self.H, self.C)


def _rho_of(alpha: np.ndarray, y: np.ndarray, yG: np.ndarray, C: np.ndarray) -> float:
    at_upper = alpha >= C
    at_lower = alpha <= 0
    free = ~at_upper & ~at_lower
    if free.any():
        return float(yG[free].mean())
    pos = y > 0
    ub_mask = (at_upper & ~pos) | (at_lower & pos)
    lb_mask = (at_upper & pos) | (at_lower & ~pos)
    ub = yG[ub_mask].min(initial=np.inf)
    lb = yG[lb_mask].max(initial=-np.inf)
    if not np.isfinite(ub):
        return float(lb) if np.isfinite(lb) else 0.0
    if not np.isfinite(lb):
        return float(ub)
    return float(0.5 * (ub + lb))
