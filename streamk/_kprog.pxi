# A kernel program (streamk/kernels/program.py: a sum, product, scaling or cosine
# normalisation of RBF, Laplacian, polynomial, linear and constant kernels, flattened to
# postfix nodes of six numbers) run on a stack of kernel rows, for the per-event core
# (streamk/learners/_event.pyx includes it after _kcol.pxi, whose columns are its leaves).
# Every node is NumPy's element-wise operation in NumPy's order (Sum._gram adds left to
# right, Normalized._gram multiplies by the first argument's inverse norm, then the
# second's), so a row differs from kernel.gram's by the leaves' rounding alone.

from libc.string cimport memcpy

DEF OP_LEAF = 0
DEF OP_CONSTANT = 1
DEF OP_SUM = 2
DEF OP_PRODUCT = 3
DEF OP_SCALE = 4
DEF OP_NORMALIZE = 5
DEF PROGRAM_DEPTH = 8  # streamk.kernels.program.MAX_DEPTH (checked by a test)


cdef inline double _kprog_leaf_diag(const double *node, double sq) noexcept nogil:
    """``k(x, x)`` of a leaf from ``sq = ||x||²`` (``Kernel.diag``'s formulas)."""
    cdef int code = <int>node[5]
    if code == K_POLY:
        return _power(node[1] * sq + node[2], node[3])
    if code == K_LINEAR:
        return sq
    return 1.0


cdef inline double _inv_norm(double d) noexcept nogil:
    """``Normalized``'s ``1 / sqrt(d)``, 0 where ``d <= 0``."""
    return 1.0 / sqrt(d) if d > 0.0 else 0.0


cdef double _kprog_diag(const double *prog, Py_ssize_t m, double sq) noexcept nogil:
    """``kernel.diag_one(x)`` from ``sq = ||x||²`` (every diagonal of a program's kernels is
    a function of the norm)."""
    cdef double st[PROGRAM_DEPTH]
    cdef Py_ssize_t i, h = 0
    cdef const double *node
    cdef int op
    for i in range(m):
        node = prog + 6 * i
        op = <int>node[0]
        if op == OP_LEAF:
            st[h] = _kprog_leaf_diag(node, sq)
            h += 1
        elif op == OP_CONSTANT:
            st[h] = node[1]
            h += 1
        elif op == OP_SUM:
            h -= 1
            st[h - 1] = st[h - 1] + st[h]
        elif op == OP_PRODUCT:
            h -= 1
            st[h - 1] = st[h - 1] * st[h]
        elif op == OP_SCALE:
            st[h - 1] = node[1] * st[h - 1]
        else:  # OP_NORMALIZE: 1 where the inner diagonal is positive
            st[h - 1] = 1.0 if st[h - 1] > 0.0 else 0.0
    return st[0]


cdef inline void _kprog_leaf(const double *node, const double *X, Py_ssize_t ldx,
                             Py_ssize_t n, const double *x_sq, const double *row, Py_ssize_t w,
                             double row_sq, double *dots, bint *have_dots,
                             double *out) noexcept nogil:
    """A leaf's row into ``out``: :func:`_kcol`'s steps, with the dots ``X[s] . row`` taken
    once per program (``dots``, computed by the first leaf that needs them) for every RBF,
    polynomial and linear leaf (``Sum(RBF, Linear)`` pays one pass over the set, not two)."""
    cdef int code = <int>node[5]
    cdef Py_ssize_t s
    if code == K_LAPLACIAN:
        _kcol(code, node + 1, X, ldx, n, x_sq, row, w, row_sq, out)
        return
    if not have_dots[0]:
        sk_dots(dots, X, ldx, n, row, w)
        have_dots[0] = True
    if code == K_RBF:
        sk_rbf_from_dots(out, dots, x_sq, row_sq, n, node[1])
    elif code == K_POLY:
        for s in range(n):
            out[s] = _power(node[1] * dots[s] + node[2], node[3])
    else:  # K_LINEAR
        memcpy(out, dots, n * sizeof(double))


cdef void _kprog_col(const double *prog, Py_ssize_t m, Py_ssize_t depth, bint norm,
                     const double *X, Py_ssize_t ldx, Py_ssize_t n, const double *x_sq,
                     const double *row, Py_ssize_t w, double row_sq, double *work,
                     double *out) noexcept nogil:
    """``out[s] = k(row, X[s])`` for ``s < n`` (as :func:`_kcol`: rows ``ldx`` wide, ``row``
    ``w <= ldx`` wide) for the program ``prog`` of ``m`` nodes. ``work``: ``depth * n``
    doubles, twice that when the program normalises (each level's row then carries the
    rows' own ``k(x, x)`` beside it, and the event row's in ``dr``), then ``n`` for the
    dots the leaves share."""
    cdef double *D = work + depth * n  # the diagonal rows, level by level
    cdef double *dots = work + (2 * depth if norm else depth) * n
    cdef bint have_dots = False
    cdef double dr[PROGRAM_DEPTH]  # the event row's diagonal, level by level
    cdef double *a
    cdef double *b
    cdef double *da
    cdef double *db
    cdef double c, ir
    cdef Py_ssize_t i, s, h = 0
    cdef const double *node
    cdef int op
    if n <= 0:
        return
    for i in range(m):
        node = prog + 6 * i
        op = <int>node[0]
        if op == OP_LEAF or op == OP_CONSTANT:
            a = work + h * n
            if op == OP_LEAF:
                _kprog_leaf(node, X, ldx, n, x_sq, row, w, row_sq, dots, &have_dots, a)
            else:
                for s in range(n):
                    a[s] = node[1]
            if norm:
                da = D + h * n
                if op == OP_LEAF:
                    for s in range(n):
                        da[s] = _kprog_leaf_diag(node, x_sq[s])
                    dr[h] = _kprog_leaf_diag(node, row_sq)
                else:
                    for s in range(n):
                        da[s] = node[1]
                    dr[h] = node[1]
            h += 1
        elif op == OP_SUM or op == OP_PRODUCT:
            h -= 1
            a = work + (h - 1) * n
            b = work + h * n
            if op == OP_SUM:
                for s in range(n):
                    a[s] = a[s] + b[s]
            else:
                for s in range(n):
                    a[s] = a[s] * b[s]
            if norm:
                da = D + (h - 1) * n
                db = D + h * n
                if op == OP_SUM:
                    for s in range(n):
                        da[s] = da[s] + db[s]
                    dr[h - 1] = dr[h - 1] + dr[h]
                else:
                    for s in range(n):
                        da[s] = da[s] * db[s]
                    dr[h - 1] = dr[h - 1] * dr[h]
        elif op == OP_SCALE:
            a = work + (h - 1) * n
            c = node[1]
            for s in range(n):
                a[s] = c * a[s]
            if norm:
                da = D + (h - 1) * n
                for s in range(n):
                    da[s] = c * da[s]
                dr[h - 1] = c * dr[h - 1]
        else:  # OP_NORMALIZE
            a = work + (h - 1) * n
            da = D + (h - 1) * n
            ir = _inv_norm(dr[h - 1])
            for s in range(n):
                a[s] = (a[s] * ir) * _inv_norm(da[s])
                da[s] = 1.0 if da[s] > 0.0 else 0.0
            dr[h - 1] = 1.0 if dr[h - 1] > 0.0 else 0.0
    memcpy(out, work, n * sizeof(double))
