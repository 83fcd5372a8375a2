# Merge's compiled search and merge on raw support buffers, shared by
# streamk/budget/_policies.pyx (merge_search, merge_apply, merge_run) and
# streamk/learners/_event.pyx (the per-event insert under a Merge budget).
#
# The including module declares ``sk_scaled_exp`` and ``sk_dots`` from ``_fastexp.h`` before
# including this file. The steps are those of ``streamk.budget.merge`` (``merge_search`` then
# ``merge_smallest``), in the same order, so the compiled paths agree with it to rounding and
# with each other to the bit. Rows are ``w`` wide (the buffer's row stride: zero padding
# included), coefficients ``p`` per row, both row-major.

from libc.math cimport INFINITY, exp, fabs, sqrt
from libc.stdint cimport int64_t

#: ``merge.GRID_TIE``: grid weights this close (relative) are a tie
cdef double GRID_TIE = 1e-12
#: ``merge.STEP_TOL``: an accepted Newton step this short ends a candidate's search
cdef double STEP_TOL = 1e-8
#: ``merge.FLAT_SLOPE``: a slope this small (relative) at a non-concave grid point is zero
cdef double FLAT_SLOPE = 1e-10
#: Most grid points of Merge's search
DEF MAX_GRID = 64
# ``merge.best_h``'s defaults, which ``Merge`` uses: grid points, most refining steps
DEF MERGE_GRID = 11
DEF MERGE_STEPS = 40


cdef struct _Search:
    # Merge's search state for up to ``cap`` candidates (``merge.best_h``'s arrays)
    Py_ssize_t cap
    double *u      # gamma d2
    double *nn     # ||alpha_n||²
    double *mn     # alpha_m · alpha_n
    double *half   # exp(-u / 2) (for the pruning bound)
    double *x      # the current point, its a, b and weight
    double *a
    double *b
    double *w
    double *lo     # the bracket
    double *hi
    double *g      # the weight's slope and curvature at x
    double *H
    double *xg     # the best grid point and its weight
    double *wg
    double *top    # the largest grid weight
    double *flat   # 1: every grid weight is within GRID_TIE of the top (nothing to refine)
    double *e1     # scratch of the vectorised exponentials (``2 cap``: ``e2`` follows it)
    double *e2
    double *B      # exp(-u h_j²): ``grid`` rows of ``ldb``
    double *W      # the grid weights: ``grid`` rows of ``ldb``
    Py_ssize_t ldb   # the row stride of ``B`` and ``W``: the last grid pass's candidates
    Py_ssize_t *act  # the candidates still searching


cdef inline Py_ssize_t _index_doubles(Py_ssize_t n) noexcept nogil:
    """Doubles that hold ``n`` ``Py_ssize_t`` (the list of candidates still searching)."""
    cdef Py_ssize_t d = sizeof(double)
    return (n * <Py_ssize_t>sizeof(Py_ssize_t) + d - 1) // d


cdef inline Py_ssize_t _merge_work(Py_ssize_t n, int grid) noexcept nogil:
    """Doubles of scratch :func:`_merge_pick` needs for ``n`` rows."""
    return (26 + 2 * grid) * n + _index_doubles(n)


cdef _Search _search_in(double *work, Py_ssize_t cap, int grid) noexcept nogil:
    """The search state for ``cap`` candidates carved from ``work`` (``(18 + 2 grid) cap``
    doubles, then the index list)."""
    cdef _Search s
    s.cap = cap
    s.ldb = cap
    s.u = work
    s.nn = s.u + cap
    s.mn = s.nn + cap
    s.half = s.mn + cap
    s.x = s.half + cap
    s.a = s.x + cap
    s.b = s.a + cap
    s.w = s.b + cap
    s.lo = s.w + cap
    s.hi = s.lo + cap
    s.g = s.hi + cap
    s.H = s.g + cap
    s.xg = s.H + cap
    s.wg = s.xg + cap
    s.top = s.wg + cap
    s.flat = s.top + cap
    s.e1 = s.flat + cap
    s.e2 = s.e1 + cap
    s.B = s.e2 + cap
    s.W = s.B + grid * cap
    s.act = <Py_ssize_t *>(s.W + grid * cap)
    return s


