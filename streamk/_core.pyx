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
* :func:`perceptron_rows` and :func:`ranker_rows` — the perceptrons' and the ranker's rule
  without a block: each row's kernel values against the set computed afresh, the same
  decision and the same support-set and policy code (``_insert`` on a one-row block).
* :func:`step_pass` — the same support-set and policy code for the rules that may add
  every row: the on-line SVR's step (no resweep) and the novelty detector's insertion,
  over a tracked block or row by row without one (``learn_one`` too); the Python paths
  of :mod:`streamk.learners.svr` and :mod:`streamk.learners.novelty` are its reference.
"""

from libc.math cimport INFINITY, NAN, copysign, fabs, pow, sqrt
from libc.stdint cimport int64_t

import numpy as np


cdef extern from "_hintrow.h" nogil:
    double sk_centre32(float *out, const double *x, const double *center, Py_ssize_t w,
                       Py_ssize_t step)


cdef extern from "_fastexp.h" nogil:
    void sk_scaled_exp(double *a, Py_ssize_t n, double factor)
    void sk_expf_array(float *a, Py_ssize_t n)
    double sk_coef_dot(const double *k, const double *c, Py_ssize_t n)
    void sk_hint_block(double *H, double *err, Py_ssize_t ldh, Py_ssize_t p, const double *W,
                       Py_ssize_t n, const float *V, Py_ssize_t ldv, const float *v_sq,
                       const float *Qt, Py_ssize_t ldq, Py_ssize_t w, Py_ssize_t m,
                       const float *q_sq, float gamma)
    void sk_hint_column(double *F, double *err, Py_ssize_t ldf, Py_ssize_t p, const double *wts,
                        const float *Qt, Py_ssize_t ldq, Py_ssize_t w, Py_ssize_t r0,
                        Py_ssize_t r1, const float *v, float v_sq, const float *q_sq,
                        float gamma)
    void sk_hint_column2(double *F, double *err, Py_ssize_t ldf, Py_ssize_t p, const double *wts,
                         const float *Qt, Py_ssize_t ldq, Py_ssize_t w, Py_ssize_t r0,
                         Py_ssize_t r1, const float *v0, float v0_sq, const float *v1,
                         float v1_sq, const float *q_sq, float gamma)
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


cdef inline Py_ssize_t _slot_for_new(const int64_t *ids, Py_ssize_t n,
                                     Py_ssize_t budget) noexcept nogil:
    """Where a new support vector goes: ``n`` (appended) unless the budget is full, then
    the slot of the oldest vector (remove-oldest; ``_dense.h``'s ``sk_oldest``)."""
    if budget <= 0 or n < budget:
        return n
    return sk_oldest(ids, n)


cdef inline void _store(double *x, Py_ssize_t wx, const double *row, Py_ssize_t wq,
                        double *coef, const double *nc, Py_ssize_t p) noexcept nogil:
    """A new support row (zero-padded to the set's width) and its coefficients."""
    cdef Py_ssize_t k
    for k in range(wq):
        x[k] = row[k]
    for k in range(wq, wx):
        x[k] = 0.0
    for k in range(p):
        coef[k] = nc[k]


cdef inline bint _decide(const double *f, const double *t, Py_ssize_t p, double *nc,
                        double *step, int64_t *code) noexcept nogil:
    """What Alg. 7.52 does with a row's exact decision values ``f`` (targets ``t``): the
    prediction ``code`` (binary: 1 if ``f >= 0``; one-vs-rest: the arg-max column), the new
    vector's coefficients ``nc`` (``t`` where the sign is wrong, sgn(0) = +1, else 0) and
    their largest magnitude ``step``. Returns whether the row is a mistake."""
    cdef Py_ssize_t c, best_c = 0
    cdef double best = f[0]
    cdef bint wrong, any_wrong = False
    if p == 1:
        code[0] = 1 if f[0] >= 0.0 else 0
    else:
        for c in range(1, p):
            if f[c] > best:
                best = f[c]
                best_c = c
        code[0] = best_c
    step[0] = 0.0
    for c in range(p):
        wrong = (f[c] >= 0.0) != (t[c] > 0.0)
        nc[c] = t[c] if wrong else 0.0
        if wrong:
            any_wrong = True
            step[0] = max(step[0], fabs(nc[c]))
    return any_wrong


cdef inline bint _margin_errors(const double *f, const double *t, Py_ssize_t p, double margin,
                                double *nc, double *step) noexcept nogil:
    """After :func:`_decide`: also update the columns with ``t f < margin`` (the perceptron
    with margin; nothing changes for ``margin = 0``). Returns whether any column updates."""
    cdef Py_ssize_t c
    cdef bint wrong, any_wrong = False
    for c in range(p):
        wrong = nc[c] != 0.0 or t[c] * f[c] < margin
        nc[c] = t[c] if wrong else 0.0
        if wrong:
            any_wrong = True
            step[0] = max(step[0], fabs(nc[c]))
    return any_wrong


#: Kernel codes of the tracked pass (see :func:`perceptron_pass`); ``K_GRAM`` takes the
#: block's own Gram matrix, computed by the kernel in NumPy (any vector kernel).
DEF K_RBF = 0
DEF K_LAPLACIAN = 1
DEF K_POLY = 2
DEF K_LINEAR = 3
DEF K_GRAM = 9
#: Budget policy codes: remove-oldest (or none, ``budget <= 0``), remove-random, Forgetron,
#: remove-smallest; and, for :func:`perceptron_hint_pass` only, Merge.
DEF P_OLDEST = 0
DEF P_RANDOM = 1
DEF P_FORGETRON = 2
DEF P_SMALLEST = 3
DEF P_MERGE = 4
#: Rows whose hints the hint pass computes at once (a multiple of 16, the kernels' group):
#: an update then changes the hints of at most this many rows
DEF HINT_ROWS = 64

KERNEL_CODES = {"RBF": K_RBF, "Laplacian": K_LAPLACIAN, "Polynomial": K_POLY,
                "Linear": K_LINEAR, "gram": K_GRAM}
POLICY_CODES = {"RemoveOldest": P_OLDEST, "Unbounded": P_OLDEST, "RemoveRandom": P_RANDOM,
                "Forgetron": P_FORGETRON, "RemoveSmallest": P_SMALLEST}
#: :func:`perceptron_hint_pass`'s ``pcode`` for a Merge budget (RBF)
MERGE_CODE = P_MERGE
#: the rows whose hints the hint pass computes at once (:data:`HINT_ROWS`; the user guide's)
HINT_GROUP = HINT_ROWS


include "_kcol.pxi"
include "budget/_smallest.pxi"
include "budget/_vec.pxi"
include "budget/_merge.pxi"  # Merge's search and merge (as the per-event core's)
include "budget/_forgetron.pxi"

cdef inline void _drop_move(double[:, ::1] K, double[:, ::1] F, Py_ssize_t j, Py_ssize_t slot,
                            Py_ssize_t n, double[:, ::1] X, double[::1] s_sq,
                            double[:, ::1] coef, double[::1] kdiag,
                            int64_t[::1] ids) noexcept nogil:
    """``SupportSet.remove(slot)`` with the tracker's ``drop`` and ``move`` for rows after
    ``j``: the vector leaves ``F``, the last one moves into its slot."""
    cdef Py_ssize_t r, c, k, m = K.shape[0], p = F.shape[1], last = n - 1
    cdef double kv
    for r in range(j + 1, m):
        kv = K[r, slot]
        for c in range(p):
            F[r, c] = F[r, c] - kv * coef[slot, c]
    for r in range(m):
        K[r, slot] = K[r, last]
    if slot != last:
        for k in range(X.shape[1]):
            X[slot, k] = X[last, k]
        for c in range(p):
            coef[slot, c] = coef[last, c]
        kdiag[slot] = kdiag[last]
        s_sq[slot] = s_sq[last]
        ids[slot] = ids[last]
    for k in range(X.shape[1]):
        X[last, k] = 0.0
    for c in range(p):
        coef[last, c] = 0.0


cdef void _novelty_swap(const double[:, ::1] K, Py_ssize_t j, const double[:, ::1] X,
                        const double[::1] s_sq, const double[:, ::1] coef, int kcode,
                        const double *kp, Py_ssize_t q, Py_ssize_t n, bint moved, double kxx,
                        double phi, double *col, bint have_col, double *rv) noexcept nogil:
    """The novelty detector's ``r = K(S, S) w`` through a swap, as
    ``KernelNovelty._follow_swap`` does: vector ``q`` (weight ``w_q``) leaves for block row
    ``j`` (weight 1, ``k(x, x) = kxx``), whose kernel values against the ``n`` vectors are
    ``K[j, :n]``: ``r -= w_q k(S, x_q)`` (``col``, computed here unless ``have_col``) and
    ``r += k(S, x)`` over the others, the new entry ``k(x, S) w + kxx``, placed as the policy
    places the row (``moved``: ``remove(q)`` moved the last slot into ``q`` and the row is
    appended; else it takes slot ``q``), then ``r *= phi`` (the Forgetron's shrink)."""
    cdef Py_ssize_t s, last = n - 1
    cdef double wq = coef[q, 0], f = 0.0, rnew
    if not have_col:
        _kcol(kcode, kp, &X[0, 0], X.shape[1], n, &s_sq[0], &X[q, 0], X.shape[1], s_sq[q],
              col)
    for s in range(n):
        if s != q:
            f = f + K[j, s] * coef[s, 0]
            rv[s] = (rv[s] - wq * col[s]) + K[j, s]
    rnew = f + kxx
    if moved:
        if q != last:
            rv[q] = rv[last]
        rv[last] = rnew
    else:
        rv[q] = rnew
    if phi != 1.0:
        for s in range(n):
            rv[s] = rv[s] * phi


#: No Gram matrix of the block (the ``G`` of a pass that computes its kernel in C).
_NO_GRAM = np.zeros((0, 0))

#: Rows :func:`step_pass` took together with the Forgetron's leaving column (``_kcol2``),
#: counted over the process for tests (:func:`fused_columns`).
cdef Py_ssize_t _FUSED_COLUMNS = 0


cdef struct PassState:
    # what a tracked pass carries from row to row besides the buffers
    Py_ssize_t budget, used, m
    int64_t next_id, fm
    double fq, coef_l1, kmax, sq_max
    int pcode, kcode
    bint bounded
    Py_ssize_t col_slot  # >= 0: the pass left this slot's kernel column in _insert's col


cdef inline PassState _pass_state(Py_ssize_t budget, Py_ssize_t m, int64_t next_id,
                                  int64_t fm, double fq, double coef_l1, double kmax,
                                  int pcode, int kcode, bint bounded) noexcept nogil:
    """A pass's state before its first row: no draws used, no new squared norm, no kernel
    column left for :func:`_insert`."""
    cdef PassState st
    st.budget, st.used, st.m, st.next_id, st.fm, st.fq = budget, 0, m, next_id, fm, fq
    st.coef_l1, st.kmax, st.sq_max, st.pcode, st.kcode = coef_l1, kmax, 0.0, pcode, kcode
    st.bounded, st.col_slot = bounded, -1
    return st


cdef Py_ssize_t _insert(PassState *st, double[:, ::1] K, double[:, ::1] F,
                        const double[:, ::1] Q, const double[::1] q_sq, double[:, ::1] X,
                        double[::1] s_sq, double[:, ::1] coef, double[::1] kdiag,
                        int64_t[::1] ids, const double[:, ::1] G, const double[::1] qdiag,
                        const int64_t[::1] draws, const double[::1] kp, Py_ssize_t j,
                        Py_ssize_t start, Py_ssize_t n, const double *nc, double step,
                        double *col, double *fr, double *rv) noexcept nogil:
    """Block row ``j`` joins the set with coefficients ``nc`` (largest magnitude ``step``)
    through the policy, as its ``insert`` does through the set's methods, mirrored into
    ``K`` and ``F`` for the block's later rows. ``rv``: the novelty detector's ``r`` to
    carry through a removal (:func:`_novelty_swap`; ``NULL``: none). Returns the new
    number of vectors."""
    cdef Py_ssize_t m = K.shape[0], p = F.shape[1], wq = Q.shape[1], wx = X.shape[1]
    cdef Py_ssize_t r, c, s, slot
    cdef double kv, a, b, phi
    phi = 1.0
    slot = n
    if st.pcode == P_FORGETRON:
        st.fm += 1
    if st.budget > 0 and n >= st.budget:
        if st.pcode == P_OLDEST:
            slot = _slot_for_new(&ids[0], n, st.budget)
            if rv != NULL:
                _novelty_swap(K, j, X, s_sq, coef, st.kcode, &kp[0], slot, n, False, qdiag[j],
                              1.0, col, False, rv)
            for r in range(j + 1, m):  # the oldest leaves; the new one takes its slot
                kv = K[r, slot]
                for c in range(p):
                    F[r, c] = F[r, c] - kv * coef[slot, c]
        else:
            if st.pcode == P_RANDOM:
                slot = draws[st.used]
                st.used += 1
            elif st.pcode == P_SMALLEST:
                slot = _smallest_slot(coef, kdiag, ids, n)
            else:  # the Forgetron: the oldest leaves after f' is shrunk by phi
                slot = _slot_for_new(&ids[0], n, st.budget)
                if st.col_slot != slot:  # (else the pass took it with the row: _kcol2)
                    _kcol(st.kcode, &kp[0], &X[0, 0], wx, n, &s_sq[0], &X[slot, 0], wx,
                          s_sq[slot], &col[0])
                _combine(col, &coef[0, 0], n, p, fr)
                for c in range(p):
                    fr[c] = fr[c] + K[j, slot] * nc[c]
                _forgetron_ab(&coef[slot, 0], fr, p, &a, &b)
                phi = _forgetron_phi(a, b, st.fq - 15.0 / 32.0 * st.fm) if b > 0.0 else 1.0
                st.fq = st.fq + (a * phi * phi + b * phi)  # (Forgetron.insert's order)
            if rv != NULL:  # the Forgetron's col is k(S, x_slot) already
                _novelty_swap(K, j, X, s_sq, coef, st.kcode, &kp[0], slot, n, True, qdiag[j],
                              phi, col, st.pcode == P_FORGETRON, rv)
            _drop_move(K, F, j, slot, n, X, s_sq, coef, kdiag, ids)
            n -= 1
            slot = n
    if slot == n:
        n += 1
    _store(&X[slot, 0], wx, &Q[j, 0], wq, &coef[slot, 0], &nc[0], p)
    s_sq[slot] = q_sq[j]
    if q_sq[j] > st.sq_max:
        st.sq_max = q_sq[j]
    kdiag[slot] = qdiag[j]
    ids[slot] = st.next_id
    st.next_id += 1
    st.coef_l1 = st.coef_l1 + step
    # Its kernel column against the rest of the block, as the tracker computes it.
    if j + 1 < m:
        if st.kcode == K_GRAM:
            for r in range(j + 1, m):
                col[r] = G[r - start, j - start]
        else:
            _kcol(st.kcode, &kp[0], &Q[j + 1, 0], wq, m - j - 1, &q_sq[j + 1], &Q[j, 0],
                  wq, q_sq[j], &col[j + 1])
    for r in range(j + 1, m):
        kv = col[r]
        K[r, slot] = kv
        if not st.bounded and fabs(kv) > st.kmax:
            st.kmax = fabs(kv)
        for c in range(p):
            F[r, c] = F[r, c] + kv * nc[c]
    if phi != 1.0:
        for s in range(n):
            for c in range(p):
                coef[s, c] = coef[s, c] * phi
        for r in range(j + 1, m):
            for c in range(p):
                F[r, c] = F[r, c] * phi
        st.coef_l1 = st.coef_l1 * fabs(phi)
    return n


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
    double coef_l1,
    int64_t[::1] codes,
    int kcode,
    const double[::1] kp,
    const double[:, ::1] G,
    const double[::1] qdiag,
    double kmax,
    bint bounded,
    int pcode,
    const int64_t[::1] draws,
    double fq,
    int64_t fm,
    double margin,
):
    """Learn block rows ``start:end`` (targets ``T[j - start]``) with the kernel perceptron
    (``margin = 0``, Alg. 7.52) or the perceptron with margin (an update also where
    ``t f < margin``, per column).

    ``K``/``F`` are the tracker's kernel block ``(m, capacity)`` and decision hints
    ``(m, p)``; ``X``, ``s_sq``, ``coef``, ``kdiag``, ``ids`` are the support set's
    buffers, with room for every row that may be added. Every change is mirrored into
    ``K`` and ``F`` for all later rows of the block, as the tracker would, and each
    policy changes the buffers exactly as its ``insert`` does through the set's methods.

    The kernel: ``kcode`` (:data:`KERNEL_CODES`) with parameters ``kp`` (see
    :func:`_kcol`), or ``K_GRAM``: the new vector's column read from ``G``, the kernel's
    Gram matrix of block rows ``start:``. ``qdiag`` holds ``k(q, q)`` of the block's rows
    (the new vector's ``kdiag``); ``kmax`` bounds ``|k|`` for the hints' tolerance
    (``bounded``: a bound of the kernel; otherwise raised by every new column).

    The policy: ``pcode`` (:data:`POLICY_CODES`) with ``budget`` (``<= 0``: none);
    remove-random takes its slots from ``draws`` (the policy's generator's next draws of
    ``integers(budget)``), the Forgetron carries its state ``fq``, ``fm``.

    ``codes[j]`` receives what ``predict_one`` said before row ``j`` was learned: ``-1``
    for "the row's own label" (every column had the right sign), otherwise the class
    code (binary: 1 positive, 0 negative; one-vs-rest: the arg-max column).

    Returns ``(n, next_id, n_mistakes, coef_l1, largest new squared norm, kmax, draws
    used, fq, fm)``.
    """
    cdef Py_ssize_t m = K.shape[0], p = F.shape[1], wq = Q.shape[1], wx = X.shape[1]
    cdef Py_ssize_t j, c, s
    cdef Py_ssize_t mistakes = 0
    cdef double tol, kv, step
    cdef bint flagged, any_wrong
    f_buf = np.empty(max(p, 1))
    nc_buf = np.empty(max(p, 1))
    fr_buf = np.empty(max(p, 1))
    cdef double[::1] f = f_buf
    cdef double[::1] nc = nc_buf
    cdef double[::1] fr = fr_buf
    col_buf = np.empty(max(m, X.shape[0], 1))
    cdef double[::1] col = col_buf
    if wq > wx:
        raise ValueError("support rows are narrower than the block: reserve the width first")
    if K.shape[1] < (n + end - start if budget <= 0 else min(budget, n + end - start)):
        raise ValueError("the block's kernel buffer is too small: reserve the rows first")
    if kp.shape[0] != 4 or qdiag.shape[0] != m:
        raise ValueError("kp takes 4 parameters and qdiag one value per block row")
    if kcode == K_GRAM and (G.shape[0] != m - start or G.shape[1] != m - start):
        raise ValueError("G must be the Gram matrix of block rows start:")
    if pcode == P_RANDOM and budget > 0 and draws.shape[0] < end - start:
        raise ValueError("remove-random needs one draw per row")
    cdef PassState st = _pass_state(budget, m, next_id, fm, fq, coef_l1, kmax, pcode, kcode,
                                    bounded)
    with nogil:
        for j in range(start, end):
            # The hint: a wrong sign (sgn(0) = +1), a margin below ``margin``, or too close
            # to either to trust flags the row.
            tol = 1e-9 * (1.0 + st.kmax * coef_l1)
            flagged = False
            for c in range(p):
                if F[j, c] * T[j - start, c] <= margin + tol:
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
            any_wrong = _decide(&f[0], &T[j - start, 0], p, &nc[0], &step, &codes[j])
            if margin > 0.0:
                any_wrong = _margin_errors(&f[0], &T[j - start, 0], p, margin, &nc[0], &step)
            if not any_wrong:
                continue
            mistakes += 1
            st.coef_l1 = coef_l1
            n = _insert(&st, K, F, Q, q_sq, X, s_sq, coef, kdiag, ids, G, qdiag, draws, kp, j,
                        start, n, &nc[0], step, &col[0], &fr[0], NULL)
            coef_l1 = st.coef_l1
    return n, st.next_id, mistakes, coef_l1, st.sq_max, st.kmax, st.used, st.fq, st.fm


