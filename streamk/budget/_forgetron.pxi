# The Forgetron's shrink (``Forgetron.insert``'s a, b and phi), shared by the block passes
# (streamk/_core.pyx) and the per-event core (streamk/learners/_event.pyx) through
# Cython's ``include``: one definition, in the policy's order of operations, so both take
# the same shrink to the bit.

from libc.math cimport fabs, sqrt


cdef void _forgetron_ab(const double *cr, const double *fr, Py_ssize_t p, double *a,
                        double *b) noexcept nogil:
    """The Forgetron's ``a = c_r . c_r - 2 c_r . f'(x_r)`` and ``b = 2 sum |c_r|`` for the
    leaving vector's coefficients ``cr`` (``p`` of them) and ``fr = f'(x_r)``."""
    cdef Py_ssize_t c
    cdef double cc = 0.0, cf = 0.0, bs = 0.0
    for c in range(p):
        cc = cc + cr[c] * cr[c]
        cf = cf + cr[c] * fr[c]
        bs = bs + fabs(cr[c])
    a[0] = cc - 2.0 * cf
    b[0] = 2.0 * bs


cdef double _forgetron_phi(double a, double b, double c) noexcept nogil:
    """:func:`streamk.budget.removal.forgetron_phi`, the same operations."""
    cdef double disc, phi
    if a + b + c <= 0.0:
        return 1.0
    if a == 0.0:
        return min(1.0, -c / b)
    disc = b * b - 4.0 * a * c
    phi = (-b + sqrt(max(disc, 0.0))) / (2.0 * a)
    return min(1.0, max(phi, 0.0))