cdef inline void _slopes(double x, double u, double a, double b, double mm, double nn,
                         double mn, double *g, double *H, double *S) noexcept nogil:
    """``merge._slopes``: the weight's slope ``g`` and curvature ``H`` in ``h`` at ``x``, and
    ``S`` bounding ``|g|``'s terms."""
    cdef double da = 2.0 * u * (1.0 - x) * a
    cdef double db = -2.0 * u * x * b
    cdef double dda = a * (4.0 * u * u * (1.0 - x) * (1.0 - x) - 2.0 * u)
    cdef double ddb = b * (4.0 * u * u * x * x - 2.0 * u)
    g[0] = 2.0 * (a * da * mm + b * db * nn + (da * b + a * db) * mn)
    H[0] = 2.0 * ((da * da + a * dda) * mm + (db * db + b * ddb) * nn)
    H[0] = H[0] + 2.0 * (dda * b + 2.0 * da * db + a * ddb) * mn
    S[0] = 4.0 * u * (a * a * mm + b * b * nn + a * b * fabs(mn))


cdef void _grid_pass(_Search *s, Py_ssize_t K, int grid, double mm) noexcept nogil:
    """``merge.best_h``'s grid for candidates ``0..K-1`` (``u``, ``nn``, ``mn`` set): ``B``
    (one exponential a point: ``a`` at ``h_j`` is ``b`` at ``h_{grid-1-j}``), the weights,
    the best point (ties within ``GRID_TIE``: the smallest ``h``) with its bracket, and
    whether the grid is flat. The slopes wait for :func:`_grid_slopes`: the grid's bound
    leaves few candidates to refine. ``B`` and ``W`` have rows of ``K`` (``s.ldb``), so
    that the exponentials are one call (a call per grid point costs more than its
    exponentials where few candidates are left, e.g. the nearest alone)."""
    cdef Py_ssize_t i, cap = max(K, 1)
    cdef int j
    cdef double Hg, step = 1.0 / (grid - 1), A, Bv, top, low
    s.ldb = cap
    for j in range(grid):
        Hg = <double>j / (grid - 1)
        for i in range(K):
            s.B[j * cap + i] = s.u[i] * (Hg * Hg)
    sk_scaled_exp(s.B, grid * K, -1.0)
    for j in range(grid):
        for i in range(K):
            A = s.B[(grid - 1 - j) * cap + i]
            Bv = s.B[j * cap + i]
            s.W[j * cap + i] = A * A * mm + Bv * Bv * s.nn[i] + 2.0 * A * Bv * s.mn[i]
    for i in range(K):
        top = s.W[i]
        low = s.W[i]
        for j in range(1, grid):
            top = max(top, s.W[j * cap + i])
            low = min(low, s.W[j * cap + i])
        s.top[i] = top
        s.flat[i] = 1.0 if low >= top * (1.0 - GRID_TIE) else 0.0
        for j in range(grid):
            if s.W[j * cap + i] >= top * (1.0 - GRID_TIE):
                break
        s.x[i] = <double>j / (grid - 1)
        s.a[i] = s.B[(grid - 1 - j) * cap + i]
        s.b[i] = s.B[j * cap + i]
        s.w[i] = s.W[j * cap + i]
        s.xg[i] = s.x[i]
        s.wg[i] = s.w[i]
        s.lo[i] = max(s.x[i] - step, 0.0)
        s.hi[i] = min(s.x[i] + step, 1.0)


cdef inline void _grid_slopes(_Search *s, Py_ssize_t i, double mm) noexcept nogil:
    """The slope and curvature at candidate ``i``'s grid point, before :func:`_refine`
    (a rounding slope where the weight is not concave counts as downhill)."""
    cdef double S
    _slopes(s.x[i], s.u[i], s.a[i], s.b[i], mm, s.nn[i], s.mn[i], &s.g[i], &s.H[i], &S)
    if s.H[i] >= 0.0 and fabs(s.g[i]) <= FLAT_SLOPE * S:
        s.g[i] = -1.0


