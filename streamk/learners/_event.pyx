# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The per-event path of the kernel perceptrons in one compiled call (optional).

``learn_one`` / ``predict_one`` of :class:`~streamk.learners.perceptron.KernelPerceptron`
and :class:`~streamk.learners.budgeted.MarginPerceptron` spend most of their time in
Python plumbing around a small amount of arithmetic: the feature dict to a row, the
kernel row, the margins, the mistake test, the support-set write. :class:`EventPass` does
all of it in one call, for the case that dominates a stream once warmed up:

* an RBF kernel with ``gamma`` resolved and frozen, remove-oldest or no budget, no Gram
  matrix kept, no block being tracked;
* an event whose keys are exactly the learner's features in column order, with float or
  int values that are finite;
* a label already known (learn) — a new class changes the coefficient columns.

Anything else returns "not handled" (``False`` / ``NOT_HANDLED``) *before* changing any
state, and the learner runs its NumPy path, which stays the reference: the compiled
path writes the support set exactly as :meth:`SupportSet.replace` / :meth:`append` would
(same slot, id, norm, zero padding) and computes the kernel row with the loops of
:func:`streamk._core.rbf_row` (``_fastexp.h``), so the two give the same predictions.
"""

from cpython.dict cimport PyDict_Next, PyDict_Size
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsDouble
from cpython.object cimport PyObject
from libc.math cimport isfinite
from libc.stdint cimport int64_t
from libc.stdlib cimport free, realloc

cdef extern from "Python.h":
    bint PyFloat_CheckExact(object o)
    bint PyLong_CheckExact(object o)
    int PyObject_RichCompareBool(PyObject *a, PyObject *b, int op) except -1

cdef extern from "_fastexp.h" nogil:
    void sk_rbf_from_dots(double *out, const double *dot, const double *sq, double row_sq,
                          Py_ssize_t n, double gamma)
    void sk_dots(double *out, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                 const double *row, Py_ssize_t w)

#: What :meth:`EventPass.predict` returns when it does not apply.
NOT_HANDLED = object()

cdef int PY_EQ = 2
cdef Py_ssize_t AUTO_WINDOW = 200  # streamk.learners.base.AUTO_WINDOW (checked by a test)


cdef class EventPass:
    """One learner's compiled ``learn_one`` / ``predict_one`` (see the module docstring).

    It holds no reference to the learner: each call receives it, and the views of the
    support set's buffers are re-taken whenever the set, its buffers, its kernel, the
    labels or anything else changed outside this path (``support.version`` and object
    identities say so).

    Parameters
    ----------
    margin
        ``None`` for the kernel perceptron (update on a mistake, ``alpha = y``), a number
        for the margin perceptron (update also where ``y f < margin``, per column).
    """

    cdef readonly object margin
    cdef double _margin
    cdef bint _use_margin
    # the binding: what the views below were taken from
    cdef bint bound
    cdef object support, X_obj, coef_obj, labels, classes, features, names, scale
    cdef bint warming  # gamma="auto" is still being estimated: each learned row refines it
    cdef Py_ssize_t version, n_classes
    cdef double[:, ::1] X
    cdef double[:, ::1] coef
    cdef double[::1] sq
    cdef double[::1] kdiag
    cdef int64_t[::1] ids
    cdef double gamma
    cdef Py_ssize_t budget
    cdef object cols  # label -> column of its class (one-vs-rest) or its sign (binary)
    cdef object pair  # (positive, negative) labels when binary
    # scratch
    cdef double *row
    cdef double *k
    cdef double *f
    cdef double *t
    cdef Py_ssize_t cap_row, cap_k, cap_f

    def __cinit__(self, margin=None):
        self.margin = margin
        self._use_margin = margin is not None
        self._margin = 0.0 if margin is None else float(margin)
        self.bound = False
        self.row = self.k = self.f = self.t = NULL
        self.cap_row = self.cap_k = self.cap_f = 0

    def __dealloc__(self):
        free(self.row)
        free(self.k)
        free(self.f)
        free(self.t)

    def __reduce__(self):
        # the binding is a cache of the learner it serves: a copy starts unbound
        return (EventPass, (self.margin,))

    def reset(self):
        """Drop the binding (the next call re-takes it)."""
        self._unbind()

    cdef void _unbind(self):
        self.bound = False
        self.support = self.X_obj = self.coef_obj = None
        self.labels = self.classes = self.features = self.names = self.scale = None
        self.warming = False
        self.cols = self.pair = None
        self.X = None
        self.coef = None
        self.sq = None
        self.kdiag = None
        self.ids = None

    cdef bint _reserve(self, Py_ssize_t d, Py_ssize_t n, Py_ssize_t p) except False:
        cdef void *mem
        if d > self.cap_row:
            mem = realloc(self.row, max(d, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.row = <double *>mem
            self.cap_row = d
        if n > self.cap_k:
            mem = realloc(self.k, max(n, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.k = <double *>mem
            self.cap_k = n
        if p > self.cap_f:
            mem = realloc(self.f, max(p, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.f = <double *>mem
            mem = realloc(self.t, max(p, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.t = <double *>mem
            self.cap_f = p
        return True

    # -- binding --------------------------------------------------------------------------------
    cdef bint _current(self, model) except -1:
        """Whether the binding still describes ``model``'s state; re-take it if it can."""
        support = model._support
        if (
            self.bound
            and support is self.support
            and support.version == self.version
            and support._X is self.X_obj
            and support._coef is self.coef_obj
            and model._labels is self.labels
            and PyList_GET_SIZE(self.classes) == self.n_classes
            and model._features is self.features
        ):
            return True
        return self._bind(model, support)

    cdef bint _bind(self, model, support) except -1:
        """Take views of ``model``'s buffers when the compiled path applies to it."""
        from streamk.budget.base import Unbounded
        from streamk.budget.removal import RemoveOldest
        from streamk.kernels import RBF

        self._unbind()
        scale = model._scale
        self.scale = scale
        self.warming = scale is not None and scale.n < AUTO_WINDOW
        if getattr(model, "_objects", True) or type(support.kernel) is not RBF:
            return False
        if support._G is not None or support._trackers:
            return False
        policy = model._policy
        if type(policy) is RemoveOldest:
            budget = int(policy.budget)
        elif type(policy) is Unbounded:
            budget = 0
        else:
            return False
        labels = model._labels
        classes = labels.classes
        p = support.n_outputs
        if len(classes) > 2:
            if p != len(classes):
                return False
            cols = {c: i for i, c in enumerate(classes)}
            pair = None
        else:
            if p != 1:
                return False
            cols = {c: float(s) for c, s in zip(classes, labels.signs)}
            pair = labels._pair
        X_obj, coef_obj = support._X, support._coef
        if X_obj.dtype.char != "d" or coef_obj.dtype.char != "d":
            return False
        self.X = X_obj
        self.coef = coef_obj
        self.sq = support._sq
        self.kdiag = support._kdiag
        self.ids = support._ids
        self.support, self.X_obj, self.coef_obj = support, X_obj, coef_obj
        self.version = support.version
        self.labels, self.classes, self.n_classes = labels, classes, len(classes)
        self.features = model._features
        self.names = self.features.names
        self.cols, self.pair = cols, pair
        self.gamma = float(support.kernel.gamma)
        self.budget = budget
        self._reserve(len(self.names), X_obj.shape[0], p)
        self.bound = True
        return True

    # -- the per-event work -------------------------------------------------------------------
    cdef Py_ssize_t _row(self, dict x) except -2:
        """The event's values in column order into ``self.row``; its width, or -1 when its
        keys are not exactly the features in column order or a value is not a finite
        float/int (the NumPy path then grows the index, or raises the right error)."""
        cdef Py_ssize_t pos = 0, i = 0, d
        cdef PyObject *key
        cdef PyObject *value
        cdef PyObject *name
        cdef double v
        names = self.names
        d = PyList_GET_SIZE(names)
        if PyDict_Size(x) != d:
            return -1
        if d > self.cap_row:  # features added since the binding (by the NumPy path)
            self._reserve(d, 0, 0)
        while PyDict_Next(x, &pos, &key, &value):
            name = PyList_GET_ITEM(names, i)
            if key != name and not PyObject_RichCompareBool(key, name, PY_EQ):
                return -1
            if PyFloat_CheckExact(<object>value):
                v = PyFloat_AS_DOUBLE(<object>value)
            elif PyLong_CheckExact(<object>value):
                v = PyLong_AsDouble(<object>value)  # raises OverflowError: not finite anyway
            else:
                return -1
            if not isfinite(v):
                return -1
            self.row[i] = v
            i += 1
        return d

    cdef bint _margins(self, Py_ssize_t d, double *row_sq) noexcept:
        """``f = K(row, S) coef`` into ``self.f`` (``self.k`` holds the kernel row); False when
        the norm expansion may be inexact (the NumPy path takes the exact one)."""
        cdef Py_ssize_t n = self.support.n, p = self.coef.shape[1], s, c, k
        cdef double acc = 0.0, sq_max
        cdef double *row = self.row
        for k in range(d):
            acc = acc + row[k] * row[k]
        row_sq[0] = acc
        for c in range(p):
            self.f[c] = 0.0
        if n == 0:
            return True
        if d > self.X.shape[1] or n > self.cap_k:
            return False
        sq_max = self.support._sq_max
        if (sq_max + acc) * 1e-15 * self.gamma > 1e-10:
            return False
        with nogil:
            sk_dots(self.k, &self.X[0, 0], self.X.shape[1], n, row, d)
            sk_rbf_from_dots(self.k, self.k, &self.sq[0], acc, n, self.gamma)
            for s in range(n):
                for c in range(p):
                    self.f[c] = self.f[c] + self.k[s] * self.coef[s, c]
        return True

    cdef bint _fold(self, Py_ssize_t d) except -1:
        """Fold ``self.row`` into the ``gamma="auto"`` estimate, as
        ``ScaleEstimator.update(row[None, :])`` does (Welford, the same operations in the
        same order); False, with nothing changed, when its vectors are not ``d`` wide."""
        cdef double[::1] mean
        cdef double[::1] m2
        cdef double delta, a, c
        cdef Py_ssize_t j, n_old
        scale = self.scale
        mean_obj, m2_obj = scale.mean, scale._m2
        if mean_obj.shape[0] != d or m2_obj.shape[0] != d or d == 0:
            return False
        if not (mean_obj.flags.writeable and m2_obj.flags.writeable):
            return False
        mean = mean_obj
        m2 = m2_obj
        n_old = scale.n
        a = 1.0 / <double>(n_old + 1)
        c = <double>n_old / <double>(n_old + 1)
        for j in range(d):
            delta = self.row[j] - mean[j]
            mean[j] = mean[j] + delta * a
            m2[j] = (m2[j] + 0.0) + (delta * delta) * c
        scale.n = n_old + 1
        return True

    cdef object _finish(self, model, Py_ssize_t d, y):
        """The rest of ``learn_one`` on the NumPy path, for a row already folded into the
        ``gamma="auto"`` estimate (the rare case the compiled update cannot take)."""
        import numpy as np

        row = np.array([self.row[j] for j in range(d)])
        k_row, f = model._margins(row)
        model._update(row, f, k_row, y)
        self._unbind()
        return True

    cdef object _decide(self):
        """The predicted label from ``self.f`` (``LabelCoder.decide_one``; sgn(0) = +1)."""
        cdef Py_ssize_t c, best_c = 0, p = self.coef.shape[1]
        cdef double best
        if self.n_classes == 0:
            return None
        if self.n_classes == 1:
            return self.classes[0]
        if self.pair is not None:
            return self.pair[0] if self.f[0] >= 0.0 else self.pair[1]
        best = self.f[0]
        for c in range(1, p):
            if self.f[c] > best:
                best = self.f[c]
                best_c = c
        return self.classes[best_c]

    def predict(self, model, x):
        """``model.predict_one(x)`` in one call, or :data:`NOT_HANDLED`."""
        cdef double row_sq
        cdef Py_ssize_t d
        if type(x) is not dict or not self._current(model):
            return NOT_HANDLED
        d = self._row(<dict>x)
        if d < 0 or not self._margins(d, &row_sq):
            return NOT_HANDLED
        return self._decide()

    def learn(self, model, x, y):
        """``model.learn_one(x, y)`` in one call; False (nothing changed) when it does not
        apply."""
        cdef double row_sq, step
        cdef Py_ssize_t d, n, p, c, s, slot, wx
        cdef bint wrong, any_wrong = False, folded
        cdef int64_t oldest
        if type(x) is not dict or not self._current(model):
            return False
        try:
            code = self.cols.get(y)
        except TypeError:  # an unhashable label: the NumPy path says what is wrong
            return False
        if code is None:
            return False  # a new class, or no label
        d = self._row(<dict>x)
        if d < 0:
            return False
        if self.warming and self.scale.n < AUTO_WINDOW:
            if not self._fold(d):
                return False
            # the row is in the estimate now: from here on the event is never handed back
            if self.scale.n <= AUTO_WINDOW and (self.scale.n <= 10 or self.scale.n % 10 == 0):
                support = model._support  # regamma_at: the kernel moves before this event
                support.set_kernel(model._auto_kernel.resolve(self.scale))
            if not self._current(model) or not self._margins(d, &row_sq):
                return self._finish(model, d, y)
            folded = True
        elif not self._margins(d, &row_sq):
            return False
        else:
            folded = False
        p = self.coef.shape[1]
        if self.pair is not None or self.n_classes < 2:
            self.t[0] = <double>code
        else:
            for c in range(p):
                self.t[c] = -1.0
            self.t[<Py_ssize_t>code] = 1.0
        for c in range(p):
            wrong = (self.f[c] >= 0.0) != (self.t[c] > 0.0)
            if self._use_margin and self.t[c] * self.f[c] < self._margin:
                wrong = True
            if wrong:
                any_wrong = True
            self.f[c] = self.t[c] if wrong else 0.0  # the new vector's coefficients
        if any_wrong:
            support = self.support
            n = support.n
            wx = self.X.shape[1]
            if self.budget > 0 and n >= self.budget:
                slot = 0
                oldest = self.ids[0]
                for s in range(1, n):
                    if self.ids[s] < oldest:
                        oldest = self.ids[s]
                        slot = s
            elif n < self.X.shape[0]:
                slot = n
            else:  # full buffers: the NumPy path grows them
                return self._finish(model, d, y) if folded else False
            if d > wx:
                return self._finish(model, d, y) if folded else False
            for c in range(d):
                self.X[slot, c] = self.row[c]
            for c in range(d, wx):
                self.X[slot, c] = 0.0
            for c in range(p):
                self.coef[slot, c] = self.f[c]
            self.sq[slot] = row_sq
            self.kdiag[slot] = 1.0  # RBF: k(x, x) = 1
            next_id = support.next_id
            self.ids[slot] = next_id
            support.next_id = next_id + 1
            if slot == n:
                support.n = n + 1  # <= the buffers' rows, the kernel row's room
            if d > support.width:
                support.width = d
            if row_sq > support._sq_max:
                support._sq_max = row_sq
            support.rows_version += 1
            self.version = support.version + 1
            support.version = self.version
            model.n_mistakes += 1
        model._n_learned += 1
        return True
