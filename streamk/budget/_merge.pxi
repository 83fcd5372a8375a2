# Merge's compiled search and merge on raw support buffers, shared by
# streamk/budget/_policies.pyx (merge_search, merge_apply, merge_run) and
# streamk/learners/_event.pyx (the per-event insert under a Merge budget).
#
# The including module declares ``sk_scaled_exp`` from ``_fastexp.h`` before including this
# file. The steps are those of ``streamk.budget.merge`` (``merge_search`` then
# ``merge_smallest``), in the same order, so the compiled paths agree with it to rounding and
# with each other to the bit. Rows are ``w`` wide (the buffer's row stride: zero padding
# included), coefficients ``p`` per row, both row-major.

from libc.math cimport INFINITY, exp, fabs, sqrt
from libc.stdint cimport int64_t

#: (sqrt(5) - 1) / 2, as :mod:`streamk.budget.merge` computes it
cdef double GOLDEN = (5.0 ** 0.5 - 1.0) / 2.0
#: ``merge.GRID_TIE``: grid weights this close (relative) are a tie
cdef double GRID_TIE = 1e-12
#: Most grid points of Merge's search (its weights live on the stack)
DEF MAX_GRID = 64
# ``merge.best_h``'s defaults, which ``Merge`` uses: grid points, golden steps, Newton steps
DEF MERGE_GRID = 11
DEF MERGE_ITERS = 20
DEF MERGE_NEWTON = 4


cdef inline Py_ssize_t _merge_work(Py_ssize_t n, int grid) noexcept nogil:
    """Doubles of scratch :func:`_merge_pick` needs for ``n`` rows."""
    return (20 + grid) * n


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


cdef void _merge_pick(const double *X, Py_ssize_t w, const double *C, Py_ssize_t p,
                      const double *s_sq, const double *kdiag, const int64_t *ids,
                      Py_ssize_t n, double gamma, int grid, int iters, int newton,
                      double *buf, Py_ssize_t *pick, Py_ssize_t *m_out,
                      Py_ssize_t *partner_out, double *h_out) noexcept nogil:
    """``merge.merge_search`` on the first ``n >= 2`` rows: ``m``, its partner and ``h``.

    ``m`` is the vector of smallest ``||coef_m|| sqrt(k(x_m, x_m))`` (ties within 1e-12
    relative: the oldest); the partner minimises the weight degradation at the ``h`` that
    keeps most of ``||alpha_z||²`` (ties: the first slot). The nearest candidate is searched
    first; then every candidate that its lower bound does not rule out, all at once.
    ``buf`` holds :func:`_merge_work` doubles, ``pick`` ``n`` slots (both scratch).
    """
    cdef Py_ssize_t i, c, m = -1, partner = -1, K, seed = -1
    cdef double lo = INFINITY, cost, mm = 0.0, nn, mn, dot, loss, best, best_h = 0.0
    cdef double half, small, bound
    cdef int64_t oldest = 0
    cdef double *cs = buf
    cdef double *dd = cs + n
    cdef double *NN = dd + n
    cdef double *MN = NN + n
    cdef double *pd2 = MN + n
    cdef double *pnn = pd2 + n
    cdef double *pmn = pnn + n
    cdef double *ph = pmn + n
    cdef double *pw = ph + n
    cdef double *work = pw + n
    for i in range(n):
        cost = 0.0
        for c in range(p):
            cost += C[i * p + c] * C[i * p + c]
        cs[i] = sqrt(cost * kdiag[i])
        if cs[i] < lo:
            lo = cs[i]
    for i in range(n):
        if cs[i] <= lo * (1.0 + 1e-12) and (m < 0 or ids[i] < oldest):
            m = i
            oldest = ids[i]
    for c in range(p):
        mm += C[m * p + c] * C[m * p + c]
    for i in range(n):
        if i == m:
            continue
        dot = 0.0
        for c in range(w):
            dot += X[i * w + c] * X[m * w + c]
        dd[i] = max(s_sq[i] + s_sq[m] - 2.0 * dot, 0.0)
        nn = 0.0
        mn = 0.0
        for c in range(p):
            nn += C[i * p + c] * C[i * p + c]
            mn += C[i * p + c] * C[m * p + c]
        NN[i] = nn
        MN[i] = mn
        if seed < 0 or dd[i] < dd[seed]:
            seed = i
    _best_h(&dd[seed], &NN[seed], &MN[seed], mm, gamma, 1, grid, iters, newton, work, ph, pw)
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
    m_out[0] = m
    partner_out[0] = partner
    h_out[0] = best_h


cdef double _merge_at(double *X, Py_ssize_t w, double *C, Py_ssize_t p, double *s_sq,
                      double *kdiag, int64_t *ids, double *G, Py_ssize_t ldg, Py_ssize_t n,
                      double gamma, Py_ssize_t m, Py_ssize_t partner,
                      double h) noexcept nogil:
    """``merge.merge_smallest``'s change of the first ``n`` rows once ``(m, partner, h)`` is
    known: ``m`` becomes ``z = h x_m + (1 - h) x_n`` with ``alpha_z = a alpha_m + b alpha_n``
    (its norm, ``k(z, z) = 1`` and, when ``G`` is not NULL, its kept Gram row from exact
    distances), and the partner is removed by moving the last row into its slot, as
    ``SupportSet.replace`` and ``remove`` do. Returns ``||z||²``; the caller updates the
    set's counters (``n - 1`` rows now)."""
    cdef Py_ssize_t last = n - 1, i, j
    cdef double d2, a, b, sqz = 0.0, t
    cdef double *xm = X + m * w
    cdef double *xn = X + partner * w
    cdef double *xl = X + last * w
    d2 = max(s_sq[m] + s_sq[partner] - 2.0 * _dot(xn, xm, w), 0.0)
    a = exp(-gamma * (1.0 - h) * (1.0 - h) * d2)
    b = exp(-gamma * h * h * d2)
    for j in range(w):
        t = h * xm[j] + (1.0 - h) * xn[j]
        xm[j] = t
        sqz += t * t
    for j in range(p):
        C[m * p + j] = a * C[m * p + j] + b * C[partner * p + j]
    s_sq[m] = sqz
    kdiag[m] = 1.0
    if G != NULL:
        for i in range(n):
            t = exp(-gamma * _dist2(X + i * w, xm, w))
            G[m * ldg + i] = t
            G[i * ldg + m] = t
    if partner != last:
        for j in range(w):
            xn[j] = xl[j]
        for j in range(p):
            C[partner * p + j] = C[last * p + j]
        kdiag[partner] = kdiag[last]
        s_sq[partner] = s_sq[last]
        ids[partner] = ids[last]
        if G != NULL:
            for i in range(n):
                G[partner * ldg + i] = G[last * ldg + i]
            for i in range(n):
                G[i * ldg + partner] = G[i * ldg + last]
    for j in range(w):
        xl[j] = 0.0
    for j in range(p):
        C[last * p + j] = 0.0
    return sqz