cdef void _refine(_Search *s, Py_ssize_t K, int steps, double mm) noexcept nogil:
    """``merge.best_h``'s safeguarded Newton search from the grid points for the ``K``
    candidates listed in ``s.act`` (the list is used up): the slope's sign moves an end of
    the bracket to the point, a Newton step that is not concave or leaves the bracket
    becomes a bisection, and a candidate stops when its point does not move or after an
    accepted Newton step under ``STEP_TOL`` (its new point evaluated). The exponentials of
    the points that moved are one vectorised call a step; ``x`` and ``w`` hold the result."""
    cdef Py_ssize_t i, k, moved, live
    cdef int it
    cdef double x, xn, S
    cdef bint ok
    for it in range(steps):
        moved = 0
        for k in range(K):
            i = s.act[k]
            x = s.x[i]
            if s.g[i] > 0.0:
                s.lo[i] = x
            elif s.g[i] < 0.0:
                s.hi[i] = x
            ok = False
            if s.H[i] < 0.0:
                xn = x - s.g[i] / s.H[i]
                ok = xn >= s.lo[i] and xn <= s.hi[i]
            if not ok:
                xn = 0.5 * (s.lo[i] + s.hi[i])
            if xn == x:
                continue
            s.x[i] = xn
            s.g[i] = 1.0 if ok and fabs(xn - x) <= STEP_TOL else 0.0  # 1: its last step
            # a's and b's exponents side by side (``e1`` and ``e2`` are one buffer): one call
            s.e1[2 * moved] = s.u[i] * ((1.0 - xn) * (1.0 - xn))
            s.e1[2 * moved + 1] = s.u[i] * (xn * xn)
            s.act[moved] = i
            moved += 1
        if moved == 0:
            return
        sk_scaled_exp(s.e1, 2 * moved, -1.0)
        live = 0
        for k in range(moved):
            i = s.act[k]
            s.a[i] = s.e1[2 * k]
            s.b[i] = s.e1[2 * k + 1]
            s.w[i] = (s.a[i] * s.a[i] * mm + s.b[i] * s.b[i] * s.nn[i]
                      + 2.0 * s.a[i] * s.b[i] * s.mn[i])
            if s.g[i] != 0.0:
                continue
            _slopes(s.x[i], s.u[i], s.a[i], s.b[i], mm, s.nn[i], s.mn[i], &s.g[i], &s.H[i], &S)
            s.act[live] = i
            live += 1
        K = live
        if K == 0:
            return


cdef inline void _finish(_Search *s, Py_ssize_t i) noexcept nogil:
    """``merge.best_h``'s last step for candidate ``i``: a grid point (e.g. an endpoint) can
    beat the refined one."""
    if s.wg[i] > s.w[i]:
        s.x[i] = s.xg[i]
        s.w[i] = s.wg[i]


cdef void _best_h(_Search *s, Py_ssize_t K, int grid, int steps, double mm) noexcept nogil:
    """``merge.best_h`` for candidates ``0..K-1`` (``u``, ``nn``, ``mn`` set), step for step;
    the results in ``s.x`` and ``s.w``. ``2 <= grid <= MAX_GRID``."""
    cdef Py_ssize_t i, L = 0
    _grid_pass(s, K, grid, mm)
    for i in range(K):
        if s.flat[i] == 0.0:
            _grid_slopes(s, i, mm)
            s.act[L] = i
            L += 1
    _refine(s, L, steps, mm)
    for i in range(K):
        _finish(s, i)



