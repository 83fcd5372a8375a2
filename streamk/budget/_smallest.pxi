# The removal policies' choice of the vector that leaves (RemoveSmallest's here; the
# oldest's, for RemoveOldest and the Forgetron, is streamk/_dense.h's sk_oldest), shared by
# the block passes (streamk/_core.pyx) and the per-event core (streamk/learners/_event.pyx)
# through Cython's ``include``: one definition, so both pick the same slot.

from libc.math cimport INFINITY, sqrt


cdef extern from "_dense.h" nogil:
    Py_ssize_t sk_oldest(const int64_t *ids, Py_ssize_t n)  # SupportSet.oldest, vectorised


cdef Py_ssize_t _smallest_slot(const double[:, ::1] coef, const double[::1] kdiag,
                               const int64_t[::1] ids, Py_ssize_t n) noexcept nogil:
    """``RemoveSmallest``'s slot among the first ``n`` rows: the least ``removal_cost``
    ``||coef_s|| sqrt(k(x_s, x_s))``, ties within 1e-12 relative going to the oldest id.
    The costs are compared squared and rooted only near the least (sqrt is monotone and
    correctly rounded, so the candidates' roots are ``removal_cost``'s, and only squares
    within 3e-12 of the least can tie), in two passes over the coefficients. NaN costs:
    the oldest."""
    cdef Py_ssize_t s, c, p = coef.shape[1], slot = -1
    cdef double t, lo = INFINITY, near, root
    cdef int64_t oldest = 0
    for s in range(n):
        t = 0.0
        for c in range(p):
            t = t + coef[s, c] * coef[s, c]
        t = t * kdiag[s]
        if t < lo:
            lo = t
    near = lo * (1.0 + 3e-12)
    root = sqrt(lo) * (1.0 + 1e-12)
    for s in range(n):
        t = 0.0
        for c in range(p):
            t = t + coef[s, c] * coef[s, c]
        t = t * kdiag[s]
        # (t == lo passes the root's test: sqrt is monotone; equal costs, as every
        # vector of an RBF perceptron has, then take no square root)
        if t <= near and (t == lo or sqrt(t) <= root) and (slot < 0 or ids[s] < oldest):
            slot = s
            oldest = ids[s]
    if slot < 0:
        for s in range(n):
            if slot < 0 or ids[s] < oldest:
                slot = s
                oldest = ids[s]
    return slot
