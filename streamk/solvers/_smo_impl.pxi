# The body of the compiled SMO core, included by _smo.pyx (Qfloat = float, as LIBSVM) and
# _smo64.pyx (Qfloat = double); see _smo.pyx for what it does.
cimport cython
from libc.math cimport INFINITY
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

import numpy as np

cdef extern from "_fastexp.h" nogil:
    double sk_exp(double x)

cdef double TAU = 1e-12


cdef enum Source:
    GRAM = 0
    RBF = 1
    CALL = 2


cdef struct Head:
    Head *prev
    Head *next
    Qfloat *data
    Py_ssize_t len


@cython.final
cdef class _Cache:
    """LIBSVM's ``Cache``: LRU list of partial columns, ``size`` counted in doubles."""

    cdef Py_ssize_t l
    cdef Py_ssize_t size
    cdef Head *head
    cdef Head lru_head

    def __cinit__(self, Py_ssize_t l, Py_ssize_t size_bytes):
        cdef Py_ssize_t i
        self.l = l
        self.head = <Head *> malloc(l * sizeof(Head))
        if self.head == NULL:
            raise MemoryError()
        for i in range(l):
            self.head[i].prev = NULL
            self.head[i].next = NULL
            self.head[i].data = NULL
            self.head[i].len = 0
        self.size = size_bytes // sizeof(Qfloat)
        self.size -= l * sizeof(Head) // sizeof(Qfloat)
        if self.size < 2 * l:
            self.size = 2 * l  # at least two columns: Q_i must survive the fetch of Q_j
        self.lru_head.next = &self.lru_head
        self.lru_head.prev = &self.lru_head

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.head != NULL:
            for i in range(self.l):
                free(self.head[i].data)
            free(self.head)

    cdef inline void lru_delete(self, Head *h) noexcept nogil:
        h.prev.next = h.next
        h.next.prev = h.prev

    cdef inline void lru_insert(self, Head *h) noexcept nogil:
        h.next = &self.lru_head
        h.prev = self.lru_head.prev
        h.prev.next = h
        h.next.prev = h

    cdef Py_ssize_t get_data(self, Py_ssize_t index, Qfloat **data, Py_ssize_t length) except -1:
        """Point ``data`` at column ``index`` grown to ``length``; return how many were valid."""
        cdef Head *h = &self.head[index]
        cdef Head *old
        cdef Py_ssize_t more, start
        cdef Qfloat *p
        if h.len:
            self.lru_delete(h)
        more = length - h.len
        start = h.len
        if more > 0:
            while self.size < more:
                old = self.lru_head.next
                self.lru_delete(old)
                free(old.data)
                self.size += old.len
                old.data = NULL
                old.len = 0
            p = <Qfloat *> realloc(h.data, length * sizeof(Qfloat))
            if p == NULL:
                raise MemoryError()
            h.data = p
            self.size -= more
            h.len = length
        self.lru_insert(h)
        data[0] = h.data
        return start

    cdef void swap_index(self, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
        cdef Head *h
        cdef Head *nxt
        cdef Qfloat *td
        cdef Py_ssize_t tl
        cdef Qfloat tmp
        if i == j:
            return
        if self.head[i].len:
            self.lru_delete(&self.head[i])
        if self.head[j].len:
            self.lru_delete(&self.head[j])
        td = self.head[i].data
        self.head[i].data = self.head[j].data
        self.head[j].data = td
        tl = self.head[i].len
        self.head[i].len = self.head[j].len
        self.head[j].len = tl
        if self.head[i].len:
            self.lru_insert(&self.head[i])
        if self.head[j].len:
            self.lru_insert(&self.head[j])
        if i > j:
            i, j = j, i
        h = self.lru_head.next
        while h != &self.lru_head:
            nxt = h.next
            if h.len > i:
                if h.len > j:
                    tmp = h.data[i]
                    h.data[i] = h.data[j]
                    h.data[j] = tmp
                else:  # give up the column: it holds i but not j
                    self.lru_delete(h)
                    free(h.data)
                    self.size += h.len
                    h.data = NULL
                    h.len = 0
            h = nxt


@cython.final
cdef class _Solver:
    """One SMO run; arrays are held permuted (LIBSVM's ``active_set``) until :meth:`results`."""

    cdef Py_ssize_t l, active_size, n_rows, dim
    cdef int source
    cdef bint nu, unshrink, pre_valid, has_dummy
    cdef bint bad  # a kernel value read was nan or inf
    cdef double mu  # added to Q_tt (the 2-norm soft margin's 1/C)
    cdef double pre_Gmax  # the next selection's first pass, done in the gradient update
    cdef Py_ssize_t pre_i
    cdef double eps, gamma
    cdef double *y
    cdef double *G
    cdef double *G_bar
    cdef double *alpha
    cdef double *p
    cdef double *C
    cdef double *QD
    cdef char *status  # 0 lower, 1 upper, 2 free
    cdef Py_ssize_t *active_set
    cdef Py_ssize_t *base  # row of the data behind each (permuted) variable
    cdef const double *K
    cdef const double *X
    cdef const double *sq
    cdef object callback
    cdef object keep  # references to the arrays behind K / X / sq
    cdef double *buf
    cdef _Cache cache
    cdef bint by_row  # more variables than rows (SVR): cache kernel rows, build Q in qbuf
    cdef Qfloat *qbuf
    cdef int next_buf

    def __cinit__(self):
        self.y = self.G = self.G_bar = self.alpha = self.p = self.C = self.QD = NULL
        self.status = NULL
        self.active_set = self.base = NULL
        self.buf = NULL
        self.qbuf = NULL

    def __dealloc__(self):
        free(self.qbuf)
        free(self.y); free(self.G); free(self.G_bar); free(self.alpha); free(self.p)
        free(self.C); free(self.QD); free(self.status); free(self.active_set); free(self.base)
        free(self.buf)

    # ---------------------------------------------------------------- kernel columns
    cdef Qfloat *get_Q(self, Py_ssize_t i, Py_ssize_t length) except NULL:
        """Column ``i`` of ``Q`` over variables ``[0, length)`` (LIBSVM's ``get_Q``)."""
        cdef Qfloat *data
        cdef Py_ssize_t start, j, bi
        cdef double yi, v
        if self.by_row:
            return self._get_Q_by_row(i, length)
        start = self.cache.get_data(i, &data, length)
        if start < length:
            bi = self.base[i]
            yi = self.y[i]
            if self.has_dummy:
                for j in range(start, length):
                    v = self._kval(bi, self.base[j])
                    if v * 0.0 != 0.0:  # nan or inf
                        self.bad = True
                    data[j] = yi * self.y[j] * v
            elif self.source == CALL:
                self._call_column(bi, start, length)
                for j in range(start, length):
                    data[j] = yi * self.y[j] * self.buf[j - start]
            elif self.source == GRAM:
                self._gram_column(data, bi, yi, start, length)
            else:
                self._rbf_column(data, bi, yi, start, length)
            if self.mu != 0.0 and bi >= 0 and start <= i < length:  # not on dummies
                data[i] += self.mu
        return data

    cdef Qfloat *_get_Q_by_row(self, Py_ssize_t i, Py_ssize_t length) except NULL:
        """LIBSVM's ``SVR_Q::get_Q``: the kernel row of variable ``i``'s example is cached
        (length n, never permuted) and the Q column is built in one of two rotating buffers."""
        cdef Qfloat *row
        cdef Qfloat *out
        cdef Py_ssize_t start, j, r, n = self.n_rows, bi = self.base[i]
        cdef double yi = self.y[i], v
        start = self.cache.get_data(bi, &row, n)
        if start < n:
            if self.source == CALL:
                self._call_column(bi, start, n, True)
                for r in range(start, n):
                    row[r] = self.buf[r - start]
            elif self.source == GRAM:
                for r in range(start, n):
                    v = self.K[bi * n + r]
                    if v * 0.0 != 0.0:  # nan or inf: the Gram is not checked in advance
                        self.bad = True
                    row[r] = v
            else:
                for r in range(start, n):
                    row[r] = self._kval(bi, r)
        out = self.qbuf + self.next_buf * self.l
        self.next_buf = 1 - self.next_buf
        for j in range(length):
            out[j] = yi * self.y[j] * row[self.base[j]]
        if self.mu != 0.0 and i < length:
            out[i] += self.mu
        return out

    cdef double _kval(self, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
        """``k(row a, row b)``; a negative row is a dummy variable with a zero kernel."""
        cdef Py_ssize_t k
        cdef double s = 0.0, d
        if a < 0 or b < 0:
            return 0.0
        if self.source == GRAM:
            return self.K[a * self.n_rows + b]
        for k in range(self.dim):
            s += self.X[a * self.dim + k] * self.X[b * self.dim + k]
        d = self.sq[a] + self.sq[b] - 2.0 * s
        return sk_exp(-self.gamma * (d if d > 0.0 else 0.0))

    cdef void _gram_column(self, Qfloat *data, Py_ssize_t bi, double yi, Py_ssize_t start,
                           Py_ssize_t length) noexcept nogil:
        """``data[j] = y_i y_j K[b_i, b_j]``, flagging a non-finite entry (``bad``): the Gram is
        checked only where it is read, never in a whole pass of its own."""
        cdef Py_ssize_t j
        cdef const double *row = self.K + bi * self.n_rows
        cdef double v
        cdef bint bad = False
        for j in range(start, length):
            v = row[self.base[j]]
            bad |= v * 0.0 != 0.0
            data[j] = yi * self.y[j] * v
        if bad:
            self.bad = True

    cdef void _rbf_column(self, Qfloat *data, Py_ssize_t bi, double yi, Py_ssize_t start,
                          Py_ssize_t length) noexcept nogil:
        """``data[j] = y_i y_j exp(-gamma max(0, |x_i|^2 + |x_j|^2 - 2 x_i.x_j))``."""
        cdef Py_ssize_t j, k, b, dim = self.dim
        cdef const double *xa = self.X + bi * dim
        cdef const double *xb
        cdef double s, d, sa = self.sq[bi], g = self.gamma
        for j in range(start, length):
            b = self.base[j]
            xb = self.X + b * dim
            s = 0.0
            for k in range(dim):
                s += xa[k] * xb[k]
            d = sa + self.sq[b] - 2.0 * s
            if d < 0.0:
                d = 0.0
            data[j] = yi * self.y[j] * sk_exp(-g * d)

    cdef int _call_column(self, Py_ssize_t bi, Py_ssize_t start, Py_ssize_t stop,
                          bint rows=False) except -1:
        cdef Py_ssize_t j, m = stop - start
        idx = np.empty(m, dtype=np.intp)
        cdef Py_ssize_t[::1] iv = idx
        for j in range(m):
            iv[j] = start + j if rows else self.base[start + j]
        vals = np.ascontiguousarray(self.callback(int(bi), idx), dtype=np.float64).reshape(-1)
        if not np.isfinite(vals).all():
            self.bad = True
        if vals.shape[0] != m:
            raise ValueError(f"kernel callback returned {vals.shape[0]} values, expected {m}")
        cdef const double[::1] vv = vals
        if m:
            memcpy(self.buf, &vv[0], m * sizeof(double))
        return 0

    # ---------------------------------------------------------------- status
    cdef inline void update_alpha_status(self, Py_ssize_t i) noexcept nogil:
        if self.alpha[i] >= self.C[i]:
            self.status[i] = 1
        elif self.alpha[i] <= 0:
            self.status[i] = 0
        else:
            self.status[i] = 2

    cdef inline bint is_upper(self, Py_ssize_t i) noexcept nogil:
        return self.status[i] == 1

    cdef inline bint is_lower(self, Py_ssize_t i) noexcept nogil:
        return self.status[i] == 0

    cdef void swap_index(self, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
        if not self.by_row:
            self.cache.swap_index(i, j)
        _swap_d(self.y, i, j); _swap_d(self.G, i, j); _swap_d(self.alpha, i, j)
        _swap_d(self.p, i, j); _swap_d(self.G_bar, i, j); _swap_d(self.C, i, j)
        _swap_d(self.QD, i, j)
        cdef char s = self.status[i]
        self.status[i] = self.status[j]
        self.status[j] = s
        cdef Py_ssize_t t = self.active_set[i]
        self.active_set[i] = self.active_set[j]
        self.active_set[j] = t
        t = self.base[i]
        self.base[i] = self.base[j]
        self.base[j] = t

    # ---------------------------------------------------------------- gradient
    cdef int reconstruct_gradient(self) except -1:
        cdef Py_ssize_t i, j, nr_free = 0, l = self.l, act = self.active_size
        cdef Qfloat *Q_i
        cdef double a_i
        self.pre_valid = False
        if act == l:
            return 0
        for j in range(act, l):
            self.G[j] = self.G_bar[j] + self.p[j]
        for j in range(act):
            if self.status[j] == 2:
                nr_free += 1
        if nr_free * l > 2 * act * (l - act):
            for i in range(act, l):
                Q_i = self.get_Q(i, act)
                for j in range(act):
                    if self.status[j] == 2:
                        self.G[i] += self.alpha[j] * Q_i[j]
        else:
            for i in range(act):
                if self.status[i] == 2:
                    Q_i = self.get_Q(i, l)
                    a_i = self.alpha[i]
                    for j in range(act, l):
                        self.G[j] += a_i * Q_i[j]
        return 0

    # ---------------------------------------------------------------- WSS2
    cdef int select_working_set(self, Py_ssize_t *out_i, Py_ssize_t *out_j) except -1:
        """1 when optimal within ``eps``; else the pair in ``out_i``, ``out_j``."""
        cdef double Gmax = -INFINITY, Gmax2 = -INFINITY, obj_diff_min = INFINITY
        cdef double grad_diff, quad, obj_diff, yi = 0.0, QDi = 0.0
        cdef Py_ssize_t t, j, i = -1, Gmin_idx = -1, act = self.active_size
        cdef Qfloat *Q_i = NULL
        cdef double *G = self.G
        cdef double *y = self.y
        cdef double *QD = self.QD
        cdef char *st = self.status
        if self.nu:
            return self.select_working_set_nu(out_i, out_j)
        if self.pre_valid:
            Gmax, i = self.pre_Gmax, self.pre_i
            self.pre_valid = False
        else:
            for t in range(act):
                if y[t] > 0:
                    if st[t] != 1 and -G[t] >= Gmax:
                        Gmax = -G[t]
                        i = t
                else:
                    if st[t] != 0 and G[t] >= Gmax:
                        Gmax = G[t]
                        i = t
        if i != -1:
            Q_i = self.get_Q(i, act)
            yi = y[i]
            QDi = QD[i]
        for j in range(act):
            if y[j] > 0:
                if st[j] != 0:
                    grad_diff = Gmax + G[j]
                    if G[j] >= Gmax2:
                        Gmax2 = G[j]
                    if grad_diff > 0:
                        quad = QDi + QD[j] - 2.0 * yi * Q_i[j]
                        if quad <= 0:
                            quad = TAU
                        obj_diff = -(grad_diff * grad_diff) / quad
                        if obj_diff <= obj_diff_min:
                            Gmin_idx = j
                            obj_diff_min = obj_diff
            else:
                if st[j] != 1:
                    grad_diff = Gmax - G[j]
                    if -G[j] >= Gmax2:
                        Gmax2 = -G[j]
                    if grad_diff > 0:
                        quad = QDi + QD[j] + 2.0 * yi * Q_i[j]
                        if quad <= 0:
                            quad = TAU
                        obj_diff = -(grad_diff * grad_diff) / quad
                        if obj_diff <= obj_diff_min:
                            Gmin_idx = j
                            obj_diff_min = obj_diff
        if Gmax + Gmax2 < self.eps or Gmin_idx == -1:
            return 1
        out_i[0] = i
        out_j[0] = Gmin_idx
        return 0

    cdef int select_working_set_nu(self, Py_ssize_t *out_i, Py_ssize_t *out_j) except -1:
        cdef double Gmaxp = -INFINITY, Gmaxp2 = -INFINITY, Gmaxn = -INFINITY, Gmaxn2 = -INFINITY
        cdef double obj_diff_min = INFINITY, grad_diff, quad, obj_diff
        cdef Py_ssize_t t, j, ip = -1, i_n = -1, Gmin_idx = -1, act = self.active_size
        cdef Qfloat *Q_ip = NULL
        cdef Qfloat *Q_in = NULL
        cdef double *G = self.G
        cdef double *y = self.y
        cdef double *QD = self.QD
        cdef char *st = self.status
        for t in range(act):
            if y[t] > 0:
                if st[t] != 1 and -G[t] >= Gmaxp:
                    Gmaxp = -G[t]
                    ip = t
            else:
                if st[t] != 0 and G[t] >= Gmaxn:
                    Gmaxn = G[t]
                    i_n = t
        if ip != -1:
            Q_ip = self.get_Q(ip, act)
        if i_n != -1:
            Q_in = self.get_Q(i_n, act)
            if ip != -1:  # the second fetch may have moved the first: fetch again (cached)
                Q_ip = self.get_Q(ip, act)
        for j in range(act):
            if y[j] > 0:
                if st[j] != 0:
                    grad_diff = Gmaxp + G[j]
                    if G[j] >= Gmaxp2:
                        Gmaxp2 = G[j]
                    if grad_diff > 0:
                        quad = QD[ip] + QD[j] - 2.0 * Q_ip[j]
                        if quad <= 0:
                            quad = TAU
                        obj_diff = -(grad_diff * grad_diff) / quad
                        if obj_diff <= obj_diff_min:
                            Gmin_idx = j
                            obj_diff_min = obj_diff
            else:
                if st[j] != 1:
                    grad_diff = Gmaxn - G[j]
                    if -G[j] >= Gmaxn2:
                        Gmaxn2 = -G[j]
                    if grad_diff > 0:
                        quad = QD[i_n] + QD[j] - 2.0 * Q_in[j]
                        if quad <= 0:
                            quad = TAU
                        obj_diff = -(grad_diff * grad_diff) / quad
                        if obj_diff <= obj_diff_min:
                            Gmin_idx = j
                            obj_diff_min = obj_diff
        if max(Gmaxp + Gmaxp2, Gmaxn + Gmaxn2) < self.eps or Gmin_idx == -1:
            return 1
        out_i[0] = ip if y[Gmin_idx] > 0 else i_n
        out_j[0] = Gmin_idx
        return 0

    # ---------------------------------------------------------------- shrinking
    cdef inline bint be_shrunk(self, Py_ssize_t i, double g1, double g2, double g3,
                               double g4) noexcept nogil:
        if self.status[i] == 1:
            if self.y[i] > 0:
                return -self.G[i] > g1
            return -self.G[i] > (g4 if self.nu else g2)
        if self.status[i] == 0:
            if self.y[i] > 0:
                return self.G[i] > g2
            return self.G[i] > (g3 if self.nu else g1)
        return False

    cdef int do_shrinking(self) except -1:
        cdef double g1 = -INFINITY, g2 = -INFINITY, g3 = -INFINITY, g4 = -INFINITY, gap
        cdef Py_ssize_t i
        cdef double *G = self.G
        for i in range(self.active_size):
            if self.nu:
                if self.status[i] != 1:
                    if self.y[i] > 0:
                        if -G[i] > g1:
                            g1 = -G[i]
                    elif -G[i] > g4:
                        g4 = -G[i]
                if self.status[i] != 0:
                    if self.y[i] > 0:
                        if G[i] > g2:
                            g2 = G[i]
                    elif G[i] > g3:
                        g3 = G[i]
            elif self.y[i] > 0:
                if self.status[i] != 1 and -G[i] >= g1:
                    g1 = -G[i]
                if self.status[i] != 0 and G[i] >= g2:
                    g2 = G[i]
            else:
                if self.status[i] != 1 and -G[i] >= g2:
                    g2 = -G[i]
                if self.status[i] != 0 and G[i] >= g1:
                    g1 = G[i]
        gap = max(g1 + g2, g3 + g4) if self.nu else g1 + g2
        if not self.unshrink and gap <= self.eps * 10:
            self.unshrink = True
            self.reconstruct_gradient()
            self.active_size = self.l
        i = 0
        while i < self.active_size:
            if self.be_shrunk(i, g1, g2, g3, g4):
                self.active_size -= 1
                while self.active_size > i:
                    if not self.be_shrunk(self.active_size, g1, g2, g3, g4):
                        self.swap_index(i, self.active_size)
                        break
                    self.active_size -= 1
            i += 1
        return 0

    # ---------------------------------------------------------------- the loop
    cdef int update_G_bar(self, Py_ssize_t i, bint was_upper, double c) except -1:
        cdef Qfloat *Q_i
        cdef Py_ssize_t k
        if was_upper == (self.status[i] == 1):
            return 0
        Q_i = self.get_Q(i, self.l)
        if was_upper:
            for k in range(self.l):
                self.G_bar[k] -= c * Q_i[k]
        else:
            for k in range(self.l):
                self.G_bar[k] += c * Q_i[k]
        return 0

    cdef Py_ssize_t run(self, Py_ssize_t max_iter, bint shrinking, bint shrink_first) except -1:
        cdef Py_ssize_t it = 0, counter, i = 0, j = 0, k, act
        cdef Qfloat *Q_i
        cdef Qfloat *Q_j
        cdef double C_i, C_j, old_i, old_j, quad, delta, diff, s, d_i, d_j
        cdef bint ui, uj
        cdef double *a = self.alpha
        cdef double *G
        cdef double *y
        cdef char *st
        cdef double g, gm
        cdef Py_ssize_t gi
        counter = 1 if shrink_first else min(self.l, 1000) + 1
        while it < max_iter and not self.bad:
            counter -= 1
            if counter == 0:
                counter = min(self.l, 1000)
                if shrinking:
                    self.pre_valid = False
                    self.do_shrinking()
            if self.select_working_set(&i, &j) != 0:
                self.reconstruct_gradient()
                self.active_size = self.l
                self.pre_valid = False
                if self.select_working_set(&i, &j) != 0:
                    break
                counter = 1
            it += 1
            act = self.active_size
            Q_i = self.get_Q(i, act)
            Q_j = self.get_Q(j, act)
            C_i = self.C[i]
            C_j = self.C[j]
            old_i = a[i]
            old_j = a[j]
            if self.y[i] != self.y[j]:
                quad = self.QD[i] + self.QD[j] + 2.0 * Q_i[j]
                if quad <= 0:
                    quad = TAU
                delta = (-self.G[i] - self.G[j]) / quad
                diff = a[i] - a[j]
                a[i] += delta
                a[j] += delta
                if diff > 0:
                    if a[j] < 0:
                        a[j] = 0
                        a[i] = diff
                elif a[i] < 0:
                    a[i] = 0
                    a[j] = -diff
                if diff > (C_i - C_j if C_i != C_j else 0.0):  # inf - inf would be nan
                    if a[i] > C_i:
                        a[i] = C_i
                        a[j] = C_i - diff
                elif a[j] > C_j:
                    a[j] = C_j
                    a[i] = C_j + diff
            else:
                quad = self.QD[i] + self.QD[j] - 2.0 * Q_i[j]
                if quad <= 0:
                    quad = TAU
                delta = (self.G[i] - self.G[j]) / quad
                s = a[i] + a[j]
                a[i] -= delta
                a[j] += delta
                if s > C_i:
                    if a[i] > C_i:
                        a[i] = C_i
                        a[j] = s - C_i
                elif a[j] < 0:
                    a[j] = 0
                    a[i] = s
                if s > C_j:
                    if a[j] > C_j:
                        a[j] = C_j
                        a[i] = s - C_j
                elif a[i] < 0:
                    a[i] = 0
                    a[j] = s
            d_i = a[i] - old_i
            d_j = a[j] - old_j
            ui = self.status[i] == 1
            uj = self.status[j] == 1
            self.update_alpha_status(i)
            self.update_alpha_status(j)
            if self.nu:
                for k in range(act):
                    self.G[k] += Q_i[k] * d_i + Q_j[k] * d_j
            else:  # fused with the next selection's first pass (argmax over I_up)
                G = self.G
                y = self.y
                st = self.status
                gm = -INFINITY
                gi = -1
                for k in range(act):
                    g = G[k] + Q_i[k] * d_i + Q_j[k] * d_j
                    G[k] = g
                    if y[k] > 0:
                        if st[k] != 1 and -g >= gm:
                            gm = -g
                            gi = k
                    elif st[k] != 0 and g >= gm:
                        gm = g
                        gi = k
                self.pre_Gmax = gm
                self.pre_i = gi
                self.pre_valid = True
            self.update_G_bar(i, ui, C_i)
            self.update_G_bar(j, uj, C_j)
        if self.active_size < self.l:
            self.reconstruct_gradient()
            self.active_size = self.l
        return it


cdef inline void _swap_d(double *a, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    cdef double t = a[i]
    a[i] = a[j]
    a[j] = t


cdef double *_copy(arr, Py_ssize_t n) except NULL:
    cdef const double[::1] v = np.ascontiguousarray(arr, dtype=np.float64)
    cdef double *out = <double *> malloc(max(n, 1) * sizeof(double))
    if out == NULL:
        raise MemoryError()
    if n:
        memcpy(out, &v[0], n * sizeof(double))
    return out


def solve(
    source,
    data,
    sq,
    double gamma,
    base,
    y,
    p,
    C,
    alpha,
    G,
    G_bar,
    double tol,
    Py_ssize_t max_iter,
    bint shrinking,
    bint nu,
    Py_ssize_t cache_bytes,
    QD,
    bint shrink_first=False,
    double mu=0.0,
):
    """Run SMO from the feasible ``alpha`` with its gradient ``G = Q alpha + p`` and
    ``G_bar = sum_{alpha_t = C_t} C_t Q_t``; update ``alpha`` and ``G`` in place.

    ``source``: ``"gram"`` (``data`` the Gram matrix), ``"rbf"`` (``data`` the rows, ``sq`` their
    squared norms, ``gamma``) or ``"call"`` (``data`` a callable ``f(i, idx)``). ``base[t]`` is the
    row behind variable ``t``; ``QD[t] = Q_tt``. ``shrink_first`` shrinks before the first
    iteration instead of after ``min(l, 1000)`` (a warm start's gradient already tells which
    bound variables will stay). ``mu`` is added to every ``Q_tt``; a negative ``base[t]`` makes
    ``t`` a dummy variable with a zero kernel row (how a problem without the equality is posed:
    two unbounded dummies of opposite sign absorb it). Returns ``(n_iter, status)`` with status 1 when
    ``max_iter`` stopped the run and 2 when a kernel value read was nan or inf (a ``"gram"``
    source is checked only where the run reads it: entries it never reads cannot change the
    solution, whose KKT conditions involve the support vectors' columns only).
    """
    cdef _Solver s = _Solver()
    cdef Py_ssize_t l = len(y), t
    cdef double[::1] a_out = alpha
    cdef double[::1] g_out = G
    cdef const Py_ssize_t[::1] bv = np.ascontiguousarray(base, dtype=np.intp)
    cdef const double[:, ::1] M
    cdef const double[::1] sqv
    s.l = l
    s.active_size = l
    s.eps = tol
    s.nu = nu
    s.unshrink = False
    s.bad = False
    s.pre_valid = False
    s.mu = mu
    s.has_dummy = bool(np.any(np.asarray(base) < 0))
    s.gamma = gamma
    s.keep = (data, sq)
    if source == "gram":
        s.source = GRAM
        M = data
        s.K = &M[0, 0]
        s.n_rows = M.shape[0]
    elif source == "rbf":
        s.source = RBF
        M = data
        s.X = &M[0, 0]
        s.n_rows = M.shape[0]
        s.dim = M.shape[1]
        sqv = sq
        s.sq = &sqv[0]
    elif source == "call":
        s.source = CALL
        s.callback = data
        if np.any(np.asarray(base) < 0):
            raise ValueError("dummy variables need a 'gram' or 'rbf' source")
    else:
        raise ValueError(f"unknown kernel source {source!r}")
    s.y = _copy(y, l)
    s.p = _copy(p, l)
    s.C = _copy(C, l)
    s.alpha = _copy(alpha, l)
    s.G = _copy(G, l)
    s.G_bar = _copy(G_bar, l)
    s.QD = _copy(QD, l)
    s.buf = <double *> malloc(max(l, 1) * sizeof(double))
    s.status = <char *> malloc(max(l, 1))
    s.active_set = <Py_ssize_t *> malloc(max(l, 1) * sizeof(Py_ssize_t))
    s.base = <Py_ssize_t *> malloc(max(l, 1) * sizeof(Py_ssize_t))
    if s.buf == NULL or s.status == NULL or s.active_set == NULL or s.base == NULL:
        raise MemoryError()
    for t in range(l):
        s.active_set[t] = t
        s.base[t] = bv[t]
        s.update_alpha_status(t)
    s.by_row = l > s.n_rows and not s.has_dummy and source != "call" or (
        source == "call" and l > len(set(np.asarray(base).tolist())))
    if s.by_row:
        s.n_rows = int(np.asarray(base).max()) + 1 if source == "call" else s.n_rows
        s.qbuf = <Qfloat *> malloc(2 * max(l, 1) * sizeof(Qfloat))
        if s.qbuf == NULL:
            raise MemoryError()
        s.next_buf = 0
        s.cache = _Cache(s.n_rows, cache_bytes)
    else:
        s.cache = _Cache(l, cache_bytes)
    n_iter = s.run(max_iter, shrinking, shrink_first)
    for t in range(l):
        a_out[s.active_set[t]] = s.alpha[t]
        g_out[s.active_set[t]] = s.G[t]
    if s.bad:
        return int(n_iter), 2
    return int(n_iter), int(n_iter >= max_iter)


def kbar_times(source, data, sq, double gamma, base, w1, w2):
    """``(Kbar @ w1, Kbar @ w2)`` over variables (``Kbar_st = k(row base_s, row base_t)``) for
    a ``"gram"`` or ``"rbf"`` source: one single-threaded pass over the rows of the non-zero
    weights (a BLAS call this small spends longer waking its threads on a busy machine).

    A row with one non-zero weight costs one multiply-add per entry (a warm start's variables
    are at the bound, in ``w2``, or free, in ``w1``, rarely both), and with ``base`` the identity
    a Gram row is read contiguously (vectorised). A nan or inf entry read shows in the output
    (the weights are finite and non-zero), which the caller checks."""
    cdef const Py_ssize_t[::1] b = np.ascontiguousarray(base, dtype=np.intp)
    cdef const double[::1] v1 = np.ascontiguousarray(w1, dtype=np.float64)
    cdef const double[::1] v2 = np.ascontiguousarray(w2, dtype=np.float64)
    cdef Py_ssize_t l = b.shape[0], t, k, n, dim = 0, bt, bk, q
    out1 = np.zeros(l)
    out2 = np.zeros(l)
    cdef double[::1] o1 = out1
    cdef double[::1] o2 = out2
    cdef const double[:, ::1] M = data
    cdef const double[::1] sqv
    cdef const double *row
    cdef const double *xa
    cdef const double *xb
    cdef double *p1
    cdef double *p2
    cdef double *kb = NULL
    cdef double a1, a2, kv, s, d, sa
    cdef bint rbf = source == "rbf", ident
    n = M.shape[0]
    if rbf:
        sqv = sq
        dim = M.shape[1]
    elif source != "gram":
        raise ValueError(f"kbar_times needs a 'gram' or 'rbf' source, got {source!r}")
    ident = l == n and bool(np.array_equal(np.asarray(b), np.arange(l)))
    if l == 0:
        return out1, out2
    p1 = &o1[0]
    p2 = &o2[0]
    if rbf or not ident:
        kb = <double *> malloc(l * sizeof(double))
        if kb == NULL:
            raise MemoryError()
    with nogil:
        for t in range(l):
            a1 = v1[t]
            a2 = v2[t]
            if a1 == 0.0 and a2 == 0.0:
                continue
            bt = b[t]
            if ident and not rbf:
                row = &M[bt, 0]
            elif not rbf:
                for k in range(l):
                    kb[k] = M[bt, b[k]]
                row = kb
            else:
                xa = &M[bt, 0]
                sa = sqv[bt]
                for k in range(l):
                    bk = b[k]
                    xb = &M[bk, 0]
                    s = 0.0
                    for q in range(dim):
                        s += xa[q] * xb[q]
                    d = sa + sqv[bk] - 2.0 * s
                    if d < 0.0:
                        d = 0.0
                    kb[k] = sk_exp(-gamma * d)
                row = kb
            if a2 == 0.0:
                for k in range(l):
                    p1[k] += a1 * row[k]
            elif a1 == 0.0:
                for k in range(l):
                    p2[k] += a2 * row[k]
            else:
                for k in range(l):
                    kv = row[k]
                    p1[k] += a1 * kv
                    p2[k] += a2 * kv
    free(kb)
    return out1, out2
