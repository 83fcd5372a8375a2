# The Projectron's compiled steps on ``P = K(S, S)^-1``, shared by
# streamk/budget/_policies.pyx and streamk/learners/_event.pyx through Cython's ``include``
# (textual: each module gets its own copy of the C, so neither imports the other), as
# streamk/_kcol.pxi is. The including module cimports INFINITY (libc.math), int64_t
# (libc.stdint) and memset (libc.string), declares ``sk_dots``, ``sk_scaled_exp``
# (streamk/_fastexp.h) and ``sk_gram_args``, and finds streamk/_dense.h on its include path. :mod:`streamk.budget.projectron`
# is the reference: the same steps in the same order, so the two agree to rounding. The
# O(n²) loops on ``P`` are C in streamk/_dense.h (AVX2 clones without FMA: the same bits
# on every machine); the removal's downdate and the growth that follows it are one pass,
# which :func:`_shrink_defer` leaves to the next :func:`_project_pending` (one pass for both).
# These steps read and write only ``P``'s lower triangle (``P`` is symmetric): half the
# memory; :meth:`Projectron._mirror` mirrors it before Python reads ``P``.


cdef extern from "_dense.h" nogil:
    double sk_pjl_project(const double *P, Py_ssize_t ldp, const double *k, double *d,
                          double *u, Py_ssize_t n, double kxx)
    double sk_pj_error(const double *k, const double *d, Py_ssize_t m, double kxx)
    Py_ssize_t sk_pjl_pick(const double *P, Py_ssize_t ldp, const double *coef, Py_ssize_t p,
                           double *col, double *row, Py_ssize_t n)
    void sk_pjl_grow(double *P, Py_ssize_t ldp, const double *d, double *g, Py_ssize_t n,
                     double delta)
    void sk_pjl_shrink_grow(double *P, Py_ssize_t ldp, Py_ssize_t n, Py_ssize_t i,
                            const double *col, double *row, const double *d, double *pend,
                            double *cm, double delta)
    void sk_pjl_shrink_defer(double *P, Py_ssize_t ldp, Py_ssize_t n, Py_ssize_t i,
                             const double *col, double *row, const double *d, double *pend,
                             double *cm, double delta)
    void sk_pjl_settle(double *P, Py_ssize_t ldp, const double *pend, Py_ssize_t m)
    void sk_pjl_grow_defer(double *P, Py_ssize_t ldp, const double *d, Py_ssize_t n,
                           double delta, double *pend)
    double sk_pjl_project_pending(double *P, Py_ssize_t ldp, const double *k, double *d,
                                  double *u, Py_ssize_t n, double kxx, const double *pend,
                                  Py_ssize_t m)
    int sk_pjl_inverse(const double *G, Py_ssize_t n, double *P, Py_ssize_t ldp, double *L,
                       double *M, double *t, double *lanes, double min_rel, int mirror)


cdef Py_ssize_t _pick(const double *P, Py_ssize_t ldp, const double *coef, Py_ssize_t p,
                      double *k, double *col, double *row, Py_ssize_t n,
                      double *pii_out) noexcept nogil:
    """The choice of ``Projectron._remove_one``: ``i = argmin ||coef_i||² / P_ii``, with
    ``col = P[:, i]``, ``row = P[i, :] / P_ii`` (from the lower triangle; ``sk_pjl_pick``)
    and ``pii_out = P_ii`` (what the downdate and the coefficient projection need; ``P``
    itself is left for :func:`_shrink_grow`), and ``k``'s last entry moved into ``i`` (as
    ``without_slot`` does). Returns ``i``."""
    cdef Py_ssize_t i = sk_pjl_pick(P, ldp, coef, p, col, row, n)
    pii_out[0] = P[i * ldp + i]
    k[i] = k[n - 1]
    return i


