# The adatron's coordinate step (CF 7.13) over a support set's kept Gram matrix, in C: the
# one piece of code both compiled resweeps run. streamk/learners/_dual.pyx's
# ``adatron_pass`` runs _adatron_pass (``F = G @ coef`` by NumPy at each pass's start, then
# a Gram row per moved coefficient added to it, as the NumPy loop does); the per-event
# core's resweeps in streamk/learners/_event.pyx take each slot's decision value afresh
# from its Gram row and the current coefficients, then the same _adatron_step.

from libc.math cimport isnan

cdef extern from *:
    """
    /* y += x * a, element by element, as NumPy's ``y += x * a`` computes it (no fused
       multiply-add, whatever the extension's flags: fp-contract off); restrict lets the
       compiler vectorise, and on GCC/x86-64 an AVX2 clone runs where the CPU has it (the
       same IEEE operations, four at a time), as in _fastexp.h. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define SK_DUAL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default"), \
                                          optimize("fp-contract=off")))
    #else
    #define SK_DUAL_CLONES
    #endif
    SK_DUAL_CLONES static void sk_axpy(double *restrict y, const double *restrict x,
                                       double a, Py_ssize_t n) {
        for (Py_ssize_t j = 0; j < n; j++) y[j] += x[j] * a;
    }

    /* Four rows' dots with one vector y, each row's in eight partial sums (lane l over
       j = l mod 8; the last partial group of eight as a whole group, its missing entries
       0: each adds +0), then the lanes added pairwise (l and l + 4, then l and l + 2,
       then the two): y is read once for four rows, so a pass over the Gram matrix makes
       five loads for four entries where a row at a time made two for one (its loads, not
       its arithmetic, bound a pass at the resweeps' n ~ 60-250), and neither the tail nor
       the reduction is a chain of dependent adds. GCC's vector types, written out: every
       clone (and the plain SSE2 build) adds the same values in the same order: the same
       bits on every machine. */
    typedef double sk_dual_v4 __attribute__((vector_size(32)));
    #define SK_DUAL_LD4(p) ({ sk_dual_v4 v_; __builtin_memcpy(&v_, (p), sizeof v_); v_; })
    SK_DUAL_CLONES static void sk_dot8x4(const double *restrict a, const double *restrict b,
                                         const double *restrict c, const double *restrict d,
                                         const double *restrict y, Py_ssize_t n,
                                         double *restrict out) {
        sk_dual_v4 a0 = {0.0}, a1 = {0.0}, b0 = {0.0}, b1 = {0.0};
        sk_dual_v4 c0 = {0.0}, c1 = {0.0}, d0 = {0.0}, d1 = {0.0};
        sk_dual_v4 y0, y1;
        Py_ssize_t j = 0, m = n & ~(Py_ssize_t)7;
        for (; j < m; j += 8) {
            y0 = SK_DUAL_LD4(y + j);
            y1 = SK_DUAL_LD4(y + j + 4);
            a0 += SK_DUAL_LD4(a + j) * y0; a1 += SK_DUAL_LD4(a + j + 4) * y1;
            b0 += SK_DUAL_LD4(b + j) * y0; b1 += SK_DUAL_LD4(b + j + 4) * y1;
            c0 += SK_DUAL_LD4(c + j) * y0; c1 += SK_DUAL_LD4(c + j + 4) * y1;
            d0 += SK_DUAL_LD4(d + j) * y0; d1 += SK_DUAL_LD4(d + j + 4) * y1;
        }
        if (m < n) {
            double t[5][8] = {{0.0}};
            for (Py_ssize_t l = 0; l < n - m; l++) {
                t[0][l] = y[m + l];
                t[1][l] = a[m + l];
                t[2][l] = b[m + l];
                t[3][l] = c[m + l];
                t[4][l] = d[m + l];
            }
            y0 = SK_DUAL_LD4(t[0]);
            y1 = SK_DUAL_LD4(t[0] + 4);
            a0 += SK_DUAL_LD4(t[1]) * y0; a1 += SK_DUAL_LD4(t[1] + 4) * y1;
            b0 += SK_DUAL_LD4(t[2]) * y0; b1 += SK_DUAL_LD4(t[2] + 4) * y1;
            c0 += SK_DUAL_LD4(t[3]) * y0; c1 += SK_DUAL_LD4(t[3] + 4) * y1;
            d0 += SK_DUAL_LD4(t[4]) * y0; d1 += SK_DUAL_LD4(t[4] + 4) * y1;
        }
        a0 += a1;
        b0 += b1;
        c0 += c1;
        d0 += d1;
        out[0] = (a0[0] + a0[2]) + (a0[1] + a0[3]);
        out[1] = (b0[0] + b0[2]) + (b0[1] + b0[3]);
        out[2] = (c0[0] + c0[2]) + (c0[1] + c0[3]);
        out[3] = (d0[0] + d0[2]) + (d0[1] + d0[3]);
    }
    """
    void sk_axpy(double *y, const double *x, double a, Py_ssize_t n) nogil
    void sk_dot8x4(const double *a, const double *b, const double *c, const double *d,
                   const double *y, Py_ssize_t n, double *out) nogil


