# The removal policies' choice of the vector that leaves (RemoveSmallest's here; the
# oldest's, for RemoveOldest and the Forgetron, is streamk/_dense.h's sk_oldest), shared by
# the block passes (streamk/_core.pyx) and the per-event core (streamk/learners/_event.pyx)
# through Cython's ``include``: one definition, so both pick the same slot.

from libc.math cimport INFINITY, sqrt


cdef extern from "_dense.h" nogil:
    Py_ssize_t sk_oldest(const int64_t *ids, Py_ssize_t n)  # SupportSet.oldest, vectorised


cdef extern from * nogil:
    """
    /* _smallest_slot for one coefficient column (every learner but a multi-output one): its
     * two passes eight rows at a time, the cost t = (0 + c c) k(x, x) of each row computed as
     * the scalar loop computes it (fp-contract off in every clone: the same bits). A full
     * RemoveSmallest(1,000) scanned its rows one compare-and-branch at a time: 1.8 us of an
     * 8.3 us adatron learn_one on 50 features. Pass 1 keeps each lane's least cost (a strict
     * compare: NaN never enters, as in the scalar loop; lanes start at +inf) and takes the
     * least over the lanes (min is exact: any order gives the same lo). Pass 2, for an
     * ordinary lo (>= 0, < 1e300), tests t <= min(lo (1 + 3e-12), T), T the largest double
     * whose root is at most root = sqrt(lo) (1 + 1e-12) (skm_root_floor: sqrt is correctly
     * rounded, so monotone, and t == lo passes it): the scalar loop's test without a root a
     * row, as Merge's skm_smallest does; the oldest id among the rows that pass and its
     * first slot, lane by lane. Returns -1 for any other lo (NaN, huge or infinite costs):
     * the scalar loop decides those. */
    SK_DENSE_CLONES static Py_ssize_t sk_smallest1(const double *coef, const double *kdiag,
                                                   const int64_t *ids, Py_ssize_t n)
    {
        Py_ssize_t i = 0, j, m = -1;
        double lo = INFINITY, near, root, floor_, t;
        int64_t oldest = INT64_MAX;
        sk_v8d c, k, v, x, nv;
        sk_v8l lt, id, slot, top = (sk_v8l){0} + INT64_MAX, best = top, at = top;
        sk_v8l lane = {0, 1, 2, 3, 4, 5, 6, 7};
        v = (sk_v8d){0.0} + INFINITY;
        for (; i + 8 <= n; i += 8) {
            memcpy(&c, coef + i, sizeof c);
            memcpy(&k, kdiag + i, sizeof k);
            x = ((sk_v8d){0.0} + c * c) * k;
            lt = x < v;
            v = (sk_v8d)((lt & (sk_v8l)x) | (~lt & (sk_v8l)v));
        }
        for (j = 0; j < 8; j++)
            lo = v[j] < lo ? v[j] : lo;
        for (; i < n; i++) {
            t = (0.0 + coef[i] * coef[i]) * kdiag[i];
            lo = t < lo ? t : lo;
        }
        if (!(lo >= 0.0 && lo < 1e300))
            return -1;
        near = lo * (1.0 + 3e-12);
        root = sqrt(lo) * (1.0 + 1e-12);
        floor_ = skm_root_floor(root);
        near = floor_ < near ? floor_ : near;
        nv = (sk_v8d){0.0} + near;
        for (i = 0; i + 8 <= n; i += 8) {
            memcpy(&c, coef + i, sizeof c);
            memcpy(&k, kdiag + i, sizeof k);
            memcpy(&id, ids + i, sizeof id);
            x = ((sk_v8d){0.0} + c * c) * k;
            lt = x <= nv;
            id = (id & lt) | (top & ~lt);
            lt = id < best; /* strict: a lane keeps its first slot of an id */
            slot = lane + (int64_t)i;
            best = (id & lt) | (best & ~lt);
            at = (slot & lt) | (at & ~lt);
        }
        for (j = 0; j < 8; j++) /* lanes in slot order within a block: (id, slot) decides */
            if (best[j] != INT64_MAX && (best[j] < oldest || (best[j] == oldest && at[j] < m))) {
                oldest = best[j];
                m = (Py_ssize_t)at[j];
            }
        for (; i < n; i++) {
            t = (0.0 + coef[i] * coef[i]) * kdiag[i];
            if (t <= near && (m < 0 || ids[i] < oldest)) {
                m = i;
                oldest = ids[i];
            }
        }
        return m;
    }
    """
    Py_ssize_t sk_smallest1(const double *coef, const double *kdiag, const int64_t *ids,
                            Py_ssize_t n)


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
    if p == 1 and n > 0:  # one column: the vectorised passes, where lo is an ordinary number
        slot = sk_smallest1(&coef[0, 0], &kdiag[0], &ids[0], n)
        if slot >= 0:
            return slot
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
