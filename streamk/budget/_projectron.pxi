# The Projectron's compiled steps on ``P = K(S, S)^-1``, shared by
# streamk/budget/_policies.pyx and streamk/learners/_event.pyx through Cython's ``include``
# (textual: each module gets its own copy of the C, so neither imports the other), as
# streamk/_kcol.pxi is. The including module cimports INFINITY (libc.math) and int64_t
# (libc.stdint). :mod:`streamk.budget.projectron` is the reference: the same steps in the
# same order, so the two agree to rounding.


cdef Py_ssize_t _downdate(double *P, Py_ssize_t ldp, const double *coef, Py_ssize_t p,
                          double *k, double *col, double *row, Py_ssize_t n,
                          double *pii_out) noexcept nogil:
    """The ``P`` half of ``Projectron._remove_one``: pick ``i = argmin ||coef_i||² / P_ii``,
    downdate ``P`` by rank one and move its last row and column into ``i`` (``k`` too, as
    ``without_slot`` does). ``col`` keeps ``P[:, i]`` and ``pii_out`` ``P_ii`` from before the
    downdate: the caller projects coefficient ``i`` onto the others with them. Returns ``i``."""
    cdef Py_ssize_t i = 0, a, c, last = n - 1
    cdef double best = INFINITY, cost, pii
    for a in range(n):
        cost = 0.0
        for c in range(p):
            cost += coef[a * p + c] * coef[a * p + c]
        cost = cost / P[a * ldp + a]
        if cost < best:
            best = cost
            i = a
    pii = P[i * ldp + i]
    pii_out[0] = pii
    for a in range(n):
        col[a] = P[a * ldp + i]
        row[a] = P[i * ldp + a] / pii
    for a in range(n):  # P -= outer(P[:, i], P[i, :] / P_ii)
        _axpy(-col[a], row, &P[a * ldp], n)
    for a in range(n):
        P[i * ldp + a] = P[last * ldp + a]
    for a in range(n):
        P[a * ldp + i] = P[a * ldp + last]
    for a in range(n):
        P[last * ldp + a] = 0.0
        P[a * ldp + last] = 0.0
    k[i] = k[last]
    return i


cdef Py_ssize_t _remove_one(double *P, Py_ssize_t ldp, double *X, Py_ssize_t ldx,
                            double *coef, Py_ssize_t p, double *s_sq, double *kdiag,
                            int64_t *ids, double *k, double *col, double *row,
                            Py_ssize_t n, double *pii_out) noexcept nogil:
    """``Projectron._remove_one`` on the support buffers: :func:`_downdate`, coefficient
    ``i`` projected onto the others, then ``SupportSet.remove(i)``. Returns ``i``
    (``col`` and ``pii_out`` as :func:`_downdate` leaves them)."""
    cdef Py_ssize_t i, a, c, last = n - 1
    cdef double pii
    i = _downdate(P, ldp, coef, p, k, col, row, n, &pii)
    pii_out[0] = pii
    for a in range(n):  # coef -= outer(P[:, i] / P_ii, coef_i), row i unchanged
        if a != i:
            for c in range(p):
                coef[a * p + c] += -(col[a] / pii) * coef[i * p + c]
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


cdef void _grow_inverse(double *P, Py_ssize_t ldp, const double *d, double *col,
                        Py_ssize_t n, double delta) noexcept nogil:
    """Block-inverse growth of ``P`` by one row and column (``Projectron._append``)."""
    cdef Py_ssize_t s
    for s in range(n):
        col[s] = d[s] / delta
    for s in range(n):  # P += outer(d, d / delta), then the new row and column
        _axpy(d[s], col, &P[s * ldp], n)
    for s in range(n):
        P[s * ldp + n] = -col[s]
        P[n * ldp + s] = -col[s]
    P[n * ldp + n] = 1.0 / delta


cdef double _project(const double *P, Py_ssize_t ldp, const double *k, double *d,
                     Py_ssize_t n, double kxx) noexcept nogil:
    """``d = P k`` and the squared projection error ``kxx - k·d``."""
    cdef Py_ssize_t a
    for a in range(n):
        d[a] = _dot(&P[a * ldp], k, n)
    return kxx - _dot(k, d, n)


cdef double _project_without(double *d, const double *col, double pii, Py_ssize_t i,
                            Py_ssize_t n, const double *k, double kxx) noexcept nogil:
    """``d = P k`` and the squared projection error for the set without slot ``i`` (``n``
    rows before), in O(n) from ``d`` before the removal: ``P``'s downdate gives
    ``d' = d - P[:, i] d_i / P_ii`` (``col`` and ``pii`` as :func:`_downdate` left them),
    then the last entry moves into ``i``; ``k`` is already ``without_slot``'s."""
    cdef Py_ssize_t a, last = n - 1
    cdef double di = d[i] / pii
    for a in range(n):
        d[a] = d[a] - col[a] * di
    d[i] = d[last]
    return kxx - _dot(k, d, last)
