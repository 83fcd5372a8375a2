# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Compiled per-mistake work of the Projectron and Merge budgets (optional).

:mod:`streamk.budget.compiled` falls back to the NumPy code in
:mod:`streamk.budget.projectron` and :mod:`streamk.budget.merge` without this module; that
code is the reference these loops are tested against (the same steps in the same order,
so the two agree to rounding).

* :func:`projectron_run` — a margin perceptron (margin 0: Alg. 7.52) over a block of rows
  with an RBF kernel and a :class:`~streamk.budget.Projectron` budget in one call: the
  kernel row, the decision, the projection ``d = P k`` onto the span of the set, then
  either the projected coefficient update or the insertion with the block-inverse update
  of ``P = K(S, S)^-1`` (after the rank-one removal when the set is full).
* :func:`projectron_insert` — the ``P`` work of one ``Projectron.insert`` for any learner
  and kernel (the caller's kernel row): projection, removal downdate, block-inverse growth.
* :func:`rbf_gram` and :func:`inverse_by_cholesky` — the Projectron's ``P`` rebuilt from scratch (after a change
  it did not make, e.g. ``gamma="auto"`` moving the kernel) without LAPACK's threads.
* :func:`merge_search` — :class:`~streamk.budget.Merge`'s search: the vector to merge, its
  partner and the point ``h`` on the segment between them that loses least.