cdef Py_ssize_t _remove_one(const double *P, Py_ssize_t ldp, double *X, Py_ssize_t ldx,
                            double *coef, Py_ssize_t p, double *s_sq, double *kdiag,
                            int64_t *ids, double *k, double *col, double *row,
                            Py_ssize_t n, double *pii_out) noexcept nogil:
    """``Projectron._remove_one`` on the support buffers but ``P``: :func:`_pick`, coefficient
    ``i`` projected onto the others, then ``SupportSet.remove(i)``. Returns ``i``
    (``col``, ``row`` and ``pii_out`` as :func:`_pick` leaves them, for
    :func:`_shrink_grow`)."""
    cdef Py_ssize_t i, a, c, last = n - 1
    cdef double pii
    i = _pick(P, ldp, coef, p, k, col, row, n, &pii)
    pii_out[0] = pii
    for a in range(n):  # coef -= outer(P[:, i] / P_ii, coef_i), row i unchanged
        if a != i:  # (row[a] is _pick's col[a] / P_ii: the same division, made once)
            for c in range(p):
                coef[a * p + c] += -row[a] * coef[i * p + c]
    if i != last:  # SupportSet.remove
        for a in range(ldx):
            X[i * ldx + a] = X[last * ldx + a]
        for c in range(p):
            coef[i * p + c] = coef[last * p + c]
        kdiag[i] = kdiag[last]
        s_sq[i] = s_sq[last]
        ids[i] = ids[last]
    for a in range(ldx):
        X[last * ldx + a] = 0.0
    for c in range(p):
        coef[last * p + c] = 0.0
    return i


cdef inline void _grow_inverse(double *P, Py_ssize_t ldp, const double *d, double *g,
                               Py_ssize_t n, double delta) noexcept nogil:
    """Block-inverse growth of ``P`` by one row and column (``Projectron._append``); ``g``
    (``n`` entries) is scratch."""
    sk_pjl_grow(P, ldp, d, g, n, delta)


cdef inline void _grow_defer(double *P, Py_ssize_t ldp, const double *d, Py_ssize_t n,
                             double delta, double *pend) noexcept nogil:
    """:func:`_grow_inverse` but its pass over ``P``: the new row and corner are written, and
    the rows below ``n`` want the rank-one update that ``pend`` (``4 n`` entries) takes in
    :func:`_shrink_defer`'s form (the same bits), for :func:`_project_pending` or
    :func:`_settle`."""
    sk_pjl_grow_defer(P, ldp, d, n, delta, pend)


cdef inline void _shrink_grow(double *P, Py_ssize_t ldp, Py_ssize_t n, Py_ssize_t i,
                              const double *col, double *row, const double *d, double *pend,
                              double *cm, double delta) noexcept nogil:
    """``Projectron._remove_one``'s downdate of ``P`` (``n`` rows, slot ``i`` leaving; ``col``
    and ``row`` from :func:`_pick`, ``row`` then changed) and ``_append``'s growth by ``d``
    and ``delta`` (from :func:`_project_without`), in one pass over ``P``; ``pend``
    (``4 n`` entries) and ``cm`` (``n``) are scratch."""
    sk_pjl_shrink_grow(P, ldp, n, i, col, row, d, pend, cm, delta)


cdef inline void _shrink_defer(double *P, Py_ssize_t ldp, Py_ssize_t n, Py_ssize_t i,
                               const double *col, double *row, const double *d, double *pend,
                               double *cm, double delta) noexcept nogil:
    """:func:`_shrink_grow` but its pass over ``P``: the O(n) moves are done, and the rows
    below ``n - 1`` still want the rank-two update whose four vectors (``n - 1`` entries
    each) ``pend`` takes; :func:`_project_pending` or :func:`_settle` applies it."""
    sk_pjl_shrink_defer(P, ldp, n, i, col, row, d, pend, cm, delta)


cdef inline double _project_pending(double *P, Py_ssize_t ldp, const double *k, double *d,
                                    double *u, Py_ssize_t n, double kxx, const double *pend,
                                    Py_ssize_t m) noexcept nogil:
    """:func:`_project` after :func:`_shrink_defer` (``pend``, ``m`` rows), whose update it
    applies in the same pass over ``P``: ``P`` inverts the set on return."""
    return sk_pjl_project_pending(P, ldp, k, d, u, n, kxx, pend, m)


cdef inline double _project(const double *P, Py_ssize_t ldp, const double *k, double *d,
                            double *u, Py_ssize_t n, double kxx) noexcept nogil:
    """``d = P k`` and the squared projection error ``kxx - k·d``; ``u`` (``n`` entries) is
    scratch."""
    return sk_pjl_project(P, ldp, k, d, u, n, kxx)


