# One adatron pass (CF 7.13) over a support set's kept Gram matrix, in C: the one piece of
# code both compiled resweeps run. streamk/learners/_dual.pyx's ``adatron_pass`` (the
# learner's NumPy plumbing around it, ``F = G @ coef`` by NumPy) and the per-event core's
# resweeps in streamk/learners/_event.pyx (the whole event in one call) include it.

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
    """
    void sk_axpy(double *y, const double *x, double a, Py_ssize_t n) nogil


cdef Py_ssize_t _adatron_pass(const double *G, Py_ssize_t ldg, double *coef, Py_ssize_t k,
                              double *FT, Py_ssize_t ldf, const double *cls,
                              const double *signs, const double *kdiag,
                              const Py_ssize_t *by_age, Py_ssize_t n, double mu, double upper,
                              double *DT, Py_ssize_t ldd) noexcept nogil:
    """One adatron pass over the ``n`` slots ``by_age`` (oldest first); the number of steps
    that moved a coefficient. The caller has checked every index (``k <= 64``, the slots
    and class indices in range).

    ``G`` is the Gram buffer (row ``i`` at ``G + i ldg``), ``coef`` the coefficients
    (``n`` rows of ``k`` columns, row-major), ``FT`` the decision values transposed
    (column ``c`` at ``FT + c ldf``, updated in place), ``cls`` each slot's class index
    (NaN: unknown, the slot is fixed), ``signs`` each class's sign in binary mode (NULL:
    one-vs-rest, +1 in the slot's class column and -1 elsewhere), ``kdiag`` ``k(x_i,
    x_i)``. A slot moves only with a known class and a positive step ``eta = 1 / (k(x_i,
    x_i) + mu)``. ``DT`` (NULL: none): ``k`` rows of stride ``ldd`` the changes are added
    to. For each column, ``a = coef t``; ``a_new = min(max(a + eta (1 - t f - mu a), 0),
    upper)``; a slot whose step moved some column gets ``coef += (a_new - a) t`` and
    ``f += G[i] (a_new - a) t``: the NumPy loop's operations in its order."""
    cdef Py_ssize_t p, i, c, moved = 0, label
    cdef double a, a_new, t, e, denom, d
    cdef bint any_moved
    cdef double delta[64]
    for p in range(n):
        i = by_age[p]
        if isnan(cls[i]):
            continue
        denom = kdiag[i] + mu
        e = 1.0 / denom if denom > 0.0 else 0.0
        if not e > 0.0:
            continue
        label = <Py_ssize_t>cls[i]
        any_moved = False
        for c in range(k):
            if signs != NULL:
                t = signs[label]
            else:
                t = 1.0 if c == label else -1.0
            a = coef[i * k + c] * t
            # the 2-norm shift acts on alpha = a >= 0, not on the signed coefficient
            a_new = a + e * (1.0 - t * FT[c * ldf + i] - mu * a)
            if 0.0 > a_new:  # Python's max(x, 0.0), NaN included
                a_new = 0.0
            if upper < a_new:  # min(., upper)
                a_new = upper
            d = (a_new - a) * t
            delta[c] = d
            if d != 0.0:
                any_moved = True
        if not any_moved:
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
