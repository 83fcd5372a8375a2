# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled kernel rows of the gap-weighted subsequences family (optional extension).

One call computes ``k(s, t)`` for one string ``s`` against every string ``t`` of a
support set: the dynamic programme of Shawe-Taylor & Cristianini, Code Fragment 11.3
(corrected, see ``reference/kernels-and-measures.md`` §5.4) in its Alg. 11.40 form

    DP_l(i, j) = DPS_l(i, j) + g_s[i] DP_l(i-1, j) + g_t[j] DP_l(i, j-1)
                 - g_s[i] g_t[j] DP_l(i-1, j-1),
    DPS_{l+1}(i, j) = M(i, j) DP_l(i-1, j-1),     DPS_1 = M,

row by row and for all ``p`` levels at once, so memory is O(p |t|) per pair rather than
O(|s| |t|). ``g`` are per-position gap weights (``lam`` everywhere for Alg. 11.38) and
``M(i, j)`` the match weight: ``[s_i = t_j] w_s[i]`` (exact matching, Alg. 11.38/11.40)
or ``sim[s_i, t_j]`` (soft matching, Alg. 11.41, codes are alphabet indices).

The pure-NumPy path in :mod:`streamk.kernels.strings` is the fallback and the oracle.
"""

import numpy as np

from libc.stdlib cimport free, malloc
from libc.string cimport memset


cdef double _pair(
    const unsigned int* a, const double* ga, const double* wa, Py_ssize_t n,
    const unsigned int* b, const double* gb, Py_ssize_t m,
    const double* sim, Py_ssize_t n_sym, int p, double* D, double* dps, double* mrow,
) noexcept nogil:
    cdef Py_ssize_t i, j, l
    cdef double total = 0.0, up, cur, left, diag, gi, w
    cdef const double* srow
    cdef double* Dl
    cdef double* Dprev
    cdef unsigned int ai
    if n == 0 or m == 0:
        return 0.0
    memset(D, 0, p * m * sizeof(double))  # row -1 of every DP_l is 0
    for i in range(n):
        gi = ga[i]
        ai = a[i]
        # M(i, j) for this row, shared by every level
        if sim != NULL:
            srow = sim + ai * n_sym
            for j in range(m):
                mrow[j] = srow[b[j]]
        else:
            w = wa[i]
            for j in range(m):
                mrow[j] = w if b[j] == ai else 0.0
        l = p
        while l >= 1:
            # DPS_l row i: it needs DP_{l-1} at row i-1, still in D[(l-2) m :]
            if l == 1:
                for j in range(m):
                    dps[j] = mrow[j]
            else:
                Dprev = D + (l - 2) * m
                dps[0] = 0.0
                for j in range(1, m):
                    dps[j] = mrow[j] * Dprev[j - 1]
            if l == p:
                for j in range(m):
                    total += dps[j]
            else:
                # DP_l row i from DPS_l row i and DP_l row i-1 (in place, left to right)
                Dl = D + (l - 1) * m
                left = 0.0
                diag = 0.0
                for j in range(m):
                    up = Dl[j]
                    cur = dps[j] + gi * up + gb[j] * (left - gi * diag)
                    diag = up
                    Dl[j] = cur
                    left = cur
            l -= 1
    return total


def subsequence_row(
    const unsigned int[::1] a,
    const double[::1] ga,
    const double[::1] wa,
    const unsigned int[::1] b_all,
    const double[::1] gb_all,
    const long long[::1] offsets,
    int p,
    sim=None,
):
    """``k(s, t_k)`` for every support string ``t_k``.

    ``a, ga, wa``: the query's codes, gap weights and exact-match weights; ``b_all,
    gb_all``: the support strings' codes and gap weights, concatenated, string ``k`` at
    ``offsets[k]:offsets[k+1]``; ``sim``: a C-contiguous ``(n_sym, n_sym)`` float64
    similarity for soft matching (then codes index it), or ``None`` for exact matching.
    """
    cdef Py_ssize_t n_support = offsets.shape[0] - 1
    cdef Py_ssize_t k, start, m, max_m = 0
    cdef const double[:, ::1] simv
    cdef const double* simp = NULL
    cdef Py_ssize_t n_sym = 0
    if p < 1:
        raise ValueError("p must be >= 1")
    if a.shape[0] != ga.shape[0] or a.shape[0] != wa.shape[0]:
        raise ValueError("a, ga and wa must have the same length")
    if b_all.shape[0] != gb_all.shape[0] or offsets[n_support] != b_all.shape[0]:
        raise ValueError("b_all, gb_all and offsets disagree")
    if sim is not None:
        simv = sim
        n_sym = simv.shape[0]
        if simv.shape[1] != n_sym:
            raise ValueError("sim must be square")
        for k in range(a.shape[0]):
            if a[k] >= n_sym:
                raise ValueError("a code is outside sim")
        for k in range(b_all.shape[0]):
            if b_all[k] >= n_sym:
                raise ValueError("a code is outside sim")
        if n_sym:
            simp = &simv[0, 0]
    out = np.zeros(n_support)
    cdef double[::1] o = out
    for k in range(n_support):
        m = offsets[k + 1] - offsets[k]
        if m < 0:
            raise ValueError("offsets must not decrease")
        if m > max_m:
            max_m = m
    if a.shape[0] == 0 or max_m == 0:
        return out
    cdef double* D = <double*> malloc(p * max_m * sizeof(double))
    cdef double* dps = <double*> malloc(max_m * sizeof(double))
    cdef double* mrow = <double*> malloc(max_m * sizeof(double))
    if D == NULL or dps == NULL or mrow == NULL:
        free(D)
        free(dps)
        free(mrow)
        raise MemoryError()
    try:
        with nogil:
            for k in range(n_support):
                start = offsets[k]
                m = offsets[k + 1] - start
                o[k] = _pair(
                    &a[0], &ga[0], &wa[0], a.shape[0],
                    &b_all[start] if m else NULL, &gb_all[start] if m else NULL, m,
                    simp, n_sym, p, D, dps, mrow,
                )
    finally:
        free(D)
        free(dps)
        free(mrow)
    return out