# The polygon bound on a candidate's loss (what rules most candidates out before the grid),
# in C so that the pass over every candidate runs on the widest SIMD lanes (the bounds only
# prune, so the clones' different roundings cannot change a pick).
cdef extern from * nogil:
    """
    /* Kept weight a² mm + b² nn + 2ab mn at (a, b) = (k(x_m, z), k(x_n, z)). */
    static inline double skm_w(double a, double b, double mm, double nn, double mn)
    {
        return a * a * mm + b * b * nn + 2.0 * a * b * mn;
    }

    static inline double skm_max(double x, double y) { return x > y ? x : y; }

    /* x², flushed to 0 below 1e-300: a product that falls into the subnormals costs a
     * hundred cycles (a far candidate's powers of r would), and a bound 1e-300 off is as
     * good. */
    static inline double skm_sq(double x) { x = x < 1e-150 ? 0.0 : x; return x * x; }

    /* x y, flushed to 0 as skm_sq's */
    static inline double skm_mul(double x, double y)
    {
        return (x < 1e-150 ? 0.0 : x) * (y < 1e-150 ? 0.0 : y);
    }

    /* One piece of the arc h in [h0, h1] of (a(h), b(h)), its curvature of one sign there.
     * The weight is convex in (a, b) (mn² <= mm nn), so its largest value on a polygon
     * holding the piece is at a vertex, and the piece lies in the triangle of its chord and
     * the tangents at its ends (tangent ((1-h) a, -h b): it turns < 90°): skm_piece_top
     * gives the weight where the tangents meet, P0 + l t0 with l = num / det. Where they
     * do not meet ahead of P0 and behind P1 (a far candidate's a flushed to 0), or the
     * piece is too short for their meeting point to be more than rounding (its ends
     * computed two ways), or det is too small for the product of four (one division serves
     * the four pieces: the divider is the pass's slowest unit), the box a <= a1, b <= b0
     * (a rises and b falls in h; ab rises on [0, 1/2], so ab >= a0 b0 bounds the term of an
     * mn < 0). */
    typedef struct { double a0, b0, ta0, tb0, ta1, tb1, dx, dy, det, box, ok; } skm_piece;

    static inline skm_piece skm_piece_at(double h0, double a0, double b0, double h1, double a1,
                                         double b1, double mm, double nn, double mn)
    {
        skm_piece p;
        p.a0 = a0;
        p.b0 = b0;
        p.ta0 = (1.0 - h0) * a0;
        p.tb0 = -h0 * b0;
        p.ta1 = (1.0 - h1) * a1;
        p.tb1 = -h1 * b1;
        p.dx = a1 - a0;
        p.dy = b1 - b0;
        p.det = p.ta1 * p.tb0 - p.ta0 * p.tb1;
        p.box = a1 * a1 * mm + b0 * b0 * nn + 2.0 * (mn > 0.0 ? a1 : a0) * b0 * mn;
        p.ok = h1 - h0 > 1e-6 ? (fabs(p.det) > 1e-70 ? 1.0 : 0.0) : 0.0;
        p.det = p.ok != 0.0 ? p.det : 1.0;  /* |det| <= 2: the product stays a double */
        return p;
    }

    /* The bound on piece p's weight, inv = 1 / p.det. */
    static inline double skm_piece_top(skm_piece p, double inv, double mm, double nn,
                                       double mn)
    {
        double l = (p.ta1 * p.dy - p.tb1 * p.dx) * inv, k = (p.ta0 * p.dy - p.tb0 * p.dx) * inv;
        double tri = skm_w(p.a0 + l * p.ta0, p.b0 + l * p.tb0, mm, nn, mn);
        l = p.ok != 0.0 ? l : -1.0;
        return (l >= 0.0) & (k <= 0.0) ? tri : p.box;
    }

    /* sqrt(t) for 0 <= t < 1 without libm's sqrt, whose errno branch keeps the loop off
     * the SIMD lanes: 1/sqrt(t) from the exponent halved in the bits (3.5% off), four
     * Newton steps (the error squares each: rounding after them), times t. */
    static inline double skm_sqrt(double t)
    {
        uint64_t bits;
        double y;
        memcpy(&bits, &t, sizeof bits);
        bits = 0x5FE6EB50C7B537A9ULL - (bits >> 1);
        memcpy(&y, &bits, sizeof y);
        y = y * (1.5 - 0.5 * t * y * y);
        y = y * (1.5 - 0.5 * t * y * y);
        y = y * (1.5 - 0.5 * t * y * y);
        y = y * (1.5 - 0.5 * t * y * y);
        return t * y;
    }

    /* lb[i]: a lower bound on candidate i's loss, half[i] = exp(-u_i / 2). With mm <= nn,
     * W(h) - W(1-h) = (a² - b²)(mm - nn) <= 0 for h >= 1/2, so the best weight is on
     * [0, 1/2]; there the arc's curvature has the sign of 2u h(1-h) - 1, so cut at its
     * root hx = (1 - sqrt(1 - 2/u)) / 2 (u > 2; 1/2 for u <= 2: an empty last piece) and
     * at h = 1/8, 1/4 its pieces keep theirs (a, b = r^(64 (1-h)²), r^(64 h²) with
     * r = exp(-u/64): squarings). Where nn < mm, the box bound over both halves:
     * min(mm, nn) + 2 e^-u mn - e^-u/2 (min(mm, nn) + 2 |mn|). The max(u, 2) and the
     * |t| below are arithmetic, not selects: GCC would otherwise run the sqrt's Newton
     * steps on the unselected 1 - 2/u < 0 in every lane (subnormal assists). A cut off
     * the root by rounding (1e-8 in h at worst, near u = 2) leaves an arc piece of the
     * other curvature so short that it strays from its triangle by ~1e-24. */
    SK_EXP_CLONES static void skm_bounds(const double *u, const double *nn, const double *mn,
                                         double mm, Py_ssize_t n, double *lb, double *half)
    {
        for (Py_ssize_t i = 0; i < n; i++) {
            double ui = u[i], N = nn[i], M = mn[i];
            double v = 0.5 * (ui + 2.0 + fabs(ui - 2.0));
            double hx = 0.5 - 0.5 * skm_sqrt(fabs(1.0 - 2.0 / v));
            double r = sk_exp(ui * (-1.0 / 64.0)), r4, r16, r32, k, q1a, q2a;
            double ax = sk_exp(-ui * ((1.0 - hx) * (1.0 - hx))), bx = sk_exp(-ui * (hx * hx));
            double h1, a1, b1, h2, a2, b2, h3, a3, b3, top, small, d12, d34, inv;
            skm_piece p1, p2, p3, p4;
            r4 = skm_sq(skm_sq(r));
            r16 = skm_sq(skm_sq(r4));
            r32 = skm_sq(r16);
            k = skm_sq(r32);  /* exp(-u) */
            q1a = skm_mul(skm_mul(r32, r16), r);  /* a at h = 1/8 (b = r) */
            q2a = skm_mul(r32, r4);  /* a at h = 1/4 (b = r4) */
            /* the cuts in order: 1/8, 1/4 and hx */
            h1 = hx < 0.125 ? hx : 0.125;
            a1 = hx < 0.125 ? ax : q1a;
            b1 = hx < 0.125 ? bx : r;
            h2 = hx < 0.125 ? 0.125 : (hx < 0.25 ? hx : 0.25);
            a2 = hx < 0.125 ? q1a : (hx < 0.25 ? ax : q2a);
            b2 = hx < 0.125 ? r : (hx < 0.25 ? bx : r4);
            h3 = hx < 0.25 ? 0.25 : hx;
            a3 = hx < 0.25 ? q2a : ax;
            b3 = hx < 0.25 ? r4 : bx;
            /* the weights at the cuts, then at the triangles' third vertices */
            top = skm_max(skm_max(skm_w(k, 1.0, mm, N, M), skm_w(a1, b1, mm, N, M)),
                          skm_max(skm_w(a2, b2, mm, N, M), skm_w(a3, b3, mm, N, M)));
            top = skm_max(top, skm_w(r16, r16, mm, N, M));
            p1 = skm_piece_at(0.0, k, 1.0, h1, a1, b1, mm, N, M);
            p2 = skm_piece_at(h1, a1, b1, h2, a2, b2, mm, N, M);
            p3 = skm_piece_at(h2, a2, b2, h3, a3, b3, mm, N, M);
            p4 = skm_piece_at(h3, a3, b3, 0.5, r16, r16, mm, N, M);
            d12 = p1.det * p2.det;
            d34 = p3.det * p4.det;
            inv = 1.0 / (d12 * d34);
            top = skm_max(top, skm_max(skm_piece_top(p1, inv * p2.det * d34, mm, N, M),
                                       skm_piece_top(p2, inv * p1.det * d34, mm, N, M)));
            top = skm_max(top, skm_max(skm_piece_top(p3, inv * d12 * p4.det, mm, N, M),
                                       skm_piece_top(p4, inv * d12 * p3.det, mm, N, M)));
            small = N < mm ? N : mm;
            lb[i] = mm <= N ? mm + N + 2.0 * k * M - top
                            : small + 2.0 * k * M - r32 * (small + 2.0 * fabs(M));
            half[i] = r32;
        }
    }
    """
    void skm_bounds(const double *u, const double *nn, const double *mn, double mm,
                    Py_ssize_t n, double *lb, double *half)


