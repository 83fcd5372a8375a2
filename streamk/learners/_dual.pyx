# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""One cyclic coordinate pass of the on-line dual learners in compiled code (optional).

:meth:`KernelAdatron._resweep <streamk.learners.adatron.KernelAdatron._resweep>` (CF 7.13)
and :meth:`OnlineSVR._resweep <streamk.learners.svr.OnlineSVR._resweep>` (CF 7.14) step
through the support set oldest first; each step reads one decision value, moves one
coefficient and, when it moved, adds one Gram-matrix row times the change to every decision
value. On the NumPy path that is a Python loop with a NumPy call per step. Here the loop is
C, with the same operations in the same order on the same doubles (no fused multiply-add:
the build passes ``-ffp-contract=off``), so both paths give the same coefficients. The
adatron's pass is ``_adatron_pass.pxi``, the one piece of code the per-event core's resweeps
(``_event.pyx``) run too.

The caller computes the decision values ``F = G @ coef`` at the start of each pass with
NumPy (the very call the NumPy path makes), writes nothing else, and does the support set's
bookkeeping afterwards (:func:`streamk.learners.dualpass.coef_changed`): these functions
write the coefficients in place and, when asked, add every change to ``D`` as well.
"""

from libc.math cimport copysign, fabs

ctypedef Py_ssize_t intp

include "_adatron_pass.pxi"  # the pass itself (shared with _event.pyx's resweeps)


def adatron_pass(
    const double[:, ::1] G,
    double[:, ::1] coef,
    double[:, ::1] FT,
    const double[::1] cls,
    const double[::1] signs,
    const double[::1] kdiag,
    const intp[::1] by_age,
    double mu,
    double upper,
    double[:, ::1] DT,
):
    """One adatron pass (CF 7.13), oldest first; returns the number of steps that moved a
    coefficient.

    ``G`` is the support set's Gram buffer (``G[i, :n]`` is row ``i``), ``coef`` its
    coefficient buffer (``k`` columns), ``FT`` the decision values transposed, ``(k, n)``
    (updated in place), ``cls`` each slot's class index (NaN: unknown, the slot is fixed),
    ``signs`` each class's sign in binary mode (``None``: one-vs-rest, the target is +1 in
    the slot's class column and -1 elsewhere), ``kdiag`` ``k(x_i, x_i)``, ``by_age`` every
    slot, oldest first. A slot moves only with a known class and a positive step
    ``eta = 1 / (k(x_i, x_i) + mu)``. ``DT``: a ``(k, n)`` array the changes are added to,
    or ``None``. For each column, ``a = coef t``;
    ``a_new = min(max(a + eta (1 - t f - mu a), 0), upper)``; a slot whose step moved some
    column gets ``coef += (a_new - a) t`` and ``f += G[i] (a_new - a) t``.
    """
    cdef Py_ssize_t n = FT.shape[1], k = FT.shape[0], m = by_age.shape[0]
    cdef Py_ssize_t p, i, moved = 0, label
    cdef bint track = DT is not None, binary = signs is not None
    if k > 64:
        raise ValueError("adatron_pass handles at most 64 outputs")
    if G.shape[0] < n or G.shape[1] < n or coef.shape[0] < n or coef.shape[1] != k:
        raise ValueError("adatron_pass: buffers smaller than the support set")
    if cls.shape[0] != n or kdiag.shape[0] < n or m != n:
        raise ValueError("adatron_pass: classes or diagonal do not match the support set")
    if binary and k != 1:
        raise ValueError("adatron_pass: signs are for one output column")
    if track and (DT.shape[0] != k or DT.shape[1] != n):
        raise ValueError("adatron_pass: D does not match the support set")
    for p in range(m):
        i = by_age[p]
        if i < 0 or i >= n:
            raise IndexError("adatron_pass: slot out of range")
        if not isnan(cls[i]):
            label = <Py_ssize_t>cls[i]
            if label < 0 or label >= (signs.shape[0] if binary else k):
                raise IndexError("adatron_pass: class index out of range")
    with nogil:
        moved = _adatron_pass(&G[0, 0], G.shape[1], &coef[0, 0], k, &FT[0, 0], n, &cls[0],
                              &signs[0] if binary else NULL, &kdiag[0], &by_age[0], n, mu,
                              upper, &DT[0, 0] if track else NULL, n)
    return moved


def dead_slots(const double[:, ::1] coef, const double[::1] cls):
    """Slots of a known class whose coefficients are all 0, in descending order (so that
    swap-removing them one by one never moves a slot still to remove)."""
    cdef Py_ssize_t n = cls.shape[0], k = coef.shape[1], i, c
    cdef bint zero
    out = []
    if coef.shape[0] < n:
        raise ValueError("dead_slots: buffers smaller than the support set")
    for i in range(n - 1, -1, -1):
        if isnan(cls[i]):
            continue
        zero = True
        for c in range(k):
            if coef[i, c] != 0.0:
                zero = False
                break
        if zero:
            out.append(i)
    return out


def svr_pass(
    const double[:, ::1] G,
    double[:, ::1] coef,
    double[::1] f,
    const double[::1] y,
    const double[::1] kdiag,
    const intp[::1] order,
    double eps,
    double C,
    double[::1] D,
):
    """One pass of the SVR's rule (CF 7.14) over the slots ``order``; returns the number of
    steps that moved a coefficient.

    ``coef`` is the support set's coefficient buffer (column 0 is used), ``f`` the decision
    values (updated in place), ``y`` the targets minus the offset, ``kdiag`` ``k(x_i, x_i)``.
    ``D``: an ``(n,)`` array the changes are added to, or ``None``. The step: the residual
    ``r = y - f`` less ``eps`` towards zero on the side of the coefficient's sign (both
    sides at zero), divided by ``k(x_i, x_i)``; a step that crosses zero stops there; the
    coefficient stays in ``[-C, C]``.
    """
    cdef Py_ssize_t n = f.shape[0], m = order.shape[0]
    cdef Py_ssize_t p, i, moved = 0
    cdef double a, a_new, r, g, d
    cdef bint track = D is not None
    if G.shape[0] < n or G.shape[1] < n or coef.shape[0] < n or coef.shape[1] < 1:
        raise ValueError("svr_pass: buffers smaller than the support set")
    if y.shape[0] != n or kdiag.shape[0] < n:
        raise ValueError("svr_pass: targets or diagonal do not match the support set")
    if track and D.shape[0] != n:
        raise ValueError("svr_pass: D does not match the support set")
    for p in range(m):
        i = order[p]
        if i < 0 or i >= n:
            raise IndexError("svr_pass: slot out of range")
    with nogil:
        for p in range(m):
            i = order[p]
            a = coef[i, 0]
            r = y[i] - f[i]
            if a > 0.0:
                g = r - eps
            elif a < 0.0:
                g = r + eps
            else:
                g = fabs(r) - eps
                if 0.0 > g:  # Python's max(., 0.0)
                    g = 0.0
                g = copysign(g, r)
            a_new = a + g / kdiag[i]
            if a * a_new < 0.0:  # crossing zero: stop at 0
                a_new = 0.0
            if -C > a_new:  # Python's max(a_new, -C)
                a_new = -C
            if C < a_new:  # min(., C)
                a_new = C
            if a_new != a:
                d = a_new - a
                moved += 1
                coef[i, 0] += d
                if track:
                    D[i] += d
                sk_axpy(&f[0], &G[i, 0], d, n)
    return moved
