# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""One cyclic coordinate pass of the on-line dual learners in compiled code (optional).

:meth:`KernelAdatron._resweep <streamk.learners.adatron.KernelAdatron._resweep>` (CF 7.13)
and :meth:`OnlineSVR._resweep <streamk.learners.svr.OnlineSVR._resweep>` (CF 7.14) step
through the support set oldest first; each step reads one decision value, moves one
coefficient and, when it moved, adds one Gram-matrix row times the change to every decision
value. On the NumPy path that is a Python loop with a NumPy call per step. Here the loop is
C, with the same operations in the same order on the same doubles (no fused multiply-add:
the build passes ``-ffp-contract=off``), so both paths give the same coefficients.

The caller computes the decision values ``F = G @ coef`` at the start of each pass with
NumPy (the very call the NumPy path makes), writes nothing else, and does the support set's
bookkeeping afterwards (:func:`streamk.learners.dualpass.coef_changed`): these functions
write the coefficients in place and, when asked, add every change to ``D`` as well.
"""

from libc.math cimport copysign, fabs

ctypedef Py_ssize_t intp


def adatron_pass(
    const double[:, ::1] G,
    double[:, ::1] coef,
    double[:, ::1] F,
    const double[:, ::1] T,
    const double[::1] eta,
    const intp[::1] order,
    double mu,
    double upper,
    double[:, ::1] D,
):
    """One adatron pass (CF 7.13) over the slots ``order``; returns the number of steps that
    moved a coefficient.

    ``G`` is the support set's Gram buffer (``G[i, :n]`` is row ``i``), ``coef`` its
    coefficient buffer (``n_outputs`` columns), ``F`` the decision values ``(n, n_outputs)``
    (updated in place), ``T`` the ±1 targets, ``eta`` ``1 / (k(x_i, x_i) + mu)``. ``D``:
    an ``(n, n_outputs)`` array the changes are added to, or ``None``. For each slot and
    column, ``a = coef t``; ``a_new = min(max(a + eta (1 - t f - mu a), 0), upper)``; a
    slot whose step moved some column gets ``coef += (a_new - a) t`` and
    ``F += G[i] (a_new - a) t``.
    """
    cdef Py_ssize_t n = F.shape[0], k = F.shape[1], m = order.shape[0]
    cdef Py_ssize_t p, i, j, c, moved = 0
    cdef double a, a_new, t, e, x, d
    cdef bint any_moved, track = D is not None
    cdef double delta[64]
    if k > 64:
        raise ValueError("adatron_pass handles at most 64 outputs")
    if G.shape[0] < n or G.shape[1] < n or coef.shape[0] < n or coef.shape[1] != k:
        raise ValueError("adatron_pass: buffers smaller than the support set")
    if T.shape[0] != n or T.shape[1] != k or eta.shape[0] != n:
        raise ValueError("adatron_pass: targets or steps do not match the support set")
    if track and (D.shape[0] != n or D.shape[1] != k):
        raise ValueError("adatron_pass: D does not match the support set")
    for p in range(m):
        i = order[p]
        if i < 0 or i >= n:
            raise IndexError("adatron_pass: slot out of range")
    with nogil:
        for p in range(m):
            i = order[p]
            e = eta[i]
            any_moved = False
            for c in range(k):
                t = T[i, c]
                a = coef[i, c] * t
                # the 2-norm shift acts on alpha = a >= 0, not on the signed coefficient
                x = a + e * (1.0 - t * F[i, c] - mu * a)
                a_new = x
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
                coef[i, c] += d
                if track:
                    D[i, c] += d
                for j in range(n):
                    F[j, c] += G[i, j] * d
    return moved


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
    cdef Py_ssize_t p, i, j, moved = 0
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
                for j in range(n):
                    f[j] += G[i, j] * d
    return moved