The Projectron's steps on ``P`` live in ``_projectron.pxi``, which the per-event path
(``streamk/learners/_event.pyx``) includes too.
"""

from libc.math cimport INFINITY, exp, fabs, sqrt
from libc.stdint cimport int64_t


cdef extern from "../_fastexp.h" nogil:
    void sk_scaled_exp(double *a, Py_ssize_t n, double factor)

import numpy as np

#: (sqrt(5) - 1) / 2, as :mod:`streamk.budget.merge` computes it
cdef double GOLDEN = (5.0 ** 0.5 - 1.0) / 2.0
#: ``merge.GRID_TIE``: grid weights this close (relative) are a tie
cdef double GRID_TIE = 1e-12
#: Most grid points of Merge's search (its weights live on the stack)
DEF MAX_GRID = 64


cdef inline double _dist2(const double *a, const double *b, Py_ssize_t w) noexcept nogil:
    cdef double s = 0.0, t
    cdef Py_ssize_t j
    for j in range(w):
        t = a[j] - b[j]
        s += t * t
    return s


include "_projectron.pxi"


def rbf_gram(const double[:, ::1] X, const double[::1] sq, Py_ssize_t n, double gamma):
    """``K(S, S)`` of the first ``n`` support rows for an RBF kernel, single-threaded:
    ``exp(-gamma max(0, sq_i + sq_j - 2 x_i . x_j))`` in the operation order of
    :func:`streamk.accel.rbf_from_dots` (the caller checks the expansion is exact)."""
    cdef Py_ssize_t w = X.shape[1], i, j
    cdef double t
    if n < 0 or n > X.shape[0] or sq.shape[0] < n:
        raise ValueError("X and sq must hold n rows")
    Gm = np.empty((n, n))
    if n == 0:
        return Gm
    cdef double[:, ::1] G = Gm
    with nogil:
        for i in range(n):
            for j in range(i + 1):
                t = -2.0 * _dot(&X[i, 0], &X[j, 0], w)
                t = t + sq[i]
                t = t + sq[j]
                G[i, j] = t if t > 0.0 else 0.0
            sk_scaled_exp(&G[i, 0], i + 1, -gamma)
            for j in range(i):
                G[j, i] = G[i, j]
    return Gm


def inverse_by_cholesky(const double[:, ::1] G, double[:, ::1] P, double min_rel):
    """``P[:n, :n] = G^-1`` for a positive definite Gram matrix ``G`` (``n x n``):
    ``G = L Lᵀ``, ``M = L^-1``, ``P = Mᵀ M`` (O(n³), backward stable like LAPACK's).

    Single-threaded and in place, where ``np.linalg.inv`` may spin BLAS threads on a busy
    machine for a matrix this small. Returns ``False`` (``P`` untouched) when a squared
    pivot ``L_ss²`` (the squared distance of ``x_s`` from the span of the rows before it)
    falls to ``min_rel * G_ss`` or below: ``G`` is too close to singular, and the caller
    inverts it with LAPACK (or a pseudo-inverse) instead.
    """
    cdef Py_ssize_t n = G.shape[0], ldp = P.shape[0], i, j, k
    cdef double t
    cdef bint ok = True
    if G.shape[1] != n or ldp < n or P.shape[1] != ldp:
        raise ValueError("G must be square and P at least as large")
    if n == 0:
        return True
    Lm = np.zeros((n, n))
    Mm = np.zeros((n, n))
    cdef double[:, ::1] L = Lm
    cdef double[:, ::1] M = Mm
    with nogil:
        for j in range(n):  # Cholesky, row by row: L[i, :j] . L[j, :j] contiguous
            t = G[j, j] - _dot(&L[j, 0], &L[j, 0], j)
            if not (t > min_rel * G[j, j]):  # also catches NaN
                ok = False
                break
            L[j, j] = sqrt(t)
            for i in range(j + 1, n):
                L[i, j] = (G[i, j] - _dot(&L[i, 0], &L[j, 0], j)) / L[j, j]
        if ok:
            for i in range(n):  # M = L^-1, lower triangular, row by row
                M[i, i] = 1.0 / L[i, i]
                for j in range(i):
                    t = 0.0
                    for k in range(j, i):
                        t += L[i, k] * M[k, j]
                    M[i, j] = -t / L[i, i]
            for i in range(n):
                for j in range(n):
                    P[i, j] = 0.0
            for k in range(n):  # P = Mᵀ M = sum_k outer(M[k, :k+1], M[k, :k+1])
                for i in range(k + 1):
                    _axpy(M[k, i], &M[k, 0], &P[i, 0], k + 1)
    return ok


def projectron_insert(
    double[:, ::1] P,
    const double[:, ::1] coef,
    double[::1] k,
    double[::1] d,
    double[::1] col,
    Py_ssize_t n,
    bint full,
    double kxx,
    double eta,
    double min_rel,
):
    """The ``P`` work of one ``Projectron.insert`` of a vector with ``k = K(S, x)``.

    ``d = P k`` and the squared projection error; then, if the vector is not projected,
    the removal's rank-one downdate when ``full`` (``coef`` are the set's ``n``
    coefficient rows, read only) and the block-inverse growth. ``P`` (capacity ``n + 1``),
    ``k`` and ``d`` change in place; the caller makes the matching support-set changes.
    Returns ``(slot, P_ii)``: ``slot = -2`` when projected (``coef_S += d cᵀ``), ``-1`` when
    appended, else the removed slot (``col[:n]`` then holds ``P[:, slot]`` before the
    removal, ``P_ii`` its pivot, and ``k`` is ``without_slot(k, slot)`` in its first
    ``n - 1`` entries).
    """
    cdef Py_ssize_t ldp = P.shape[0], slot = -1, m = n
    cdef double delta, pii = 0.0
    if n < 1 or n + 1 > ldp or P.shape[1] != ldp or k.shape[0] < n or d.shape[0] < n:
        raise ValueError("need n >= 1, P holding n + 1 rows, and n entries in k and d")
    if col.shape[0] < 2 * n or coef.shape[0] < n or coef.shape[1] < 1:
        raise ValueError("col needs 2 n entries (half of them scratch) and coef n rows")
    cdef double *Pp = &P[0, 0]
    cdef double *scratch = &col[m]
    with nogil:
        delta = _project(Pp, ldp, &k[0], &d[0], n, kxx)
        if delta <= eta or delta <= min_rel * kxx:
            slot = -2
        else:
            if full:
                slot = _downdate(Pp, ldp, &coef[0, 0], coef.shape[1], &k[0], &col[0],
                                 scratch, n, &pii)
                delta = _project_without(&d[0], &col[0], pii, slot, n, &k[0], kxx)
                n -= 1
            _grow_inverse(Pp, ldp, &d[0], scratch, n, delta)
    return slot, pii


def projectron_run(
    const double[:, ::1] Q,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    double[:, ::1] P,
    const double[:, ::1] T,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    double gamma,
    double eta,
    double min_rel,
    double margin,
    int64_t[::1] codes,
):
    """Learn the rows of ``Q`` (targets ``T``, ±1 per column) in order; see the module.

    ``Q`` is at least as wide as the stored rows (absent features 0; columns of ``X``
    beyond ``Q``'s width are 0). A row updates when some column has a
    mistake (``sgn(f) != t``, sgn(0) = +1) or a margin error (``t f < margin``); its
    coefficients are ``t`` in those columns, 0 elsewhere. ``codes[j]`` receives the
    prediction made before row ``j`` was learned (binary: 1 if ``f >= 0``; one-vs-rest: the
    arg-max column). The support buffers and ``P`` (capacity at least the largest set the
    run can reach) change in place. Returns ``(n, next_id, updates, largest squared norm
    stored)``.
    """
    cdef Py_ssize_t m = Q.shape[0], ldx = X.shape[1], p = coef.shape[1], ldp = P.shape[0]
    cdef Py_ssize_t w = Q.shape[1]
    cdef Py_ssize_t j, s, c, best_c
    cdef Py_ssize_t cap = min(X.shape[0], P.shape[0])
    if w > ldx or w < 1 or T.shape[0] != m or T.shape[1] != p or codes.shape[0] < m:
        raise ValueError("Q must be at most as wide as X, T one row per row of Q, codes long enough")
    if n > cap or (budget > 0 and min(budget, n + m) > cap) or (budget == 0 and n + m > cap):
        raise ValueError("the support buffers or P cannot hold the set this run may reach")
    if p < 1 or p > 64:
        raise ValueError("between 1 and 64 coefficient columns")
    scratch = np.empty(4 * max(cap, 1) + 2 * p)
    cdef double[::1] sc = scratch
    cdef double *k = &sc[0]
    cdef double *d = k + cap
    cdef double *col = d + cap
    cdef double *row = col + cap
    cdef double *f = row + cap
    cdef double *nc = f + p
    cdef double *Pp = &P[0, 0]
    cdef double *Xp = &X[0, 0]
    cdef double *Cp = &coef[0, 0]
    cdef double delta, kxx = 1.0, sq, sq_max = 0.0, best, t, pii
    cdef bint wrong, any_wrong
    cdef int64_t updates = 0
    with nogil:
        for j in range(m):
            for s in range(n):
                k[s] = exp(-gamma * _dist2(&Q[j, 0], &Xp[s * ldx], w))
            for c in range(p):
                f[c] = 0.0
            for s in range(n):
                for c in range(p):
                    f[c] += k[s] * Cp[s * p + c]
            if p == 1:
                codes[j] = 1 if f[0] >= 0.0 else 0
            else:
                best_c = 0
                best = f[0]
                for c in range(1, p):
                    if f[c] > best:
                        best = f[c]
                        best_c = c
                codes[j] = best_c
            any_wrong = False
            for c in range(p):
                t = T[j, c]
                wrong = ((f[c] >= 0.0) != (t > 0.0)) or (t * f[c] < margin)
                nc[c] = t if wrong else 0.0
                any_wrong = any_wrong or wrong
            if not any_wrong:
                continue
            updates += 1
            delta = _project(Pp, ldp, k, d, n, kxx)
            if n and (delta <= eta or delta <= min_rel * kxx):
                for s in range(n):
                    for c in range(p):
                        Cp[s * p + c] += d[s] * nc[c]
                continue
            if budget > 0 and n >= budget:
                s = _remove_one(Pp, ldp, Xp, ldx, Cp, p, &s_sq[0], &kdiag[0], &ids[0], k, col,
                                row, n, &pii)
                delta = _project_without(d, col, pii, s, n, k, kxx)
                n -= 1
            _grow_inverse(Pp, ldp, d, col, n, delta)
            sq = 0.0
            for s in range(w):
                Xp[n * ldx + s] = Q[j, s]
                sq += Q[j, s] * Q[j, s]
            for s in range(w, ldx):
                Xp[n * ldx + s] = 0.0
            s_sq[n] = sq
            if sq > sq_max:
                sq_max = sq
            for c in range(p):
                Cp[n * p + c] = nc[c]
            kdiag[n] = kxx
            ids[n] = next_id
            next_id += 1
            n += 1
    return n, next_id, updates, sq_max


cdef void _weights(const double *h, const double *d2, const double *nn, const double *mn,
                   double mm, double gamma, Py_ssize_t K, double *A, double *B,
                   double *out) noexcept nogil:
    """``merge.merge_weight`` for ``K`` candidates at once (their exponentials in one
    vectorised call each); ``A`` and ``B`` keep ``a`` and ``b``."""
    cdef Py_ssize_t i
    for i in range(K):
        A[i] = (1.0 - h[i]) * (1.0 - h[i]) * d2[i]
        B[i] = h[i] * h[i] * d2[i]
    sk_scaled_exp(A, K, -gamma)
    sk_scaled_exp(B, K, -gamma)
    for i in range(K):
        out[i] = A[i] * A[i] * mm + B[i] * B[i] * nn[i] + 2.0 * A[i] * B[i] * mn[i]


cdef void _newton(double *h, const double *d2, const double *nn, const double *mn,
                  double mm, double gamma, Py_ssize_t K, double *A, double *B) noexcept nogil:
    """``merge._newton_step`` for ``K`` candidates at once."""
    cdef Py_ssize_t i
    cdef double u, a, b, da, db, dda, ddb, g, H, x
    for i in range(K):
        A[i] = (1.0 - h[i]) * (1.0 - h[i]) * d2[i]
        B[i] = h[i] * h[i] * d2[i]
    sk_scaled_exp(A, K, -gamma)
    sk_scaled_exp(B, K, -gamma)
    for i in range(K):
        u = gamma * d2[i]
        a = A[i]
        b = B[i]
        x = h[i]
        da = 2.0 * u * (1.0 - x) * a
        db = -2.0 * u * x * b
        dda = a * (4.0 * u * u * (1.0 - x) * (1.0 - x) - 2.0 * u)
        ddb = b * (4.0 * u * u * x * x - 2.0 * u)
        g = 2.0 * (a * da * mm + b * db * nn[i] + (da * b + a * db) * mn[i])
        H = 2.0 * ((da * da + a * dda) * mm + (db * db + b * ddb) * nn[i])
        H = H + 2.0 * (dda * b + 2.0 * da * db + a * ddb) * mn[i]
        if H < 0.0:
            x = x - g / H
        h[i] = min(max(x, 0.0), 1.0)


cdef void _best_h(const double *d2, const double *nn, const double *mn, double mm,
                  double gamma, Py_ssize_t K, int grid, int iters, int newton,
                  double *work, double *h_out, double *w_out) noexcept nogil:
    """``merge.best_h`` for ``K`` candidates at once, step for step: grid bracket (ties
    within ``GRID_TIE``: the smallest ``h``), golden section, Newton steps. ``work`` holds
    ``(11 + grid) K`` doubles; ``grid <= MAX_GRID``, ``iters >= 1``."""
    cdef double step = 1.0 / (grid - 1), top, Hg
    cdef Py_ssize_t i
    cdef int g, it
    cdef double *A = work
    cdef double *B = A + K
    cdef double *lo = B + K
    cdef double *hi = lo + K
    cdef double *x1 = hi + K
    cdef double *x2 = x1 + K
    cdef double *w1 = x2 + K
    cdef double *w2 = w1 + K
    cdef double *xn = w2 + K  # the new point of each bracket, its weight, which one it is
    cdef double *wn = xn + K
    cdef double *up = wn + K
    cdef double *W = up + K  # grid x K
    for g in range(grid):
        Hg = 1.0 if g == grid - 1 else g * step
        for i in range(K):
            x1[i] = Hg
        _weights(x1, d2, nn, mn, mm, gamma, K, A, B, &W[g * K])
    for i in range(K):  # best grid point (first within GRID_TIE of the top): h_out, w_out
        top = W[i]
        for g in range(1, grid):
            top = max(top, W[g * K + i])
        for g in range(grid):
            if W[g * K + i] >= top * (1.0 - GRID_TIE):
                Hg = 1.0 if g == grid - 1 else g * step
                h_out[i] = Hg
                w_out[i] = W[g * K + i]
                break
        lo[i] = max(h_out[i] - step, 0.0)
        hi[i] = min(h_out[i] + step, 1.0)
    # Golden section as merge.best_h, with the interior point that survives a step kept
    # (its weight is not evaluated again: ``merge.best_h`` recomputes it from the new
    # bracket, a rounding apart), so one weight per candidate and step; the Newton steps
    # below then meet the same optimum.
    for i in range(K):
        x1[i] = hi[i] - GOLDEN * (hi[i] - lo[i])
        x2[i] = lo[i] + GOLDEN * (hi[i] - lo[i])
    _weights(x1, d2, nn, mn, mm, gamma, K, A, B, w1)
    _weights(x2, d2, nn, mn, mm, gamma, K, A, B, w2)
    for it in range(iters - 1):
        for i in range(K):
            if w1[i] < w2[i]:
                lo[i] = x1[i]
                x1[i] = x2[i]
                w1[i] = w2[i]
                x2[i] = lo[i] + GOLDEN * (hi[i] - lo[i])
                xn[i] = x2[i]
                up[i] = 1.0
            else:
                hi[i] = x2[i]
                x2[i] = x1[i]
                w2[i] = w1[i]
                x1[i] = hi[i] - GOLDEN * (hi[i] - lo[i])
                xn[i] = x1[i]
                up[i] = 0.0
        _weights(xn, d2, nn, mn, mm, gamma, K, A, B, wn)
        for i in range(K):
            if up[i] != 0.0:
                w2[i] = wn[i]
            else:
                w1[i] = wn[i]
    for i in range(K):  # the last step narrows the bracket only
        if w1[i] < w2[i]:
            lo[i] = x1[i]
        else:
            hi[i] = x2[i]
        x1[i] = 0.5 * (lo[i] + hi[i])
    for it in range(newton):
        _newton(x1, d2, nn, mn, mm, gamma, K, A, B)
    _weights(x1, d2, nn, mn, mm, gamma, K, A, B, w1)
    for i in range(K):
        if not (w_out[i] > w1[i]):  # a grid point (e.g. an endpoint) can beat the refined one
            h_out[i] = x1[i]
            w_out[i] = w1[i]


def merge_search(
    const double[:, ::1] X,
    const double[:, ::1] C,
    const double[::1] s_sq,
    const double[::1] kdiag,
    const int64_t[::1] ids,
    Py_ssize_t n,
    double gamma,
    int grid=11,
    int iters=20,
    int newton=4,
):
    """``(m, partner, h)`` of ``merge.merge_smallest`` for the first ``n`` support rows.

    ``m`` is the vector of smallest ``||coef_m|| sqrt(k(x_m, x_m))`` (ties within 1e-12
    relative: the oldest); the partner minimises the weight degradation at the ``h`` that
    keeps most of ``||alpha_z||²`` (ties: the first slot). The nearest candidate is searched
    first; then every candidate that its lower bound does not rule out, all at once.
    """
    cdef Py_ssize_t w = X.shape[1], p = C.shape[1], i, c, m = 0, partner = -1, K
    cdef double lo = INFINITY, cost, mm = 0.0, nn, mn, dot, loss, best, best_h = 0.0
    cdef int64_t oldest
    if n < 2 or n > X.shape[0] or C.shape[0] < n or grid < 2 or grid > MAX_GRID or iters < 1:
        raise ValueError("need two support rows, a grid of 2 to 64 points, a golden step")
    buf = np.zeros((20 + grid) * n)  # 9 arrays of n, then _best_h's work
    slots = np.zeros(n, dtype=np.intp)
    cdef double[::1] bv = buf
    cdef Py_ssize_t[::1] pick = slots
    cdef double *cs = &bv[0]
    cdef double *dd = cs + n
    cdef double *NN = dd + n
    cdef double *MN = NN + n
    cdef double *pd2 = MN + n
    cdef double *pnn = pd2 + n
    cdef double *pmn = pnn + n
    cdef double *ph = pmn + n
    cdef double *pw = ph + n
    cdef double *work = pw + n
    cdef Py_ssize_t seed
    cdef double half, small, bound
    with nogil:
        for i in range(n):
            cost = 0.0
            for c in range(p):
                cost += C[i, c] * C[i, c]
            cs[i] = sqrt(cost * kdiag[i])
            if cs[i] < lo:
                lo = cs[i]
        oldest = 0
        m = -1
        for i in range(n):
            if cs[i] <= lo * (1.0 + 1e-12) and (m < 0 or ids[i] < oldest):
                m = i
                oldest = ids[i]
        for c in range(p):
            mm += C[m, c] * C[m, c]
        seed = -1
        for i in range(n):
            if i == m:
                continue
            dot = 0.0
            for c in range(w):
                dot += X[i, c] * X[m, c]
            dd[i] = max(s_sq[i] + s_sq[m] - 2.0 * dot, 0.0)
            nn = 0.0
            mn = 0.0
            for c in range(p):
                nn += C[i, c] * C[i, c]
                mn += C[i, c] * C[m, c]
            NN[i] = nn
            MN[i] = mn
            if seed < 0 or dd[i] < dd[seed]:
                seed = i
        _best_h(&dd[seed], &NN[seed], &MN[seed], mm, gamma, 1, grid, iters, newton, work,
                ph, pw)
        best = mm + NN[seed] + 2.0 * exp(-gamma * dd[seed]) * MN[seed] - pw[0]
        # Candidates far from m cannot beat the nearest one: their loss is at least
        # min(mm, nn) + 2 e^-u mn - e^-u/2 (min(mm, nn) + 2 |mn|), u = gamma d2; every
        # candidate whose bound does not exceed the nearest's loss by a margin far above
        # rounding is searched (the nearest again with them).
        K = 0
        for i in range(n):
            if i == m:
                continue
            half = exp(-0.5 * gamma * dd[i])
            small = min(mm, NN[i])
            bound = small + 2.0 * half * half * MN[i] - half * (small + 2.0 * fabs(MN[i]))
            if i != seed and bound > best + 1e-9 * (mm + NN[i]):
                continue
            pick[K] = i
            pd2[K] = dd[i]
            pnn[K] = NN[i]
            pmn[K] = MN[i]
            K += 1
        _best_h(pd2, pnn, pmn, mm, gamma, K, grid, iters, newton, work, ph, pw)
        for c in range(K):
            pd2[c] = -pd2[c]
        sk_scaled_exp(pd2, K, gamma)  # exp(-gamma d2)
        best = INFINITY
        for c in range(K):
            loss = mm + pnn[c] + 2.0 * pd2[c] * pmn[c] - pw[c]
            if loss < best:  # candidates in slot order: ties keep the first
                best = loss
                best_h = ph[c]
                partner = pick[c]
    return m, partner, best_h


def merge_apply(
    double[:, ::1] X,
    double[:, ::1] C,
    double[::1] s_sq,
    double[::1] kdiag,
    int64_t[::1] ids,
    double[:, ::1] G,
    Py_ssize_t n,
    double gamma,
):
    """``merge.merge_smallest`` in one call on the first ``n`` rows: search, merge, remove.

    The search is :func:`merge_search`'s; then ``m`` becomes ``z = h x_m + (1 - h) x_n``
    with ``alpha_z = a alpha_m + b alpha_n`` (its norm, ``k(z, z) = 1`` and, when ``G`` has
    ``n`` rows or more, its kept Gram row from exact distances), and the partner is removed
    by moving the last row into its slot, as ``SupportSet.replace`` and ``remove`` do.
    Returns ``(m, partner, h, ||z||^2)``; the caller updates the set's counters.
    """
    cdef Py_ssize_t m, partner, last = n - 1, w = X.shape[1], p = C.shape[1], i, j
    cdef double h, d2, a, b, sqz = 0.0, t
    cdef bint gram = G.shape[0] >= n and G.shape[1] >= n
    m, partner, h = merge_search(X, C, s_sq, kdiag, ids, n, gamma)
    with nogil:
        d2 = max(s_sq[m] + s_sq[partner] - 2.0 * _dot(&X[partner, 0], &X[m, 0], w), 0.0)
        a = exp(-gamma * (1.0 - h) * (1.0 - h) * d2)
        b = exp(-gamma * h * h * d2)
        for j in range(w):
            t = h * X[m, j] + (1.0 - h) * X[partner, j]
            X[m, j] = t
            sqz += t * t
        for j in range(p):
            C[m, j] = a * C[m, j] + b * C[partner, j]
        s_sq[m] = sqz
        kdiag[m] = 1.0
        if gram:
            for i in range(n):
                t = exp(-gamma * _dist2(&X[i, 0], &X[m, 0], w))
                G[m, i] = t
                G[i, m] = t
        if partner != last:
            for j in range(w):
                X[partner, j] = X[last, j]
            for j in range(p):
                C[partner, j] = C[last, j]
            kdiag[partner] = kdiag[last]
            s_sq[partner] = s_sq[last]
            ids[partner] = ids[last]
            if gram:
                for i in range(n):
                    G[partner, i] = G[last, i]
                for i in range(n):
                    G[i, partner] = G[i, last]
        for j in range(w):
            X[last, j] = 0.0
        for j in range(p):
            C[last, j] = 0.0
    return m, partner, h, sqz