cdef double _project_without(double *d, const double *col, double pii, Py_ssize_t i,
                            Py_ssize_t n, const double *k, double kxx) noexcept nogil:
    """``d = P k`` and the squared projection error for the set without slot ``i`` (``n``
    rows before), in O(n) from ``d`` before the removal: ``P``'s downdate gives
    ``d' = d - P[:, i] d_i / P_ii`` (``col`` and ``pii`` as :func:`_pick` left them),
    then the last entry moves into ``i``; ``k`` is already ``without_slot``'s."""
    cdef Py_ssize_t a, last = n - 1
    cdef double di = d[i] / pii
    for a in range(n):
        d[a] = d[a] - col[a] * di
    d[i] = d[last]
    return sk_pj_error(k, d, last, kxx)


cdef inline void _settle(double *P, Py_ssize_t ldp, const double *pend,
                         Py_ssize_t m) noexcept nogil:
    """The update :func:`_shrink_defer` left (``pend``, ``m`` rows) applied to ``P`` on its
    own, when no :func:`_project_pending` follows: ``P`` inverts the set on return."""
    sk_pjl_settle(P, ldp, pend, m)


cdef void _gram_rows(double *G, Py_ssize_t ldg, const double *D, Py_ssize_t ldd,
                     const double *sq, Py_ssize_t n, double gamma, bint mirror) noexcept nogil:
    """``G`` (``n x n``, leading dimension ``ldg``) from the dots ``D`` (leading dimension
    ``ldd``, lower triangle read; ``D`` may be ``G``): ``exp(-gamma max(0, (-2 D_ij + sq_i)
    + sq_j))`` for ``j <= i`` row by row, in the operation order of
    :func:`streamk.accel.rbf_from_dots` (``sk_gram_args``, vectorised: element by element,
    the same bits), then mirrored unless ``mirror`` is false (the inverse reads the lower
    triangle only, and the mirror's column writes cost a cache line per entry)."""
    cdef Py_ssize_t i, j
    for i in range(n):
        sk_gram_args(&G[i * ldg], &D[i * ldd], sq, sq[i], i + 1)
        sk_scaled_exp(&G[i * ldg], i + 1, -gamma)
    if mirror:
        for i in range(n):
            for j in range(i):
                G[j * ldg + i] = G[i * ldg + j]


cdef void _rbf_gram(double *G, Py_ssize_t ldg, const double *X, Py_ssize_t w,
                    const double *sq, Py_ssize_t n, double gamma, bint mirror) noexcept nogil:
    """``K(S, S)`` of the first ``n`` rows of ``X`` (contiguous, ``w`` wide; ``sq`` their
    squared norms) for an RBF kernel into ``G`` (leading dimension ``ldg``): row ``i``'s
    dots with the rows up to it by ``sk_dots`` (four rows at a time), then
    :func:`_gram_rows`. What ``_policies.rbf_gram`` returns, what the per-event core's
    ``_projectron_rewidth`` inverts and ``_gram_rewidth`` keeps for the resweeping adatron:
    one piece, so every rebuild after a width change has the same bits."""
    cdef Py_ssize_t i
    for i in range(n):
        sk_dots(&G[i * ldg], X, w, i + 1, &X[i * w], w)
    _gram_rows(G, ldg, G, ldg, sq, n, gamma, mirror)


cdef int _inverse_by_cholesky(const double *G, Py_ssize_t n, double *P, Py_ssize_t ldp,
                              double *work, double min_rel, bint mirror) noexcept nogil:
    """``P[:n, :n] = G^-1`` by ``sk_pjl_inverse`` (``G = L Lᵀ``, ``N = L^-ᵀ``, ``P = N Nᵀ``)
    with ``work`` (``2 n² + 9 n`` entries, any contents) laid out as its scratch: ``L``, then
    ``N`` (whose zeros below the diagonal are read, so they are written here), then the dots'
    lanes. Nonzero on success; 0 with ``P`` untouched where a squared pivot falls to
    ``min_rel * G_ss`` or below."""
    cdef Py_ssize_t i
    cdef double *L = work
    cdef double *N = L + n * n
    cdef double *t = N + n * n
    for i in range(n):
        memset(&N[i * n], 0, i * sizeof(double))
    return sk_pjl_inverse(G, n, P, ldp, L, N, t, t + n, min_rel, mirror)
