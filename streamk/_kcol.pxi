# The kernel column of the compiled passes, shared by streamk/_core.pyx and
# streamk/learners/_event.pyx through Cython's ``include`` (textual: each module gets its own
# copy of the C, so neither imports the other). The including module defines the K_* codes
# and declares pow, sk_dots, sk_rbf_from_dots, sk_scaled_exp and sk_coef_dot; sk_l1dists and
# sk_dots2 are declared here.
# The dots and L1 distances are summed in _fastexp.h's lane order (four lanes along the
# features), the same bits on every machine and under trailing zero padding.

cdef extern from "_fastexp.h" nogil:
    void sk_l1dists(double *out, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                    const double *row, Py_ssize_t w)
    void sk_dots2(double *out0, double *out1, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                  const double *row0, const double *row1, Py_ssize_t w)


cdef inline double _power(double x, double degree) noexcept nogil:
    """``x ** degree`` as NumPy's ``array ** scalar`` takes it: a square for degree 2 and
    the value itself for degree 1 (its fast paths, also the cheap ones), else ``pow``."""
    if degree == 2.0:
        return x * x
    if degree == 1.0:
        return x
    return pow(x, degree)


cdef void _kcol(int code, const double *kp, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                const double *x_sq, const double *row, Py_ssize_t w, double row_sq,
                double *out) noexcept nogil:
    """``out[s] = k(X[s], row)`` for ``s < n`` (rows of ``X`` ``ldx`` wide, ``row`` ``w <= ldx``
    wide: its absent features are 0). ``kp``: ``(gamma or scale, offset, degree, c)``, the
    kernel's parameters and the factor of a :class:`~streamk.kernels.Scaled` around it;
    polynomial powers as NumPy takes them (:func:`_power`)."""
    if n <= 0:
        return
    if code == K_LAPLACIAN:
        sk_l1dists(out, X, ldx, n, row, w)
    else:
        sk_dots(out, X, ldx, n, row, w)
    _kfinish(code, kp, n, x_sq, row_sq, out)


cdef void _kfinish(int code, const double *kp, Py_ssize_t n, const double *x_sq,
                   double row_sq, double *out) noexcept nogil:
    """:func:`_kcol`'s kernel values, in place, from the dots in ``out`` (RBF, polynomial,
    linear) or the L1 distances (Laplacian)."""
    _kfinish_from(code, kp, n, x_sq, row_sq, out, out)


cdef void _kfinish_from(int code, const double *kp, Py_ssize_t n, const double *x_sq,
                        double row_sq, const double *src, double *out) noexcept nogil:
    """:func:`_kfinish` from the dots (or distances) in ``src`` into ``out`` (``src`` may
    be ``out``): the same bits, without a copy where the dots sit in another buffer."""
    cdef Py_ssize_t s
    if code == K_RBF:
        sk_rbf_from_dots(out, src, x_sq, row_sq, n, kp[0])
    elif code == K_POLY:
        for s in range(n):
            out[s] = _power(kp[0] * src[s] + kp[1], kp[2])
    else:
        if src != out:
            for s in range(n):
                out[s] = src[s]
        if code == K_LAPLACIAN:
            sk_scaled_exp(out, n, -kp[0])
    if kp[3] != 1.0:
        for s in range(n):
            out[s] = kp[3] * out[s]


cdef void _kcol2(int code, const double *kp, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                 const double *x_sq, Py_ssize_t w, const double *row0, double sq0,
                 double *out0, const double *row1, double sq1, double *out1) noexcept nogil:
    """:func:`_kcol` for two rows ``w`` wide, ``out0`` against ``row0`` (squared norm
    ``sq0``) and ``out1`` against ``row1``, the same bits as two calls; the dot kernels
    read ``X`` once for both (``sk_dots2``)."""
    if code == K_LAPLACIAN or n <= 0:
        _kcol(code, kp, X, ldx, n, x_sq, row0, w, sq0, out0)
        _kcol(code, kp, X, ldx, n, x_sq, row1, w, sq1, out1)
        return
    sk_dots2(out0, out1, X, ldx, n, row0, row1, w)
    _kfinish(code, kp, n, x_sq, sq0, out0)
    _kfinish(code, kp, n, x_sq, sq1, out1)


cdef void _combine(const double *k, const double *coef, Py_ssize_t n, Py_ssize_t p,
                   double *f) noexcept nogil:
    """``f = k @ coef[:n]`` (``coef`` row-major, ``p`` columns), in one order for every
    compiled path (the per-event core's decision and the Forgetron's ``f(x_r)`` in every
    pass), so that they agree to the bit. One column is summed in four interleaved partial
    sums (``sk_coef_dot``, on SIMD lanes), so the additions overlap (NumPy's BLAS dot does
    not sum left to right either: both are the product to rounding); several left to
    right."""
    cdef Py_ssize_t s, c
    if p == 1:
        f[0] = sk_coef_dot(k, coef, n)
        return
    for c in range(p):
        f[c] = 0.0
    for s in range(n):
        for c in range(p):
            f[c] = f[c] + k[s] * coef[s * p + c]
