# Small vector loops the budget policies' compiled steps share (``_projectron.pxi``,
# ``_merge.pxi``), included by ``_policies.pyx`` and ``streamk/learners/_event.pyx`` before
# them: one definition, so the two modules sum in the same order.

cdef inline double _dot(const double *x, const double *y, Py_ssize_t n) noexcept nogil:
    """``x · y`` with four partial sums (vectorisable without reassociating flags)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t a = 0
    while a + 4 <= n:
        s0 += x[a] * y[a]
        s1 += x[a + 1] * y[a + 1]
        s2 += x[a + 2] * y[a + 2]
        s3 += x[a + 3] * y[a + 3]
        a += 4
    while a < n:
        s0 += x[a] * y[a]
        a += 1
    return (s0 + s1) + (s2 + s3)


cdef inline void _axpy(double alpha, const double *x, double *y, Py_ssize_t n) noexcept nogil:
    """``y += alpha x``."""
    cdef Py_ssize_t a
    for a in range(n):
        y[a] += alpha * x[a]


cdef inline double _dist2(const double *a, const double *b, Py_ssize_t w) noexcept nogil:
    """``||a - b||²`` summed left to right."""
    cdef double s = 0.0, t
    cdef Py_ssize_t j
    for j in range(w):
        t = a[j] - b[j]
        s += t * t
    return s