def ranker_pass(
    double[:, ::1] K,
    double[:, ::1] F,
    const double[:, ::1] Q,
    const double[::1] q_sq,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    const int64_t[::1] ranks,
    double[::1] b,
    Py_ssize_t start,
    Py_ssize_t end,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    double coef_l1,
    int kcode,
    const double[::1] kp,
    const double[:, ::1] G,
    const double[::1] qdiag,
    double kmax,
    bint bounded,
    int pcode,
    const int64_t[::1] draws,
    double fq,
    int64_t fm,
):
    """Learn block rows ``start:end`` (rank indices ``ranks[j - start]``) with the on-line
    ranker (Shawe-Taylor & Cristianini, Alg. 8.14 / CF 8.2): the predicted rank is the
    number of thresholds ``b`` at or below ``f``; on a wrong rank ``p`` the row joins with
    ``alpha = k - p`` and the thresholds between move by one (``b`` changes in place).

    A row whose running value ``F`` lies inside its rank's interval by more than the
    rounding tolerance needs no work; any other is decided afresh from its kernel row.
    Arguments otherwise as for :func:`perceptron_pass` (one output column). Returns
    ``(n, next_id, n_mistakes, coef_l1, largest new squared norm, kmax, draws used, fq, fm)``.
    """
    cdef Py_ssize_t m = K.shape[0], nb = b.shape[0], j, s, k, pr, i
    cdef Py_ssize_t mistakes = 0
    cdef double tol, f, nc
    col_buf = np.empty(max(m, X.shape[0], 1))
    cdef double[::1] col = col_buf
    fr_buf = np.empty(1)
    cdef double[::1] fr = fr_buf
    if F.shape[1] != 1 or coef.shape[1] != 1 or ranks.shape[0] != end - start:
        raise ValueError("the ranker has one output column and one rank per row")
    if Q.shape[1] > X.shape[1]:
        raise ValueError("support rows are narrower than the block: reserve the width first")
    if K.shape[1] < (n + end - start if budget <= 0 else min(budget, n + end - start)):
        raise ValueError("the block's kernel buffer is too small: reserve the rows first")
    if kp.shape[0] != 4 or qdiag.shape[0] != m:
        raise ValueError("kp takes 4 parameters and qdiag one value per block row")
    if kcode == K_GRAM and (G.shape[0] != m - start or G.shape[1] != m - start):
        raise ValueError("G must be the Gram matrix of block rows start:")
    if pcode == P_RANDOM and budget > 0 and draws.shape[0] < end - start:
        raise ValueError("remove-random needs one draw per row")
    for j in range(end - start):
        if not 0 <= ranks[j] <= nb:
            raise ValueError("a rank index beyond the thresholds")
    cdef PassState st = _pass_state(budget, m, next_id, fm, fq, coef_l1, kmax, pcode, kcode,
                                    bounded)
    with nogil:
        for j in range(start, end):
            k = ranks[j - start]
            tol = 1e-9 * (1.0 + st.kmax * st.coef_l1)
            if (k == 0 or F[j, 0] > b[k - 1] + tol) and (k == nb or F[j, 0] < b[k] - tol):
                continue
            f = sk_coef_dot(&K[j, 0], &coef[0, 0], n)  # the per-event path's order
            pr = 0
            for i in range(nb):
                if b[i] <= f:
                    pr += 1
            if pr == k:
                continue
            mistakes += 1
            nc = <double>(k - pr)
            n = _insert(&st, K, F, Q, q_sq, X, s_sq, coef, kdiag, ids, G, qdiag, draws, kp, j,
                        start, n, &nc, fabs(nc), &col[0], &fr[0], NULL)
            if pr < k:
                for i in range(pr, k):
                    b[i] = b[i] - 1.0
            else:
                for i in range(k, pr):
                    b[i] = b[i] + 1.0
    return n, st.next_id, mistakes, st.coef_l1, st.sq_max, st.kmax, st.used, st.fq, st.fm