cdef inline double _adatron_eta(const double *cls, const double *kdiag, Py_ssize_t i,
                                double mu) noexcept nogil:
    """Slot ``i``'s step ``eta = 1 / (k(x_i, x_i) + mu)``; 0 where it stays fixed (an unknown
    class, NaN in ``cls``, or ``k(x_i, x_i) + mu`` not positive)."""
    cdef double denom
    if isnan(cls[i]):
        return 0.0
    denom = kdiag[i] + mu
    return 1.0 / denom if denom > 0.0 else 0.0


cdef inline bint _adatron_step(const double *coef_i, Py_ssize_t k, const double *f,
                               Py_ssize_t fstride, Py_ssize_t label, const double *signs,
                               double e, double mu, double upper,
                               double *delta) noexcept nogil:
    """The coordinate step of one slot (CF 7.13) from its decision values ``f[c fstride]``:
    each column's change into ``delta``; whether any is not 0.

    ``coef_i`` is the slot's coefficient row (``k`` columns), ``label`` its class index,
    ``signs`` each class's sign in binary mode (NULL: one-vs-rest, +1 in the slot's class
    column and -1 elsewhere), ``e`` its step. For each column, ``a = coef t``;
    ``a_new = min(max(a + e (1 - t f - mu a), 0), upper)``; the change is ``(a_new - a) t``:
    the NumPy loop's operations in its order."""
    cdef Py_ssize_t c
    cdef double a, a_new, t, d
    cdef bint any_moved = False
    for c in range(k):
        if signs != NULL:
            t = signs[label]
        else:
            t = 1.0 if c == label else -1.0
        a = coef_i[c] * t
        # the 2-norm shift acts on alpha = a >= 0, not on the signed coefficient
        a_new = a + e * (1.0 - t * f[c * fstride] - mu * a)
        if 0.0 > a_new:  # Python's max(x, 0.0), NaN included
            a_new = 0.0
        if upper < a_new:  # min(., upper)
            a_new = upper
        d = (a_new - a) * t
        delta[c] = d
        if d != 0.0:
            any_moved = True
    return any_moved


cdef Py_ssize_t _adatron_pass(const double *G, Py_ssize_t ldg, double *coef, Py_ssize_t k,
                              double *FT, Py_ssize_t ldf, const double *cls,
                              const double *signs, const double *kdiag,
                              const Py_ssize_t *by_age, Py_ssize_t n, double mu, double upper,
                              double *DT, Py_ssize_t ldd) noexcept nogil:
    """One adatron pass over the ``n`` slots ``by_age`` (oldest first) from the decision
    values at its start; the number of steps that moved a coefficient. The caller has
    checked every index (``k <= 64``, the slots and class indices in range).

    ``G`` is the Gram buffer (row ``i`` at ``G + i ldg``), ``coef`` the coefficients
    (``n`` rows of ``k`` columns, row-major), ``FT`` the decision values transposed
    (column ``c`` at ``FT + c ldf``, updated in place), ``cls`` each slot's class index
    (NaN: unknown, the slot is fixed), ``signs`` as :func:`_adatron_step`'s, ``kdiag``
    ``k(x_i, x_i)``. ``DT`` (NULL: none): ``k`` rows of stride ``ldd`` the changes are
    added to. A slot whose step (:func:`_adatron_step`) moved some column gets ``coef +=
    delta`` and ``f += G[i] delta``, as the NumPy loop does."""
    cdef Py_ssize_t p, i, c, moved = 0
    cdef double e, d
    cdef double delta[64]
    for p in range(n):
        i = by_age[p]
        e = _adatron_eta(cls, kdiag, i, mu)
        if not e > 0.0:
            continue
        if not _adatron_step(coef + i * k, k, FT + i, ldf, <Py_ssize_t>cls[i], signs, e, mu,
                             upper, delta):
            continue
        moved += 1
        for c in range(k):
            d = delta[c]
            if d == 0.0:  # adds +-0 on the NumPy path: no value changes
                continue
            coef[i * k + c] += d
            if DT != NULL:
                DT[c * ldd + i] += d
            sk_axpy(FT + c * ldf, G + i * ldg, d, n)
    return moved
