# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Compiled per-mistake work of the Projectron and Merge budgets (optional).

:mod:`streamk.budget.compiled` falls back to the NumPy code in
:mod:`streamk.budget.projectron` and :mod:`streamk.budget.merge` without this module; that
code is the reference these loops are tested against (the same steps in the same order,
so the two agree to rounding).

* :func:`projectron_run` — a margin perceptron (margin 0: Alg. 7.52) over a block of rows
  with an RBF kernel and a :class:`~streamk.budget.Projectron` budget in one call: the
  kernel row, the decision, the projection ``d = P k`` onto the span of the set, then
  either the projected coefficient update or the insertion with the block-inverse update
  of ``P = K(S, S)^-1`` (after the rank-one removal when the set is full); each update's
  pass over ``P`` is made by the next row's ``d = P k`` in its own pass (one pass instead of
  two), the last one at the end of the run.
* :func:`projectron_settle` — such a pass the per-event path left pending, when
  ``Projectron._settle`` wants it before something else reads ``P``.
* :func:`projectron_insert` — the ``P`` work of one ``Projectron.insert`` for any learner
  and kernel (the caller's kernel row): projection, removal downdate, block-inverse growth.
* :func:`rbf_gram` and :func:`inverse_by_cholesky` — the Projectron's ``P`` rebuilt from scratch (after a change
  it did not make, e.g. ``gamma="auto"`` moving the kernel) without LAPACK's threads;
  :func:`rbf_gram_kept` the same Gram matrix from the dots a former rebuild kept.
* :func:`merge_search` — :class:`~streamk.budget.Merge`'s search: the vector to merge, its
  partner and the point ``h`` on the segment between them that loses least;
  :func:`merge_apply` the whole merge, :func:`merge_run` a margin perceptron over a block
  of rows under a Merge budget in one call.