cdef inline void _row_join(const double[:, ::1] Q, const double[::1] q_sq,
                           const double[::1] qdiag, Py_ssize_t j, double[:, ::1] Qc,
                           double[::1] qc, double[::1] dc) noexcept nogil:
    """Row ``j`` into the one-row block :func:`_insert` reads as its row 0."""
    cdef Py_ssize_t k
    for k in range(Q.shape[1]):
        Qc[0, k] = Q[j, k]
    qc[0] = q_sq[j]
    dc[0] = qdiag[j]



cdef int _check_rows(double[:, ::1] K, const double[:, ::1] Q, const double[::1] q_sq,
                     double[:, ::1] X, double[:, ::1] coef, Py_ssize_t n, Py_ssize_t budget,
                     int kcode, const double[::1] kp, const double[::1] qdiag, int pcode,
                     const int64_t[::1] draws) except -1:
    """The shape checks of an untracked pass (:func:`perceptron_rows`,
    :func:`ranker_rows`); raises ``ValueError`` before anything changes."""
    cdef Py_ssize_t m = Q.shape[0]
    if K.shape[0] != 1 or K.shape[1] < X.shape[0] or kcode == K_GRAM:
        raise ValueError("untracked: a (1, capacity) scratch row and a kernel in C")
    if Q.shape[1] > X.shape[1]:
        raise ValueError("support rows are narrower than the rows: reserve the width first")
    if X.shape[0] < (n + m if budget <= 0 else min(budget, n + m)):
        raise ValueError("the support buffers are too small: reserve the rows first")
    if qdiag.shape[0] != m or q_sq.shape[0] != m or kp.shape[0] != 4:
        raise ValueError("one norm and one k(q, q) per row, and 4 kernel parameters")
    if pcode == P_RANDOM and budget > 0 and draws.shape[0] < m:
        raise ValueError("remove-random needs one draw per row")
    return 0


def perceptron_rows(
    double[:, ::1] K,
    const double[:, ::1] Q,
    const double[::1] q_sq,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    const double[:, ::1] T,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    int64_t[::1] codes,
    int kcode,
    const double[::1] kp,
    const double[::1] qdiag,
    int pcode,
    const int64_t[::1] draws,
    double fq,
    int64_t fm,
    double margin,
):
    """:func:`perceptron_pass` without a block: every row of ``Q`` (targets ``T``) decided
    from its kernel values against the current set, computed afresh in C into the
    ``(1, capacity)`` scratch row ``K`` (no ``K_GRAM``), as ``learn_one`` decides it.

    A row costs ``n`` kernel values; the tracked pass pays that for every row up front and
    a block column per update besides, so this is the cheaper pass for a kernel the block
    cannot compute as one matrix product. ``codes[j]`` receives every row's decided
    prediction (never ``-1``). Other arguments as for :func:`perceptron_pass`. Returns
    ``(n, next_id, n_mistakes, largest new squared norm, draws used, fq, fm)``.
    """
    cdef Py_ssize_t m = Q.shape[0], p = coef.shape[1], wq = Q.shape[1], wx = X.shape[1]
    cdef Py_ssize_t j, c, s
    cdef Py_ssize_t mistakes = 0
    cdef double kv, step
    cdef bint any_wrong
    _check_rows(K, Q, q_sq, X, coef, n, budget, kcode, kp, qdiag, pcode, draws)
    if T.shape[0] != m or T.shape[1] != p or codes.shape[0] < m:
        raise ValueError("one target row (one column per output) and one code per row")
    cdef double[::1] f = np.empty(max(p, 1))
    cdef double[::1] nc = np.empty(max(p, 1))
    cdef double[::1] fr = np.empty(max(p, 1))
    cdef double[::1] col = np.empty(max(X.shape[0], 1))
    cdef double[:, ::1] F1 = np.zeros((1, max(p, 1)))
    cdef double[:, ::1] Qc = np.zeros((1, wq))
    cdef double[::1] qc = np.zeros(1)
    cdef double[::1] dc = np.zeros(1)
    cdef double[:, ::1] G0 = _NO_GRAM
    cdef PassState st = _pass_state(budget, 1, next_id, fm, fq, 0.0, 0.0, pcode, kcode, True)
    with nogil:
        for j in range(m):
            _kcol(kcode, &kp[0], &X[0, 0], wx, n, &s_sq[0], &Q[j, 0], wq, q_sq[j],
                         &K[0, 0])
            for c in range(p):  # the tracked pass's fresh decision, the same operations
                f[c] = 0.0
            for s in range(n):
                kv = K[0, s]
                for c in range(p):
                    f[c] = f[c] + kv * coef[s, c]
            any_wrong = _decide(&f[0], &T[j, 0], p, &nc[0], &step, &codes[j])
            if margin > 0.0:
                any_wrong = _margin_errors(&f[0], &T[j, 0], p, margin, &nc[0], &step)
            if not any_wrong:
                continue
            mistakes += 1
            _row_join(Q, q_sq, qdiag, j, Qc, qc, dc)
            n = _insert(&st, K, F1, Qc, qc, X, s_sq, coef, kdiag, ids, G0, dc, draws,
                        kp, 0, 0, n, &nc[0], step, &col[0], &fr[0], NULL)
    return n, st.next_id, mistakes, st.sq_max, st.used, st.fq, st.fm


def ranker_rows(
    double[:, ::1] K,
    const double[:, ::1] Q,
    const double[::1] q_sq,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    const int64_t[::1] ranks,
    double[::1] b,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    int kcode,
    const double[::1] kp,
    const double[::1] qdiag,
    int pcode,
    const int64_t[::1] draws,
    double fq,
    int64_t fm,
):
    """:func:`ranker_pass` without a block: every row of ``Q`` (rank indices ``ranks``)
    decided from its kernel values against the current set, computed afresh in C into the
    ``(1, capacity)`` scratch row ``K`` (no ``K_GRAM``); see :func:`perceptron_rows`.
    Returns ``(n, next_id, n_mistakes, largest new squared norm, draws used, fq, fm)``.
    """
    cdef Py_ssize_t m = Q.shape[0], nb = b.shape[0], wq = Q.shape[1], wx = X.shape[1]
    cdef Py_ssize_t j, s, k, pr, i
    cdef Py_ssize_t mistakes = 0
    cdef double f, nc
    _check_rows(K, Q, q_sq, X, coef, n, budget, kcode, kp, qdiag, pcode, draws)
    if coef.shape[1] != 1 or ranks.shape[0] != m:
        raise ValueError("the ranker has one output column and one rank per row")
    for j in range(m):
        if not 0 <= ranks[j] <= nb:
            raise ValueError("a rank index beyond the thresholds")
    cdef double[::1] fr = np.empty(1)
    cdef double[::1] col = np.empty(max(X.shape[0], 1))
    cdef double[:, ::1] F1 = np.zeros((1, 1))
    cdef double[:, ::1] Qc = np.zeros((1, wq))
    cdef double[::1] qc = np.zeros(1)
    cdef double[::1] dc = np.zeros(1)
    cdef double[:, ::1] G0 = _NO_GRAM
    cdef PassState st = _pass_state(budget, 1, next_id, fm, fq, 0.0, 0.0, pcode, kcode, True)
    with nogil:
        for j in range(m):
            k = ranks[j]
            _kcol(kcode, &kp[0], &X[0, 0], wx, n, &s_sq[0], &Q[j, 0], wq, q_sq[j],
                         &K[0, 0])
            # the tracked pass's fresh decision, the same operations (the per-event path's)
            f = sk_coef_dot(&K[0, 0], &coef[0, 0], n)
            pr = 0
            for i in range(nb):
                if b[i] <= f:
                    pr += 1
            if pr == k:
                continue
            mistakes += 1
            nc = <double>(k - pr)
            _row_join(Q, q_sq, qdiag, j, Qc, qc, dc)
            n = _insert(&st, K, F1, Qc, qc, X, s_sq, coef, kdiag, ids, G0, dc, draws,
                        kp, 0, 0, n, &nc, fabs(nc), &col[0], &fr[0], NULL)
            if pr < k:
                for i in range(pr, k):
                    b[i] = b[i] - 1.0
            else:
                for i in range(k, pr):
                    b[i] = b[i] + 1.0
    return n, st.next_id, mistakes, st.sq_max, st.used, st.fq, st.fm


cdef int _check_block(double[:, ::1] K, double[:, ::1] F, const double[:, ::1] Q,
                      double[:, ::1] X, double[:, ::1] coef, Py_ssize_t start,
                      Py_ssize_t end, Py_ssize_t n, Py_ssize_t budget, const double[::1] kp,
                      const double[:, ::1] G, const double[::1] qdiag, int kcode, int pcode,
                      const int64_t[::1] draws) except -1:
    """The shape checks of a one-output tracked pass (:func:`svr_pass`,
    :func:`novelty_pass`); raises ``ValueError`` before anything changes."""
    cdef Py_ssize_t m = K.shape[0]
    if F.shape[1] != 1 or coef.shape[1] != 1 or not 0 <= start <= end <= m:
        raise ValueError("one output column, and rows start:end inside the block")
    if Q.shape[1] > X.shape[1]:
        raise ValueError("support rows are narrower than the block: reserve the width first")
    if K.shape[1] < (n + end - start if budget <= 0 else min(budget, n + end - start)):
        raise ValueError("the block's kernel buffer is too small: reserve the rows first")
    if kp.shape[0] != 4 or qdiag.shape[0] != m:
        raise ValueError("kp takes 4 parameters and qdiag one value per block row")
    if kcode == K_GRAM and (G.shape[0] != m - start or G.shape[1] != m - start):
        raise ValueError("G must be the Gram matrix of block rows start:")
    if pcode == P_RANDOM and budget > 0 and draws.shape[0] < end - start:
        raise ValueError("remove-random needs one draw per row")
    return 0


#: The rules of :func:`step_pass`.
DEF R_SVR = 0
DEF R_NOVELTY = 1
RULE_CODES = {"svr": R_SVR, "novelty": R_NOVELTY}


cdef struct StepRule:
    # what step_pass carries from row to row besides PassState
    int rule
    double yn, mean, m2, eps, C, offset, cc
    double updates, every  # novelty: removals r followed, and how many before it is dropped
    bint off_mean, track_r


cdef inline double _svr_alpha(StepRule *R, double y, double f, double kxx) noexcept nogil:
    """:meth:`streamk.learners.OnlineSVR._update` for one row, ``f = K(x, S) @ coef``: the
    target joins the running statistics (Welford, the Python path's operations, no fused
    multiply-add), then the soft-threshold step from ``alpha = 0`` with the resulting
    ``eps``, ``C`` and offset (``eps``/``C`` < 0: auto; NaN offset: the running mean)."""
    cdef double delta, spread, eps, C, off, r, g, alpha
    cdef volatile double t  # no fused multiply-add: Python rounds the product first
    R.yn = R.yn + 1.0
    delta = y - R.mean
    t = delta / R.yn
    R.mean = R.mean + t
    t = y - R.mean
    t = delta * t
    R.m2 = R.m2 + t
    spread = sqrt(R.m2 / R.yn)
    eps = 0.1 * spread if R.eps < 0.0 else R.eps
    C = spread if R.C < 0.0 else R.C
    off = R.mean if R.off_mean else R.offset
    r = (y - off) - f
    if kxx <= 0.0:
        return 0.0
    g = fabs(r) - eps  # _new_alpha, with Python's max and min
    if 0.0 > g:
        g = 0.0
    g = copysign(g, r)
    alpha = g / kxx
    if -C > alpha:
        alpha = -C
    if C < alpha:
        alpha = C
    return alpha