cdef extern from "_dense.h" nogil:
    double skm_costs(const double *C, Py_ssize_t p, const double *kdiag, Py_ssize_t n,
                     double *nn, double *cs)
    Py_ssize_t skm_partners(double *dd, const double *sq, const double *C, Py_ssize_t p,
                            Py_ssize_t n, Py_ssize_t m, double gamma, double *mn, double *u)
    Py_ssize_t skm_smallest(const double *cs, const int64_t *ids, Py_ssize_t n, double lo)
    Py_ssize_t skm_keep(const double *lb, Py_ssize_t J, Py_ssize_t seed, Py_ssize_t m, double mm,
                        double best, const Py_ssize_t *frm, Py_ssize_t *pick, const double *cu,
                        const double *cn, const double *cmn, const double *chalf, double *u,
                        double *nn, double *mn, double *half)
    enum: SKM_REACH_N
    const double skm_reach[]
    int skm_reach_at(double mm, double best, double *reach)
    Py_ssize_t skm_gather(const double *u, const double *nn, const double *mn, double mm,
                          const double *reach, Py_ssize_t n, Py_ssize_t m, Py_ssize_t seed,
                          double *flag, Py_ssize_t *pick, double *cu, double *cn, double *cmn)


cdef inline void _loss_bounds(const double *u, const double *nn, const double *mn, double mm,
                              Py_ssize_t n, double *lb, double *half) noexcept nogil:
    """:c:func:`skm_bounds` for ``n`` candidates (``u = gamma d2``): lower bounds on their
    losses in ``lb``, ``exp(-u / 2)`` in ``half``."""
    skm_bounds(u, nn, mn, mm, n, lb, half)


