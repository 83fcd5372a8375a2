# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Compiled inner loops (optional: :mod:`streamk.accel` falls back to NumPy without them).

Two routines, both plain loops over C-contiguous float64 buffers:

* :func:`sqnorms` — row-wise squared norms summed left to right, so a row padded with
  trailing zeros has exactly the same norm as the row itself (a BLAS dot does not promise
  that); the support set uses it wherever a norm is cached or recomputed.
* :func:`perceptron_pass` — Alg. 7.52 over the rows of a tracked micro-batch, for an RBF
  kernel with remove-oldest or no budget: the mistake-to-mistake scan, the decision of a
  flagged row, the support-set update and the block's kernel column for the new vector,
  all without returning to Python. Between mistakes each row costs one comparison; a
  mistake costs O(m d) for the new kernel column. The Python path in
  :mod:`streamk.learners.perceptron` is the reference it is tested against.
"""

from libc.math cimport fabs
from libc.stdint cimport int64_t

import numpy as np


cdef extern from "_fastexp.h" nogil:
    void sk_scaled_exp(double *a, Py_ssize_t n, double factor)
    void sk_rbf_from_dots(double *out, const double *dot, const double *sq, double row_sq,
                          Py_ssize_t n, double gamma)
    void sk_dots(double *out, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                 const double *row, Py_ssize_t w)


def scaled_exp(double[::1] a, double factor):
    """``a[i] = exp(factor * a[i])`` in place (``a``: a flat view of a C-contiguous array)."""
    if a.shape[0]:
        with nogil:
            sk_scaled_exp(&a[0], a.shape[0], factor)


cdef inline double _sqnorm(const double *a, Py_ssize_t w) noexcept nogil:
    """``a . a`` summed left to right (trailing zeros change nothing)."""
    cdef double s = 0.0
    cdef Py_ssize_t k
    for k in range(w):
        s = s + a[k] * a[k]
    return s


def sqnorms(const double[:, ::1] A):
    """``||A[i]||^2`` for each row, summed in index order (see the module docstring)."""
    cdef Py_ssize_t m = A.shape[0], w = A.shape[1], i
    out = np.empty(m)
    cdef double[::1] o = out
    if w:
        for i in range(m):
            o[i] = _sqnorm(&A[i, 0], w)
    else:
        o[:] = 0.0
    return out


def rbf_from_dots(double[:, ::1] D, const double[::1] a_sq, const double[::1] b_sq,
                  double gamma):
    """``D[i, j] = exp(-gamma max(0, a_sq[i] + b_sq[j] - 2 D[i, j]))`` in place: an RBF Gram
    block from its dot products, in one pass instead of five."""
    cdef Py_ssize_t i, m = D.shape[0], n = D.shape[1]
    if a_sq.shape[0] != m or b_sq.shape[0] != n:
        raise ValueError("norms do not match the block's shape")
    if n == 0:
        return
    with nogil:
        for i in range(m):
            sk_rbf_from_dots(&D[i, 0], &D[i, 0], &b_sq[0], a_sq[i], n, gamma)


def perceptron_pass(
    double[:, ::1] K,
    double[:, ::1] F,
    const double[:, ::1] Q,
    const double[::1] q_sq,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    const double[:, ::1] T,
    Py_ssize_t start,
    Py_ssize_t end,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    double gamma,
    double coef_l1,
    int64_t[::1] codes,
):
    """Learn block rows ``start:end`` (targets ``T[j - start]``) with the kernel perceptron.

    ``K``/``F`` are the tracker's kernel block ``(m, capacity)`` and decision hints
    ``(m, p)``; ``X``, ``s_sq``, ``coef``, ``kdiag``, ``ids`` are the support set's
    buffers, with room for every row that may be added. Every change is mirrored into
    ``K`` and ``F`` for all later rows of the block, as the tracker would.

    ``codes[j]`` receives what ``predict_one`` said before row ``j`` was learned: ``-1``
    for "the row's own label" (every column had the right sign), otherwise the class
    code (binary: 1 positive, 0 negative; one-vs-rest: the arg-max column).

    Returns ``(n, next_id, n_mistakes, coef_l1, largest new squared norm)``.
    """
    cdef Py_ssize_t m = K.shape[0], p = F.shape[1], wq = Q.shape[1], wx = X.shape[1]
    cdef Py_ssize_t j, r, c, s, k, slot, best_c
    cdef Py_ssize_t mistakes = 0
    cdef double tol, kv, step, best, sq_max = 0.0
    cdef bint flagged, wrong, any_wrong
    cdef int64_t oldest
    f_buf = np.empty(max(p, 1))
    nc_buf = np.empty(max(p, 1))
    cdef double[::1] f = f_buf
    cdef double[::1] nc = nc_buf
    col_buf = np.empty(max(m, 1))
    cdef double[::1] col = col_buf
    if wq > wx:
        raise ValueError("support rows are narrower than the block: reserve the width first")
    if K.shape[1] < (n + end - start if budget <= 0 else min(budget, n + end - start)):
        raise ValueError("the block's kernel buffer is too small: reserve the rows first")
    with nogil:
        for j in range(start, end):
            # The hint: a wrong sign (sgn(0) = +1) or too close to 0 to trust flags the row.
            tol = 1e-9 * (1.0 + coef_l1)  # |k| <= 1 for RBF
            flagged = False
            for c in range(p):
                if F[j, c] * T[j - start, c] <= tol:
                    flagged = True
                    break
            if not flagged:
                codes[j] = -1
                continue
            # Decide the row afresh from its kernel row, as learn_one does.
            for c in range(p):
                f[c] = 0.0
            for s in range(n):
                kv = K[j, s]
                for c in range(p):
                    f[c] = f[c] + kv * coef[s, c]
            if p == 1:
                codes[j] = 1 if f[0] >= 0.0 else 0
            else:
                best_c = 0
                best = f[0]
                for c in range(1, p):
                    if f[c] > best:
                        best = f[c]
                        best_c = c
                codes[j] = best_c
            any_wrong = False
            step = 0.0
            for c in range(p):
                wrong = (f[c] >= 0.0) != (T[j - start, c] > 0.0)
                nc[c] = T[j - start, c] if wrong else 0.0
                if wrong:
                    any_wrong = True
                    if fabs(nc[c]) > step:
                        step = fabs(nc[c])
            if not any_wrong:
                continue
            mistakes += 1
            # A mistake: the row joins the set, in the oldest vector's slot when full.
            if budget > 0 and n >= budget:
                slot = 0
                oldest = ids[0]
                for s in range(1, n):
                    if ids[s] < oldest:
                        oldest = ids[s]
                        slot = s
                for r in range(j + 1, m):
                    kv = K[r, slot]
                    for c in range(p):
                        F[r, c] = F[r, c] - kv * coef[slot, c]
            else:
                slot = n
                n += 1
            for k in range(wq):
                X[slot, k] = Q[j, k]
            for k in range(wq, wx):
                X[slot, k] = 0.0
            s_sq[slot] = q_sq[j]
            if q_sq[j] > sq_max:
                sq_max = q_sq[j]
            kdiag[slot] = 1.0
            ids[slot] = next_id
            next_id += 1
            for c in range(p):
                coef[slot, c] = nc[c]
            coef_l1 = coef_l1 + step
            # Its kernel column against the rest of the block, as rbf_rows computes it.
            if j + 1 < m:
                sk_dots(&col[j + 1], &Q[j + 1, 0], wq, m - j - 1, &Q[j, 0], wq)
                sk_rbf_from_dots(&col[j + 1], &col[j + 1], &q_sq[j + 1], q_sq[j], m - j - 1,
                                 gamma)
            for r in range(j + 1, m):
                kv = col[r]
                K[r, slot] = kv
                for c in range(p):
                    F[r, c] = F[r, c] + kv * nc[c]
    return n, next_id, mistakes, coef_l1, sq_max


def rbf_row(
    const double[:, ::1] X,
    const double[::1] s_sq,
    Py_ssize_t n,
    const double[::1] row,
    double sq_max,
    double gamma,
):
    """``exp(-gamma ||X[s] - row||^2)`` for the first ``n`` rows of ``X``, or ``None``.

    The per-event kernel row of an RBF support set, by the norm expansion of
    :func:`streamk.tracking.rbf_rows` with the row's norm summed as :func:`sqnorms` does.
    ``None`` when that expansion may be off by more than 1e-10 (``sq_max`` bounds the
    stored norms), so the caller can take the exact path. ``row`` may be narrower than
    ``X``: absent features are 0.
    """
    cdef Py_ssize_t w = row.shape[0]
    cdef double row_sq = 0.0
    if w > X.shape[1] or n > X.shape[0]:
        raise ValueError("row wider than the support rows, or n beyond their count")
    if w:
        row_sq = _sqnorm(&row[0], w)
    if (sq_max + row_sq) * 1e-15 * gamma > 1e-10:
        return None
    out = np.empty(max(n, 1))
    cdef double[::1] o = out
    if n:
        with nogil:
            sk_dots(&o[0], &X[0, 0], X.shape[1], n, &row[0], w)
            sk_rbf_from_dots(&o[0], &o[0], &s_sq[0], row_sq, n, gamma)
    return out[:n]
