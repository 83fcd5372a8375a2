"""SMO for the nu-problems: two equalities, one per sign group (LIBSVM's ``Solver_NU``).

``min 0.5 a'Qa + p'a  s.t.  sum_{y_t=+1} a_t = d_+, sum_{y_t=-1} a_t = d_-, 0 <= a <= C``
(Chang & Lin, "Training nu-support vector classifiers", Neural Computation 13, 2001; the
second-order selection of Fan, Chen & Lin 2005 is applied within each group). Used by nu-SVC (the
book's CF 7.6/7.7) and nu-SVR (CF 7.11, corrected dual).
"""

from __future__ import annotations

import numpy as np

from .smo import _NEG, TAU, Solver

__all__ = ["SolverNU", "rho_r_of"]


class SolverNU(Solver):
    """:class:`Solver` whose pairs are chosen within one sign group, so both sums stay fixed."""

    def _penalties(self) -> None:
        super()._penalties()
        pos = self.yw > 0
        self.pen_up_p = np.where(pos, self.pen_up, _NEG)
        self.pen_up_n = np.where(pos, _NEG, self.pen_up)
        self.pen_low_p = np.where(pos, self.pen_low, _NEG)
        self.pen_low_n = np.where(pos, _NEG, self.pen_low)

    def update_alpha_status(self, r: int) -> None:
        super().update_alpha_status(r)
        if self.yw[r] > 0:
            self.pen_up_p[r], self.pen_low_p[r] = self.pen_up[r], self.pen_low[r]
        else:
            self.pen_up_n[r], self.pen_low_n[r] = self.pen_up[r], self.pen_low[r]

    def _group_bounds(self) -> tuple[float, float, float, float]:
        h = self.h
        return (
            float((self.pen_up_p - h).max()),
            float((h + self.pen_low_p).max()),
            float((self.pen_up_n - h).max()),
            float((h + self.pen_low_n).max()),
        )

    def select_working_set(self) -> tuple[int, int, np.ndarray | None]:
        """WSS2 within each group; ``i`` is the group's maximal violator for the chosen ``j``."""
        h = self.h
        vp = self.pen_up_p - h
        ip = int(vp.argmax())
        gp = vp[ip]
        vn = self.pen_up_n - h
        i_n = int(vn.argmax())
        gn = vn[i_n]
        hlp = h + self.pen_low_p
        hln = h + self.pen_low_n
        self.gap = max(gp + hlp.max(), gn + hln.max())
        if self.gap < self.tol:
            return -1, -1, None
        kp = self.row(ip)
        kn = self.row(i_n)
        b = np.maximum(hlp + gp, hln + gn)
        np.maximum(b, 0.0, out=b)
        pos = self.yw > 0
        quad = np.where(pos, self.QDw[ip] - 2.0 * kp, self.QDw[i_n] - 2.0 * kn)
        quad += self.QDw
        np.maximum(quad, TAU, out=quad)
        b *= b
        b /= quad
        j = int(b.argmax())
        if pos[j]:
            return ip, j, kp
        return i_n, j, kn

    def _shrink_mask(self) -> np.ndarray:
        g1, g2, g3, g4 = self._group_bounds()
        pos = self.yw > 0
        gmax_up = np.where(pos, g1, g3)
        gmax_low = np.where(pos, g2, g4)
        up_only = self.up & ~self.low
        low_only = self.low & ~self.up
        return (up_only & (self.h > gmax_low)) | (low_only & (-self.h > gmax_up))

    def _near_optimal(self) -> bool:
        g1, g2, g3, g4 = self._group_bounds()
        return max(g1 + g2, g3 + g4) <= 10.0 * self.tol

    def _final_gap(self) -> float:
        self._set_work(np.arange(self.l))
        g1, g2, g3, g4 = self._group_bounds()
        return max(g1 + g2, g3 + g4)

    def calculate_rho_r(self) -> tuple[float, float]:
        """Return ``(rho, r)`` (see :func:`rho_r_of`)."""
        return rho_r_of(self.alpha, self.y, self.H, self.C)


def rho_r_of(alpha: np.ndarray, y: np.ndarray, H: np.ndarray, C: np.ndarray) -> tuple[float, float]:
    """Return ``(rho, r)``: per group, ``r_g`` is the mean gradient over free variables (else
    the midpoint of the KKT bounds); ``r = (r_+ + r_-)/2``, ``rho = (r_+ - r_-)/2`` (LIBSVM)."""
    G = y * H
    out = []
    for sign in (1.0, -1.0):
        g = y == sign
        a, c, gg = alpha[g], C[g], G[g]
        upper, lower = a >= c, a <= 0
        free = ~upper & ~lower
        if free.any():
            out.append(float(gg[free].mean()))
            continue
        lb = gg[upper].max(initial=-np.inf)
        ub = gg[lower].min(initial=np.inf)
        if np.isfinite(lb) and np.isfinite(ub):
            out.append(float(0.5 * (lb + ub)))
        else:
            out.append(float(lb if np.isfinite(lb) else (ub if np.isfinite(ub) else 0.0)))
    r1, r2 = out
    return 0.5 * (r1 - r2), 0.5 * (r1 + r2)