def step_pass(
    double[:, ::1] K,
    double[:, ::1] F,
    const double[:, ::1] Q,
    const double[::1] q_sq,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    int rule,
    const double[::1] Y,
    double[::1] stats,
    unsigned char[::1] joined,
    double[::1] r,
    bint tracked,
    Py_ssize_t start,
    Py_ssize_t end,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    double coef_l1,
    int kcode,
    const double[::1] kp,
    const double[:, ::1] G,
    const double[::1] qdiag,
    double kmax,
    bint bounded,
    int pcode,
    const int64_t[::1] draws,
    double fq,
    int64_t fm,
):
    """Learn rows ``start:end`` of ``Q`` with a one-output rule that may add every row:
    the on-line SVR's step (``rule = R_SVR``, :meth:`streamk.learners.OnlineSVR._update`
    with no resweep) or the novelty detector's insertion with weight 1 (``R_NOVELTY``,
    :meth:`streamk.learners.KernelNovelty._insert`).

    ``tracked``: ``Q`` is a tracked block, ``K``/``F`` its kernel block and hints, kept
    current as :func:`perceptron_pass` keeps them (any kernel: ``K_GRAM`` reads ``G``).
    Otherwise ``K`` is a ``(1, capacity)`` scratch row: each row's kernel values against
    the set are computed afresh in C (no block, so ``kcode`` may not be ``K_GRAM``), which
    costs ``n`` kernel values per row where the block also pays a column per insertion.

    SVR: ``Y`` the targets, ``stats = (count, mean, m2, eps, C, offset)``; the first
    three, the targets' running statistics, change in place (see :func:`_svr_alpha`);
    ``joined[j - start] = 1`` for a row that joined the set. Novelty: ``stats[6]`` is
    ``cc = w' K(S, S) w`` and ``r = K(S, S) @ w`` (one entry per slot), updated as the
    Python path does, when ``stats[7]`` (``track_r``) is 1: through growth, and through a
    removal with the leaving vector's kernel column computed on the fly
    (:func:`_novelty_swap`, then ``cc = w' r``), counted in ``stats[0]``; once that count
    reaches ``stats[1]``, or under ``K_GRAM`` (no column of the set), a removal sets
    ``track_r`` to 0 instead (stale: the Python path recomputes them exactly when read).

    The policy and other arguments as for :func:`perceptron_pass`. Returns ``(n,
    next_id, rows that joined, coef_l1, largest new squared norm, kmax, draws used, fq,
    fm)``.
    """
    global _FUSED_COLUMNS
    cdef Py_ssize_t m = K.shape[0], wq = Q.shape[1], j, s, k, jj
    cdef Py_ssize_t joins = 0
    cdef double f, alpha
    cdef StepRule R
    cdef double fr = 0.0, unused = 0.0
    cdef double *colp = &unused  # a column only when tracked, Forgetron or novelty's swap
    cdef double[::1] col
    cdef double *rv
    cdef bint swap
    if tracked or pcode == P_FORGETRON or (rule == R_NOVELTY and budget > 0):
        col = np.empty(max(K.shape[0], X.shape[0], 1))
        colp = &col[0]
    # untracked: row j alone as a one-row block (a copy unless Q has one row)
    cdef const double[:, ::1] Q1 = Q
    cdef const double[::1] q1 = q_sq
    cdef const double[::1] d1 = qdiag
    cdef double[:, ::1] Qc
    cdef double[::1] qc, dc
    cdef bint copy_rows = not tracked and Q.shape[0] > 1
    if copy_rows:
        Qc = np.zeros((1, wq))
        qc = np.empty(1)
        dc = np.empty(1)
        Q1, q1, d1 = Qc, qc, dc
    if tracked:
        _check_block(K, F, Q, X, coef, start, end, n, budget, kp, G, qdiag, kcode, pcode,
                     draws)
    else:
        if K.shape[0] != 1 or K.shape[1] < X.shape[0] or F.shape[0] != 1 or kcode == K_GRAM:
            raise ValueError("untracked: a (1, capacity) scratch row and a kernel in C")
        if Q.shape[1] > X.shape[1] or not 0 <= start <= end <= Q.shape[0]:
            raise ValueError("support rows narrower than the rows, or start:end outside")
        if X.shape[0] < (n + end - start if budget <= 0 else min(budget, n + end - start)):
            raise ValueError("the support buffers are too small: reserve the rows first")
        if qdiag.shape[0] != Q.shape[0] or q_sq.shape[0] != Q.shape[0] or kp.shape[0] != 4:
            raise ValueError("one norm and one k(q, q) per row, and 4 kernel parameters")
        if pcode == P_RANDOM and budget > 0 and draws.shape[0] < end - start:
            raise ValueError("remove-random needs one draw per row")
    if stats.shape[0] != 8 or rule not in (R_SVR, R_NOVELTY):
        raise ValueError("stats = (count, mean, m2, eps, C, offset, cc, track_r)")
    if rule == R_SVR and (Y.shape[0] != end - start or joined.shape[0] != end - start):
        raise ValueError("one target and one flag per row")
    if rule == R_NOVELTY and stats[7] != 0.0 and r.shape[0] < X.shape[0]:
        raise ValueError("r needs one entry per support slot")
    R.rule = rule
    R.yn, R.mean, R.m2, R.eps, R.C, R.offset = stats[0], stats[1], stats[2], stats[3], \
        stats[4], stats[5]
    R.off_mean = R.offset != R.offset
    R.cc, R.track_r = stats[6], rule == R_NOVELTY and stats[7] != 0.0
    R.updates, R.every = stats[0], stats[1]
    # untracked: the kernel values against the set are needed for f and r; the
    # Forgetron's removal (a full set) reads one, k(x, x_oldest); a novelty row without
    # these needs none
    cdef Py_ssize_t oldest
    cdef PassState st = _pass_state(budget, m, next_id, fm, fq, coef_l1, kmax, pcode, kcode,
                                    bounded)
    with nogil:
        for j in range(start, end):
            jj = j
            if not tracked:  # row j alone, its kernel values against the set afresh
                jj = 0
                if copy_rows:
                    for k in range(wq):
                        Qc[0, k] = Q[j, k]
                    qc[0] = q_sq[j]
                    dc[0] = qdiag[j]
                st.col_slot = -1
                if R.track_r and pcode == P_FORGETRON and budget > 0 and n >= budget \
                        and wq == X.shape[1]:
                    # novelty inserts every row: its kernel row and the leaving vector's
                    # column (_insert's shrink reads it) in one pass over the set, each with
                    # the bits of its own _kcol (not the SVR's rows, which may not join:
                    # the column would be wasted on them; measured slower on Friedman)
                    st.col_slot = _slot_for_new(&ids[0], n, budget)
                    _kcol2(kcode, &kp[0], &X[0, 0], wq, n, &s_sq[0], wq, &Q[j, 0], q_sq[j],
                           &K[0, 0], &X[st.col_slot, 0], s_sq[st.col_slot], colp)
                    _FUSED_COLUMNS += 1
                elif rule == R_SVR or R.track_r:
                    _kcol(kcode, &kp[0], &X[0, 0], X.shape[1], n, &s_sq[0], &Q[j, 0], wq,
                          q_sq[j], &K[0, 0])
                elif pcode == P_FORGETRON and budget > 0 and n >= budget:
                    oldest = _slot_for_new(&ids[0], n, budget)
                    _kcol(kcode, &kp[0], &X[oldest, 0], X.shape[1], 1, &s_sq[oldest],
                          &Q[j, 0], wq, q_sq[j], &K[0, oldest])
            swap = False
            if R.track_r and budget > 0 and n >= budget:  # a vector leaves
                if kcode == K_GRAM or R.updates >= R.every:
                    R.track_r = False  # stale: recomputed exactly when read
                else:
                    swap = True
                    R.updates = R.updates + 1.0
            f = 0.0
            if rule == R_SVR or (R.track_r and not swap):  # the per-event path's order
                f = sk_coef_dot(&K[jj, 0], &coef[0, 0], n)
            if rule == R_SVR:
                alpha = _svr_alpha(&R, Y[j - start], f, qdiag[j])
                joined[j - start] = alpha != 0.0
                if alpha == 0.0:
                    continue
            else:
                alpha = 1.0
                if R.track_r and not swap:
                    for s in range(n):
                        r[s] = r[s] + K[jj, s]
                    r[n] = f + qdiag[j]
                    R.cc = R.cc + (2.0 * f + qdiag[j])  # the Python path's order
            joins += 1
            rv = &r[0] if swap else NULL
            if tracked:
                n = _insert(&st, K, F, Q, q_sq, X, s_sq, coef, kdiag, ids, G, qdiag, draws,
                            kp, j, start, n, &alpha, fabs(alpha), colp, &fr, rv)
            else:
                n = _insert(&st, K, F, Q1, q1, X, s_sq, coef, kdiag, ids, G, d1, draws, kp,
                            0, 0, n, &alpha, fabs(alpha), colp, &fr, rv)
            if swap:  # cc = w' r, as the Python path takes it after a swap
                R.cc = 0.0
                for s in range(n):
                    R.cc = R.cc + coef[s, 0] * r[s]
    stats[0], stats[1], stats[2], stats[6], stats[7] = R.yn, R.mean, R.m2, R.cc, R.track_r
    if rule == R_NOVELTY:
        stats[0] = R.updates
    return n, st.next_id, joins, st.coef_l1, st.sq_max, st.kmax, st.used, st.fq, st.fm


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


# Float32's unit roundoff: every float32 operation is exact to a factor (1 + d), |d| <= U32.
cdef double U32 = 5.9604644775390625e-08


def _hint_setup(const double[:, ::1] Q, const double[:, ::1] X, Py_ssize_t n):
    """The float32 side of the hints: the block's rows and the first ``n`` support rows,
    centred on the block's mean and rounded. Returns ``(Qt, q_sq32, S32, s_sq32, q_big,
    s_big)``: rows transposed ``(w, m)`` and their squared norms (taken in float64 before
    rounding, over all of a support row's features), room for every support slot, and
    the largest squared norms (the bound's inputs)."""
    cdef Py_ssize_t m = Q.shape[0], w = Q.shape[1], wx = X.shape[1]
    cdef double q_big = 0.0, s_big = 0.0
    if w > wx or n > X.shape[0]:
        raise ValueError("support rows narrower than the block, or n beyond them")
    Qt_buf, q32_buf, S32_buf, s32_buf, center_buf, _, _ = _hint_buffers(w, m, X.shape[0], 0)
    _hint_fill(Q, X, n, center_buf, Qt_buf, q32_buf, S32_buf, s32_buf, &q_big, &s_big)
    return Qt_buf, q32_buf, S32_buf, s32_buf, q_big, s_big