The Projectron's steps on ``P`` live in ``_projectron.pxi`` and Merge's in ``_merge.pxi``;
the per-event path (``streamk/learners/_event.pyx``) includes both.
"""

from libc.math cimport INFINITY, exp, fabs, sqrt
from libc.string cimport memcmp, memcpy, memset
from libc.stdint cimport int64_t, uint64_t


cdef extern from "../_fastexp.h" nogil:
    void sk_scaled_exp(double *a, Py_ssize_t n, double factor)
    void sk_dots(double *out, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                 const double *row, Py_ssize_t w)
    void sk_rbf_from_dots(double *out, const double *dot, const double *sq, double row_sq,
                          Py_ssize_t n, double gamma)
    double sk_coef_dot(const double *k, const double *c, Py_ssize_t n)


cdef extern from "../_dense.h" nogil:
    void sk_gram_args(double *g, const double *d, const double *sq, double sq_i, Py_ssize_t m)

import numpy as np

include "_vec.pxi"
# Merge's search and merge on raw buffers (shared with streamk/learners/_event.pyx)
include "_merge.pxi"
include "_projectron.pxi"


cdef inline bint _margin_rule(const double *k, const double *C, Py_ssize_t n, Py_ssize_t p,
                              const double *t, double margin, double *f, double *nc,
                              int64_t *code) noexcept nogil:
    """The margin perceptron's rule on a row whose kernel row is ``k``: ``f = k C``, the
    prediction into ``code`` (the sign, sgn(0) = +1, or the best column), and the update
    ``nc``: ``t`` in the columns whose sign is wrong or where ``t f < margin``, else 0.
    Returns whether any column updates (what :func:`projectron_run` and :func:`merge_run`
    share).

    ``f`` is summed as the per-event core sums it (``_combine`` in streamk/_kcol.pxi: one
    column on ``sk_coef_dot``'s four lanes, several left to right), so a block and
    ``learn_one`` decide alike to the bit, and a column's sum is held in a register: summed
    into ``f`` in memory, each addition waited on the store of the one before (about eight
    cycles a vector, most of the rule's time on a set of 200)."""
    cdef Py_ssize_t s, c, best_c = 0
    cdef double best, acc
    cdef bint wrong, any_wrong = False
    if p == 1:
        f[0] = sk_coef_dot(k, C, n)
    else:
        for c in range(p):  # column by column: each column's additions in _combine's order
            acc = 0.0
            for s in range(n):
                acc = acc + k[s] * C[s * p + c]
            f[c] = acc
    if p == 1:
        code[0] = 1 if f[0] >= 0.0 else 0
    else:
        best = f[0]
        for c in range(1, p):
            if f[c] > best:
                best = f[c]
                best_c = c
        code[0] = best_c
    for c in range(p):
        wrong = ((f[c] >= 0.0) != (t[c] > 0.0)) or (t[c] * f[c] < margin)
        nc[c] = t[c] if wrong else 0.0
        any_wrong = any_wrong or wrong
    return any_wrong


cdef inline double _append(const double *q, Py_ssize_t w, double *X, Py_ssize_t ldx,
                           double *s_sq, double *C, Py_ssize_t p, const double *nc,
                           double *kdiag, double kxx, int64_t *ids, int64_t new_id,
                           Py_ssize_t n) noexcept nogil:
    """``SupportSet.append`` of row ``q`` (``w`` wide) into slot ``n`` of the buffers, with
    coefficients ``nc``, ``k(x, x) = kxx`` and id ``new_id``; returns its squared norm
    (what :func:`projectron_run` and :func:`merge_run` share)."""
    cdef Py_ssize_t s, c
    cdef double sq = 0.0
    for s in range(w):
        X[n * ldx + s] = q[s]
        sq += q[s] * q[s]
    for s in range(w, ldx):
        X[n * ldx + s] = 0.0
    s_sq[n] = sq
    for c in range(p):
        C[n * p + c] = nc[c]
    kdiag[n] = kxx
    ids[n] = new_id
    return sq


def rbf_gram(const double[:, ::1] X, const double[::1] sq, Py_ssize_t n, double gamma):
    """``K(S, S)`` of the first ``n`` support rows for an RBF kernel, single-threaded:
    ``exp(-gamma max(0, sq_i + sq_j - 2 x_i . x_j))`` in the operation order of
    :func:`streamk.accel.rbf_from_dots` (the caller checks the expansion is exact). The dots
    of row ``i`` with the rows up to it are ``sk_dots``'s, four rows at a time (the warm-up's
    kernel changes rebuild ``P`` from this every ten events)."""
    cdef Py_ssize_t w = X.shape[1]
    if n < 0 or n > X.shape[0] or sq.shape[0] < n:
        raise ValueError("X and sq must hold n rows")
    Gm = np.empty((n, n))
    if n == 0:
        return Gm
    cdef double[:, ::1] G = Gm
    with nogil:
        _rbf_gram(&G[0, 0], n, &X[0, 0], w, &sq[0], n, gamma, True)
    return Gm


cdef inline Py_ssize_t _slot_hash(int64_t key, Py_ssize_t mask) noexcept nogil:
    """A slot of an open-addressing table of ``mask + 1`` entries for ``key``."""
    return <Py_ssize_t>((<uint64_t>key * <uint64_t>0x9E3779B97F4A7C15ULL) >> 40) & mask


cdef void _kept_rows(const double *X, Py_ssize_t w, const int64_t *ids, Py_ssize_t n,
                     const double *kX, const int64_t *kids, Py_ssize_t m, Py_ssize_t *table,
                     Py_ssize_t mask, Py_ssize_t *hit) noexcept nogil:
    """``hit[i]``: the kept row (of ``m``, ``w`` wide, ids ``kids``) with slot ``i``'s id and
    its very entries, else ``-1``. ``table`` (``mask + 1`` entries, a power of two above
    ``m``) is scratch: the kept ids hashed, linear probing."""
    cdef Py_ssize_t a, h
    for h in range(mask + 1):
        table[h] = -1
    for a in range(m):
        h = _slot_hash(kids[a], mask)
        while table[h] >= 0:
            h = (h + 1) & mask
        table[h] = a
    for a in range(n):
        hit[a] = -1
        h = _slot_hash(ids[a], mask)
        while table[h] >= 0:
            if kids[table[h]] == ids[a]:
                if memcmp(&X[a * w], &kX[table[h] * w], w * sizeof(double)) == 0:
                    hit[a] = table[h]
                break
            h = (h + 1) & mask


def rbf_gram_kept(
    const double[:, ::1] X,
    const double[::1] sq,
    const int64_t[::1] ids,
    Py_ssize_t n,
    double gamma,
    const int64_t[::1] kept_ids,
    const double[:, ::1] kept_X,
    const double[:, ::1] kept_D,
    Py_ssize_t m,
    int64_t[::1] out_ids,
    double[:, ::1] out_X,
    double[:, ::1] out_D,
    double[:, ::1] out_G,
    bint mirror=True,
):
    """:func:`rbf_gram` (the same bits) from the dots a former call kept.

    ``kept_ids``, ``kept_X`` and ``kept_D`` hold ``m`` rows (ids, entries as wide as
    ``X``, dots in ``kept_D``'s lower triangle). Slot ``i``'s row, when kept under its id
    with the very same entries (compared here), takes its dots with the other kept rows
    from ``kept_D`` (a dot's bits do not depend on which operand is the row, see
    ``sk_dots``); the other pairs are ``sk_dots``'s. So a new ``gamma`` costs the exps and
    the dots of new rows only. ``out_ids``, ``out_X`` and ``out_D`` (room for ``n`` rows, not
    the kept buffers) receive what to keep for the next call, ``out_G`` (``n x n``) the Gram
    matrix (its lower triangle alone unless ``mirror``). Returns how many rows were found
    kept."""
    cdef Py_ssize_t w = X.shape[1], i, j, a, b, mask = 1, found = 0, same = 0
    if n < 0 or n > X.shape[0] or sq.shape[0] < n or ids.shape[0] < n:
        raise ValueError("X, sq and ids must hold n rows")
    if m < 0 or m > kept_ids.shape[0] or m > kept_X.shape[0] or m > kept_D.shape[0]:
        raise ValueError("the kept buffers must hold m rows")
    if m and (kept_X.shape[1] != w or kept_D.shape[1] < m):
        raise ValueError("kept rows as wide as X, kept dots m x m")
    if out_ids.shape[0] < n or out_X.shape[0] < n or out_X.shape[1] != w:
        raise ValueError("the output buffers must hold n rows as wide as X")
    if out_D.shape[0] < n or out_D.shape[1] < n:
        raise ValueError("out_D must hold n x n dots")
    if out_G.shape[0] != n or out_G.shape[1] != n:
        raise ValueError("out_G must be n x n")
    if n == 0:
        return 0
    while mask <= 2 * m:
        mask *= 2
    scratch = np.empty(mask + n, dtype=np.intp)
    cdef Py_ssize_t[::1] sc = scratch
    cdef Py_ssize_t *hit = &sc[mask]
    cdef double[:, ::1] G = out_G
    cdef double[:, ::1] D = out_D
    with nogil:
        if m:
            _kept_rows(&X[0, 0], w, &ids[0], n, &kept_X[0, 0], &kept_ids[0], m, &sc[0],
                       mask - 1, hit)
        else:
            for i in range(n):
                hit[i] = -1
        while same < n and hit[same] == same:  # the leading slots kept where they were
            same += 1
        for i in range(n):
            out_ids[i] = ids[i]
            memcpy(&out_X[i, 0], &X[i, 0], w * sizeof(double))
            if hit[i] < 0:  # a new row: its dots with all the rows up to it
                sk_dots(&D[i, 0], &X[0, 0], w, i + 1, &X[i, 0], w)
                continue
            found += 1
            a = hit[i]
            if i < same:  # it and every row before it kept in place: the kept row's dots
                memcpy(&D[i, 0], &kept_D[i, 0], (i + 1) * sizeof(double))
                continue
            for j in range(i + 1):
                b = hit[j]
                if b < 0:
                    sk_dots(&D[i, j], &X[j, 0], w, 1, &X[i, 0], w)
                elif b <= a:
                    D[i, j] = kept_D[a, b]
                else:
                    D[i, j] = kept_D[b, a]
        _gram_rows(&G[0, 0], n, &D[0, 0], D.shape[1], &sq[0], n, gamma, mirror)
    return found


def inverse_by_cholesky(const double[:, ::1] G, double[:, ::1] P, double min_rel,
                        double[::1] work=None, bint mirror=True):
    """``P[:n, :n] = G^-1`` for a positive definite Gram matrix ``G`` (``n x n``):
    ``G = L Lᵀ``, ``N = L^-ᵀ``, ``P = N Nᵀ`` (O(n³), backward stable like LAPACK's; every
    step a dot of two rows, so ``P`` comes out exactly symmetric).

    Single-threaded and in place, where ``np.linalg.inv`` may spin BLAS threads on a busy
    machine for a matrix this small. Returns ``False`` (``P`` untouched) when a squared
    pivot ``L_ss²`` (the squared distance of ``x_s`` from the span of the rows before it)
    falls to ``min_rel * G_ss`` or below: ``G`` is too close to singular, and the caller
    inverts it with LAPACK (or a pseudo-inverse) instead. ``work`` (``2 n² + 9 n`` entries,
    any contents), when given, is the scratch (``L``, ``N`` and the dots' lanes): a caller
    that rebuilds often saves the allocations. ``mirror=False`` writes ``P``'s lower triangle
    only (the Projectron's compiled steps read no other; it mirrors before NumPy reads ``P``).
    """
    cdef Py_ssize_t n = G.shape[0], ldp = P.shape[0]
    cdef bint ok
    if G.shape[1] != n or ldp < n or P.shape[1] != ldp:
        raise ValueError("G must be square and P at least as large")
    if n == 0:
        return True
    if work is None:
        work = np.empty(2 * n * n + 9 * n)
    elif work.shape[0] < 2 * n * n + 9 * n:
        raise ValueError("work must hold 2 n² + 9 n entries")
    with nogil:  # the loops are C (streamk/_dense.h: two dots per load, sk_dots's bits)
        ok = _inverse_by_cholesky(&G[0, 0], n, &P[0, 0], ldp, &work[0], min_rel, mirror) != 0
    return ok


def projectron_insert(
    double[:, ::1] P,
    const double[:, ::1] coef,
    double[::1] k,
    double[::1] d,
    double[::1] col,
    Py_ssize_t n,
    bint full,
    double kxx,
    double eta,
    double min_rel,
):
    """The ``P`` work of one ``Projectron.insert`` of a vector with ``k = K(S, x)``.

    ``d = P k`` and the squared projection error; then, if the vector is not projected,
    the removal's rank-one downdate when ``full`` (``coef`` are the set's ``n``
    coefficient rows, read only) and the block-inverse growth. ``P`` (capacity ``n + 1``),
    ``k`` and ``d`` change in place; the caller makes the matching support-set changes.
    Returns ``(slot, P_ii)``: ``slot = -2`` when projected (``coef_S += d cᵀ``), ``-1`` when
    appended, else the removed slot (``col[:n]`` then holds ``P[:, slot]`` before the
    removal, ``P_ii`` its pivot, and ``k`` is ``without_slot(k, slot)`` in its first
    ``n - 1`` entries).
    """
    cdef Py_ssize_t ldp = P.shape[0], slot = -1, m = n
    cdef double delta, pii = 0.0
    if n < 1 or n + 1 > ldp or P.shape[1] != ldp or k.shape[0] < n or d.shape[0] < n:
        raise ValueError("need n >= 1, P holding n + 1 rows, and n entries in k and d")
    if col.shape[0] < 2 * n or coef.shape[0] < n or coef.shape[1] < 1:
        raise ValueError("col needs 2 n entries (half of them scratch) and coef n rows")
    cdef double *Pp = &P[0, 0]
    cdef double *row = &col[m]
    cdef double[::1] g = np.empty(5 * n)  # scratch: 4 n for _shrink_grow, then cm
    with nogil:
        delta = _project(Pp, ldp, &k[0], &d[0], &g[0], n, kxx)
        if delta <= eta or delta <= min_rel * kxx:
            slot = -2
        elif full:
            slot = _pick(Pp, ldp, &coef[0, 0], coef.shape[1], &k[0], &col[0], row, n, &pii)
            delta = _project_without(&d[0], &col[0], pii, slot, n, &k[0], kxx)
            _shrink_grow(Pp, ldp, n, slot, &col[0], row, &d[0], &g[0], &g[4 * n], delta)
        else:
            _grow_inverse(Pp, ldp, &d[0], &g[0], n, delta)
    return slot, pii


def projectron_settle(double[:, ::1] P, const double[::1] pend, Py_ssize_t m):
    """``Projectron._settle``'s update of ``P``'s rows below ``m`` from ``pend`` (its four
    vectors of ``m`` entries), compiled: the same bits as its NumPy lines and as the
    ``d = P k`` that would have taken it, without their O(n²) temporaries."""
    if m < 0 or m > P.shape[0] or P.shape[1] != P.shape[0] or pend.shape[0] < 4 * m:
        raise ValueError("need P at least m x m (square) and 4 m entries in pend")
    if m:
        with nogil:
            _settle(&P[0, 0], P.shape[1], &pend[0], m)


cdef void _rbf_row(const double *q, Py_ssize_t w, const double *X, Py_ssize_t ldx,
                   const double *s_sq, Py_ssize_t n, double set_sq, double gamma,
                   double *k) noexcept nogil:
    """``k[s] = exp(-gamma ||q - X[s]||²)`` for ``s < n``: from the norm expansion with the
    loops of the per-event path (``_fastexp.h``'s ``sk_dots`` and ``sk_rbf_from_dots``, the
    same values as its kernel rows) where ``RBF.expansion_exact`` holds for the set's
    largest squared norm ``set_sq`` and ``q``'s, else from the distances themselves."""
    cdef Py_ssize_t s
    cdef double q_sq = 0.0
    for s in range(w):
        q_sq = q_sq + q[s] * q[s]
    if not (set_sq + q_sq) * 1e-15 * gamma > 1e-10:
        sk_dots(k, X, ldx, n, q, w)
        sk_rbf_from_dots(k, k, s_sq, q_sq, n, gamma)
        return
    for s in range(n):
        k[s] = exp(-gamma * _dist2(q, &X[s * ldx], w))


def projectron_run(
    const double[:, ::1] Q,
    double[:, ::1] X,
    double[::1] s_sq,
    double[:, ::1] coef,
    double[::1] kdiag,
    int64_t[::1] ids,
    double[:, ::1] P,
    const double[:, ::1] T,
    Py_ssize_t n,
    Py_ssize_t budget,
    int64_t next_id,
    double gamma,
    double eta,
    double min_rel,
    double margin,
    int64_t[::1] codes,
):
    """Learn the rows of ``Q`` (targets ``T``, ±1 per column) in order; see the module.

    ``Q`` is at least as wide as the stored rows (absent features 0; columns of ``X``
    beyond ``Q``'s width are 0). A row updates when some column has a
    mistake (``sgn(f) != t``, sgn(0) = +1) or a margin error (``t f < margin``); its
    coefficients are ``t`` in those columns, 0 elsewhere. ``codes[j]`` receives the
    prediction made before row ``j`` was learned (binary: 1 if ``f >= 0``; one-vs-rest: the
    arg-max column). The support buffers and ``P`` (capacity at least the largest set the
    run can reach) change in place. Returns ``(n, next_id, updates, largest squared norm
    stored)``.
    """
    cdef Py_ssize_t m = Q.shape[0], ldx = X.shape[1], p = coef.shape[1], ldp = P.shape[0]
    cdef Py_ssize_t w = Q.shape[1]
    cdef Py_ssize_t j, s, c
    cdef Py_ssize_t cap = min(X.shape[0], P.shape[0])
    if w > ldx or w < 1 or T.shape[0] != m or T.shape[1] != p or codes.shape[0] < m:
        raise ValueError("Q must be at most as wide as X, T one row per row of Q, codes long enough")
    if n > cap or (budget > 0 and min(budget, n + m) > cap) or (budget == 0 and n + m > cap):
        raise ValueError("the support buffers or P cannot hold the set this run may reach")
    if p < 1 or p > 64:
        raise ValueError("between 1 and 64 coefficient columns")
    scratch = np.empty(9 * max(cap, 1) + 2 * p)  # g: 4 cap (_shrink_grow's update)
    cdef double[::1] sc = scratch
    cdef double *k = &sc[0]
    cdef double *d = k + cap
    cdef double *col = d + cap
    cdef double *row = col + cap
    cdef double *g = row + cap
    cdef double *cm = g + 4 * cap
    cdef double *f = cm + cap
    cdef double *nc = f + p
    cdef double *Pp = &P[0, 0]
    cdef double *Xp = &X[0, 0]
    cdef double *Cp = &coef[0, 0]
    cdef double delta, kxx = 1.0, sq, sq_max = 0.0, pii, set_sq = 0.0
    cdef int64_t updates = 0
    cdef Py_ssize_t pend_m = -1  # rows of the update _shrink_defer or _grow_defer left in g
    with nogil:
        for s in range(n):
            if s_sq[s] > set_sq:
                set_sq = s_sq[s]
        for j in range(m):
            _rbf_row(&Q[j, 0], w, Xp, ldx, &s_sq[0], n, set_sq, gamma, k)
            if not _margin_rule(k, Cp, n, p, &T[j, 0], margin, f, nc, &codes[j]):
                continue
            updates += 1
            if pend_m >= 0:  # the last update's pass over P and this d = P k in one
                delta = _project_pending(Pp, ldp, k, d, cm, n, kxx, g, pend_m)
                pend_m = -1
            else:
                delta = _project(Pp, ldp, k, d, cm, n, kxx)
            if n and (delta <= eta or delta <= min_rel * kxx):
                for s in range(n):
                    for c in range(p):
                        Cp[s * p + c] += d[s] * nc[c]
                continue
            if budget > 0 and n >= budget:
                s = _remove_one(Pp, ldp, Xp, ldx, Cp, p, &s_sq[0], &kdiag[0], &ids[0], k, col,
                                row, n, &pii)
                delta = _project_without(d, col, pii, s, n, k, kxx)
                _shrink_defer(Pp, ldp, n, s, col, row, d, g, cm, delta)
                pend_m = n - 1
                n -= 1
            else:
                _grow_defer(Pp, ldp, d, n, delta, g)
                pend_m = n
            sq = _append(&Q[j, 0], w, Xp, ldx, &s_sq[0], Cp, p, nc, &kdiag[0], kxx, &ids[0],
                         next_id, n)
            if sq > sq_max:
                sq_max = sq
            if sq > set_sq:
                set_sq = sq
            next_id += 1
            n += 1
        if pend_m >= 0:  # no d = P k left to take it
            _settle(Pp, ldp, g, pend_m)
    return n, next_id, updates, sq_max


def merge_search(
    const double[:, ::1] X,
    const double[:, ::1] C,
    const double[::1] s_sq,
    const double[::1] kdiag,
    const int64_t[::1] ids,
    Py_ssize_t n,
    double gamma,
    int grid=MERGE_GRID,
    int steps=MERGE_STEPS,
):
    """``(m, partner, h)`` of ``merge.merge_smallest`` for the first ``n`` support rows
    (:func:`_merge_pick`)."""
    cdef Py_ssize_t m = 0, partner = -1
    cdef double h = 0.0
    if n < 2 or n > X.shape[0] or C.shape[0] < n or grid < 2 or grid > MAX_GRID or steps < 1:
        raise ValueError("need two support rows, a grid of 2 to 64 points, a refining step")
    if s_sq.shape[0] < n or kdiag.shape[0] < n or ids.shape[0] < n:
        raise ValueError("s_sq, kdiag and ids must hold n rows")
    buf = np.empty(_merge_work(n, grid))  # scratch: written before it is read
    slots = np.zeros(n, dtype=np.intp)
    cdef double[::1] bv = buf
    cdef Py_ssize_t[::1] pick = slots
    with nogil:
        _merge_pick(&X[0, 0], X.shape[1], &C[0, 0], C.shape[1], &s_sq[0], &kdiag[0], &ids[0],
                    n, gamma, grid, steps, &bv[0], &pick[0], &m, &partner, &h)
    return m, partner, h



def merge_bounds(const double[::1] u, const double[::1] nn, const double[::1] mn, double mm):
    """Lower bounds on Merge's loss for partners at ``u = gamma d2`` with ``||alpha_n||² =
    nn``, ``alpha_m · alpha_n = mn`` and ``||alpha_m||² = mm``: what :func:`merge_search`
    rules candidates out by (``_merge.pxi``'s ``_loss_bounds``), for tests."""
    cdef Py_ssize_t n = u.shape[0]
    if nn.shape[0] != n or mn.shape[0] != n:
        raise ValueError("u, nn and mn must have one entry per candidate")
    lb = np.empty(n)
    scratch = np.empty(n)
    cdef double[::1] lv = lb
    cdef double[::1] sv = scratch
    if n:
        with nogil:
            _loss_bounds(&u[0], &nn[0], &mn[0], mm, n, &lv[0], &sv[0])
    return lb

def merge_reach():
    """Merge's reach table (``_dense.h``'s ``skm_reach``): entry ``k`` bounds from below the
    loss per ``||alpha_m||²`` of any partner at ``u >= 2^(k/16 - 15)`` (``u = gamma d2``)
    whose ``||alpha_n||² >= ||alpha_m||²``, for tests."""
    return np.array([skm_reach[k] for k in range(SKM_REACH_N)])


def merge_reach_at(double mm, double best):
    """``(u1, cap1, u2, cap2)`` of ``_dense.h``'s ``skm_reach_at`` (partners at ``u >= u1``
    with ``mm <= nn <= cap1``, or at ``u >= u2`` with ``mm <= nn <= cap2``, cannot lose less
    than ``best``), or None where it rules nothing out, for tests."""
    cdef double reach[4]
    if not skm_reach_at(mm, best, reach):
        return None
    return reach[0], reach[1], reach[2], reach[3]


def merge_apply(
    double[:, ::1] X,
    double[:, ::1] C,
    double[::1] s_sq,
    double[::1] kdiag,
    int64_t[::1] ids,
    double[:, ::1] G,
    Py_ssize_t n,
    double gamma,
):
    """``merge.merge_smallest`` in one call on the first ``n`` rows: search, merge, remove.

    The search is :func:`merge_search`'s, the change :func:`_merge_at`'s (with the kept
    Gram row when ``G`` has ``n`` rows and columns or more). Returns
    ``(m, partner, h, ||z||^2)``; the caller updates the set's counters.
    """
    cdef Py_ssize_t m, partner
    cdef double h, sqz
    cdef double *Gp = NULL
    if G.shape[0] >= n and G.shape[1] >= n and n > 0:
        Gp = &G[0, 0]
    m, partner, h = merge_search(X, C, s_sq, kdiag, ids, n, gamma)
    with nogil:
        sqz = _merge_at(&X[0, 0], X.shape[1], &C[0, 0], C.shape[1], &s_sq[0], &kdiag[0],
                        &ids[0], Gp, G.shape[1], n, gamma, m, partner, h)
    return m, partner, h, sqz


def merge_run(
    const double[:, ::1] Q,
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
    double margin,
    int64_t[::1] codes,
):
    """Learn the rows of ``Q`` (targets ``T``, ±1 per column) in order with the margin
    perceptron's rule (margin 0: Alg. 7.52), an RBF kernel and a
    :class:`~streamk.budget.Merge` budget of ``budget`` vectors.

    The rule, ``Q``'s width and ``codes`` are :func:`projectron_run`'s. An updating row is
    appended (``Merge.insert``), and when the set was full the smallest vector is merged
    with its partner (:func:`_merge_pick`, :func:`_merge_at`). The support buffers (rows
    for ``min(max(n, budget) + 1, n + len(Q))`` vectors) change in place. Returns
    ``(n, next_id, updates, merges, largest squared norm stored)``.
    """
    cdef Py_ssize_t m = Q.shape[0], ldx = X.shape[1], p = coef.shape[1], w = Q.shape[1]
    cdef Py_ssize_t cap = X.shape[0], j, s, c, mi = 0, partner = 0
    cdef double sq, sq_max = 0.0, h = 0.0, sqz
    cdef bint full
    cdef int64_t updates = 0, merges = 0
    if w > ldx or w < 1 or T.shape[0] != m or T.shape[1] != p or codes.shape[0] < m:
        raise ValueError("Q must be at most as wide as X, T one row per row of Q, codes long enough")
    if budget < 1 or n > cap or min(max(n, budget) + 1, n + m) > cap:
        raise ValueError("need a budget, and buffers that hold the set this run may reach")
    if s_sq.shape[0] < cap or kdiag.shape[0] < cap or ids.shape[0] < cap or coef.shape[0] < cap:
        raise ValueError("s_sq, kdiag, ids and coef must have X's rows")
    if p < 1 or p > 64:
        raise ValueError("between 1 and 64 coefficient columns")
    scratch = np.empty(max(cap, 1) + 2 * p + _merge_work(max(cap, 2), MERGE_GRID))
    slots = np.zeros(max(cap, 1), dtype=np.intp)
    cdef double[::1] sc = scratch
    cdef Py_ssize_t[::1] pick = slots
    cdef double *k = &sc[0]
    cdef double *f = k + max(cap, 1)
    cdef double *nc = f + p
    cdef double *work = nc + p
    cdef double *Xp = &X[0, 0]
    cdef double *Cp = &coef[0, 0]
    with nogil:
        for j in range(m):
            for s in range(n):
                k[s] = _dist2(&Q[j, 0], &Xp[s * ldx], w)
            sk_scaled_exp(k, n, -gamma)
            if not _margin_rule(k, Cp, n, p, &T[j, 0], margin, f, nc, &codes[j]):
                continue
            updates += 1
            full = n >= budget
            sq = _append(&Q[j, 0], w, Xp, ldx, &s_sq[0], Cp, p, nc, &kdiag[0], 1.0, &ids[0],
                         next_id, n)
            if sq > sq_max:
                sq_max = sq
            next_id += 1
            n += 1
            if full:
                _merge_pick(Xp, ldx, Cp, p, &s_sq[0], &kdiag[0], &ids[0], n, gamma,
                            MERGE_GRID, MERGE_STEPS, work, &pick[0], &mi, &partner, &h)
                sqz = _merge_at(Xp, ldx, Cp, p, &s_sq[0], &kdiag[0], &ids[0], NULL, 0, n,
                                gamma, mi, partner, h)
                n -= 1
                merges += 1
                if sqz > sq_max:
                    sq_max = sqz
    return n, next_id, updates, merges, sq_max