cdef void _merge_pick(const double *X, Py_ssize_t w, const double *C, Py_ssize_t p,
                      const double *s_sq, const double *kdiag, const int64_t *ids,
                      Py_ssize_t n, double gamma, int grid, int steps,
                      double *buf, Py_ssize_t *pick, Py_ssize_t *m_out,
                      Py_ssize_t *partner_out, double *h_out,
                      const double *last_dots=NULL) noexcept nogil:
    """``merge.merge_search`` on the first ``n >= 2`` rows: ``m``, its partner and ``h``.

    ``m`` is the vector of smallest ``||coef_m|| sqrt(k(x_m, x_m))`` (ties within 1e-12
    relative: the oldest); the partner minimises the weight degradation at the ``h`` that
    keeps most of ``||alpha_z||²`` (ties: the first slot). The nearest candidate is searched
    first; every candidate within the reach of its loss (a distance beyond which no partner
    loses less) and that a closed-form lower bound on its loss does not rule out gets the
    grid, and those the grid's bound does not rule out the Newton search, all at once. A
    candidate is ruled out only when its bound exceeds a loss some candidate reaches by a
    margin far above rounding, so the pick is the full search's.
    ``buf`` holds :func:`_merge_work` doubles, ``pick`` ``n`` slots (both scratch).
    ``last_dots``: the dots of row ``n - 1`` (just appended) with the rows before it, if
    known (the per-event core's decision computed them), used where it is ``m``.
    """
    cdef Py_ssize_t i, j, k, m = -1, partner = -1, J, K, L, kept, seed
    cdef double lo, mm, loss, best, best_h = 0.0
    cdef double bound, d2h, c2, ub
    cdef double reach[4]
    cdef double *cs = buf
    cdef double *dd = cs + n
    cdef double *NN = dd + n
    cdef double *MN = NN + n
    cdef double *el = MN + n  # the gathered rows' loss bounds, then exp(-u) of those with a grid
    cdef double *sv = el + n  # 1: the candidate is searched
    cdef double *us = sv + n  # u = gamma d2 of every row
    cdef double *hf = us + n  # exp(-u / 2) of the rows bounded
    cdef _Search s = _search_in(hf + n, n, grid)
    # The costs squared (no square root a row): sqrt is monotone, so the smallest cost is
    # the root of the smallest square, and only rows within 3e-12 of it in squares can be
    # within 1e-12 of it in costs (the roots decide those). Every row's ||coef_i||² comes
    # with its cost (the partners' nn).
    lo = skm_costs(C, p, kdiag, n, NN, cs)
    m = skm_smallest(cs, ids, n, lo)
    mm = NN[m]
    if last_dots != NULL and m == n - 1:  # m is the row just appended: the dots its
        # decision computed (sk_dots's bits whichever operand is the query), and its own
        for i in range(m):
            dd[i] = last_dots[i]
        sk_dots(dd + m, &X[m * w], w, 1, &X[m * w], w)
    else:
        sk_dots(dd, X, w, n, &X[m * w], w)  # every row's x_i · x_m (SIMD across rows)
    # the squared distances, mn and u = gamma d2 of every row, and the nearest
    seed = skm_partners(dd, s_sq, C, p, n, m, gamma, MN, us)
    s.u[0] = us[seed]
    s.nn[0] = NN[seed]
    s.mn[0] = MN[seed]
    _best_h(&s, 1, grid, steps, mm)
    best = mm + NN[seed] + 2.0 * exp(-gamma * dd[seed]) * MN[seed] - s.w[0]
    # Candidates whose loss provably exceeds the nearest's by a margin far above rounding
    # are ruled out; those left get the grid (the nearest again with them). First by
    # distance (:c:func:`skm_reach_at`: beyond the reach of best no partner but one far
    # heavier than m loses less, whatever its coefficients: a few compares a row leave the
    # few near m), then by :c:func:`skm_bounds` on the rows left (gathered with their u, nn,
    # mn into cs, dd and sv, free by now). Where the reach rules nothing out (best about mm
    # or more), skm_bounds takes every row where it is (m's bound is finite: u = 0) and m is
    # left out after it.
    if skm_reach_at(mm, best, reach):
        J = skm_gather(us, NN, MN, mm, reach, n, m, seed, el, pick, cs, dd, sv)
        _loss_bounds(cs, dd, sv, mm, J, el, hf)
        K = skm_keep(el, J, seed, m, mm, best, pick, pick, cs, dd, sv, hf,
                     s.u, s.nn, s.mn, s.half)
    else:
        _loss_bounds(us, NN, MN, mm, n, el, hf)
        K = skm_keep(el, n, seed, m, mm, best, NULL, pick, us, NN, MN, hf,
                     s.u, s.nn, s.mn, s.half)
    _grid_pass(&s, K, grid, mm)
    # The grid bounds a candidate's best weight f*: on [0, 1], -f'' <= 4u f* + 12u mn- e^-u/2
    # (mn- = max(-mn, 0)), and f* is at an endpoint (a grid point) or a stationary point
    # within d = step/2 of one, so f* (1 - 2u d²) <= top + 6u d² mn- e^-u/2. A grid weight
    # is one the search keeps, so the grid's losses bound the best loss too.
    d2h = 0.125 / ((grid - 1.0) * (grid - 1.0))  # d² / 2
    for k in range(K):
        el[k] = s.B[(grid - 1) * s.ldb + k]  # exp(-u): k(x_m, x_n)
        best = min(best, mm + s.nn[k] + 2.0 * el[k] * s.mn[k] - s.top[k])
    L = 0
    kept = 0
    for k in range(K):
        sv[k] = 1.0
        kept += 1
        if s.flat[k] != 0.0:
            continue
        c2 = 4.0 * s.u[k] * d2h
        if c2 < 1.0:
            ub = (s.top[k] + 12.0 * s.u[k] * d2h * max(-s.mn[k], 0.0) * s.half[k]) / (1.0 - c2)
            bound = mm + s.nn[k] + 2.0 * el[k] * s.mn[k] - ub
            if bound > best + 1e-9 * (mm + s.nn[k]):
                sv[k] = 0.0
                kept -= 1
                continue
        _grid_slopes(&s, k, mm)
        s.act[L] = k
        L += 1
    if kept == 0:  # (the best is never ruled out but for rounding far beyond the margin)
        for k in range(K):
            sv[k] = 1.0
            _grid_slopes(&s, k, mm)
            s.act[L] = k
            L += 1
    _refine(&s, L, steps, mm)
    best = INFINITY
    for k in range(K):  # candidates in slot order: ties keep the first
        if sv[k] == 0.0:
            continue
        _finish(&s, k)
        loss = mm + s.nn[k] + 2.0 * el[k] * s.mn[k] - s.w[k]
        if loss < best:
            best = loss
            best_h = s.x[k]
            partner = pick[k]
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