cdef inline Py_ssize_t _hint_room(Py_ssize_t m) noexcept nogil:
    """``m`` rounded up to whole groups of 16 rows (the hint kernels' lanes, ``sk_hint_block``
    in ``_fastexp.h``, read and write whole groups), and to an odd number of groups: ``Qt``'s
    features then lie an odd number of 64-byte lines apart, so the lines of one group's
    features spread over the first-level cache's sets. An even count (512 rows: 2 KB
    apart) puts them all in a few sets, which cannot hold the group while every vector
    passes."""
    return ((m + 15) // 16 | 1) * 16


cdef tuple _hint_buffers(Py_ssize_t w, Py_ssize_t m, Py_ssize_t cap, Py_ssize_t p):
    """Room for the hints of up to ``m`` rows of ``w`` features against ``cap`` support
    slots with ``p`` outputs: ``(Qt, q_sq32, S32, s_sq32, center, H, work)``; the rows'
    buffers padded to whole groups of 16 (:func:`_hint_room`), ``H`` with a row after the
    hints for the error sums of :func:`_hint_tol`, and ``S32`` with a spare
    row ``cap`` (``s_sq32`` too) for a vector that leaves while another takes its slot."""
    cdef Py_ssize_t room = _hint_room(m)
    return (
        np.empty((w, room), dtype=np.float32),
        np.empty(room, dtype=np.float32),
        np.empty((cap + 1, w), dtype=np.float32),
        np.empty(cap + 1, dtype=np.float32),
        np.empty(w),
        np.empty((p + 1, room)),  # the hints, then the error sums
        np.empty(2 * p + cap),  # f, nc and a kernel row: one allocation
    )


cdef void _hint_fill(const double[:, ::1] Q, const double[:, ::1] X, Py_ssize_t n,
                     double[::1] center, float[:, ::1] Qt, float[::1] q_sq32,
                     float[:, ::1] S32, float[::1] s_sq32, double *q_big,
                     double *s_big) noexcept nogil:
    """:func:`_hint_setup` into given buffers (``Qt`` may have room for more rows; those up
    to the next whole group of 16 are set to 0, so the kernels' spare lanes stay finite)."""
    cdef Py_ssize_t m = Q.shape[0], w = Q.shape[1], wx = X.shape[1], j, k
    cdef Py_ssize_t pad = min(_hint_room(m), Qt.shape[1], q_sq32.shape[0])
    cdef double h
    q_big[0] = 0.0
    s_big[0] = 0.0
    for k in range(w):
        center[k] = 0.0
    for j in range(m):
        for k in range(w):
            center[k] += Q[j, k]
    for k in range(w):
        center[k] /= max(m, 1)
    for j in range(m):  # rows transposed: feature k of row j at Qt[k, j]
        h = sk_centre32(&Qt[0, j], &Q[j, 0], &center[0], w, Qt.shape[1])
        q_sq32[j] = <float>h
        q_big[0] = max(q_big[0], h)
    for j in range(m, pad):
        for k in range(w):
            Qt[k, j] = 0.0
        q_sq32[j] = 0.0
    for j in range(n):
        s_big[0] = max(s_big[0], _mirror_row(&X[j, 0], wx, &center[0], w, &S32[j, 0],
                                             &s_sq32[j]))


cdef inline double _mirror_row(const double *x, Py_ssize_t wx, const double *center,
                               Py_ssize_t w, float *out, float *out_sq) noexcept nogil:
    """A support row's float32 hint copy: its first ``w`` features centred (``out``), its
    squared norm after centring, the features past ``w`` counted as they are (``out_sq``,
    and returned in float64)."""
    cdef double h = sk_centre32(out, x, center, w, 1)
    cdef Py_ssize_t k
    for k in range(w, wx):
        h += x[k] * x[k]
    out_sq[0] = <float>h
    return h


cdef bint _hint_applies(double gamma, Py_ssize_t w, double q_big, double s_big,
                        double limit) noexcept:
    """Whether the hints' bound holds: its first-order term at most ``limit``, and never
    above 1e-3, where the bound's linearisation is proven."""
    cdef double sq = q_big + max(q_big, s_big)
    return sq < 1e30 and 1.03 * gamma * (w + 8) * U32 * sq <= min(limit, 1e-3)


cdef inline double _hint_tol(double gamma, Py_ssize_t w, float q_sq32, double L,
                             double M, double A, double sq_hi) noexcept nogil:
    """``E_r``, the bound on ``|H - f|`` for a row (see :func:`perceptron_hint_pass`): the
    smaller of the bound from ``k <= 1`` (``L``, ``M``) and the one weighted by the row's
    float32 kernel values (its error sum ``A``; ``sq_hi`` bounds every vector's squared
    norm), both proven."""
    cdef double kappa = 1.03 * gamma * (w + 8) * U32
    cdef double flat = 10.0 * U32 * (1.0 + L) + 2.0 * kappa * (q_sq32 * 1.01 * L + M)
    cdef double weighted = 2.0 * (
        1.001 * A * (8.0001 * U32 + 1.0016 * 1.01 * kappa * (q_sq32 + sq_hi)) + 0.74 * U32 * L)
    return 1e-9 * (1.0 + L) + min(flat, weighted)


cdef void _hint_sums(const double[:, ::1] coef, const float[::1] s_sq32, Py_ssize_t n,
                     double *L, double *M) noexcept nogil:
    """``L``, the largest column sum of ``|coef|``, and ``M``, the sum of each vector's
    largest ``|coef|`` times its squared norm (1% over, for the float32 rounding)."""
    cdef Py_ssize_t s, c, p = coef.shape[1]
    cdef double h, cmax
    L[0] = 0.0
    M[0] = 0.0
    for c in range(p):
        h = 0.0
        for s in range(n):
            h += fabs(coef[s, c])
        L[0] = max(L[0], h)
    for s in range(n):
        cmax = 0.0
        for c in range(p):
            cmax = max(cmax, fabs(coef[s, c]))
        M[0] += cmax * s_sq32[s] * 1.01


def _hook_setup(const double[:, ::1] Q, const double[:, ::1] X, const double[:, ::1] coef,
                double gamma):
    """What the test hooks :func:`hint_values` and :func:`hint_column_values` start from,
    as the hint pass starts: :func:`_hint_setup`'s float32 rows, the larger of the largest
    squared norms and the rows' room (:func:`_hint_room`); ``None`` where the pass would not
    use hints."""
    if coef.shape[0] != X.shape[0] or Q.shape[1] == 0:
        raise ValueError("one coefficient row per support row, and at least one feature")
    Qt_buf, q32_buf, S32_buf, s32_buf, q_big, s_big = _hint_setup(Q, X, X.shape[0])
    if not _hint_applies(gamma, Q.shape[1], q_big, s_big, 1e-3):
        return None
    return Qt_buf, q32_buf, S32_buf, s32_buf, max(q_big, s_big), _hint_room(Q.shape[0])


cdef void _hook_tolerances(const double[:, ::1] coef, const float[::1] s_sq32,
                           const float[::1] q_sq32, double gamma, Py_ssize_t w,
                           const double *err, double sq_hi, double[::1] E) noexcept:
    """Each row's bound ``E_r`` for the test hooks over ``w`` features, as the hint pass
    takes it (the weighted bound from the error sums ``err``, none where ``err`` is NULL)."""
    cdef double L = 0.0, M = 0.0
    cdef Py_ssize_t j
    _hint_sums(coef, s_sq32, coef.shape[0], &L, &M)
    for j in range(E.shape[0]):
        E[j] = _hint_tol(gamma, w, q_sq32[j], L, M, err[j] if err != NULL else INFINITY, sq_hi)


def hint_values(const double[:, ::1] Q, const double[:, ::1] X, const double[:, ::1] coef,
                double gamma, bint weigh=True):
    """The hints ``H`` (``(p, m)``) of block ``Q`` against support rows ``X`` with
    coefficients ``coef``, and each row's bound ``E_r``, as :func:`perceptron_hint_pass`
    computes them before its first row; ``None`` where that pass would not use them. For
    tests: ``|H - f| <= E_r`` is the claim the pass rests on."""
    cdef Py_ssize_t m = Q.shape[0], w = Q.shape[1], n = X.shape[0], p = coef.shape[1], room
    cdef double sq_hi
    hook = _hook_setup(Q, X, coef, gamma)
    if hook is None:
        return None
    Qt_buf, q32_buf, S32_buf, s32_buf, sq_hi, room = hook
    cdef float[:, ::1] Qt = Qt_buf
    cdef float[::1] q_sq32 = q32_buf
    cdef float[:, ::1] S32 = S32_buf
    cdef float[::1] s_sq32 = s32_buf
    H_buf = np.zeros((p + 1, room))  # the hints, then the error sums
    cdef double[:, ::1] H = H_buf
    E_buf = np.empty(m)
    cdef double *err = &H[p, 0] if weigh else NULL
    with nogil:
        if n and m:
            sk_hint_block(&H[0, 0], err, room, p, &coef[0, 0], n, &S32[0, 0], w,
                          &s_sq32[0], &Qt[0, 0], room, w, m, &q_sq32[0], <float>gamma)
    _hook_tolerances(coef, s_sq32, q_sq32, gamma, w, err, sq_hi, E_buf)
    return H_buf[:p, :m], E_buf


def hint_column_values(const double[:, ::1] Q, const double[:, ::1] X,
                       const double[:, ::1] coef, double gamma, Py_ssize_t r0, Py_ssize_t r1,
                       double fill, bint weigh=True):
    """The hints of rows ``r0:r1`` as the hint pass's column updates build them
    (``sk_hint_column2`` for the vectors two by two, ``sk_hint_column`` for a last odd
    one) on a start of ``fill`` everywhere: ``(H, E)`` as :func:`hint_values` gives them,
    or ``None``. For tests: ``|H - fill - f| <= E_r`` on those rows, ``H == fill`` on the
    others (the kernels work on whole groups of 16 rows)."""
    cdef Py_ssize_t m = Q.shape[0], w = Q.shape[1], n = X.shape[0], p = coef.shape[1], s, room
    cdef double sq_hi
    if not 0 <= r0 <= r1 <= m:
        raise ValueError("the rows r0:r1 within the block: 0 <= r0 <= r1 <= m")
    hook = _hook_setup(Q, X, coef, gamma)
    if hook is None:
        return None
    Qt_buf, q32_buf, S32_buf, s32_buf, sq_hi, room = hook
    cdef float[:, ::1] Qt = Qt_buf
    cdef float[::1] q_sq32 = q32_buf
    cdef float[:, ::1] S32 = S32_buf
    cdef float[::1] s_sq32 = s32_buf
    H_buf = np.full((p + 1, room), fill)
    H_buf[p] = 0.0  # the error sums start at 0
    cdef double[:, ::1] H = H_buf
    wts_buf = np.empty((2, p))
    cdef double[:, ::1] wts = wts_buf
    E_buf = np.empty(m)
    cdef double *err = &H[p, 0] if weigh else NULL
    with nogil:
        s = 0
        while s < n:
            wts[0, :] = coef[s, :]
            if s + 1 < n:
                wts[1, :] = coef[s + 1, :]
                sk_hint_column2(&H[0, 0], err, room, p, &wts[0, 0], &Qt[0, 0], room, w, r0, r1,
                                &S32[s, 0], s_sq32[s], &S32[s + 1, 0], s_sq32[s + 1],
                                &q_sq32[0], <float>gamma)
                s += 2
            else:
                sk_hint_column(&H[0, 0], err, room, p, &wts[0, 0], &Qt[0, 0], room, w, r0, r1,
                               &S32[s, 0], s_sq32[s], &q_sq32[0], <float>gamma)
                s += 1
    _hook_tolerances(coef, s_sq32, q_sq32, gamma, w, err, sq_hi, E_buf)
    return H_buf[:p, :m], E_buf


def perceptron_hint_pass(
    const double[:, ::1] Q,
    const double[::1] q_sq,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    const double[:, ::1] T,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    double gamma,
    int64_t[::1] codes,
    double hint_limit,
    double margin=0.0,
    int pcode=P_OLDEST,
    const int64_t[::1] draws=None,
    double[::1] pstate=None,
    const int64_t[::1] ranks=None,
    double[::1] thresholds=None,
    double[:, ::1] trace=None,
):
    """Learn the rows of a micro-batch (targets ``T``) with the kernel perceptron, finding
    the rows that need work from float32 decision hints; ``None`` (nothing changed) when
    the hints' error bound would exceed ``hint_limit`` (see below).

    ``Q``/``q_sq`` are the block's rows and their squared norms (as :func:`sqnorms` sums
    them); ``X``, ``s_sq``, ``coef``, ``kdiag``, ``ids`` are the support set's buffers with
    room for every row that may join, the first ``n`` in use. Rows and support vectors are
    centred on the block's mean and rounded to float32 (distances do not change; the
    rounding error shrinks with the norms). No kernel matrix is kept: the hints
    ``H[c, r] ~= f_c(row r)`` cost one float32 kernel value per (support vector, row), and
    a change to the set updates the hints of the later rows by one column.

    A hint is trusted only where its sign is certain: ``|H - f| <= E_r``, the bound below,
    proven for float32 arithmetic. With ``u`` float32's unit roundoff, ``w`` features and
    squared norms taken after centring, a float32 kernel value is off by at most
    ``1.03 g (w + 8) u (||q||^2 + ||s||^2) + 5u`` (the norm expansion, the product with
    ``g`` and a 4-ulp exp), valid while the first term stays below ``hint_limit`` (at most
    1e-3, where the bound is linearised), so ``E_r = 2 (1.03 g (w + 8) u (||q_r||^2 L + M)
    + 5u L) + 1e-9 (1 + L)``, with ``L`` the l1 norm of the coefficients that ever entered
    the hints and ``M`` the same weighted by each vector's squared norm (a removed vector
    counts twice: its column was added once and taken out once). The factor 2 is a margin;
    1e-9 covers the float64 sums, and ``5u L`` the float64 rounding of the centring (the
    caller's ``RBF.expansion_exact`` check keeps it below 1e-10 in ``k``). A row whose hint
    is within ``E_r`` of 0 is decided afresh in float64 from the support rows, with the
    arithmetic of ``learn_one``.

    A second bound, weighted by the float32 kernel values ``k~`` themselves, is proven
    alike and taken where smaller (``_hint_tol``): with ``y`` the float32 exponent, ``t =
    -g d`` the exact one and ``D_s = 1.03 (w + 8) u (||q||^2 + ||s||^2)`` the norm
    expansion's error, ``|y - t| <= g D_s + 2.0001 u g d~`` (``g``'s rounding to float32
    and the product's; at most 1.44e-3 under ``hint_limit``), so ``|e^y - k| <= e^y (g D_s
    + 2.0001 u g d~) 1.0015``; ``e^y g d~ <= 1/e`` makes the second part absolute (``0.737
    u``), ``e^y <= k~ / (1 - 8u)`` and ``|k~ - e^y| <= 8u e^y`` (4 ulp, ``x < -87``:
    ``k~ = e^-87``, absolute, in the ``1e-9`` term) give ``|k~ - k| <= k~ (8.0001 u + 1.0016
    g D_s) + 0.737 u``. Summed over the vectors with ``|coef|``: ``E_r = 2 (1.001 A_r
    (8.0001 u + 1.0016 1.01 g 1.03 (w + 8) u (||q_r||^2 + S)) + 0.74 u L) + 1e-9 (1 + L)``,
    ``A_r`` the row's sum of ``max_c |coef_s,c| k~_s`` over every column that entered or
    left its hint (float64, 0.1% over for its own rounding), ``S`` the largest squared norm
    of the block and the set (1% over for float32), ``L`` as above. In ``d = 50`` (kernel
    values ~0.02) it is ~20 times smaller than the first; the kernels sum ``A_r`` from 16
    features on (``weigh``), where that pays.

    The kernels (``sk_hint_block``, ``sk_hint_column`` in ``_fastexp.h``) may take the
    dots' multiply-adds fused (FMA: one rounding instead of two) and sum a dot's ``w``
    products in any order: every summation order of ``w`` terms is within ``(w - 1) u /
    (1 - (w - 1) u)`` of ``sum_k |q_k s_k| <= (||q||^2 + ||s||^2) / 2`` of the exact dot,
    the left-to-right bound the ``(w + 8)`` term is built on, so ``E_r`` holds for them
    all; the float64 sums of ``H`` may be grouped differently too (the ``1e-9`` term). The
    squared norms are summed in float64 in any order (to far below float32's rounding).
    The hints only pick the rows decided afresh: the model's bits come from the float64
    decisions, whatever the hints' arithmetic.

    ``codes[j]`` as in :func:`perceptron_pass`. Returns ``(n, next_id, n_mistakes, largest
    new squared norm, rows decided afresh)``.

    ``pcode`` (:data:`POLICY_CODES`) picks the policy on a full set: remove-oldest, or
    remove-random with its slots from ``draws``, or the Forgetron; ``pstate`` carries
    ``(draws used, Q, M)`` in and out (the Forgetron's state as its ``insert`` keeps it).
    :data:`MERGE_CODE` is ``Merge(budget)`` (RBF): an update appends its row, and when that
    makes ``budget + 1`` vectors, two merge into one as the per-event core merges them
    (``_merge.pxi``: the search on the float64 rows, then the merge; the hints of the later
    rows lose both columns and gain the merged vector's). The buffers need ``budget + 1``
    rows; ``pstate[0]`` receives the merges made.

    With ``margin > 0`` it is the perceptron with margin: a row also updates where
    ``t f < margin`` (per column); a hint within ``E_r`` of ``margin`` is decided afresh too.

    With rank indices ``ranks`` and ``thresholds`` (changed in place) it is the ranker
    (:func:`ranker_rows`'s rule; ``T`` one column, not read): see :func:`_hint_pass`.

    ``trace`` (for tests; ``(m, p + 1)``): each row's hints and ``E_r`` as the pass decides
    it, so a test can hold every one to the exact decision values of the set at that row.
    """
    Qt, q_sq32, S32, s_sq32, center, H, work = _hint_buffers(
        Q.shape[1], Q.shape[0], X.shape[0], T.shape[1])
    mbuf = mpick = None
    if pcode == P_MERGE:  # its search's scratch for the set with the row appended
        mbuf = np.empty(_merge_work(max(budget + 1, 2), MERGE_GRID))
        mpick = np.empty(max(budget + 1, 2), dtype=np.intp)
    return _hint_pass(Q, q_sq, X, s_sq, coef, kdiag, ids, T, n, budget, next_id, gamma, codes,
                      hint_limit, margin, pcode, draws, pstate, Qt, q_sq32, S32, s_sq32,
                      center, H, work, ranks, thresholds, mbuf, mpick, trace)


def perceptron_warm_pass(
    const double[:, ::1] Q,
    const double[::1] q_sq,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    const double[:, ::1] T,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    const double[::1] gammas,
    const int64_t[::1] bounds,
    int64_t[::1] codes,
    double hint_limit,
    double margin=0.0,
    int pcode=P_OLDEST,
    const int64_t[::1] draws=None,
    double[::1] pstate=None,
):
    """The runs of ``gamma="auto"``'s warm-up in one call: rows ``bounds[r]:bounds[r + 1]``
    learned by :func:`perceptron_hint_pass` with ``gammas[r]``, the support set and
    ``pstate`` carried from run to run (exactly the calls one run at a time would make).
    Stops before a run the pass declines. Returns ``(runs learned, n, next_id, n_mistakes,
    largest new squared norm, rows decided afresh)``."""
    cdef Py_ssize_t r, a, b, runs = gammas.shape[0], done_runs = 0
    cdef Py_ssize_t mistakes = 0, fresh = 0, run_mistakes, run_fresh
    cdef double sq_max = 0.0, run_sq_max
    cdef Py_ssize_t longest = 0
    if bounds.shape[0] != runs + 1 or (runs and bounds[runs] > Q.shape[0]):
        raise ValueError("one gamma per run, and the runs' bounds within the rows")
    for r in range(runs):
        if not 0 <= bounds[r] <= bounds[r + 1]:
            raise ValueError("the runs' bounds must not decrease")
        longest = max(longest, bounds[r + 1] - bounds[r])
    # what a run would refuse, refused before the first one changes anything
    cdef Py_ssize_t rows = bounds[runs] - bounds[0] if runs else 0
    if runs and (T.shape[0] < bounds[runs] or q_sq.shape[0] < bounds[runs]
                 or codes.shape[0] < bounds[runs]):
        raise ValueError("targets, squared norms and codes for every row of the runs")
    if X.shape[0] < (n + rows if budget <= 0 else min(budget, n + rows)):
        raise ValueError("the support buffers are too small: reserve the rows first")
    if pcode != P_OLDEST and (pstate is None or pstate.shape[0] != 3):
        raise ValueError("every policy but remove-oldest carries pstate = (used, Q, M)")
    if pcode == P_MERGE:
        raise ValueError("the Merge code is perceptron_hint_pass's alone")
    if pcode == P_RANDOM and budget > 0 and (
            draws is None or draws.shape[0] < <Py_ssize_t>pstate[0] + rows):
        raise ValueError("remove-random needs one draw per row")
    # one set of buffers for every run: the hints' values do not depend on their room;
    # typed once here, so no run acquires their memoryviews again
    cdef float[:, ::1] Qt, S32
    cdef float[::1] q_sq32, s_sq32
    cdef double[::1] center, work
    cdef double[:, ::1] H
    Qt, q_sq32, S32, s_sq32, center, H, work = _hint_buffers(
        Q.shape[1], longest, X.shape[0], T.shape[1])
    for r in range(runs):
        a, b = bounds[r], bounds[r + 1]
        done = _hint_pass(Q[a:b], q_sq[a:b], X, s_sq, coef, kdiag, ids, T[a:b], n, budget,
                          next_id, gammas[r], codes[a:b], hint_limit, margin, pcode, draws,
                          pstate, Qt, q_sq32, S32, s_sq32, center, H, work)
        if done is None:
            break
        n, next_id, run_mistakes, run_sq_max, run_fresh = done
        if run_mistakes:
            mistakes += run_mistakes
            sq_max = max(sq_max, run_sq_max)
        fresh += run_fresh
        done_runs += 1
    return done_runs, n, next_id, mistakes, sq_max, fresh


cdef inline Py_ssize_t _hint_rank(double h, double tol, const double *b,
                                  Py_ssize_t nb) noexcept nogil:
    """The ranker's predicted rank from a hint ``h`` within ``tol`` of ``f``: the number of
    thresholds ``b[i] <= f``, or -1 where a threshold lies within ``tol`` of ``h`` (or ``h``
    is NaN): its side is not certain."""
    cdef Py_ssize_t i, pr = 0
    for i in range(nb):
        if h - b[i] > tol:
            pr += 1
        elif not b[i] - h > tol:
            return -1
    return pr


cdef object _hint_pass(
    const double[:, ::1] Q,
    const double[::1] q_sq,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    const double[:, ::1] T,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    double gamma,
    int64_t[::1] codes,
    double hint_limit,
    double margin,
    int pcode,
    const int64_t[::1] draws,
    double[::1] pstate,
    float[:, ::1] Qt,
    float[::1] q_sq32,
    float[:, ::1] S32,
    float[::1] s_sq32,
    double[::1] center,
    double[:, ::1] H,
    double[::1] work,
    const int64_t[::1] ranks=None,
    double[::1] thresholds=None,
    double[::1] mbuf=None,
    Py_ssize_t[::1] mpick=None,
    double[:, ::1] trace=None,
):
    """The body of :func:`perceptron_hint_pass` (its docstring says what it does), callable
    from C: :func:`perceptron_warm_pass` runs it once per run. The buffers (see
    :func:`_hint_buffers`) may have room for more rows (``Qt``, ``q_sq32``, ``H``).

    With ``ranks`` and ``thresholds`` it is the ranker's pass instead (one output, ``T``
    unread): row ``j``'s predicted rank is the number of thresholds ``<= f``, certain from
    the hint where no threshold lies within the bound of it; a wrong rank moves the
    thresholds between the two ranks by one and joins the set with ``ranks[j] - predicted``
    (as :func:`ranker_rows`), and a row whose rank is not certain is decided afresh in
    float64 as the per-event path decides it (``sk_coef_dot`` of its kernel row).
    ``codes[j]`` receives the predicted rank index."""
    cdef Py_ssize_t m = Q.shape[0], p = T.shape[1], wq = Q.shape[1], wx = X.shape[1]
    cdef Py_ssize_t cap = X.shape[0], j, c, s, k, slot
    cdef Py_ssize_t mistakes = 0, fresh = 0
    cdef double step, sq_max = 0.0, h, tol, L = 0.0, M = 0.0, cmax
    cdef float g32 = <float>gamma
    cdef bint certain, any_wrong, below, left
    cdef Py_ssize_t used = 0, last, ldq = Qt.shape[1], ldh = H.shape[1]
    cdef int64_t fm = 0
    cdef double fq = 0.0, phi, a, b, kx, q_big, s_big
    if pcode != P_OLDEST:
        if pstate is None or pstate.shape[0] != 3:
            raise ValueError("every policy but remove-oldest carries pstate = (used, Q, M)")
        used, fq, fm = <Py_ssize_t>pstate[0], pstate[1], <int64_t>pstate[2]
        if pcode == P_RANDOM and budget > 0 and (draws is None or draws.shape[0] < used + m):
            raise ValueError("remove-random needs one draw per row")
    if wq == 0 or wq > wx or T.shape[0] != m or q_sq.shape[0] != m or coef.shape[1] != p:
        raise ValueError("no features, support rows narrower than the block, or shapes differ")
    if cap < (n + m if budget <= 0 else min(budget, n + m)):
        raise ValueError("the support buffers are too small: reserve the rows first")
    cdef bint ranker = ranks is not None
    cdef Py_ssize_t nb = 0, pr = 0, i, merges = 0, mi = 0, partner = 0, zs
    cdef Py_ssize_t j_end = 0
    cdef double mh = 0.0, sqz, cz
    if trace is not None and (trace.shape[0] < m or trace.shape[1] != p + 1):
        raise ValueError("trace: a row of p hints and the bound per row")
    if pcode == P_MERGE and (
        budget <= 0 or cap < budget + 1 or mpick is None or mpick.shape[0] < budget + 1
        or mbuf is None or mbuf.shape[0] < _merge_work(budget + 1, MERGE_GRID)
    ):
        raise ValueError("Merge needs a budget, a spare row and its search's scratch")
    if ranker:
        if thresholds is None or p != 1 or ranks.shape[0] != m or margin != 0.0:
            raise ValueError("the ranker: thresholds, one output, one rank per row, no margin")
        nb = thresholds.shape[0]
        for j in range(m):
            if not 0 <= ranks[j] <= nb:
                raise ValueError("a rank index beyond the thresholds")
    if m == 0:
        if pcode == P_MERGE:
            pstate[0] = 0.0
        return n, next_id, 0, 0.0, 0
    if n > cap:
        raise ValueError("support rows narrower than the block, or n beyond them")
    if (Qt.shape[0] != wq or ldq < _hint_room(m) or q_sq32.shape[0] < _hint_room(m)
            or S32.shape[0] < cap + 1 or S32.shape[1] != wq or s_sq32.shape[0] < cap + 1
            or center.shape[0] < wq or H.shape[0] != p + 1 or ldh < _hint_room(m)
            or work.shape[0] < 2 * p + cap):
        raise ValueError("the hint buffers are too small (see _hint_buffers)")
    _hint_fill(Q, X, n, center, Qt, q_sq32, S32, s_sq32, &q_big, &s_big)
    if not _hint_applies(gamma, wq, q_big, s_big, hint_limit):
        return None
    cdef double *f = &work[0]
    cdef double *nc = &work[p]
    # the error sums (H's row p) pay from 16 features on: below, the bound from k <= 1
    # leaves next to no row to decide afresh (Bananas, Phishing: 0-5 in 500) and the sums
    # cost ~6% of the pass; both bounds are proven, the choice is speed only
    cdef bint weigh = wq >= 16
    cdef double *err = &H[p, 0] if weigh else NULL
    cdef double *krow = &work[2 * p]
    with nogil:
        for c in range(p + 1):  # the hints, then the error sums
            for j in range(m):
                H[c, j] = 0.0
        for j in range(m):
            if j == j_end:  # the next HINT_ROWS rows' hints, against the set as it is now
                # (one float32 kernel value per support vector and row), so a change to the
                # set updates at most that many rows' hints; the bound's sums afresh with them
                j_end = min(m, j + HINT_ROWS)
                _hint_sums(coef, s_sq32, n, &L, &M)
                if n and wq:
                    sk_hint_block(&H[0, j], err + j if weigh else NULL, ldh, p, &coef[0, 0], n,
                                  &S32[0, 0], wq, &s_sq32[0], &Qt[0, j], ldq, wq, j_end - j,
                                  &q_sq32[j], g32)
            tol = _hint_tol(gamma, wq, q_sq32[j], L, M, H[p, j] if weigh else INFINITY,
                            max(q_big, s_big))
            if trace is not None:  # (tests: the hints and the bound each row is decided by)
                for c in range(p):
                    trace[j, c] = H[c, j]
                trace[j, p] = tol
            if ranker:
                pr = _hint_rank(H[0, j], tol, &thresholds[0], nb)
                if pr < 0:  # a threshold within the bound: afresh, as learn_one decides it
                    fresh += 1
                    if n:
                        sk_dots(&krow[0], &X[0, 0], wx, n, &Q[j, 0], wq)
                        sk_rbf_from_dots(&krow[0], &krow[0], &s_sq[0], q_sq[j], n, gamma)
                    h = sk_coef_dot(&krow[0], &coef[0, 0], n)
                    pr = 0
                    for i in range(nb):
                        if thresholds[i] <= h:
                            pr += 1
                codes[j] = pr
                if pr == ranks[j]:
                    continue
                nc[0] = <double>(ranks[j] - pr)
                step = fabs(nc[0])
                if pr < ranks[j]:
                    for i in range(pr, ranks[j]):
                        thresholds[i] = thresholds[i] - 1.0
                else:
                    for i in range(ranks[j], pr):
                        thresholds[i] = thresholds[i] + 1.0
            else:
                certain = True
                any_wrong = False
                below = False
                for c in range(p):
                    h = H[c, j] * T[j, c]
                    if h > margin + tol:
                        continue
                    if h < -tol and p == 1:
                        any_wrong = True  # binary: a certain mistake needs no exact value
                        continue
                    if tol < h < margin - tol and p == 1:
                        below = True  # binary: a certain margin error, the sign right
                        continue
                    certain = False
                    break
                if certain and not any_wrong and not below:
                    codes[j] = -1
                    continue
                if certain:  # binary: a certain mistake (it predicted -T) or margin error
                    codes[j] = (1 if T[j, 0] < 0.0 else 0) if any_wrong else -1
                    nc[0] = T[j, 0]
                    step = fabs(nc[0])
                else:  # decided afresh, exactly as learn_one computes it
                    fresh += 1
                    for c in range(p):
                        f[c] = 0.0
                    if n:
                        sk_dots(&krow[0], &X[0, 0], wx, n, &Q[j, 0], wq)
                        sk_rbf_from_dots(&krow[0], &krow[0], &s_sq[0], q_sq[j], n, gamma)
                    if p == 1:  # the same sum in a register: no store and reload of f[0]
                        h = 0.0  # (from 0.0, as f[0] was: the same additions in order)
                        for s in range(n):
                            h = h + krow[s] * coef[s, 0]
                        f[0] = h
                    else:
                        for s in range(n):
                            for c in range(p):
                                f[c] = f[c] + krow[s] * coef[s, c]
                    any_wrong = _decide(&f[0], &T[j, 0], p, &nc[0], &step, &codes[j])
                    if margin > 0.0:
                        any_wrong = _margin_errors(&f[0], &T[j, 0], p, margin, &nc[0], &step)
                    if not any_wrong:
                        continue
            mistakes += 1
            phi = 1.0
            left = False
            if pcode == P_FORGETRON:
                fm += 1
            slot = n
            if budget > 0 and n >= budget and pcode != P_MERGE:  # (Merge: append, merge below)
                if pcode == P_RANDOM:
                    slot = draws[used]
                    used += 1
                elif pcode == P_SMALLEST:
                    slot = _smallest_slot(coef, kdiag, ids, n)
                else:
                    slot = _slot_for_new(&ids[0], n, budget)
                if pcode == P_FORGETRON:  # f'(x_r) of the oldest, exactly, then phi
                    sk_dots(&krow[0], &X[0, 0], wx, n, &X[slot, 0], wx)
                    sk_rbf_from_dots(&krow[0], &krow[0], &s_sq[0], s_sq[slot], n, gamma)
                    sk_dots(&kx, &X[slot, 0], wx, 1, &Q[j, 0], wq)
                    sk_rbf_from_dots(&kx, &kx, &s_sq[slot], q_sq[j], 1, gamma)
                    _combine(&krow[0], &coef[0, 0], n, p, f)  # (f is free: decided)
                    for c in range(p):
                        f[c] = f[c] + kx * nc[c]
                    _forgetron_ab(&coef[slot, 0], f, p, &a, &b)
                    phi = _forgetron_phi(a, b, fq - 15.0 / 32.0 * fm) if b > 0.0 else 1.0
                    fq = fq + (a * phi * phi + b * phi)  # (Forgetron.insert's order)
                cmax = 0.0  # the vector in slot leaves the later rows' hints: its float32
                for c in range(p):  # row kept in the spare row cap, its column taken
                    f[c] = -coef[slot, c]  # with the new vector's (weights f, then nc)
                    cmax = max(cmax, fabs(f[c]))
                left = True
                for k in range(wq):
                    S32[cap, k] = S32[slot, k]
                s_sq32[cap] = s_sq32[slot]
                L = L + cmax
                M = M + cmax * s_sq32[slot] * 1.01
                if pcode != P_OLDEST:  # SupportSet.remove: the last vector moves into slot
                    last = n - 1
                    if slot != last:
                        for k in range(wx):
                            X[slot, k] = X[last, k]
                        for c in range(p):
                            coef[slot, c] = coef[last, c]
                        kdiag[slot] = kdiag[last]
                        s_sq[slot] = s_sq[last]
                        ids[slot] = ids[last]
                        for k in range(wq):
                            S32[slot, k] = S32[last, k]
                        s_sq32[slot] = s_sq32[last]
                    for k in range(wx):
                        X[last, k] = 0.0
                    for c in range(p):
                        coef[last, c] = 0.0
                    n -= 1
                    slot = n
            if slot == n:
                n += 1
            _store(&X[slot, 0], wx, &Q[j, 0], wq, &coef[slot, 0], &nc[0], p)
            s_sq[slot] = q_sq[j]
            if q_sq[j] > sq_max:
                sq_max = q_sq[j]
            kdiag[slot] = 1.0
            ids[slot] = next_id
            next_id += 1
            for k in range(wq):
                S32[slot, k] = Qt[k, j]
            s_sq32[slot] = q_sq32[j]
            L = L + step
            M = M + step * q_sq32[j] * 1.01
            if j + 1 < j_end and left:  # the leaving vector goes, the new one enters them
                sk_hint_column2(&H[0, 0], err, ldh, p, &f[0], &Qt[0, 0], ldq, wq, j + 1, j_end,
                                &S32[cap, 0], s_sq32[cap], &S32[slot, 0], s_sq32[slot],
                                &q_sq32[0], g32)
            elif j + 1 < j_end:  # the new vector enters them
                sk_hint_column(&H[0, 0], err, ldh, p, &nc[0], &Qt[0, 0], ldq, wq, j + 1, j_end,
                               &S32[slot, 0], s_sq32[slot], &q_sq32[0], g32)
            if phi != 1.0:  # the Forgetron's shrink: f and the hints scale alike (their
                for s in range(n):  # error bound too, so L and M stay upper bounds)
                    for c in range(p):
                        coef[s, c] = coef[s, c] * phi
                for c in range(p):
                    for k in range(j + 1, j_end):
                        H[c, k] = H[c, k] * phi
            if pcode == P_MERGE and n > budget:  # Merge.insert: appended, so two merge
                _merge_pick(&X[0, 0], wx, &coef[0, 0], p, &s_sq[0], &kdiag[0], &ids[0], n,
                            gamma, MERGE_GRID, MERGE_STEPS, &mbuf[0], &mpick[0], &mi,
                            &partner, &mh, NULL)
                cmax = 0.0  # both leave the later rows' hints (weights f, then nc)
                cz = 0.0
                for c in range(p):
                    f[c] = -coef[mi, c]
                    nc[c] = -coef[partner, c]
                    cmax = max(cmax, fabs(f[c]))
                    cz = max(cz, fabs(nc[c]))
                L = L + cmax + cz
                M = M + (cmax * s_sq32[mi] + cz * s_sq32[partner]) * 1.01
                if j + 1 < j_end:
                    sk_hint_column2(&H[0, 0], err, ldh, p, &f[0], &Qt[0, 0], ldq, wq, j + 1, j_end,
                                    &S32[mi, 0], s_sq32[mi], &S32[partner, 0],
                                    s_sq32[partner], &q_sq32[0], g32)
                last = n - 1
                sqz = _merge_at(&X[0, 0], wx, &coef[0, 0], p, &s_sq[0], &kdiag[0], &ids[0],
                                NULL, 0, n, gamma, mi, partner, mh)
                n -= 1
                merges += 1
                if sqz > sq_max:
                    sq_max = sqz
                zs = partner if mi == last else mi  # z's slot (last moved into partner's)
                if partner != last and mi != last:
                    for k in range(wq):
                        S32[partner, k] = S32[last, k]
                    s_sq32[partner] = s_sq32[last]
                h = _mirror_row(&X[zs, 0], wx, &center[0], wq, &S32[zs, 0], &s_sq32[zs])
                s_big = max(s_big, h)
                cz = 0.0  # z enters them
                for c in range(p):
                    cz = max(cz, fabs(coef[zs, c]))
                L = L + cz
                M = M + cz * s_sq32[zs] * 1.01
                if j + 1 < j_end:
                    sk_hint_column(&H[0, 0], err, ldh, p, &coef[zs, 0], &Qt[0, 0], ldq, wq,
                                   j + 1, j_end, &S32[zs, 0], s_sq32[zs], &q_sq32[0], g32)
    if pcode == P_MERGE:
        pstate[0] = <double>merges
    elif pcode != P_OLDEST:
        pstate[0], pstate[1], pstate[2] = used, fq, <double>fm
    return n, next_id, mistakes, sq_max, fresh


def expf32(float[::1] a):
    """``a[i] = exp(a[i])`` in place, in float32 (the hint pass's exponential; for tests)."""
    if a.shape[0]:
        with nogil:
            sk_expf_array(&a[0], a.shape[0])


def oldest_slot(const int64_t[::1] ids):
    """The slot of the smallest id, the first on ties (``sk_oldest``: where remove-oldest
    and the Forgetron put a new vector into a full set), for tests."""
    if ids.shape[0] == 0:
        raise ValueError("no ids")
    return sk_oldest(&ids[0], ids.shape[0])


def smallest_slot(const double[:, ::1] coef, const double[::1] kdiag, const int64_t[::1] ids):
    """``RemoveSmallest``'s slot among the rows (``_smallest_slot``: the least ``||coef_s||
    sqrt(k(x_s, x_s))``, ties within 1e-12 relative to the oldest id), for tests."""
    cdef Py_ssize_t n = ids.shape[0]
    if n == 0 or coef.shape[0] != n or kdiag.shape[0] != n or coef.shape[1] == 0:
        raise ValueError("smallest_slot: one row of coef, kdiag and ids per slot, n >= 1")
    return _smallest_slot(coef, kdiag, ids, n)


def dots(const double[:, ::1] X, Py_ssize_t n, const double[::1] row):
    """``X[s, :w] . row`` for ``s < n`` (``w = len(row) <= X.shape[1]``): the compiled
    kernel rows' dot products (``sk_dots``), for tests."""
    cdef Py_ssize_t w = row.shape[0]
    if w > X.shape[1] or n > X.shape[0] or n < 0:
        raise ValueError("row wider than the rows of X, or n beyond their count")
    out = np.zeros(n)
    cdef double[::1] o = out
    if n and w:
        with nogil:
            sk_dots(&o[0], &X[0, 0], X.shape[1], n, &row[0], w)
    return out


def dots2(const double[:, ::1] X, Py_ssize_t n, const double[::1] row0,
          const double[::1] row1):
    """``(dots(X, n, row0), dots(X, n, row1))`` in one pass over ``X`` (``sk_dots2``, how the
    per-event core takes an event's row and the Forgetron's leaving column), for tests."""
    cdef Py_ssize_t w = row0.shape[0]
    if row1.shape[0] != w or w > X.shape[1] or n > X.shape[0] or n < 0:
        raise ValueError("rows of two widths, wider than the rows of X, or n beyond them")
    out0, out1 = np.zeros(n), np.zeros(n)
    cdef double[::1] o0 = out0, o1 = out1
    if n and w:
        with nogil:
            sk_dots2(&o0[0], &o1[0], &X[0, 0], X.shape[1], n, &row0[0], &row1[0], w)
    return out0, out1


def fused_columns():
    """How many rows :func:`step_pass` has taken with the Forgetron's leaving column in the
    same pass over the set since the module loaded (its untracked novelty rows carrying
    ``r`` under a full Forgetron), for tests."""
    return _FUSED_COLUMNS


def coef_dot(const double[::1] k, const double[::1] c):
    """``k . c`` in the per-event path's one-column order (``sk_coef_dot``), for tests."""
    if k.shape[0] != c.shape[0]:
        raise ValueError("k and c differ in length")
    if k.shape[0] == 0:
        return 0.0
    return sk_coef_dot(&k[0], &c[0], k.shape[0])


def l1dists(const double[:, ::1] X, Py_ssize_t n, const double[::1] row):
    """``sum_k |X[s, k] - row[k]|`` over all of ``X``'s features for ``s < n`` (``row``'s
    absent features read as 0): the compiled Laplacian rows' distances (``sk_l1dists``),
    for tests."""
    cdef Py_ssize_t w = row.shape[0]
    if w > X.shape[1] or n > X.shape[0] or n < 0:
        raise ValueError("row wider than the rows of X, or n beyond their count")
    out = np.zeros(n)
    cdef double[::1] o = out
    if n and X.shape[1]:
        with nogil:
            sk_l1dists(&o[0], &X[0, 0], X.shape[1], n, &row[0] if w else NULL, w)
    return out


cdef inline void _welford_row(const double *row, Py_ssize_t n, double *mean, double *m2,
                              Py_ssize_t w) noexcept nogil:
    """Fold one row into the statistics of ``n`` rows: exactly the operations of
    :meth:`streamk.scale.ScaleEstimator.update` for one row, so the same bits."""
    cdef Py_ssize_t k
    cdef double r1 = 1.0 / <double>(n + 1), r2 = <double>n / <double>(n + 1), delta
    cdef volatile double t  # no fused multiply-add: NumPy rounds the product first
    for k in range(w):
        delta = row[k] - mean[k]
        t = delta * r1
        mean[k] = mean[k] + t
        t = delta * delta
        t = t * r2
        m2[k] = (m2[k] + 0.0) + t


cdef double _fsum(const double *x, Py_ssize_t w, double *partials, bint *ok) noexcept nogil:
    """``math.fsum`` of ``x[:w]``: CPython's algorithm (Shewchuk's non-overlapping partials,
    then the round-half-even fix of the last partial), so the same correctly rounded sum.
    ``partials`` has room for ``w`` doubles. ``ok`` is set False where a partial sum is not
    finite (a non-finite term or an intermediate overflow: ``math.fsum``'s own cases)."""
    cdef Py_ssize_t i, j, n = 0, k
    cdef double v, y, t, hi, yr, lo = 0.0
    ok[0] = True
    for k in range(w):
        v = x[k]
        i = 0
        for j in range(n):
            y = partials[j]
            if fabs(v) < fabs(y):
                t = v
                v = y
                y = t
            hi = v + y
            yr = hi - v
            lo = y - yr
            if lo != 0.0:
                partials[i] = lo
                i += 1
            v = hi
        n = i
        if v != 0.0:
            if not (v - v == 0.0):  # inf or NaN: math.fsum's special cases
                ok[0] = False
                return 0.0
            partials[n] = v
            n += 1
    hi = 0.0
    if n > 0:
        n -= 1
        hi = partials[n]
        while n > 0:  # sum_exact: the partials from the top until one is inexact
            v = hi
            n -= 1
            y = partials[n]
            hi = v + y
            yr = hi - v
            lo = y - yr
            if lo != 0.0:
                break
        # half-way case: the rest of the partials push the rounding to the other side
        if n > 0 and ((lo < 0.0 and partials[n - 1] < 0.0) or (lo > 0.0 and partials[n - 1] > 0.0)):
            y = lo * 2.0
            v = hi + y
            yr = v - hi
            if y == yr:
                hi = v
    return hi


def fsum_rows(const double[:, ::1] A):
    """``[math.fsum(row) for row in A]`` as float64 (the same correctly rounded sums),
    and whether every row's was finite throughout; the ``gamma="auto"`` warm-up's widths
    sum some thirty rows of per-feature variances per fresh model."""
    cdef Py_ssize_t r, m = A.shape[0], w = A.shape[1]
    cdef bint ok = True, row_ok
    out = np.zeros(m)
    cdef double[::1] o = out
    cdef double[::1] partials = np.empty(max(w, 1))
    for r in range(m):
        o[r] = _fsum(&A[r, 0], w, &partials[0], &row_ok) if w else 0.0
        ok = ok and row_ok
    return out, ok


def welford_each(const double[:, ::1] rows, Py_ssize_t n, double[::1] mean, double[::1] m2):
    """Fold ``rows`` one at a time into a running mean and sum of squared deviations
    (Welford), with exactly the operations of :meth:`streamk.scale.ScaleEstimator.update`
    for one row, so the result is the same to the bit. Returns the new count."""
    cdef Py_ssize_t i, w = rows.shape[1]
    if mean.shape[0] != w or m2.shape[0] != w:
        raise ValueError("statistics and rows differ in width")
    for i in range(rows.shape[0]):
        _welford_row(&rows[i, 0], n, &mean[0], &m2[0], w)
        n += 1
    return n


def welford_marks(const double[:, ::1] rows, Py_ssize_t n, double[::1] mean, double[::1] m2,
                  const int64_t[::1] marks, double[:, ::1] out):
    """:func:`welford_each` over ``rows``, copying the sum of squared deviations into
    ``out[r]`` once ``rows[:marks[r]]`` are in (``marks`` increasing, from 1): the
    ``gamma="auto"`` warm-up's widths of a whole block from one call, the same to the bit
    as folding up to each mark in turn. Returns the new count."""
    cdef Py_ssize_t i, k, r = 0, w = rows.shape[1], nm = marks.shape[0]
    if mean.shape[0] != w or m2.shape[0] != w:
        raise ValueError("statistics and rows differ in width")
    if out.shape[0] < nm or (nm and out.shape[1] != w):
        raise ValueError("one row of out per mark, as wide as the rows")
    for i in range(nm):
        if not (1 <= marks[i] <= rows.shape[0]) or (i and marks[i] <= marks[i - 1]):
            raise ValueError("marks must increase within 1 .. len(rows)")
    for i in range(rows.shape[0]):
        _welford_row(&rows[i, 0], n, &mean[0], &m2[0], w)
        n += 1
        while r < nm and marks[r] == i + 1:
            for k in range(w):
                out[r, k] = m2[k]
            r += 1
    return n


def standardize_rows(const double[:, ::1] X, int64_t[::1] counts, double[::1] means,
                     double[::1] vars_, double[:, ::1] said, double[:, ::1] learned=None):
    """On-line standardisation of a block, row by row, with exactly the operations of
    :class:`streamk.learners.standardizer.FeatureStandardizer` (so the same bits).

    ``said[i]`` is row ``i`` standardised with the statistics before it (``transform_one``);
    with ``learned``, row ``i`` is then folded into ``counts``, ``means`` and ``vars_``
    (one column per feature, updated in place) and ``learned[i]`` is it standardised with
    them (``learned``). A NaN cell is an absent feature: not folded, NaN in the outputs.
    ``(x - mean) / var ** 0.5`` (0 where the variance is 0) as Python computes it: ``pow``,
    as ``float.__pow__`` calls it, not ``sqrt``, once per variance (the one after a row is
    the one before the next)."""
    cdef Py_ssize_t i, j, m = X.shape[0], w = X.shape[1]
    cdef double x, old, mean, v, n
    cdef volatile double t  # no fused multiply-add: Python rounds the product first
    cdef bint update = learned is not None
    if counts.shape[0] != w or means.shape[0] != w or vars_.shape[0] != w:
        raise ValueError("statistics and rows differ in width")
    if said.shape[0] != m or said.shape[1] != w or (
        update and (learned.shape[0] != m or learned.shape[1] != w)
    ):
        raise ValueError("outputs must have the rows' shape")
    sd_obj = np.empty(w)
    cdef double[::1] sd = sd_obj  # var ** 0.5 of each column's variance as it stands
    with nogil:
        for j in range(w):
            sd[j] = pow(vars_[j], 0.5)
        for i in range(m):
            for j in range(w):
                x = X[i, j]
                if x != x:
                    said[i, j] = NAN
                    if update:
                        learned[i, j] = NAN
                    continue
                old = means[j]
                v = vars_[j]
                said[i, j] = (x - old) / sd[j] if v != 0.0 else 0.0
                if not update:
                    continue
                n = <double>(counts[j] + 1)
                mean = old + (x - old) / n
                t = (x - old) * (x - mean)
                v = v + (t - v) / n
                counts[j] += 1
                means[j] = mean
                vars_[j] = v
                sd[j] = pow(v, 0.5)
                learned[i, j] = (x - mean) / sd[j] if v != 0.0 else 0.0
