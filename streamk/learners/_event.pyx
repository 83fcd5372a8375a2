# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The per-event path of the kernel perceptrons, the ranker, the kernel adatron, the on-line
SVR and the novelty detector in one compiled call (optional).

``learn_one`` / ``predict_one`` of :class:`~streamk.learners.perceptron.KernelPerceptron`,
:class:`~streamk.learners.budgeted.MarginPerceptron`,
:class:`~streamk.learners.ranking.OnlineRanker`, :class:`~streamk.learners.OnlineSVR`
(``resweeps=0``) and :class:`~streamk.learners.KernelNovelty` (``score_one``) spend most of
their time in Python plumbing around a small amount of arithmetic: the feature dict to a
row, the kernel row, the margins, the update test, the support-set write. :class:`EventPass`
does all of it in one call, for the cases that dominate a stream once warmed up:

* an RBF, Laplacian, polynomial or linear kernel (each possibly
  :class:`~streamk.kernels.Scaled`), or a sum, product, scaling or normalisation of them
  and of constants (a program, ``_kprog.pxi``), with its parameters resolved; no budget,
  remove-oldest, remove-random, remove-smallest, the Forgetron, the Projectron or (a
  plain RBF kernel) Merge; no Gram matrix kept (but the resweeping adatron's, under every
  one of them but the Projectron: see below), no block being tracked;
* an event whose keys are exactly the learner's features in column order, with float or
  int values that are finite;
* a label already known (learn) — a new class or rank changes the learner's columns or
  thresholds.

Anything else returns "not handled" (``False`` / ``NOT_HANDLED``) *before* changing any
state, and the learner runs its NumPy path, which stays the reference: the compiled path
changes the support set exactly as the policy's ``insert`` does through
:class:`SupportSet`'s methods (same slots, ids, norms, zero padding; remove-random draws
from the policy's own generator as ``integers(n)`` does; the Forgetron keeps its ``Q`` and
``M``; the Projectron projects, removes and grows its ``P`` as its ``insert`` does, with the
steps of ``streamk/budget/_projectron.pxi``, and rebuilds it after the ``gamma="auto"``
warm-up moved a plain RBF with ``Projectron._rebuild``'s compiled steps where those compute
the Gram matrix afresh (``_projectron_rewidth``); Merge's search and merge are
``streamk/budget/_merge.pxi``, the code of ``_policies.merge_apply``) and computes the kernel
row with the loops of
:mod:`streamk._core` (``_fastexp.h``).

The kernel adatron with ``resweeps >= 1`` (``_resweep``) keeps its Gram matrix through its
inserts as ``SupportSet`` and the policies do (append; the swap-remove of remove-random,
remove-smallest and the Forgetron; remove-oldest's ``replace`` with its own kernel entry
computed from the row; Merge's merged row by ``_merge_at``; under a plain RBF, the whole
matrix again at each of the ``gamma="auto"`` warm-up's width changes with
``compiled.support_gram``'s steps and bits, ``_gram_rewidth``), keeps each slot's class and
the slots' age order as ``KernelAdatron._slots`` gives them, runs the passes by
``_adatron_pass.pxi`` (the pass ``_dual.pyx`` runs) from ``F = G @ coef`` computed here,
and removes the vectors the passes emptied as ``dualpass.dead_slots`` and
``SupportSet.remove`` do. Computed here, ``F`` is NumPy's product to rounding: the model
is the NumPy path's to rounding (``tests/test_event_resweeps.py``).

The perceptrons and the ranker under a plain RBF kernel and no budget, remove-oldest,
remove-random or the Forgetron decide an event from float32 hints once it has at least 8
features and the set at least 96 vectors (``HINT_MIN_WIDTH``, ``HINT_MIN_SET``, measured
where the hints start to pay): the event's kernel row in float32 against a float32 mirror
of the support rows (4 (w + 1) + 8 bytes per row of the set's buffers, w features, kept
only past the gate, never in a snapshot or a copy), trusted only where the error bound of
:func:`streamk._core.perceptron_hint_pass` makes the decision certain; every other event
takes the float64 row. A certain mistake inserts the row with its label's coefficient
whatever ``f`` is, so the models are those of the float64 path to the bit
(``tests/test_event_hints.py``).
"""

cimport cython
from cpython.dict cimport PyDict_Next, PyDict_Size
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsDouble
from cpython.object cimport PyObject
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.math cimport INFINITY, copysign, fabs, isfinite, log, pow, sqrt
from libc.stdint cimport INT64_MAX, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy, memmove, memset
from numpy import empty, float64

cdef extern from "Python.h":
    bint PyFloat_CheckExact(object o)
    bint PyLong_CheckExact(object o)
    int PyObject_RichCompareBool(PyObject *a, PyObject *b, int op) except -1

cdef extern from "_fastexp.h" nogil:
    void sk_scaled_exp(double *a, Py_ssize_t n, double factor)
    void sk_rbf_from_dots(double *out, const double *dot, const double *sq, double row_sq,
                          Py_ssize_t n, double gamma)
    void sk_dots(double *out, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                 const double *row, Py_ssize_t w)
    void sk_dots_rows4(double *out, Py_ssize_t ldo, const double *X, Py_ssize_t ldx,
                       Py_ssize_t n, const double *R, Py_ssize_t ldr, Py_ssize_t w)
    int sk_rows4_wide()
    int sk_rows4_tile_set(int wide)
    double sk_coef_dot(const double *k, const double *c, Py_ssize_t n)
    void sk_hint_column(double *H, double *err, Py_ssize_t ldh, Py_ssize_t p, const double *wts,
                        const float *Qt, Py_ssize_t ldq, Py_ssize_t w, Py_ssize_t r0,
                        Py_ssize_t r1, const float *v, float v_sq, const float *q_sq,
                        float gamma)

cdef extern from "_dense.h" nogil:
    # the arguments of a row of the Projectron's Gram matrix (_projectron.pxi's _gram_rows)
    void sk_gram_args(double *g, const double *d, const double *sq, double sq_i, Py_ssize_t m)

cdef extern from "_hintrow.h" nogil:
    double sk_centre32(float *out, const double *x, const double *center, Py_ssize_t w,
                       Py_ssize_t step)
    void sk_hint_sums1(const double *k, const double *c, Py_ssize_t n, double *f, double *A,
                       double *L)
    void sk_hint_sums(const double *k, const double *c, Py_ssize_t n, Py_ssize_t p, double *f,
                      double *A, double *L, double *colsum)

cdef extern from *:
    """
    /* NumPy's bitgen_t (numpy/random/bitgen.h), the documented C interface of a bit
       generator's ``capsule``: declared here so the build needs no NumPy headers. */
    typedef struct sk_bitgen {
        void *state;
        uint64_t (*next_uint64)(void *st);
        uint32_t (*next_uint32)(void *st);
        double (*next_double)(void *st);
        uint64_t (*next_raw)(void *st);
    } sk_bitgen;
    """
    ctypedef struct sk_bitgen:
        void *state
        uint32_t (*next_uint32)(void *st) nogil

from streamk import accel as _accel

#: What :meth:`EventPass.predict` returns when it does not apply.
NOT_HANDLED = object()

cdef int PY_EQ = 2
#: numpy.float64, a subclass of float whose value PyFloat_AS_DOUBLE reads (a typed global:
#: the per-value check is one pointer comparison, not a module lookup)
cdef object _NP_FLOAT64 = float64
cdef tuple _KERNEL_TYPES = None  # _kernel_types(): imported at first use, not at import


cdef tuple _kernel_types():
    """``(RBF, Laplacian, Linear, Polynomial, Scaled)``, imported once: an ``import`` in
    :meth:`EventPass._bind_kernel` ran at each of the warm-up's ~30 kernel changes."""
    global _KERNEL_TYPES
    if _KERNEL_TYPES is None:
        from streamk.kernels import RBF, Laplacian, Linear, Polynomial, Scaled

        _KERNEL_TYPES = (RBF, Laplacian, Linear, Polynomial, Scaled)
    return _KERNEL_TYPES
cdef Py_ssize_t AUTO_WINDOW = 200  # streamk.learners.base.AUTO_WINDOW (checked by a test)
cdef double TARGET_LIMIT = 1e150  # streamk.learners.svr.TARGET_LIMIT (checked by a test)
cdef Py_ssize_t SETTLE_SLACK = 64  # SlotData.settle's default slack (checked by a test)

# kernel codes (as streamk._core's) and policy codes
DEF K_RBF = 0
DEF K_LAPLACIAN = 1
DEF K_POLY = 2
DEF K_LINEAR = 3
DEF K_PROGRAM = 8  # a sum, product, scaling or normalisation of the above (_kprog.pxi)
DEF P_OLDEST = 0  # remove-oldest, or none (budget 0)
DEF P_RANDOM = 1
DEF P_FORGETRON = 2
DEF P_PROJECTRON = 3
DEF P_MERGE = 4  # Merge (RBF only): append, then merge two vectors into one when full
DEF P_SMALLEST = 5  # remove-smallest: the vector of least ||coef|| sqrt(k(x, x)) leaves
# rule codes
DEF R_PERCEPTRON = 0  # the kernel and margin perceptrons
DEF R_RANKER = 1
DEF R_SVR = 2  # OnlineSVR, resweeps=0
DEF R_NOVELTY = 3  # KernelNovelty
DEF R_ADATRON = 4  # KernelAdatron (its resweeps too: _resweep)
# what predict leaves for a learn of the same row (EventPass._keep_pre)
DEF PRE_ROW = 1  # the float64 margins and kernel row (_margins)
DEF PRE_HINTS = 2  # the float32 hints and their bound (_hint)
# the learner's counters EventPass._count moves: indices into LEARNER_COUNTERS
DEF C_LEARNED = 0
DEF C_UPDATES = 1
DEF C_MISTAKES = 2
LEARNER_COUNTERS = ("_n_learned", "n_updates", "n_mistakes")

# The per-event float32 hints (EventPass._hint): where they pay. Below HINT_MIN_SET vectors
# the hint's fixed costs (the event's centring, the sums, the mirror's upkeep) exceed what
# the float32 row saves: predict_one + learn_one with the hints on took, of the time with
# them off (kernel and margin perceptrons, remove-oldest at B vectors, 2 to 16 features),
# 1.03-1.09x at B = 32, 0.94-1.02x at 64, 0.90-0.95x at 128, 0.73-0.87x at 256; at 50
# features 0.84-0.89x at 64, 0.66x at 1000. Below HINT_MIN_WIDTH features the float64 row
# is a few operations per vector (Bananas, 2 features: 0.96-0.98x, its Forgetron 1.02x):
# not worth the mirror.
cdef Py_ssize_t HINT_MIN_WIDTH = 8
cdef Py_ssize_t HINT_MIN_SET = 96
cdef bint HINTS_ON = True  # tests compare against the float64 path with it off
cdef double HINT_TOL_SCALE = 1.0  # tests only: 0 trusts every hint (a test must then fail)
# Float32's unit roundoff, as streamk._core's U32.
cdef double U32 = 5.9604644775390625e-08


def target_limit():
    """The largest target size the SVR's per-event path takes (``svr.TARGET_LIMIT``)."""
    return TARGET_LIMIT


def hint_settings(enabled=None, min_width=None, min_set=None, tol_scale=None):
    """The per-event hints' switch and gate, for tests and measurements: each argument not
    ``None`` is set. Returns the settings as they were, ``(enabled, min_width, min_set,
    tol_scale)``, so a caller can put them back. ``tol_scale`` multiplies the hints' error
    bound (1: the proven bound; 0 makes every hint look certain, which only a test that
    must then fail may ask for)."""
    global HINTS_ON, HINT_MIN_WIDTH, HINT_MIN_SET, HINT_TOL_SCALE
    old = (bool(HINTS_ON), HINT_MIN_WIDTH, HINT_MIN_SET, HINT_TOL_SCALE)
    if enabled is not None:
        HINTS_ON = bool(enabled)
    if min_width is not None:
        HINT_MIN_WIDTH = int(min_width)
    if min_set is not None:
        HINT_MIN_SET = int(min_set)
    if tol_scale is not None:
        HINT_TOL_SCALE = float(tol_scale)
    return old


# The adatron's and the SVR's learn_rows: once the set holds the gate's vectors, four rows'
# dots against it come from one pass over it (sk_dots_rows4), each row then adding those of
# the vectors the group's earlier rows inserted and taking afresh those of the ones they
# replaced (_lookahead); the same bits as one row at a time. The gate depends on the tile.
# Two rows of X at a time (sk_dots2x4, AVX2 and baseline machines), measured in C at 48
# features: four sk_dots against 2,874 rows 58 us, in one pass 41 us; at 1,000 rows 14.0
# and 13.3 us, so below that the pass is not worth its copy. Four rows at a time
# (sk_dots4x4, AVX-512 machines) gains at every size (see sk_dots_rows4); below 256
# vectors the group's overhead takes it back (the adatron on Phishing, 9 features, at 200:
# 1.26 against 1.38 us/event, medians of 9 in one process).
cdef Py_ssize_t LOOKAHEAD_MIN_SET = 1024
cdef Py_ssize_t LOOKAHEAD_MIN_SET_WIDE = 256
DEF ROWS_AHEAD = 4  # rows a look-ahead pass serves (sk_dots_rows4's four)


cdef inline Py_ssize_t _first_changed(const int64_t *ids, const int64_t *was, Py_ssize_t c,
                                      Py_ssize_t m) noexcept nogil:
    """The first slot from ``c`` on whose id is not the one it had (``m`` if none): blocks of
    64 compared by ``memcmp`` (a few replaced slots among a thousand: the scan is most of
    the work), then the block that differs slot by slot."""
    cdef Py_ssize_t e
    while c < m:
        e = min(c + 64, m)
        if memcmp(ids + c, was + c, (e - c) * sizeof(int64_t)) != 0:
            while ids[c] == was[c]:
                c += 1
            return c
        c = e
    return m


def lookahead_settings(min_set=None, min_set_wide=None, wide=None):
    """The look-ahead of the adatron's and the SVR's ``learn_rows``, for tests: the gate
    (the set's size from which it takes four rows' dots in one pass) of the two-by-four
    tile and of the four-by-four one, and whether the pass takes the latter (only where
    the machine has AVX-512). Each is set when not ``None``; returns them as they were,
    as keywords."""
    global LOOKAHEAD_MIN_SET, LOOKAHEAD_MIN_SET_WIDE
    old = {"min_set": LOOKAHEAD_MIN_SET, "min_set_wide": LOOKAHEAD_MIN_SET_WIDE,
           "wide": bool(sk_rows4_wide())}
    if min_set is not None:
        LOOKAHEAD_MIN_SET = int(min_set)
    if min_set_wide is not None:
        LOOKAHEAD_MIN_SET_WIDE = int(min_set_wide)
    if wide is not None:
        sk_rows4_tile_set(1 if wide else 0)
    return old


include "../_kcol.pxi"
include "../_kprog.pxi"
include "../budget/_vec.pxi"
include "../budget/_smallest.pxi"
include "../budget/_projectron.pxi"
include "../budget/_merge.pxi"  # Merge's search and merge (as streamk/budget/_policies.pyx)
include "../budget/_forgetron.pxi"
include "_adatron_pass.pxi"  # the adatron's pass (as streamk/learners/_dual.pyx runs it)


cdef int _record(slots, SupportCounters support, int64_t id_, double value) except -1:
    """``slots.add(id_, value)``, then ``slots.settle(support)``: what the learner's
    ``learn_one`` did after each event, the append without a Python call and the settle's
    test only where something was recorded (nothing else grows ``SlotData.pending``)."""
    cdef list pending = slots.pending
    pending.append(id_)  # (an int and a float: no tuple for the garbage collector to count)
    (<list>slots.pending_values).append(value)
    if PyList_GET_SIZE(pending) > support.n + SETTLE_SLACK:
        slots.settle(support)
    return 0


cdef Py_ssize_t _draw(sk_bitgen *gen, Py_ssize_t n) noexcept nogil:
    """``Generator.integers(n)`` for ``1 <= n < 2**32``: NumPy's bounded draw (Lemire's
    method on 32-bit outputs, ``random_bounded_uint64_fill`` with ``use_masked=False``),
    the same operations, so the generator advances exactly as the NumPy path's."""
    cdef uint32_t rng = <uint32_t>(n - 1), rng_excl = <uint32_t>n, leftover, threshold
    cdef uint64_t m
    if rng == 0:
        return 0  # NumPy draws nothing for a range of one value
    m = (<uint64_t>gen.next_uint32(gen.state)) * rng_excl
    leftover = <uint32_t>m
    if leftover < rng_excl:
        threshold = (<uint32_t>0xFFFFFFFF - rng) % rng_excl
        while leftover < threshold:
            m = (<uint64_t>gen.next_uint32(gen.state)) * rng_excl
            leftover = <uint32_t>m
    return <Py_ssize_t>(m >> 32)


def draw_slots(generator, Py_ssize_t n, Py_ssize_t count):
    """``count`` draws of ``generator.integers(n)`` by :func:`_draw` (``1 <= n < 2**32``),
    which remove-random's compiled insert uses: for tests against NumPy's own draws."""
    cdef sk_bitgen *gen
    if not 1 <= n < 0xFFFFFFFF:
        raise ValueError("n must be in [1, 2**32 - 1)")
    gen = <sk_bitgen *>PyCapsule_GetPointer(generator.bit_generator.capsule, "BitGenerator")
    return [_draw(gen, n) for _ in range(count)]


cdef void *_grown(void *mem, size_t size) except NULL:
    """``realloc(mem, size)`` (at least one byte), raising MemoryError where it fails (``mem``
    is then still valid, as its owner holds it)."""
    cdef void *out = realloc(mem, max(size, 1))
    if out == NULL:
        raise MemoryError()
    return out


@cython.auto_pickle(False)  # SupportSet pickles its own state (``__getstate__``)
cdef class SupportCounters:
    """The base of ``streamk.learners.support.SupportSet``: its counters as C fields.

    The per-event core reads and writes a set's ``n``, ``width``, ``next_id``, versions and
    ``_sq_max`` several times an event; as instance attributes each access was a Python
    dictionary lookup (and a new ``int`` for a version), a good part of an event's fixed
    cost. Here the core reaches them as struct fields, and Python code as attributes:
    nothing else changes. Without the extension the set keeps them in its ``__dict__``.
    """

    cdef public Py_ssize_t n, width
    cdef public int64_t next_id, rows_version, version
    cdef public double _sq_max


cdef class EventPass:
    """One learner's compiled ``learn_one`` / ``predict_one`` (see the module docstring).

    It holds no reference to the learner: each call receives it, and the views of the
    support set's buffers are re-taken whenever the set, its buffers, its kernel, the
    labels, the policy or anything else changed outside this path (``support.version``
    and object identities say so).

    Parameters
    ----------
    margin
        ``None`` for the kernel perceptron (update on a mistake, ``alpha = y``), a number
        for the margin perceptron (update also where ``y f < margin``, per column).
    ranker
        The on-line ranker's rule instead (Alg. 8.14: one score, thresholds ``b``; on a
        wrong rank ``alpha = y - yhat`` and the thresholds between move by one).
    rule
        ``"svr"``: :class:`~streamk.learners.OnlineSVR`'s step with ``resweeps=0`` (the
        target's running statistics, then the soft-threshold step from ``alpha = 0``);
        ``"novelty"``: :class:`~streamk.learners.KernelNovelty`'s insert with weight 1 (the
        centre's statistics ``_r``/``_cc`` kept current through growth, removals, the
        Projectron's projections and Merge's merges).
        ``"adatron"``: :class:`~streamk.learners.KernelAdatron`'s first step
        (``alpha = clip((1 - t f) / (k(x, x) + mu), 0, upper)`` per column), then its
        ``resweeps`` passes, if any (:meth:`_resweep`).
        ``None``: the perceptrons' or the ranker's rule.

    Attributes
    ----------
    hints_certain, hints_fresh, hint_builds
        Events the float32 hints decided, events they left to the float64 row, and
        rebuilds of their mirror (see ``_hint``): counts for tests and measurements.
    fused_columns
        Events whose kernel row and the full Forgetron's leaving column one pass over the
        set took (see ``_margins``): a count for tests.
    lookahead_rows, lookahead_columns
        Rows of ``learn_rows`` whose dots against the set a pass for four rows took, and
        full Forgetron's leaving columns taken from a pass for the set's four oldest
        vectors (see ``_lookahead``): counts for tests.
    rows_reused, hints_reused
        ``learn`` calls that took the float64 kernel row, or the float32 hints, that
        ``predict`` had just computed for the same row, the set unchanged since
        (test-then-train; see ``_keep_pre``): counts for tests.
    resweep_events
        Events whose adatron resweeps ran here (:meth:`_resweep`): a count for tests.
    """

    cdef readonly object margin
    cdef readonly bint ranker
    cdef readonly object rule
    cdef int rcode
    cdef bint valued  # the SVR or novelty: no labels
    cdef double a_mu, a_upper  # the adatron's diagonal shift and box
    # the adatron's resweeps (a_passes > 0, see _resweep): the kept Gram matrix, each slot's
    # class index (NaN: unknown), the slots oldest first (as a stable sort of the ids), kept
    # through every change this path makes
    cdef Py_ssize_t a_passes
    cdef object G_obj
    cdef double[:, ::1] G
    cdef double *a_cls
    cdef Py_ssize_t *a_age
    cdef Py_ssize_t a_cap
    cdef double a_signs[2]
    cdef bint a_binary
    cdef double a_new_cls  # the class index of the vector _insert is inserting
    cdef readonly Py_ssize_t resweep_events
    # the SVR's rule as OnlineSVR._rule gives it (-1: auto, NaN offset: the running mean)
    cdef double s_eps, s_C, s_off
    cdef bint s_off_mean
    # novelty: the buffer the centre's statistics r = K(S, S) w live in, and the view of
    # it last handed to the learner (identity says whether model._r is still ours)
    cdef object r_obj, r_last
    cdef double[::1] r
    cdef bint swap_r  # novelty: _insert carries r through its removal (_novelty_swap)
    cdef double _margin
    cdef bint _use_margin
    # learn_rows holds the learner's counters here while it runs (an attribute write per
    # event each otherwise) and writes them back before any Python reads them (:meth:`_flush`)
    cdef bint holding
    cdef Py_ssize_t held[3]  # by LEARNER_COUNTERS' index
    cdef bint held_stats  # the SVR's target statistics (count, mean, m2) in held_y
    cdef double held_y[3]
    # the binding: what the views below were taken from
    cdef bint bound
    cdef SupportCounters support
    cdef object X_obj, coef_obj, labels, classes, features, names, scale
    cdef double sq_lo, sq_hi  # the features' sq_window: a row outside it is refused
    cdef object policy, rng_obj, index, b_obj
    cdef bint warming  # gamma="auto" is still being estimated: each learned row refines it
    cdef object sc_mean_obj, sc_m2_obj  # the estimate's arrays the views below are of
    cdef double[::1] sc_mean, sc_m2
    cdef Py_ssize_t version, n_classes
    cdef double[:, ::1] X
    cdef double[:, ::1] coef
    cdef double[::1] sq
    cdef double[::1] kdiag
    cdef int64_t[::1] ids
    cdef double[::1] b  # the ranker's thresholds
    cdef int kcode, pcode
    cdef double kp[4]
    cdef double gamma  # the RBF's (for the exactness test of its norm expansion), else 0
    # a kernel program (K_PROGRAM): its nodes, how many, its stack's depth, whether it
    # normalises, its largest RBF width (for the expansion's exactness test), and its
    # stack: prog_slots rows of cap_k doubles (the last for the dots its leaves share)
    cdef object prog_obj
    cdef double[:, ::1] prog
    cdef Py_ssize_t prog_m, prog_depth, prog_slots
    cdef bint prog_norm
    cdef double prog_gamma
    cdef double *kw
    cdef Py_ssize_t cap_kw
    cdef Py_ssize_t budget
    cdef sk_bitgen *bitgen  # remove-random's generator (owned by rng_obj)
    cdef object cols  # label -> column of its class (one-vs-rest) or its sign (binary)
    cdef object pair  # (positive, negative) labels when binary
    # scratch
    cdef double *row
    cdef double *k
    cdef double *kr
    cdef double *f
    cdef double *t
    cdef double *fr
    cdef Py_ssize_t cap_row, cap_k, cap_f
    # the Projectron: its P = K(S, S)^-1 (the policy's buffer, written in place), whether P
    # is known to invert the bound set, its thresholds, and scratch for d, P[:, i] and a row
    cdef object pj_P_obj, pj_work_obj
    cdef double[:, ::1] pj_P
    cdef double[::1] pj_work
    # the policy's ids array (its ``_ids``) the last adopt left, written in place after a
    # removal (n unchanged) instead of a copy and ``to_spec`` per insert
    cdef object pj_ids_obj
    cdef int64_t[::1] pj_ids
    cdef bint pj_sync
    cdef double pj_eta, pj_min_rel
    cdef Py_ssize_t pj_left  # the slot the last _projectron removed (-1: none)
    # the policy's buffer (its ``_pend``) for a removal's or growth's update of P left to the
    # next d = P k (its rows in the policy's ``_pend_m``; Projectron._settle applies it otherwise)
    cdef object pj_pend_obj
    cdef double[::1] pj_pend
    # _projectron_rewidth's scratch: the Gram matrix, then sk_pjl_inverse's L, N and lanes
    cdef double *pj_scr
    cdef Py_ssize_t pj_scr_cap
    cdef Py_ssize_t pj_keep_lo, pj_keep_hi  # projectron.KEEP_FROM, KEEP_UP_TO
    # Merge: its search's scratch (for the bound buffers' rows) and the merges made here
    cdef object m_buf_obj, m_pick_obj
    cdef double[::1] m_buf
    cdef Py_ssize_t[::1] m_pick
    cdef readonly Py_ssize_t merges
    cdef Py_ssize_t m_dots  # rows of the set whose dots with the event's row _margins left
    #                        in ``kr`` under Merge (-1: none), for a merge whose m is the row
    cdef Py_ssize_t kr_slot  # >= 0: _margins left this slot's column in kr (the Forgetron)
    # The float32 hints (see _hint): the mirror of the support rows, transposed (feature k
    # of slot s at h_S[k * h_ld + s]) and centred on h_center, their squared norms after
    # centring (h_ssq, float32; h_sbig the largest, float64, an upper bound after
    # removals), what it mirrors (h_support at h_version, its buffer h_X, h_w features;
    # built when the set held h_n0 vectors), the event's float32 row and kernel row.
    cdef float *h_S
    cdef float *h_ssq
    cdef double *h_center
    cdef float *h_q
    cdef double *h_k
    cdef double *h_col  # p columns' sums of |coef| (sk_hint_sums' scratch)
    cdef Py_ssize_t h_ld, h_w, h_n0, h_cap_S, h_cap_w, h_cap_ld, h_cap_p
    cdef Py_ssize_t h_version
    cdef object h_support, h_X
    cdef bint h_valid
    cdef double h_sbig, h_tol
    cdef Py_ssize_t k_gap_d  # >= 0: the hints decided, self.k lacks this row (its width)
    cdef double k_gap_sq  # and its squared norm
    cdef readonly Py_ssize_t hints_certain, hints_fresh, hint_builds, fused_columns
    # the look-ahead (_lookahead; the adatron's and the SVR's rows): four block rows' dots
    # against the first la_n vectors, row g at la + g * la_ld; la_first the block row of the
    # group's first, la_count its rows (0: none), la_use the group row _margins takes now
    # (-1: none); la_check: vectors may be replaced meanwhile (a full budget), la_ids their
    # ids then
    cdef double *la
    cdef int64_t *la_ids
    cdef Py_ssize_t la_ld, la_cap, la_n, la_first, la_count, la_use
    cdef bint la_check
    # under a full Forgetron (the four-by-four tile): rows 4 .. 7 of la hold the columns of
    # the set's four oldest vectors then (ids la_old, ascending; la_old_rows their rows),
    # one of which each row of the group removes, if it inserts
    cdef bint la_cols
    cdef int64_t la_old[4]
    cdef Py_ssize_t la_old_slot[4]  # their slots then
    cdef Py_ssize_t la_gone  # how many of them the group's rows removed (4: not known)
    cdef double *la_old_rows
    cdef Py_ssize_t la_old_cap
    cdef readonly Py_ssize_t lookahead_rows, lookahead_columns
    # what the last predict left for a learn of the same row (_keep_pre): pre_kind 0 nothing,
    # PRE_ROW its float64 f and k (and Merge's dots in kr), PRE_HINTS its hints' f and bound;
    # valid while the set's version is pre_version and the event's row equals pre_row
    cdef int pre_kind
    cdef int64_t pre_version
    cdef Py_ssize_t pre_d
    cdef double pre_row_sq
    cdef double *pre_row
    cdef readonly Py_ssize_t rows_reused, hints_reused

    def __cinit__(self, margin=None, ranker=False, rule=None):
        if rule not in (None, "svr", "novelty", "adatron"):
            raise ValueError(f"unknown rule {rule!r}")
        self.margin = margin
        self.ranker = bool(ranker)
        self.rule = rule
        if rule == "svr":
            self.rcode = R_SVR
        elif rule == "novelty":
            self.rcode = R_NOVELTY
        elif rule == "adatron":
            self.rcode = R_ADATRON
        else:
            self.rcode = R_RANKER if self.ranker else R_PERCEPTRON
        self.valued = self.rcode == R_SVR or self.rcode == R_NOVELTY
        self.r_obj = self.r_last = None
        self.swap_r = False
        self._use_margin = margin is not None
        self._margin = 0.0 if margin is None else float(margin)
        self.bound = False
        self.bitgen = NULL
        self.m_dots = self.kr_slot = -1
        self.row = self.k = self.kr = self.f = self.t = self.fr = self.kw = NULL
        self.pre_row = NULL
        self.pre_kind = 0
        self.la = NULL
        self.la_ids = NULL
        self.la_old_rows = NULL
        self.la_cap = self.la_count = self.la_old_cap = 0
        self.la_cols = False
        self.la_use = -1
        self.cap_row = self.cap_k = self.cap_f = self.cap_kw = 0
        self.prog_obj = None
        self.prog_slots = 0
        self.h_S = self.h_ssq = self.h_q = NULL
        self.h_center = self.h_k = self.h_col = NULL
        self.h_ld = self.h_w = self.h_n0 = 0
        self.h_cap_S = self.h_cap_w = self.h_cap_ld = self.h_cap_p = 0
        self.h_valid = False
        self.k_gap_d = -1
        self.a_cls = NULL
        self.a_age = NULL
        self.a_cap = self.a_passes = 0
        self.pj_scr = NULL
        self.pj_scr_cap = 0

    def __dealloc__(self):
        free(self.row)
        free(self.pre_row)
        free(self.k)
        free(self.kr)
        free(self.f)
        free(self.t)
        free(self.fr)
        free(self.kw)
        free(self.la)
        free(self.la_ids)
        free(self.la_old_rows)
        free(self.h_S)
        free(self.h_ssq)
        free(self.h_center)
        free(self.h_q)
        free(self.h_k)
        free(self.h_col)
        free(self.a_cls)
        free(self.a_age)
        free(self.pj_scr)

    def __reduce__(self):
        # the binding is a cache of the learner it serves: a copy starts unbound
        return (EventPass, (self.margin, self.ranker, self.rule))

    def reset(self):
        """Drop the binding (the next call re-takes it)."""
        self._unbind()

    cdef void _unbind(self):
        self.bound = False
        self.pre_kind = 0
        self.support = self.X_obj = self.coef_obj = None
        self.labels = self.classes = self.features = self.names = self.scale = None
        self.policy = self.rng_obj = self.index = self.b_obj = None
        self.bitgen = NULL
        self.warming = False
        self.cols = self.pair = None
        self.X = None
        self.coef = None
        self.sq = None
        self.kdiag = None
        self.ids = None
        self.b = None
        self.G_obj = None
        self.G = None
        self.a_passes = 0

    cdef bint _reserve(self, Py_ssize_t d, Py_ssize_t n, Py_ssize_t p) except False:
        cdef void *mem
        if d > self.cap_row:
            mem = realloc(self.row, max(d, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.row = <double *>mem
            mem = realloc(self.pre_row, max(d, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.pre_row = <double *>mem
            self.cap_row = d
        if n > self.cap_k:
            mem = realloc(self.k, max(n, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.k = <double *>mem
            mem = realloc(self.kr, max(n, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.kr = <double *>mem
            self.cap_k = n
        self._reserve_program()
        if p > self.cap_f:
            mem = realloc(self.f, max(p, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.f = <double *>mem
            mem = realloc(self.t, max(p, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.t = <double *>mem
            mem = realloc(self.fr, max(p, 1) * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.fr = <double *>mem
            self.cap_f = p
        return True

    cdef bint _reserve_program(self) except False:
        """Room for the bound program's stack: ``prog_slots`` rows of ``cap_k``."""
        cdef void *mem
        cdef Py_ssize_t need = self.prog_slots * max(self.cap_k, 1)
        if need > self.cap_kw:
            mem = realloc(self.kw, need * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.kw = <double *>mem
            self.cap_kw = need
        return True

    # -- binding --------------------------------------------------------------------------------
    cdef bint _current(self, model) except -1:
        """Whether the binding still describes ``model``'s state; re-take it if it can.

        Never while the compiled core is switched off (``accel.core = None``, as tests
        do for their NumPy oracle): then the NumPy path runs, as without the extension."""
        if _accel.core is None:
            return False
        support = model._support
        if (  # a replaced buffer moves support.version (SupportSet's growth); _G never appears
            self.bound
            and support is self.support
            and self.support.version == self.version
            and model._features is self.features
            and model._policy is self.policy
            and (self.rng_obj is None or self.policy._rng is self.rng_obj)
        ):
            if self.valued:
                return True
            if model._labels is not self.labels:
                pass
            elif self.ranker:
                if model._index is self.index and model._b is self.b_obj:
                    return True
            elif PyList_GET_SIZE(self.classes) == self.n_classes:
                return True
        return self._bind(model, support)

    cdef bint _bind_kernel(self, kernel) except -1:
        """The kernel's code and parameters (as ``fastpass._kernel_plan``), or its program
        (``streamk.kernels.program``) for a sum, product, scaling or normalisation of them;
        False for any other kernel."""
        RBF, Laplacian, Linear, Polynomial, Scaled = _kernel_types()
        c, inner = 1.0, kernel
        if type(inner) is Scaled:
            c, inner = inner.c, inner.kernel
        self.gamma = 0.0
        self.kp[0] = self.kp[1] = self.kp[2] = 0.0
        self.kp[3] = float(c)
        self.prog_obj = None
        if type(inner) is RBF or type(inner) is Laplacian:
            if not inner.is_resolved:
                return False
            self.kcode = K_RBF if type(inner) is RBF else K_LAPLACIAN
            self.kp[0] = float(inner.gamma)
            if type(inner) is RBF:
                self.gamma = self.kp[0]
        elif type(inner) is Polynomial:
            self.kcode = K_POLY
            self.kp[0], self.kp[1], self.kp[2] = inner.scale, inner.offset, inner.degree
        elif type(inner) is Linear:
            self.kcode = K_LINEAR
        else:
            return self._bind_program(kernel)
        return True

    cdef bint _bind_program(self, kernel) except -1:
        """``kernel``'s program (K_PROGRAM) and room for its stack; False when it has none."""
        from streamk.kernels.program import kernel_program

        program = kernel_program(kernel)
        if program is None:
            return False
        self.kcode = K_PROGRAM
        self.kp[3] = 1.0
        self.prog_obj = program.ops
        self.prog = program.ops
        self.prog_m = program.ops.shape[0]
        self.prog_depth = program.depth
        self.prog_norm = program.normalizes
        self.prog_slots = program.depth * (2 if program.normalizes else 1) + 1  # + the dots
        self.prog_gamma = program.rbf_gamma
        self._reserve_program()
        return True

    cdef void _column(self, const double *X, Py_ssize_t ldx, Py_ssize_t n, const double *x_sq,
                      const double *row, Py_ssize_t w, double row_sq,
                      double *out) noexcept nogil:
        """``out[s] = k(row, X[s])`` for ``s < n <= cap_k``: :func:`_kcol`, or the bound
        program on its stack."""
        if self.kcode == K_PROGRAM:
            _kprog_col(&self.prog[0, 0], self.prog_m, self.prog_depth, self.prog_norm, X, ldx,
                       n, x_sq, row, w, row_sq, self.kw, out)
        else:
            _kcol(self.kcode, self.kp, X, ldx, n, x_sq, row, w, row_sq, out)

    cdef bint _bind_policy(self, policy, support) except -1:
        """The policy's code, budget and state holders; False for any other policy."""
        from streamk.budget.base import Unbounded
        from streamk.budget.projectron import Projectron
        from streamk.budget.merge import Merge
        from streamk.budget.removal import Forgetron, RemoveOldest, RemoveRandom, RemoveSmallest
        import numpy as np

        kind = type(policy)
        if kind is Unbounded:
            self.pcode, self.budget = P_OLDEST, 0
        elif kind is RemoveOldest or kind is Forgetron:
            self.pcode = P_OLDEST if kind is RemoveOldest else P_FORGETRON
            self.budget = int(policy.budget)
        elif kind is RemoveSmallest:
            self.pcode, self.budget = P_SMALLEST, int(policy.budget)
        elif kind is RemoveRandom:
            rng = policy._rng
            if type(rng) is not np.random.Generator:
                return False
            self.pcode, self.budget = P_RANDOM, int(policy.budget)
            self.rng_obj = rng
            self.bitgen = <sk_bitgen *>PyCapsule_GetPointer(rng.bit_generator.capsule,
                                                           "BitGenerator")
        elif kind is Projectron:
            self._bind_projectron(policy)
        elif kind is Merge:
            if not self._bind_merge(policy, support):
                return False
        else:
            return False
        if self.budget < 0 or policy.needs_gram:
            return False
        self.policy = policy
        return True

    cdef bint _bind_labels(self, model, Py_ssize_t p) except -1:
        """The classes (or ranks and thresholds) and how a label maps to targets."""
        labels = model._labels
        self.labels = labels
        if self.ranker:
            b_obj = model._b
            if p != 1 or b_obj.dtype.char != "d" or not b_obj.flags.c_contiguous:
                return False
            if not b_obj.flags.writeable or b_obj.shape[0] != max(len(labels) - 1, 0):
                return False
            self.index, self.b_obj, self.classes = model._index, b_obj, labels
            self.n_classes = len(labels)
            self.b = b_obj
            return True
        classes = labels.classes
        if len(classes) > 2:
            if p != len(classes):
                return False
            self.cols = {c: i for i, c in enumerate(classes)}
            self.pair = None
        else:
            if p != 1:
                return False
            self.cols = {c: float(s) for c, s in zip(classes, labels.signs)}
            self.pair = labels._pair
        self.classes, self.n_classes = classes, len(classes)
        return True

    cdef bint _bind_rule(self, model) except -1:
        """The SVR's ``epsilon``/``C``/``offset`` as :meth:`OnlineSVR._rule` encodes them,
        the adatron's ``mu``, box and passes (read at binding: they follow from constructor
        parameters); False for an SVR that resweeps."""
        if self.rcode == R_SVR:
            if model.resweeps:
                return False
            self.s_eps, self.s_C, self.s_off = model._rule()
            self.s_off_mean = self.s_off != self.s_off
        elif self.rcode == R_ADATRON:
            self.a_passes = int(model.resweeps)
            self.a_mu, self.a_upper = float(model._mu), float(model._upper)
        return True

    cdef bint _bind_gram(self, model, support, Py_ssize_t p) except -1:
        """The adatron's resweeps (``_bind_rule`` set ``a_passes``): the kept Gram matrix,
        each slot's class index as ``KernelAdatron._slots`` aligns it and the slots oldest
        first; False where the compiled resweep does not apply (no Gram matrix, more than
        64 columns, the Projectron, a class index out of range)."""
        import numpy as np

        cdef Py_ssize_t c
        G_obj = support._G
        rows = support._X.shape[0]
        if G_obj is None or G_obj.dtype.char != "d" or not G_obj.flags.c_contiguous:
            return False
        if G_obj.shape[0] < rows or G_obj.shape[1] < rows:
            return False
        if p > 64 or self.pcode == P_PROJECTRON:
            return False
        ids = support.ids
        cls = np.ascontiguousarray(model._cls.align(ids)[:, 0], dtype=np.float64)
        order = np.argsort(ids, kind="stable")
        known = cls[~np.isnan(cls)]
        if known.size and (known.min() < 0 or known.max() >= max(self.n_classes, 1)):
            return False
        self.a_binary = self.n_classes <= 2
        if self.a_binary:
            signs = model._labels.signs
            if p != 1 or len(signs) > 2 or len(signs) < self.n_classes:
                return False
            self.a_signs[0] = self.a_signs[1] = 0.0
            for c in range(len(signs)):
                self.a_signs[c] = float(signs[c])
        if rows > self.a_cap:
            self.a_cls = <double *>_grown(self.a_cls, rows * sizeof(double))
            self.a_age = <Py_ssize_t *>_grown(self.a_age, rows * sizeof(Py_ssize_t))
            self.a_cap = rows
        for c in range(support.n):
            self.a_cls[c] = cls[c]
            self.a_age[c] = order[c]
        self.G_obj = G_obj
        self.G = G_obj
        return True

    cdef bint _bind(self, model, support) except -1:
        """Take views of ``model``'s buffers when the compiled path applies to it."""
        self._unbind()
        scale = model._scale
        self.scale = scale
        self.warming = scale is not None and scale.n < AUTO_WINDOW
        if getattr(model, "_objects", True) or not isinstance(support, SupportCounters):
            return False
        if support._trackers:
            return False
        if support._G is not None and not (self.rcode == R_ADATRON and model.resweeps):
            return False  # no pass but the adatron's resweeps writes a kept Gram matrix
        if not self._bind_kernel(support.kernel) or not self._bind_policy(model._policy, support):
            self._unbind()
            return False
        p = support.n_outputs
        X_obj, coef_obj = support._X, support._coef
        if X_obj.dtype.char != "d" or coef_obj.dtype.char != "d":
            self._unbind()
            return False
        if self.valued:
            if p != 1 or not self._bind_rule(model):
                self._unbind()
                return False
        elif not self._bind_labels(model, p) or not self._bind_rule(model):
            self._unbind()
            return False
        if self.a_passes and not self._bind_gram(model, support, p):
            self._unbind()
            return False
        self.X = X_obj
        self.coef = coef_obj
        self.sq = support._sq
        self.kdiag = support._kdiag
        self.ids = support._ids
        self.support, self.X_obj, self.coef_obj = support, X_obj, coef_obj
        self.version = support.version
        self.features = model._features
        self.names = self.features.names
        self.sq_lo, self.sq_hi = self.features.sq_window
        self._reserve(len(self.names), X_obj.shape[0], p)
        self.bound = True
        return True

    # -- the per-event work -------------------------------------------------------------------
    cdef Py_ssize_t _row(self, dict x) except -2:
        """The event's values in column order into ``self.row``; its width, or -1 when its
        keys are not exactly the features in column order, a value is not a finite
        float/int/``numpy.float64`` or their squared norm overflows or is outside the
        features' ``sq_window`` (the NumPy path then
        grows the index, or raises the right error). ``numpy.float64`` is what a dict built
        from a NumPy row holds."""
        cdef Py_ssize_t pos = 0, i = 0, d
        cdef PyObject *key
        cdef PyObject *value
        cdef PyObject *name
        cdef double v, sq = 0.0
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
            if PyFloat_CheckExact(<object>value) or type(<object>value) is _NP_FLOAT64:
                v = PyFloat_AS_DOUBLE(<object>value)  # numpy's float64 is a float: its value
            elif PyLong_CheckExact(<object>value):
                try:
                    v = PyLong_AsDouble(<object>value)
                except OverflowError:  # an int beyond any float: the NumPy path refuses it
                    return -1
            else:
                return -1
            if not isfinite(v):
                return -1
            self.row[i] = v
            sq = sq + v * v
            i += 1
        # a squared norm that overflows or puts k(x, x) out of the kernel's range (the
        # NumPy path refuses it, saying why)
        if not isfinite(sq) or sq > self.sq_hi or (sq < self.sq_lo and sq != 0.0):
            return -1
        return d

    cdef bint _expansion_exact(self, double sq_bound) noexcept:
        """``RBF.expansion_exact``: the RBF's norm expansion is exact to 1e-10 (for a
        program, that of its widest RBF; other kernels compute no expansion)."""
        if self.kcode == K_PROGRAM:
            return not sq_bound * 1e-15 * self.prog_gamma > 1e-10
        return self.kcode != K_RBF or not sq_bound * 1e-15 * self.gamma > 1e-10

    cdef bint _margins(self, Py_ssize_t d, double *row_sq, bint inserting) noexcept:
        """``f = K(row, S) coef`` into ``self.f`` (``self.k`` holds the kernel row); False when
        the norm expansion may be inexact (the NumPy path takes the exact one).
        ``inserting``: the event is learned by a rule that inserts (nearly) every event (the
        adatron, novelty), so under a full Forgetron the leaving vector's column (which its
        shrink reads) comes in the same pass over the set, into ``self.kr`` (``kr_slot``
        its slot; :meth:`_forgetron`). Not for the others: the column would be wasted on
        every event that does not update, and the pass for two rows saves less than one
        column (the SVR on Friedman, 80% updates: measured slower)."""
        cdef Py_ssize_t n = self.support.n, p = self.coef.shape[1], c, k, m, r = -1
        cdef Py_ssize_t wx = self.X.shape[1]
        cdef double acc = 0.0
        cdef double *row = self.row
        self.m_dots = self.kr_slot = -1
        for k in range(d):
            acc = acc + row[k] * row[k]
        row_sq[0] = acc
        for c in range(p):
            self.f[c] = 0.0
        if n == 0:
            return True
        if d > self.X.shape[1] or n > self.cap_k:
            return False
        if not self._expansion_exact(self.support._sq_max + acc):
            return False
        if (inserting and self.pcode == P_FORGETRON and self.budget > 0 and n >= self.budget
                and d == wx and self.kcode != K_PROGRAM):
            r = self._la_oldest_slot(n) if self.la_use >= 0 and self.la_cols else self._oldest(n)
        with nogil:
            if self.pcode == P_MERGE:  # (a plain RBF) _kcol's steps, the dots kept in kr
                if self.la_use >= 0:
                    self._la_finish(self.la + self.la_use * self.la_ld, n, row, d, acc, self.k)
                    memcpy(self.kr, self.la + self.la_use * self.la_ld, n * sizeof(double))
                    self.lookahead_rows += 1
                else:
                    sk_dots(self.kr, &self.X[0, 0], self.X.shape[1], n, row, d)
                    sk_rbf_from_dots(self.k, self.kr, &self.sq[0], acc, n, self.kp[0])
                self.m_dots = n
            elif r >= 0 and not (self.la_use >= 0 and self.la_cols):
                _kcol2(self.kcode, self.kp, &self.X[0, 0], wx, n, &self.sq[0], wx, row, acc,
                       self.k, &self.X[r, 0], self.sq[r], self.kr)
                self.fused_columns += 1
            elif self.la_use >= 0:  # _kcol's steps, most dots ready (_lookahead)
                self._la_finish(self.la + self.la_use * self.la_ld, n, row, d, acc, self.k)
                self.lookahead_rows += 1
                if r >= 0:  # the leaving vector's column: one of the four the pass took
                    c = 0
                    while c < ROWS_AHEAD and self.la_old[c] != self.ids[r]:
                        c += 1
                    if c < ROWS_AHEAD:
                        self._la_finish(self.la + (ROWS_AHEAD + c) * self.la_ld, n,
                                        &self.X[r, 0], wx, self.sq[r], self.kr)
                        self.lookahead_columns += 1
                    else:  # (not after a row the core declined: the group ends there)
                        self._column(&self.X[0, 0], wx, n, &self.sq[0], &self.X[r, 0], wx,
                                     self.sq[r], self.kr)
            else:
                self._column(&self.X[0, 0], wx, n, &self.sq[0], row, d, acc, self.k)
            _combine(self.k, &self.coef[0, 0], n, p, self.f)
        self.kr_slot = r
        return True

    cdef void _la_finish(self, double *dots, Py_ssize_t n, const double *row, Py_ssize_t d,
                         double row_sq, double *out) noexcept nogil:
        """A kernel row (or column) against the set's ``n`` vectors into ``out``, from its
        dots in a row of ``la``, which the look-ahead pass took against the set as it
        stood: the slots whose vector was replaced since (``la_ids``) and the vectors the
        group's earlier rows inserted (at most three: ``la_ld`` has room) take theirs
        afresh, written into that row. So a row of ``la`` read again (a Forgetron column
        that a row which did not insert left to the next) is brought up to date again."""
        cdef Py_ssize_t c, m = min(n, self.la_n), wx = self.X.shape[1]
        if self.la_check:
            c = _first_changed(&self.ids[0], self.la_ids, 0, m)
            while c < m:
                sk_dots(dots + c, &self.X[c, 0], wx, 1, row, d)
                c = _first_changed(&self.ids[0], self.la_ids, c + 1, m)
        if n > m:
            sk_dots(dots + m, &self.X[m, 0], wx, n - m, row, d)
        _kfinish_from(self.kcode, self.kp, n, &self.sq[0], row_sq, dots, out)

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
        if mean_obj is not self.sc_mean_obj or m2_obj is not self.sc_m2_obj:
            # new arrays (a fresh or restored estimate): checked and viewed once, not per row
            if mean_obj.dtype.char != "d" or m2_obj.dtype.char != "d":
                return False
            if not (mean_obj.flags.writeable and m2_obj.flags.writeable):
                return False
            self.sc_mean = mean_obj
            self.sc_m2 = m2_obj
            self.sc_mean_obj, self.sc_m2_obj = mean_obj, m2_obj
        mean = self.sc_mean
        m2 = self.sc_m2
        if mean.shape[0] != d or m2.shape[0] != d or d == 0:
            return False
        n_old = scale.n
        a = 1.0 / <double>(n_old + 1)
        c = <double>n_old / <double>(n_old + 1)
        for j in range(d):
            delta = self.row[j] - mean[j]
            mean[j] = mean[j] + delta * a
            m2[j] = (m2[j] + 0.0) + (delta * delta) * c
        scale.n = n_old + 1
        return True

    cdef bint _fold_warm(self, model, Py_ssize_t d) except -1:
        """:meth:`_fold`, then, at the counts ``regamma_at`` names, the kernel re-estimated
        (``KernelLearner._refine_gamma``): the kernel moves before this event is learned."""
        if not self._fold(d):
            return False
        cdef Py_ssize_t n = self.scale.n
        cdef int kcode = self.kcode
        if n <= AUTO_WINDOW and (n <= 10 or n % 10 == 0):
            support = model._support
            # only the width moves: a binding current until now takes the new kernel's
            # parameters alone (a full re-binding costs ~10 us, 29 times a warm-up); the
            # Projectron's P is brought in sync at the next insert (_projectron_room: here
            # in C for a plain RBF, _projectron_rewidth), its buffers kept
            keep = self.bound and support is self.support and support.version == self.version
            mirror = keep and self._mirror_current(d)
            kernel = model._auto_kernel.resolve(self.scale)
            if not (keep and self.a_passes and self._gram_rewidth(kernel)):
                support.set_kernel(kernel)
            if keep and self._bind_kernel(kernel) and self.kcode == kcode:
                if self.pcode == P_PROJECTRON:
                    self.pj_sync = False
                self.version = support.version
                if mirror:  # the rows did not move: the hints' mirror holds them still
                    self.h_version = self.version
        return True

    cdef object _finish(self, model, Py_ssize_t d, y):
        """The rest of ``learn_one`` on the NumPy path, for a row already folded into the
        ``gamma="auto"`` estimate (the rare case the compiled update cannot take)."""
        import numpy as np

        self._flush(model)  # the NumPy path reads and moves the counters
        row = np.array([self.row[j] for j in range(d)])
        if self.ranker:
            k_row = model._kernel_row(row)
            model._update(row, float(k_row @ model._support.coef[:, 0]), k_row, y)
        else:
            k_row, f = model._margins(row)
            model._update(row, f, k_row, y)
        self._unbind()
        return True

    cdef Py_ssize_t _rank(self) noexcept:
        """The ranker's predicted rank index: the number of thresholds ``<= f``."""
        cdef Py_ssize_t i, pr = 0
        for i in range(self.b.shape[0]):
            if self.b[i] <= self.f[0]:
                pr += 1
        return pr

    cdef object _decide(self):
        """The predicted label from ``self.f`` (``LabelCoder.decide_one``; sgn(0) = +1, or
        the ranker's rank)."""
        cdef Py_ssize_t c, best_c = 0, p = self.coef.shape[1]
        cdef double best
        if self.n_classes == 0:
            return None
        if self.ranker:
            return self.classes[self._rank()]
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

    # -- the float32 hints ---------------------------------------------------------------------
    # learn_one / predict_one of the perceptrons and the ranker under a plain RBF kernel and
    # no budget, remove-oldest, remove-random or the Forgetron, once the event has at least
    # HINT_MIN_WIDTH (8) features and the set HINT_MIN_SET (96) vectors: the event's kernel
    # row in float32 against a mirror of the support rows, and the decision from it wherever
    # the error bound of streamk._core.perceptron_hint_pass makes it certain (the float64
    # row otherwise). The mirror, allocated at the first event past the gate, costs
    # 4 (w + 1) + 8 bytes per row of the set's buffers (w features).

    cdef bint _hint_kind(self) noexcept:
        """Whether the hints serve this binding: the perceptrons' or the ranker's rule, a
        plain RBF kernel, and no budget, remove-oldest, remove-random, remove-smallest or
        the Forgetron (the Projectron and Merge use the kernel row itself)."""
        return (
            HINTS_ON
            and (self.rcode == R_PERCEPTRON or self.rcode == R_RANKER)
            and self.kcode == K_RBF
            and self.kp[3] == 1.0
            and (
                self.pcode == P_OLDEST
                or self.pcode == P_RANDOM
                or self.pcode == P_FORGETRON
                or self.pcode == P_SMALLEST
            )
        )

    cdef bint _mirror_current(self, Py_ssize_t d) except -1:
        """Whether the mirror holds the set's rows as they are now (``d`` features): only
        this path's own changes keep it so; anything else moves ``support.version``."""
        return (
            self.h_valid
            and self.h_support is self.support
            and self.h_X is self.X_obj
            and self.h_w == d
            and self.h_version == self.support.version
        )

    cdef bint _mirror_room(self, Py_ssize_t d, Py_ssize_t ld, Py_ssize_t p) except False:
        """The mirror's buffers for ``d`` features, ``ld`` slots and ``p`` outputs (grown,
        never shrunk)."""
        if d * ld > self.h_cap_S:
            self.h_S = <float *>_grown(self.h_S, d * ld * sizeof(float))
            self.h_cap_S = d * ld
        if d > self.h_cap_w:
            self.h_center = <double *>_grown(self.h_center, d * sizeof(double))
            self.h_q = <float *>_grown(self.h_q, d * sizeof(float))
            self.h_cap_w = d
        if ld > self.h_cap_ld:
            self.h_ssq = <float *>_grown(self.h_ssq, ld * sizeof(float))
            self.h_k = <double *>_grown(self.h_k, ld * sizeof(double))
            self.h_cap_ld = ld
        if p > self.h_cap_p:
            self.h_col = <double *>_grown(self.h_col, p * sizeof(double))
            self.h_cap_p = p
        return True

    cdef bint _mirror_build(self, Py_ssize_t d) except -1:
        """The mirror from the set's rows: centred on their mean (the rounding shrinks with
        the norms), each vector's squared norm over all of its features (those past ``d``
        included), the slots past ``n`` zero (the kernel's spare lanes read them)."""
        cdef Py_ssize_t n = self.support.n, wx = self.X.shape[1], s, k, t
        cdef Py_ssize_t ld = ((self.X.shape[0] + 15) // 16 | 1) * 16  # (odd: see _core's _hint_room)
        cdef double h
        self.h_valid = False
        self._mirror_room(d, ld, self.coef.shape[1])
        for k in range(d):
            self.h_center[k] = 0.0
        for s in range(n):
            for k in range(d):
                self.h_center[k] += self.X[s, k]
        for k in range(d):
            self.h_center[k] /= max(n, 1)
        self.h_sbig = 0.0
        for s in range(n):  # the squared norms after centring, all features
            h = 0.0
            for k in range(d):
                h += (self.X[s, k] - self.h_center[k]) * (self.X[s, k] - self.h_center[k])
            for k in range(d, wx):
                h += self.X[s, k] * self.X[s, k]
            self.h_ssq[s] = <float>h
            self.h_sbig = max(self.h_sbig, h)
        for t in range(0, ld, 16):  # the rows sixteen at a time: one line of S per feature
            for k in range(d):
                for s in range(t, min(t + 16, n)):
                    self.h_S[k * ld + s] = <float>(self.X[s, k] - self.h_center[k])
                for s in range(max(t, n), t + 16):
                    self.h_S[k * ld + s] = 0.0
        for s in range(n, ld):
            self.h_ssq[s] = 0.0
        self.h_ld, self.h_w, self.h_n0 = ld, d, max(n, 1)
        self.h_support, self.h_X, self.h_version = self.support, self.X_obj, self.support.version
        self.h_valid = True
        self.hint_builds += 1
        return True

    cdef void _mirror_put(self, Py_ssize_t slot, Py_ssize_t d) noexcept:
        """The event's row (``self.row``, its features past ``d`` zero) into ``slot``."""
        cdef double h = sk_centre32(&self.h_S[slot], self.row, self.h_center, d, self.h_ld)
        self.h_ssq[slot] = <float>h
        self.h_sbig = max(self.h_sbig, h)

    cdef void _mirror_move(self, Py_ssize_t src, Py_ssize_t dst) noexcept:
        """``SupportSet.remove``'s move of the last vector into the freed slot."""
        cdef Py_ssize_t k, ld = self.h_ld
        for k in range(self.h_w):
            self.h_S[k * ld + dst] = self.h_S[k * ld + src]
        self.h_ssq[dst] = self.h_ssq[src]

    cdef bint _hint(self, Py_ssize_t d, double *row_sq) except -1:
        """The float32 hints ``f~`` into ``self.f`` and their bound into ``self.h_tol``
        (``|f~ - f| <= h_tol`` for every output, ``f`` what :meth:`_margins` computes);
        False where the hints do not serve (kind, gate, the bound's range) or
        :meth:`_margins` would decline. ``row_sq`` receives the row's squared norm as
        :meth:`_margins` sums it (either way).

        The bound is :func:`streamk._core.perceptron_hint_pass`'s weighted one (its
        docstring proves it) for one row: ``1e-9 (1 + L) + 2 (1.001 A (8.0001 u + 1.0016
        1.01 kappa (||q||^2 + S)) + 0.74 u L)``, ``A`` the sum of ``max_c |coef_s,c|`` times
        the float32 kernel values, ``L`` the largest column sum of ``|coef|``, ``S`` the
        largest squared norm (after centring) of the row and the mirror, ``kappa = 1.03 g
        (w + 8) u``; valid while ``kappa (||q||^2 + S) <= 1e-3``."""
        cdef Py_ssize_t n = self.support.n, p = self.coef.shape[1], k
        cdef double acc = 0.0, qsq, sq_hi, kappa, L = 0.0, A = 0.0, one = 1.0
        cdef double *row = self.row
        for k in range(d):
            acc = acc + row[k] * row[k]
        row_sq[0] = acc
        if not self._hint_kind() or d < HINT_MIN_WIDTH or n < max(HINT_MIN_SET, 1):
            return False
        if not self.ranker and self.n_classes < 2:
            return False
        if d > self.X.shape[1] or n > self.cap_k:
            return False
        if not self._expansion_exact(self.support._sq_max + acc):
            return False
        if not self._mirror_current(d) or n > 2 * self.h_n0 + 16:
            self._mirror_build(d)  # (again as the set grows: its mean moves)
        qsq = sk_centre32(self.h_q, row, self.h_center, d, 1)
        sq_hi = max(qsq, self.h_sbig)
        kappa = 1.03 * self.gamma * (d + 8) * U32
        if not (qsq + sq_hi < 1e30 and kappa * (qsq + sq_hi) <= 1e-3):
            return False
        with nogil:
            memset(self.h_k, 0, ((n + 15) // 16 * 16) * sizeof(double))
            sk_hint_column(self.h_k, NULL, self.h_ld, 1, &one, self.h_S, self.h_ld, d, 0, n,
                           self.h_q, <float>qsq, self.h_ssq, <float>self.gamma)
            if p == 1:
                sk_hint_sums1(self.h_k, &self.coef[0, 0], n, self.f, &A, &L)
            else:
                sk_hint_sums(self.h_k, &self.coef[0, 0], n, p, self.f, &A, &L, self.h_col)
        self.h_tol = HINT_TOL_SCALE * (1e-9 * (1.0 + L) + 2.0 * (
            1.001 * A * (8.0001 * U32 + 1.0016 * 1.01 * kappa * (<float>qsq + sq_hi))
            + 0.74 * U32 * L))
        return True

    cdef Py_ssize_t _hint_rank(self) noexcept:
        """:meth:`_rank` from the hint: the number of thresholds ``<= f``, or -1 where a
        threshold lies within the bound of the hint (its side is not certain)."""
        cdef Py_ssize_t i, pr = 0
        cdef double h = self.f[0], tol = self.h_tol
        for i in range(self.b.shape[0]):
            if h - self.b[i] > tol:
                pr += 1
            elif not self.b[i] - h > tol:
                return -1
        return pr

    cdef object _hint_decide(self):
        """:meth:`_decide` from the hints, or :data:`NOT_HANDLED` where the bound leaves it
        open (the sign within it of 0, or the largest output within twice it of another)."""
        cdef Py_ssize_t c, best_c = 0, p = self.coef.shape[1], pr
        cdef double tol = self.h_tol, best
        if self.ranker:
            pr = self._hint_rank()
            return NOT_HANDLED if pr < 0 else self.classes[pr]
        if self.pair is not None:
            if self.f[0] > tol:
                return self.pair[0]
            return self.pair[1] if self.f[0] < -tol else NOT_HANDLED
        best = self.f[0]
        for c in range(1, p):
            if self.f[c] > best:
                best = self.f[c]
                best_c = c
        for c in range(p):
            if c != best_c and not best - self.f[c] > 2.0 * tol:
                return NOT_HANDLED
        return self.classes[best_c]

    cdef int _hint_targets(self, code) noexcept:
        """:meth:`_targets` from the hints: 1 (the new vector's coefficients in
        ``self.f``), 0 (no column wrong), or -1 where a column's hint lies within the bound
        of 0 or of the margin (``self.f`` then partly overwritten: the float64 row
        follows). A certain mistake needs no exact ``f``: the coefficients are the targets."""
        cdef Py_ssize_t c, p = self.coef.shape[1]
        cdef double h, tol = self.h_tol, margin = self._margin
        cdef bint wrong, any_wrong = False
        self._fill_targets(code)
        for c in range(p):
            h = self.f[c] * self.t[c]
            if h > tol and (not self._use_margin or h > margin + tol):
                wrong = False
            elif h < -tol or (self._use_margin and tol < h < margin - tol):
                wrong = True
            else:
                return -1
            if wrong:
                any_wrong = True
            self.f[c] = self.t[c] if wrong else 0.0
        return 1 if any_wrong else 0

    cdef void _hint_forget(self, Py_ssize_t r) noexcept nogil:
        """The one kernel value the Forgetron's shrink reads from the event's row when the
        hints decided it (``k_gap_d`` its width, ``k_gap_sq`` its squared norm):
        ``k(x, x_r)`` into ``self.k[r]``, exactly as the full row has it (a dot's bits do
        not depend on where its row sits)."""
        _kcol(self.kcode, self.kp, &self.X[r, 0], self.X.shape[1], 1, &self.sq[r], self.row,
              self.k_gap_d, self.k_gap_sq, &self.k[r])
        self.k_gap_d = -1

    def predict(self, model, x):
        """``model.predict_one(x)`` in one call, or :data:`NOT_HANDLED`. What it computed
        stays for a :meth:`learn` of the same row (:meth:`_keep_pre`)."""
        cdef Py_ssize_t d
        self.pre_kind = 0
        if type(x) is not dict or not self._current(model):
            return NOT_HANDLED
        d = self._row(<dict>x)
        if d < 0:
            return NOT_HANDLED
        return self._say(model, d, True)

    cdef object _say(self, model, Py_ssize_t d, bint keep):
        """``predict_one`` of the row in ``self.row`` (``d`` wide), or :data:`NOT_HANDLED`
        (the NumPy path's cases: an empty set for the SVR and novelty, whose answer is one
        line there; novelty's centre statistics not current; a ranker without ranks).
        ``keep``: what it computed stays for a :meth:`learn` of the same row."""
        cdef Py_ssize_t n = self.support.n
        if self.valued:
            if n == 0:
                return NOT_HANDLED  # the offset or 0: the NumPy path's one line
            if self.rcode == R_NOVELTY and not self._r_current(model, n):
                return NOT_HANDLED  # the NumPy path recomputes r once
            return self._predict_value_row(model, d, keep)
        if self.ranker and self.n_classes == 0:
            return NOT_HANDLED
        return self._predict_label(d, keep)

    cdef object _predict_label(self, Py_ssize_t d, bint keep):
        """A classifier's or the ranker's ``predict_one`` of the row in ``self.row`` (``d``
        wide): from the float32 hints where they make it certain, else from the float64
        margins; :data:`NOT_HANDLED` where it does not apply. ``keep``: what it computed
        stays for a :meth:`learn` of the same row (:meth:`_keep_pre`)."""
        cdef double row_sq
        if self._hint(d, &row_sq):
            said = self._hint_decide()
            if said is not NOT_HANDLED:
                self.hints_certain += 1
                if keep:
                    self._keep_pre(PRE_HINTS, d, row_sq)
                return said
            self.hints_fresh += 1
        if not self._margins(d, &row_sq, False):
            return NOT_HANDLED
        if keep:
            self._keep_pre(PRE_ROW, d, row_sq)
        return self._decide()

    def margins(self, model, x):
        """``model.decision_function_one(x)`` of a classifier (the perceptrons, the
        adatron) or the ranker's ``score_one(x)`` in one call: the float64 margins, a new
        array of one value per output; or :data:`NOT_HANDLED` (and for the SVR and
        novelty). Like :meth:`predict` it leaves its row for a :meth:`learn` of the same
        event (``predict_proba_one`` then ``learn_one``)."""
        cdef double row_sq
        cdef Py_ssize_t d, c
        cdef double[::1] out
        self.pre_kind = 0
        if self.valued or type(x) is not dict or not self._current(model):
            return NOT_HANDLED
        if self.n_classes == 0 or self.support.n == 0:
            return NOT_HANDLED  # (the NumPy path's zeros)
        d = self._row(<dict>x)
        if d < 0 or not self._margins(d, &row_sq, False):
            return NOT_HANDLED
        self._keep_pre(PRE_ROW, d, row_sq)
        f = empty(self.coef.shape[1])
        out = f
        for c in range(out.shape[0]):
            out[c] = self.f[c]
        return f

    cdef void _keep_pre(self, int kind, Py_ssize_t d, double row_sq) noexcept:
        """Keep what :meth:`predict` just computed for the event's row (``kind``: its
        float64 margins and kernel row, or its hints) for a :meth:`learn` of the same row
        next: test-then-train (``predict_one(x)`` then ``learn_one(x, y)``, as river's
        ``progressive_val_score`` runs) then computes the row once. Only that learn takes
        it (:meth:`_take_pre`), and only while the set's version has not moved (every
        change to the set, its coefficients or its kernel moves it) and the row is the same
        to the bit; every other call of this pass drops it first. Not during the
        ``gamma="auto"`` warm-up, whose learn refines the kernel before its row."""
        if self.warming and self.scale.n < AUTO_WINDOW:
            return
        memcpy(self.pre_row, self.row, d * sizeof(double))
        self.pre_d = d
        self.pre_row_sq = row_sq
        self.pre_version = self.support.version
        self.pre_kind = kind

    cdef int _take_pre(self, int kind, Py_ssize_t d, double *row_sq) noexcept:
        """``kind``, what :meth:`_keep_pre` kept (the caller took it from ``pre_kind``,
        which it cleared), if it is for the row now in ``self.row`` (``d`` wide) and the
        set has not changed since: ``row_sq`` then receives the row's squared norm as
        computed then (and, from the float64 row, Merge's dots stay in ``kr``). 0
        otherwise, with what :meth:`_margins` leaves for the event reset (it sets them
        again)."""
        if (kind == 0 or d != self.pre_d or self.support.version != self.pre_version
                or memcmp(self.row, self.pre_row, d * sizeof(double)) != 0):
            self.m_dots = self.kr_slot = -1
            return 0
        row_sq[0] = self.pre_row_sq
        if kind == PRE_ROW:
            self.rows_reused += 1
        else:  # (the hints compute no dots and no leaving column)
            self.m_dots = self.kr_slot = -1
            self.hints_reused += 1
        return kind

    cdef void _fill_targets(self, code) noexcept:
        """The label's targets into ``self.t``: its sign (binary, or a single class), else
        +1 in its column and -1 in the others (one-vs-rest)."""
        cdef Py_ssize_t c
        if self.pair is not None or self.n_classes < 2:
            self.t[0] = <double>code
        else:
            for c in range(self.coef.shape[1]):
                self.t[c] = -1.0
            self.t[<Py_ssize_t>code] = 1.0

    cdef bint _targets(self, code) noexcept:
        """The perceptrons' rule: the new vector's coefficients into ``self.f`` (the
        targets where a column is wrong or, with a margin, too close); whether any is."""
        cdef Py_ssize_t c, p = self.coef.shape[1]
        cdef bint wrong, any_wrong = False
        self._fill_targets(code)
        for c in range(p):
            wrong = (self.f[c] >= 0.0) != (self.t[c] > 0.0)
            if self._use_margin and self.t[c] * self.f[c] < self._margin:
                wrong = True
            if wrong:
                any_wrong = True
            self.f[c] = self.t[c] if wrong else 0.0
        return any_wrong

    cdef bint _adatron(self, code, double row_sq) noexcept:
        """The adatron's first step from ``alpha = 0`` (``KernelAdatron._first_step``): the
        new vector's coefficients ``alpha t`` into ``self.f``, ``alpha = clip((1 - t f) /
        (k(x, x) + mu), 0, upper)``; whether any ``alpha`` is positive (it joins)."""
        cdef Py_ssize_t c, p = self.coef.shape[1]
        cdef double denom = self._kdiag(row_sq) + self.a_mu, a
        cdef bint any_pos = False
        if not denom > 0.0:  # phi(x) = 0 (and no shift) can never change f
            return False
        if self.pair is not None or self.n_classes < 2:
            self.t[0] = <double>code
        else:
            for c in range(p):
                self.t[c] = -1.0
            self.t[<Py_ssize_t>code] = 1.0
        for c in range(p):
            a = (1.0 - self.t[c] * self.f[c]) / denom
            if 0.0 > a:
                a = 0.0
            if self.a_upper < a:
                a = self.a_upper
            if a > 0.0:
                any_pos = True
            self.f[c] = a * self.t[c]
        return any_pos

    cdef bint _room(self, Py_ssize_t d, double row_sq) except -1:
        """Whether :meth:`_insert` can take the new row without the NumPy path: the
        buffers are wide and long enough, and the Forgetron's column of the leaving
        vector is exact, the Projectron's ``P`` in sync with room for one more row (checked,
        and ``P`` prepared, before the set changes)."""
        cdef Py_ssize_t n = self.support.n
        if self.pcode == P_PROJECTRON:
            return self._projectron_room(d)
        if d > self.X.shape[1]:
            return False
        if self.pcode == P_MERGE:
            return self._room_merge(n)
        if self.budget > 0 and n >= self.budget:
            if self.pcode == P_FORGETRON:
                return n <= self.cap_k and self._expansion_exact(2.0 * self.support._sq_max)
            return self.pcode != P_RANDOM or n < 0xFFFFFFFF  # _draw's range
        return n < self.X.shape[0]

    cdef bint _grow_first(self, Py_ssize_t n) except -1:
        """Room in the set's buffers for the row the event may append, made before its
        kernel row (``SupportSet.reserve``, which doubles them; the caller re-binds): True
        when they grew. Without it an append into full buffers, about log2(n) of them in a
        growing set, would take the NumPy path, which grows them only there. Merge appends
        before it merges (one row over a full set); the Projectron may project instead, and
        is grown the same way, whether or not it appends."""
        cdef Py_ssize_t need = n + 1
        if self.budget > 0 and n >= self.budget and self.pcode != P_MERGE:
            need = n  # a removal policy frees its slot first (the Projectron removes too)
        if need <= self.X.shape[0]:
            return False
        self.support.reserve(need, self.X.shape[1])
        return True

    cdef Py_ssize_t _oldest(self, Py_ssize_t n) noexcept:
        """``SupportSet.oldest``: the slot with the smallest id (the first on ties)."""
        return sk_oldest(&self.ids[0], n)

    cdef Py_ssize_t _la_oldest_slot(self, Py_ssize_t n) noexcept:
        """:meth:`_oldest` within a look-ahead group under a full Forgetron: the group's
        rows remove the set's oldest vectors in turn, so with ``la_gone`` of its four
        oldest removed the next is the oldest (the vectors the group inserted are younger);
        its slot, where it still sits there, without a scan over the ids."""
        cdef Py_ssize_t j = self.la_gone, slot
        if j < ROWS_AHEAD:
            slot = self.la_old_slot[j]
            if slot < n and self.ids[slot] == self.la_old[j]:
                return slot
        return self._oldest(n)

    cdef void _remove(self, Py_ssize_t slot, Py_ssize_t n) noexcept:
        """``SupportSet.remove(slot)`` on the buffers: the last row moves into ``slot``."""
        cdef Py_ssize_t k, c, last = n - 1, wx = self.X.shape[1], p = self.coef.shape[1]
        if slot != last:
            for k in range(wx):
                self.X[slot, k] = self.X[last, k]
            for c in range(p):
                self.coef[slot, c] = self.coef[last, c]
            self.kdiag[slot] = self.kdiag[last]
            self.sq[slot] = self.sq[last]
            self.ids[slot] = self.ids[last]
        for k in range(wx):
            self.X[last, k] = 0.0
        for c in range(p):
            self.coef[last, c] = 0.0

    cdef double _forgetron(self, Py_ssize_t r, Py_ssize_t n) except -1.0:
        """The Forgetron's shrink ``phi`` for the removal of slot ``r`` (``Forgetron.insert``:
        ``f'(x_r)`` with the new vector, whose coefficients are in ``self.f``), with its
        ``Q`` updated as the policy does."""
        cdef Py_ssize_t c, p = self.coef.shape[1], wx = self.X.shape[1]
        cdef double a = 0.0, b = 0.0, phi, q, m
        cdef bint have = self.kr_slot == r  # _margins left r's column in kr
        policy = self.policy
        q = policy._q
        m = policy._m
        self.kr_slot = -1
        with nogil:
            if self.k_gap_d >= 0:  # the hints decided: self.k lacks the event's row
                self._hint_forget(r)
            if not have:
                self._column(&self.X[0, 0], wx, n, &self.sq[0], &self.X[r, 0], wx,
                             self.sq[r], self.kr)
            _combine(self.kr, &self.coef[0, 0], n, p, self.fr)
            for c in range(p):
                self.fr[c] = self.fr[c] + self.k[r] * self.f[c]
            _forgetron_ab(&self.coef[r, 0], self.fr, p, &a, &b)
            phi = _forgetron_phi(a, b, q - 15.0 / 32.0 * m) if b > 0.0 else 1.0
        policy._q = q + (a * phi * phi + b * phi)
        return phi

    cdef double _kdiag(self, double row_sq) noexcept:
        """``kernel.diag_one(row)`` from the row's squared norm."""
        if self.kcode == K_PROGRAM:
            return _kprog_diag(&self.prog[0, 0], self.prog_m, row_sq)
        if self.kcode == K_POLY:
            return self.kp[3] * _power(self.kp[0] * row_sq + self.kp[1], self.kp[2])
        if self.kcode == K_LINEAR:
            return self.kp[3] * row_sq
        return self.kp[3] * 1.0

    cdef void _novelty_swap(self, Py_ssize_t q, Py_ssize_t n, bint moved, double kxx,
                            double phi) noexcept:
        """Novelty's ``r`` through the swap :meth:`_insert` is about to make (``_core``'s
        ``_novelty_swap``, ``KernelNovelty._follow_swap``): ``r -= w_q k(S, x_q)`` (into
        ``self.kr``, which the Forgetron's :meth:`_forgetron` has filled already) and
        ``r += k(S, x)`` (``self.k``) over the others, the new entry ``k(x, S) w + kxx``
        placed as the row will be (``moved``: slot ``q`` gets the last one, the row is
        appended), then ``r *= phi``."""
        cdef Py_ssize_t s, last = n - 1, wx = self.X.shape[1]
        cdef double wq = self.coef[q, 0], f = 0.0, rnew
        if self.pcode != P_FORGETRON:
            self._column(&self.X[0, 0], wx, n, &self.sq[0], &self.X[q, 0], wx, self.sq[q],
                         self.kr)
        for s in range(n):
            if s != q:
                f = f + self.k[s] * self.coef[s, 0]
                self.r[s] = (self.r[s] - wq * self.kr[s]) + self.k[s]
        rnew = f + kxx
        if moved:
            if q != last:
                self.r[q] = self.r[last]
            self.r[last] = rnew
        else:
            self.r[q] = rnew
        if phi != 1.0:
            for s in range(n):
                self.r[s] = self.r[s] * phi

    cdef void _novelty_grow(self, Py_ssize_t n, double kxx) noexcept:
        """Novelty's ``r`` as the row (weight 1, kernel row ``self.k`` against the ``n``
        vectors) joins: ``r += k``, the new entry ``k·w + kxx`` (``_follow_merge``'s first
        step)."""
        cdef Py_ssize_t s
        cdef double f = 0.0
        for s in range(n):
            f = f + self.k[s] * self.coef[s, 0]
            self.r[s] = self.r[s] + self.k[s]
        self.r[n] = f + kxx

    cdef void _novelty_merge(self, Py_ssize_t n, Py_ssize_t m, Py_ssize_t partner, double wm,
                             double wp) noexcept:
        """Novelty's ``r`` through Merge's merge of the ``n + 1`` vectors (``r`` grown by
        :meth:`_novelty_grow`) into ``n`` (``KernelNovelty._follow_merge``): ``m`` (weight
        ``wm``, column in ``self.kr``) and ``partner`` (``wp``, column in ``m_buf``) became
        ``z`` (``alpha_z``) in ``m``'s slot, or in ``partner``'s when ``m`` was the last one
        (``_merge_at`` moves the last slot into ``partner``'s). ``r_s += alpha_z k(x_s, z) -
        wm k(x_s, x_m) - wp k(x_s, x_p)`` over the others (``z``'s column into ``self.k``),
        ``r_z = K(z, S) w``."""
        cdef Py_ssize_t s, o, zs = m if m != n else partner, wx = self.X.shape[1]
        cdef double az = self.coef[zs, 0], f = 0.0
        cdef double *colp = &self.m_buf[0]
        _kcol(self.kcode, self.kp, &self.X[0, 0], wx, n, &self.sq[0], &self.X[zs, 0], wx,
              self.sq[zs], self.k)
        for s in range(n):
            if s != zs:
                o = n if s == partner else s  # its slot before the merge
                self.r[s] = ((self.r[o] - wm * self.kr[o]) - wp * colp[o]) + az * self.k[s]
        for s in range(n):
            f = f + self.k[s] * self.coef[s, 0]
        self.r[zs] = f

    cdef void _novelty_projectron(self, Py_ssize_t n, bint projected, double kxx) noexcept:
        """Novelty's ``r`` through a Projectron step on ``n`` vectors
        (``KernelNovelty._follow_projectron``: ``K P k = k``): projected, ``r += k``;
        else slot ``pj_left`` left (the others' entries unchanged, the last slot moved into
        it; ``self.k`` is ``without_slot``'s) and the row was appended: ``r += k``, the new
        entry ``k·w + kxx`` over the new weights."""
        cdef Py_ssize_t s, i = self.pj_left, last = n - 1
        if projected:
            for s in range(n):
                self.r[s] = self.r[s] + self.k[s]
            return
        if i != last:
            self.r[i] = self.r[last]
        self._novelty_grow(last, kxx)

    cdef bint _insert(self, Py_ssize_t d, double row_sq) except -1:
        """The policy's ``insert`` of ``self.row`` with coefficients ``self.f`` on the
        buffers (after :meth:`_room` said it can), with the set's counters."""
        cdef Py_ssize_t n, p = self.coef.shape[1], wx = self.X.shape[1], slot, c, s
        cdef double phi = 1.0
        cdef Py_ssize_t gone = -1, last = -1
        cdef bint follow
        cdef SupportCounters support = self.support
        if self.pcode == P_MERGE:
            return self._insert_merge(d, row_sq)
        n = support.n
        slot = n
        # the hints' mirror follows this insert where it is in step with the set
        follow = self.h_valid and self.pcode != P_PROJECTRON and self._mirror_current(d)
        if self.pcode == P_FORGETRON:
            self.policy._m += 1
        if self.pcode == P_PROJECTRON:
            n = self._projectron(row_sq)
            if n < 0:
                return True  # projected onto the span: only the coefficients changed
            slot = n
        elif self.budget > 0 and n >= self.budget:
            if self.pcode == P_OLDEST:
                slot = self._oldest(n)  # RemoveOldest: the new vector takes its slot
                if self.swap_r:
                    self._novelty_swap(slot, n, False, self._kdiag(row_sq), 1.0)
            else:
                if self.pcode == P_RANDOM:
                    slot = _draw(self.bitgen, n)
                elif self.pcode == P_SMALLEST:
                    slot = _smallest_slot(self.coef, self.kdiag, self.ids, n)
                else:
                    slot = self.kr_slot if self.kr_slot >= 0 else self._oldest(n)
                    if self.la_cols:  # the look-ahead's four oldest: which have left
                        c = self.la_gone
                        self.la_gone = (c + 1 if c < ROWS_AHEAD and self.ids[slot] == self.la_old[c]
                                        else ROWS_AHEAD)
                    phi = self._forgetron(slot, n)
                if self.swap_r:
                    self._novelty_swap(slot, n, True, self._kdiag(row_sq), phi)
                gone, last = slot, n - 1
                if self.a_passes:  # the Gram's swap-remove; the row is without_slot's
                    self._gram_move(slot, n)
                    self._age_remove(slot, n)
                    self.k[slot] = self.k[n - 1]
                self._remove(slot, n)
                n -= 1
                slot = n
        for c in range(d):
            self.X[slot, c] = self.row[c]
        for c in range(d, wx):
            self.X[slot, c] = 0.0
        for c in range(p):
            self.coef[slot, c] = self.f[c]
        self.sq[slot] = row_sq
        self.kdiag[slot] = self._kdiag(row_sq)
        next_id = support.next_id
        self.ids[slot] = next_id
        support.next_id = next_id + 1
        if self.a_passes:
            if slot == n:
                self._gram_append(n)
            else:
                self._gram_replace(slot, n, d, row_sq)
        if slot == n:
            n += 1
        support.n = n  # <= the buffers' rows, the kernel row's room
        if phi != 1.0:
            for s in range(n):
                for c in range(p):
                    self.coef[s, c] = self.coef[s, c] * phi
        if d > support.width:
            support.width = d
        if row_sq > support._sq_max:
            support._sq_max = row_sq
        support.rows_version += 1
        self.version = support.version + 1
        support.version = self.version
        if self.pcode == P_PROJECTRON:
            self._projectron_adopt(n)  # P inverts the set with the new row
        if follow:  # the removal's move, then the new row (the shrink leaves the rows)
            if gone != last:
                self._mirror_move(last, gone)
            self._mirror_put(slot, d)
            self.h_version = self.version
        return True

    # -- the adatron's resweeps ------------------------------------------------------------------
    cdef void _gram_append(self, Py_ssize_t slot) noexcept:
        """``SupportSet.append``'s Gram row and column for the vector just written into
        ``slot`` (the set's ``slot`` vectors before it; ``self.k`` its kernel row against
        them), its class and its place, the newest, in the age order."""
        cdef Py_ssize_t j
        for j in range(slot):
            self.G[slot, j] = self.k[j]
            self.G[j, slot] = self.k[j]
        self.G[slot, slot] = self.kdiag[slot]
        self.a_cls[slot] = self.a_new_cls
        self.a_age[slot] = slot

    cdef void _gram_replace(self, Py_ssize_t slot, Py_ssize_t n, Py_ssize_t d,
                            double row_sq) noexcept:
        """``SupportSet.replace(slot, row, new_id=True)``'s Gram row and column (the
        remove-oldest policy's insert, which passes no kernel row: the row against the set
        with itself in ``slot``, so its own entry is the kernel computed from the row and
        its stored norm, not ``k(x, x)``); the slot leaves the front of the age order (it
        was the oldest) for its end."""
        cdef Py_ssize_t j, wx = self.X.shape[1]
        cdef double own = 0.0
        self._column(&self.X[slot, 0], wx, 1, &self.sq[slot], self.row, d, row_sq, &own)
        for j in range(n):
            if j != slot:
                self.G[slot, j] = self.k[j]
        self.G[slot, slot] = own
        for j in range(n):
            self.G[j, slot] = self.G[slot, j]
        self.a_cls[slot] = self.a_new_cls
        j = 0
        while j < n - 1 and self.a_age[j] != slot:
            j += 1
        memmove(&self.a_age[j], &self.a_age[j + 1], (n - 1 - j) * sizeof(Py_ssize_t))
        self.a_age[n - 1] = slot

    cdef bint _gram_rewidth(self, kernel) except -1:
        """``SupportSet.set_kernel(kernel)`` for the resweeping adatron's kept Gram matrix
        under a plain RBF (the ``gamma="auto"`` warm-up's ~29 width changes), in C: the
        kernel swapped and the versions moved as ``set_kernel`` moves them, ``k(x, x) = 1``,
        and ``K(S, S)`` rebuilt in the kept buffer by streamk/budget/_projectron.pxi's
        ``_rbf_gram`` (the steps and bits of ``compiled.support_gram``), without
        ``set_kernel``'s ~25 us of Python, a new ``n x n`` array and its copy per change. False, with nothing changed, where ``set_kernel`` would not take
        these steps: another kernel, a block tracked (it raises), norms too large for the
        expansion to be exact (``RBF.expansion_exact``, as ``compiled._gram_applies`` asks
        it: NumPy's ``gram`` then computes the distances directly)."""
        cdef SupportCounters support = self.support
        cdef Py_ssize_t n = support.n, i, w, ldg
        cdef double gamma
        cdef double *G
        if type(kernel) is not _kernel_types()[0] or self.G is None:
            return False
        gamma = float(kernel.gamma)
        if support._sq_max * 2.0 * 1e-15 * gamma > 1e-10:
            return False
        if support._trackers:
            return False
        if n > self.X.shape[0] or n > self.G.shape[0] or n > self.G.shape[1]:
            return False
        if n > self.sq.shape[0] or n > self.kdiag.shape[0]:
            return False
        support._kernel = kernel
        support.rows_version += 1
        support.version += 1
        if n == 0:
            return True
        G = &self.G[0, 0]
        ldg = self.G.shape[1]
        w = self.X.shape[1]
        with nogil:
            _rbf_gram(G, ldg, &self.X[0, 0], w, &self.sq[0], n, gamma, True)
            for i in range(n):
                self.kdiag[i] = 1.0
        return True

    cdef void _gram_move(self, Py_ssize_t slot, Py_ssize_t n) noexcept nogil:
        """``SupportSet._move_gram``: the Gram row and column of the last of ``n`` vectors
        into ``slot`` (as ``remove(slot)`` moves the last row there)."""
        cdef Py_ssize_t j, last = n - 1
        if slot == last:
            return
        for j in range(n):
            self.G[slot, j] = self.G[last, j]
        self.G[slot, slot] = self.G[last, last]
        for j in range(n):
            self.G[j, slot] = self.G[slot, j]

    cdef void _age_remove(self, Py_ssize_t slot, Py_ssize_t n) noexcept nogil:
        """Slot ``slot`` of ``n`` leaves, the last one moving into it (``remove(slot)``):
        its class and age entry go, the last one's are renamed ``slot``."""
        cdef Py_ssize_t j = 0, last = n - 1
        while j < n and self.a_age[j] != slot:
            j += 1
        if j < n:
            memmove(&self.a_age[j], &self.a_age[j + 1], (n - 1 - j) * sizeof(Py_ssize_t))
        if slot != last:
            for j in range(n - 1):
                if self.a_age[j] == last:
                    self.a_age[j] = slot
                    break
            self.a_cls[slot] = self.a_cls[last]

    cdef Py_ssize_t _pass(self, Py_ssize_t n) noexcept nogil:
        """One adatron pass over the ``n`` slots, oldest first: each slot's decision values
        ``G[i] @ coef`` taken afresh from the coefficients as the pass has left them so far
        (one column: :meth:`_pass1`'s four rows at a time; several: ``_combine``'s sums a
        row at a time), then ``_adatron_step`` (the step ``_dual.pyx``'s pass takes). One
        read of the Gram matrix a pass, where the NumPy loop reads it for ``G @ coef`` and
        again for a row per coefficient that moved; the same values in exact arithmetic, to
        rounding in floating point. Returns the steps that moved a coefficient."""
        cdef Py_ssize_t q, i, c, moved = 0, p = self.coef.shape[1], ldg = self.G.shape[1]
        cdef double e, d
        cdef double delta[64]
        cdef const double *G = &self.G[0, 0]
        cdef double *coef = &self.coef[0, 0]
        cdef const double *signs = &self.a_signs[0] if self.a_binary else NULL
        if p == 1:
            return self._pass1(n)
        for q in range(n):
            i = self.a_age[q]
            e = _adatron_eta(self.a_cls, &self.kdiag[0], i, self.a_mu)
            if not e > 0.0:
                continue
            _combine(G + i * ldg, coef, n, p, self.fr)
            if not _adatron_step(coef + i * p, p, self.fr, 1, <Py_ssize_t>self.a_cls[i], signs,
                                 e, self.a_mu, self.a_upper, delta):
                continue
            moved += 1
            for c in range(p):
                d = delta[c]
                if d != 0.0:  # (as _adatron_pass: a zero change writes nothing)
                    coef[i * p + c] += d
        return moved

    cdef Py_ssize_t _pass1(self, Py_ssize_t n) noexcept nogil:
        """:meth:`_pass` for one column, four slots (in age order) at a time: their Gram rows'
        dots with the coefficients as the block found them (``sk_dot8x4``: the coefficients
        read once for four rows), then each slot's step in order, its decision value the dot
        plus ``G[i, j] delta_j`` for each slot ``j`` before it in the block that moved, in
        that order (what the NumPy loop's ``f += G[j] delta_j`` adds to ``f_i``). A last
        block of fewer than four repeats its first row (a dot computed and left)."""
        cdef Py_ssize_t q = 0, b, k, l, i, moved = 0, ldg = self.G.shape[1]
        cdef Py_ssize_t rows[4]
        cdef double raw[4]
        cdef double dl[4]
        cdef double delta[1]
        cdef double e, f
        cdef const double *G = &self.G[0, 0]
        cdef double *coef = &self.coef[0, 0]
        cdef const double *signs = &self.a_signs[0] if self.a_binary else NULL
        while q < n:
            b = n - q if n - q < 4 else 4
            for k in range(4):
                rows[k] = self.a_age[q + k if k < b else q]
            sk_dot8x4(G + rows[0] * ldg, G + rows[1] * ldg, G + rows[2] * ldg,
                      G + rows[3] * ldg, coef, n, raw)
            for k in range(b):
                i = rows[k]
                dl[k] = 0.0
                e = _adatron_eta(self.a_cls, &self.kdiag[0], i, self.a_mu)
                if not e > 0.0:
                    continue
                f = raw[k]
                for l in range(k):
                    if dl[l] != 0.0:
                        f = f + G[i * ldg + rows[l]] * dl[l]
                self.fr[0] = f
                if not _adatron_step(coef + i, 1, self.fr, 1, <Py_ssize_t>self.a_cls[i], signs,
                                     e, self.a_mu, self.a_upper, delta):
                    continue
                moved += 1
                dl[k] = delta[0]
                coef[i] += delta[0]
            q += b
        return moved

    cdef int _resweep(self) except -1:
        """``KernelAdatron._resweep`` after the event: ``a_passes`` passes over the set
        (:meth:`_pass`: the coefficients agree with the NumPy path's to rounding, not to the
        bit); then the vectors of a known class whose coefficients all returned to 0 leave,
        highest slot first (``dualpass.dead_slots``, ``SupportSet.remove``), with their Gram
        rows, classes and age entries."""
        cdef SupportCounters support = self.support
        cdef Py_ssize_t n = support.n, p = self.coef.shape[1]
        cdef Py_ssize_t q, i, c, moved = 0, dead = 0
        cdef double *coef
        cdef bint zero
        if n == 0:
            return 0
        coef = &self.coef[0, 0]
        with nogil:
            for q in range(self.a_passes):
                moved += self._pass(n)
        i = n - 1
        while i >= 0:  # descending: a swap-remove moves none still to remove
            if not isnan(self.a_cls[i]):
                zero = True
                for c in range(p):
                    if coef[i * p + c] != 0.0:
                        zero = False
                        break
                if zero:
                    self._gram_move(i, n)
                    self._age_remove(i, n)
                    self._remove(i, n)
                    n -= 1
                    dead += 1
            i -= 1
        self.resweep_events += 1
        if moved or dead:
            support.n = n
            support.rows_version += dead
            self.version = support.version + 1
            support.version = self.version
        return 0

    # -- Merge ------------------------------------------------------------------------------------
    cdef bint _bind_merge(self, policy, support) except -1:
        """Merge's code and budget, and its search's scratch for the rows the set's buffers
        hold; False for any kernel but a plain RBF (``Merge.insert`` refuses the others, so
        the NumPy path raises its error)."""
        from streamk.kernels import RBF
        import numpy as np

        if type(support.kernel) is not RBF or self.kcode != K_RBF:
            return False
        rows = max(support._X.shape[0], 2)
        if self.m_pick_obj is None or self.m_pick_obj.shape[0] < rows:
            self.m_buf_obj = np.zeros(_merge_work(rows, MERGE_GRID))
            self.m_pick_obj = np.zeros(rows, dtype=np.intp)
            self.m_buf = self.m_buf_obj
            self.m_pick = self.m_pick_obj
        self.pcode, self.budget = P_MERGE, int(policy.budget)
        return True

    cdef bint _room_merge(self, Py_ssize_t n) noexcept:
        """Whether :meth:`_insert_merge` can take the row: the append needs a free row in
        the buffers (the merge then frees one) and the search its scratch."""
        return n < self.X.shape[0] and n < self.m_pick.shape[0]

    cdef bint _insert_merge(self, Py_ssize_t d, double row_sq) except -1:
        """``Merge.insert`` of ``self.row`` with coefficients ``self.f`` on the buffers:
        ``SupportSet.append``, then, when the set was full,
        ``merge_smallest`` by ``_policies.merge_apply``'s code (``_merge.pxi``), with the
        set's counters."""
        cdef Py_ssize_t n, p = self.coef.shape[1], wx = self.X.shape[1], c
        cdef Py_ssize_t m = 0, partner = 0
        cdef double h = 0.0, sqz = 0.0, wm = 0.0, wp = 0.0
        cdef double *gram = NULL  # the kept Gram matrix _merge_at keeps (resweeps only)
        cdef Py_ssize_t ldg = 0
        cdef bint full
        cdef SupportCounters support = self.support
        n = support.n
        full = n >= self.budget
        if self.swap_r:  # novelty: r through the append (the merge below follows it)
            self._novelty_grow(n, self._kdiag(row_sq))
        for c in range(d):
            self.X[n, c] = self.row[c]
        for c in range(d, wx):
            self.X[n, c] = 0.0
        for c in range(p):
            self.coef[n, c] = self.f[c]
        self.sq[n] = row_sq
        self.kdiag[n] = self._kdiag(row_sq)
        next_id = support.next_id
        self.ids[n] = next_id
        support.next_id = next_id + 1
        if self.a_passes:
            self._gram_append(n)
        n += 1
        if full:  # the row's dots with the others, where _margins kept them (m is the row
            # in about half the merges of a learner that updates on most events)
            _merge_pick(&self.X[0, 0], wx, &self.coef[0, 0], p, &self.sq[0], &self.kdiag[0],
                        &self.ids[0], n, self.gamma, MERGE_GRID, MERGE_STEPS, &self.m_buf[0],
                        &self.m_pick[0], &m, &partner, &h,
                        self.kr if self.m_dots == n - 1 else NULL)
            self.m_dots = -1
            if self.swap_r:  # the two leaving vectors' columns (the search's scratch is free)
                wm, wp = self.coef[m, 0], self.coef[partner, 0]
                _kcol(self.kcode, self.kp, &self.X[0, 0], wx, n, &self.sq[0], &self.X[m, 0],
                      wx, self.sq[m], self.kr)
                _kcol(self.kcode, self.kp, &self.X[0, 0], wx, n, &self.sq[0],
                      &self.X[partner, 0], wx, self.sq[partner], &self.m_buf[0])
            if self.a_passes:
                gram, ldg = &self.G[0, 0], self.G.shape[1]
            sqz = _merge_at(&self.X[0, 0], wx, &self.coef[0, 0], p, &self.sq[0],
                            &self.kdiag[0], &self.ids[0], gram, ldg, n, self.gamma, m,
                            partner, h)
            if self.a_passes:  # z keeps m's id, so its class; the partner leaves
                self._age_remove(partner, n)
            if self.la_check and m < self.la_n:  # m's row changed under its id: the
                self.la_ids[m] = -1  # look-ahead's dot for it is stale (ids are >= 0)
            n -= 1
            self.merges += 1
            if self.swap_r:
                self._novelty_merge(n, m, partner, wm, wp)
        support.n = n
        if d > support.width:
            support.width = d
        if row_sq > support._sq_max:
            support._sq_max = row_sq
        if sqz > support._sq_max:
            support._sq_max = sqz
        support.rows_version += 1
        self.version = support.version + 1
        support.version = self.version
        return True

    def learn(self, model, x, y):
        """``model.learn_one(x, y)`` in one call; False (nothing changed) when it does not
        apply."""
        cdef Py_ssize_t d
        cdef int pre
        if self.valued:
            return self._learn_value(model, x, y)
        if type(x) is not dict or not self._current(model):
            self.pre_kind = 0
            return False
        pre = self.pre_kind  # (what predict left: it serves this learn or none)
        self.pre_kind = 0
        code = self._code(y)
        if code is None:
            return False  # a new class or rank, no label, or an unhashable one
        d = self._row(<dict>x)
        if d < 0:
            return False
        if self.warming and self.scale.n < AUTO_WINDOW:
            if not self._fold_warm(model, d):
                return False
            # the row is in the estimate now: from here on the event is never handed back
            if not self._current(model):
                return self._finish(model, d, y)
            return self._learn_label(model, d, y, code, True, None, 0)
        return self._learn_label(model, d, y, code, False, None, pre)

    cdef object _code(self, y):
        """The label's column or sign (the ranker's rank index); ``None`` for a label not
        known (a new class or rank, no label) or unhashable (the NumPy path says what is
        wrong)."""
        try:
            return (self.index if self.ranker else self.cols).get(y)
        except TypeError:
            return None

    cdef object _learn_label(self, model, Py_ssize_t d, y, code, bint folded, list pred,
                             int pre):
        """``learn_one``'s rule, insert and counters for the row in ``self.row`` (``d``
        wide, label ``y`` with ``code`` from :meth:`_code`): the one core of :meth:`learn`
        and :meth:`learn_rows`. ``folded``: this call folded the row into the ``gamma=
        "auto"`` estimate, so it is finished on the NumPy path rather than handed back;
        otherwise False (nothing changed) when it does not apply. ``pred``: a list the
        prediction ``predict_one`` would have made is appended to (when learned). ``pre``:
        what :meth:`predict` left (:meth:`_keep_pre`), taken where still valid."""
        cdef double row_sq
        cdef Py_ssize_t pr = 0, i, k = 0
        cdef bint update = False, hinted
        if self._grow_first(self.support.n):
            pre = 0  # (new buffers: the set's version moved anyway)
            if not self._current(model):
                return self._finish(model, d, y) if folded else False
        pre = self._take_pre(pre, d, &row_sq)
        said = None
        if pre:
            hinted = pre == PRE_HINTS
        else:
            hinted = self._hint(d, &row_sq)
        if hinted:  # the decision from the float32 hints where they make it certain
            if pred is not None:
                said = self._hint_decide()
                hinted = said is not NOT_HANDLED
            if hinted and self.ranker:
                k = <Py_ssize_t>code
                pr = self._hint_rank()
                hinted = pr >= 0
                update = pr != k
                self.f[0] = <double>(k - pr)
            elif hinted:
                i = self._hint_targets(code)
                hinted = i >= 0
                update = i == 1
            if hinted:
                self.hints_certain += 1
            else:
                self.hints_fresh += 1
        if not hinted:  # the float64 kernel row
            if pre != PRE_ROW and not self._margins(d, &row_sq, self.rcode == R_ADATRON):
                return self._finish(model, d, y) if folded else False
            said = self._decide() if pred is not None else None
            if self.ranker:
                k = <Py_ssize_t>code
                pr = self._rank()
                update = pr != k
                self.f[0] = <double>(k - pr)
            elif self.rcode == R_ADATRON:
                update = self._adatron(code, row_sq)
            else:
                update = self._targets(code)
        if update:
            if not self._room(d, row_sq):
                return self._finish(model, d, y) if folded else False
            self.k_gap_d = d if hinted else -1  # (what the Forgetron's shrink must fill in)
            self.k_gap_sq = row_sq
            new_id = self.support.next_id
            if self.rcode == R_ADATRON:
                self.a_new_cls = float(self.classes.index(y))
            self._insert(d, row_sq)
            self.k_gap_d = -1
            if self.rcode == R_ADATRON:  # the class index of the new vector (its _cls)
                if self.support.next_id != new_id:  # not when a Projectron projected it
                    _record(model._cls, self.support, new_id, self.a_new_cls)
                self._count(model, C_UPDATES)
            elif self.ranker:
                if pr < k:
                    for i in range(pr, k):
                        self.b[i] = self.b[i] - 1.0
                else:
                    for i in range(k, pr):
                        self.b[i] = self.b[i] + 1.0
                self._count(model, C_MISTAKES)
            else:
                self._count(model, C_MISTAKES)
        if self.a_passes:
            self._resweep()
        self._count(model, C_LEARNED)
        if pred is not None:
            pred.append(said)
        return True

    cdef Py_ssize_t _take_row(self, const double[:, ::1] R, Py_ssize_t i) except -2:
        """Row ``i`` of a block already in feature order into ``self.row``; its width, or -1
        when a value is not finite (the NumPy path says what is wrong)."""
        cdef Py_ssize_t j, d = R.shape[1]
        cdef double v
        for j in range(d):
            v = R[i, j]
            if not isfinite(v):
                return -1
            self.row[j] = v
        return d

    cdef double _value(self, targets, Py_ssize_t i) except? -1.0:
        """The SVR's target of row ``i`` (a float, checked by the caller); 0 for novelty."""
        if self.rcode != R_SVR:
            return 0.0
        return PyFloat_AS_DOUBLE(targets[i])

    def applies(self, model):
        """Whether this path takes ``model`` as it stands (kernel, policy, rule, buffers;
        binding it if needed): :meth:`learn_rows` then learns rows until one declines."""
        return self._current(model)

    def learn_rows(self, model, rows, targets, out=None, bint fold=False, said_rows=None):
        """``model.learn_one`` on each row of a run, in one loop: ``rows`` C-contiguous
        float64, already in the learner's feature order and folded into the ``gamma=
        "auto"`` estimate (one run under one kernel, as ``learn_many`` splits a block);
        ``targets`` the labels (the SVR's float targets; ignored by novelty).

        Returns the number of rows learned: it stops at the first row :meth:`learn` would
        decline (a new label, no room, ...), with nothing changed for that row, so the
        caller goes on with the NumPy path from there. ``out``, a list, is extended with
        what ``predict_one`` would have said before each row learned (novelty's flag: a
        row whose centre statistics are not current is handed back, the NumPy path then
        computing them).

        ``fold``: the rows are not folded yet; each one is, here, as :meth:`learn` folds an
        event during the warm-up (the kernel moving where ``regamma_at`` says), so a block
        needs no split into runs. A row it stops at is not folded either; a row folded is
        learned whatever follows (on the NumPy path where this one cannot take it).

        ``said_rows`` (with ``out``): ``out`` receives what ``predict_one`` says of
        ``said_rows[i]``, not of ``rows[i]``, before ``rows[i]`` is learned: a wrapper
        that transforms an event one way to predict and another to learn (on-line
        standardisation: before and after the event moves the statistics). The same shape
        as ``rows``, in the same feature order."""
        cdef list pred = None
        self.pre_kind = 0
        if out is not None:
            if fold:
                raise ValueError("learn_rows: no predictions while folding the warm-up")
            pred = <list?>out
        elif said_rows is not None:
            raise ValueError("learn_rows: said_rows needs out")
        if said_rows is not None and self.rcode == R_NOVELTY:  # (its flag needs the step's r)
            raise ValueError("learn_rows: said_rows is for the labelled learners and the SVR")
        for block in (rows, said_rows):
            if block is None:
                continue
            if getattr(block, "ndim", 0) != 2 or block.dtype.char != "d":
                return 0
            if not block.flags.c_contiguous:
                return 0
        if said_rows is not None and said_rows.shape != rows.shape:
            raise ValueError("learn_rows: said_rows must have the rows' shape")
        self.holding = True
        self.la_count = 0
        try:
            return self._learn_rows(model, rows, targets, pred, fold, said_rows)
        finally:
            self.holding = False
            self.la_count = 0
            self.la_use = -1
            self.la_cols = False  # (no group outlives learn_rows)
            self._flush(model)

    cdef int _count(self, model, int counter) except -1:
        """One more of the learner's counter ``LEARNER_COUNTERS[counter]``, held while
        :meth:`learn_rows` runs."""
        if self.holding:
            self.held[counter] += 1
        else:
            name = LEARNER_COUNTERS[counter]
            setattr(model, name, getattr(model, name) + 1)
        return 0

    cdef int _flush(self, model) except -1:
        """The counters held (:meth:`_count`, the SVR's statistics) into the learner."""
        cdef int counter
        for counter in range(3):
            if self.held[counter]:
                name = LEARNER_COUNTERS[counter]
                setattr(model, name, getattr(model, name) + self.held[counter])
                self.held[counter] = 0
        if self.held_stats:
            self.held_stats = False
            model._y_n = <Py_ssize_t>self.held_y[0]
            model._y_mean, model._y_m2 = self.held_y[1], self.held_y[2]
        return 0

    cdef Py_ssize_t _learn_rows(self, model, rows, targets, list pred, bint fold,
                                said_rows) except -1:
        """:meth:`learn_rows`'s loop, the learner's counters held. The binding is checked
        in full for the first row and after any row the NumPy path finished (it unbinds);
        between rows learned here only the set's version can move it (a buffer grown or the
        kernel re-estimated), and that is one compare. With ``said_rows`` each prediction
        is made of that row (:meth:`_said_of`) and the learning rows take no lookahead."""
        cdef const double[:, ::1] R = rows
        cdef const double[:, ::1] P = said_rows
        cdef Py_ssize_t i, m = R.shape[0], d = R.shape[1]
        cdef double yv = 0.0
        cdef bint apart = said_rows is not None
        cdef list own = None if apart else pred  # what the learning rows' own step says
        said = None
        for i in range(m):
            self.la_use = -1
            if not (i and self.bound and self.support.version == self.version):
                if not self._current(model):
                    return i
            if d != PyList_GET_SIZE(self.names):
                return i
            if d > self.cap_row:
                self._reserve(d, 0, 0)
            if self._take_row(R, i) < 0:
                return i
            if self.rcode == R_SVR and type(targets[i]) is not float:
                return i
            if self.valued:
                yv = self._value(targets, i)
                if fold and self.warming and self.scale.n < AUTO_WINDOW:
                    if not isfinite(yv) or not self._fold_warm(model, d):
                        return i
                    if not self._current(model):
                        self._finish_value(model, d, yv)
                    else:
                        self._learn_value_row(model, d, yv, True, 0, None)
                    continue
                if apart:
                    said = self._said_of(model, R, P, i, d)
                    if said is NOT_HANDLED:
                        return i
                elif self.rcode == R_SVR:
                    self._lookahead(R, i, d, False)
                if not self._learn_value_row(model, d, yv, False, 0, own):
                    return i
                if apart:
                    pred.append(said)
                continue
            code = self._code(targets[i])
            if code is None:
                return i
            if fold and self.warming and self.scale.n < AUTO_WINDOW:
                if not self._fold_warm(model, d):
                    return i
                if not self._current(model):
                    self._finish(model, d, targets[i])
                else:
                    self._learn_label(model, d, targets[i], code, True, None, 0)
                continue
            if apart:
                said = self._said_of(model, R, P, i, d)
                if said is NOT_HANDLED:
                    return i
            elif self.rcode == R_ADATRON and not self.a_passes:  # (resweeps move slots)
                self._lookahead(R, i, d, True)
            if not self._learn_label(model, d, targets[i], code, False, own, 0):
                return i
            if apart:
                pred.append(said)
        return m

    cdef object _said_of(self, model, const double[:, ::1] R, const double[:, ::1] P,
                         Py_ssize_t i, Py_ssize_t d):
        """What ``predict_one`` says of ``P[i]`` (:meth:`_say`), then ``R[i]`` back in
        ``self.row`` (where the caller took it, its values checked); :data:`NOT_HANDLED`
        where it does not apply or a value of ``P[i]`` is not finite."""
        if self._take_row(P, i) < 0:
            said = NOT_HANDLED
        else:
            said = self._say(model, d, False)
        self._take_row(R, i)
        return said

    cdef bint _lookahead(self, const double[:, ::1] R, Py_ssize_t i, Py_ssize_t d,
                         bint inserting) except -1:
        """The adatron's or the SVR's row ``i`` of a block (``inserting``: the adatron's,
        whose rows take a full Forgetron's leaving column in their pass, see
        :meth:`_margins`): ``la_use``, its place in a group of four rows
        whose dots against the set one pass took (``sk_dots_rows4``), that pass made here
        when no group holds row ``i``; -1 where none applies. While the group cannot fill
        the set (no budget, or room for its four rows) no vector leaves, so the set's first
        ``la_n`` vectors stay as they are while the group's rows join it (:meth:`_margins`
        adds the joined ones' dots). Where it can, the removal policies put each new vector
        in a slot under a new id (remove-oldest, remove-random, remove-smallest; ids are
        never reused; ``_remove`` moves a row with its id), so ``la_ids`` tells
        :meth:`_margins` which slots' dots to take afresh. A full Forgetron also needs the
        leaving vector's column for each row that inserts: with the four-by-four tile a
        second pass takes the columns of the set's four oldest vectors (``_la_oldest``),
        one of which is the one any row of the group removes; with the two-by-four tile,
        whose two rows cost what the fused pass for a row and a column does (at 1,000
        vectors of 50 features 6.7 and 6.9 us), the full Forgetron keeps the fused pass.
        Merge writes the merged vector over one of the two under its id, so
        :meth:`_insert_merge` marks that slot's dot stale; the Projectron stops there
        (its projection reads the rows its own way). For the kernels
        :func:`_kfinish_from` finishes from dots, rows of 4 features or more (shorter ones
        share too few loads), from the tile's gate on (``LOOKAHEAD_MIN_SET_WIDE`` vectors
        with the four-by-four tile, ``LOOKAHEAD_MIN_SET`` with the two-by-four one)."""
        cdef Py_ssize_t g = i - self.la_first, n = self.support.n, ld, cap
        cdef bint check, cols
        self.la_use = -1
        if self.la_count and 0 <= g < self.la_count:
            self.la_use = g
            return True
        self.la_count = 0
        self.la_cols = False
        check = self.budget > 0 and n + ROWS_AHEAD > self.budget
        cols = check and self.pcode == P_FORGETRON and inserting
        if (self.pcode == P_PROJECTRON
                or (cols and not sk_rows4_wide())
                or n < max(LOOKAHEAD_MIN_SET_WIDE if sk_rows4_wide() else LOOKAHEAD_MIN_SET, 1)
                or i + ROWS_AHEAD > R.shape[0] or d < 4 or d != self.X.shape[1]
                or n > self.X.shape[0] or n > self.cap_k
                or not (self.kcode == K_RBF or self.kcode == K_POLY or self.kcode == K_LINEAR)):
            return False
        ld = (n + ROWS_AHEAD + 7) // 8 * 8  # (room for the dots of the group's own rows)
        if ld % 512 == 0:  # (rows 4 KB apart share a cache set)
            ld += 8
        if 2 * ROWS_AHEAD * ld > self.la_cap:  # grown by half at least: the set grows by one
            cap = max(2 * ROWS_AHEAD * ld, self.la_cap + self.la_cap // 2)
            cap = (cap + 63) // 64 * 64
            free(self.la)
            free(self.la_ids)
            self.la = <double *>malloc(cap * sizeof(double))
            self.la_ids = <int64_t *>malloc(cap // (2 * ROWS_AHEAD) * sizeof(int64_t))
            if self.la == NULL or self.la_ids == NULL:
                free(self.la)
                free(self.la_ids)
                self.la, self.la_ids, self.la_cap = NULL, NULL, 0
                raise MemoryError()
            self.la_cap = cap
        if cols:
            self._la_oldest(n, d)
        with nogil:
            sk_dots_rows4(self.la, ld, &self.X[0, 0], d, n, &R[i, 0], d, d)
            if cols:
                sk_dots_rows4(self.la + ROWS_AHEAD * ld, ld, &self.X[0, 0], d, n,
                              self.la_old_rows, d, d)
        if check:
            memcpy(self.la_ids, &self.ids[0], n * sizeof(int64_t))
        self.la_ld, self.la_n, self.la_first, self.la_count, self.la_use = ld, n, i, ROWS_AHEAD, 0
        self.la_check, self.la_cols = check, cols
        return True

    cdef int _la_oldest(self, Py_ssize_t n, Py_ssize_t d) except -1:
        """The set's four oldest vectors (the four smallest ids, ascending) into ``la_old``
        and their rows into ``la_old_rows``: under a full Forgetron each row of the group
        that inserts removes the oldest left, so the vector any of them removes is one of
        these (the vectors the group inserts are younger than every one of them)."""
        cdef Py_ssize_t s, j, slots[4]
        cdef int64_t v
        cdef void *mem
        for j in range(ROWS_AHEAD):
            self.la_old[j] = INT64_MAX
            slots[j] = 0
        for s in range(n):  # insertion into the four smallest so far
            v = self.ids[s]
            if v >= self.la_old[ROWS_AHEAD - 1]:
                continue
            j = ROWS_AHEAD - 1
            while j > 0 and self.la_old[j - 1] > v:
                self.la_old[j] = self.la_old[j - 1]
                slots[j] = slots[j - 1]
                j -= 1
            self.la_old[j], slots[j] = v, s
        if ROWS_AHEAD * d > self.la_old_cap:
            mem = realloc(self.la_old_rows, ROWS_AHEAD * d * sizeof(double))
            if mem == NULL:
                raise MemoryError()
            self.la_old_rows, self.la_old_cap = <double *>mem, ROWS_AHEAD * d
        for j in range(ROWS_AHEAD):
            memcpy(self.la_old_rows + j * d, &self.X[slots[j], 0], d * sizeof(double))
            self.la_old_slot[j] = slots[j]
        self.la_gone = 0
        return 0

    # -- Projectron ------------------------------------------------------------------------------
    cdef bint _bind_projectron(self, policy) except -1:
        """The Projectron's budget and thresholds. ``P`` is taken (and brought in sync with
        the set, as its ``insert`` would) at the first insert: binding alone changes
        nothing, so ``predict_one`` runs here whatever state ``P`` is in."""
        from streamk.budget.projectron import KEEP_FROM, KEEP_UP_TO, MIN_REL_DELTA

        self.pj_keep_lo, self.pj_keep_hi = KEEP_FROM, KEEP_UP_TO
        self.pcode = P_PROJECTRON
        self.budget = 0 if policy.budget is None else int(policy.budget)
        self.pj_eta, self.pj_min_rel = float(policy.eta), float(MIN_REL_DELTA)
        self.pj_P_obj = None
        self.pj_ids_obj = None
        self.pj_pend_obj = None
        self.pj_sync = False
        return True

    cdef bint _projectron_room(self, Py_ssize_t d) except -1:
        """:meth:`_room` under a Projectron: the buffers can take the row (after the
        removal when full), and ``P`` inverts the set with room for one more row — the
        policy's ``prepare`` (a rebuild only after a change the policy did not make, as
        its ``insert`` does first) when it is not known to."""
        cdef Py_ssize_t n = self.support.n
        if d > self.X.shape[1] or n > self.cap_k:
            return False
        if n >= self.X.shape[0] and not (self.budget > 0 and n >= self.budget):
            return False
        policy = self.policy
        P = policy._P
        if not self.pj_sync or P is not self.pj_P_obj or self.pj_P.shape[0] < n + 1:
            if not self._projectron_rewidth(n):  # (a rebuild drops a pending update)
                self._projectron_settle()  # (before prepare reads P: in C, not NumPy)
                policy.prepare(self.support, n + 1)
            P = policy._P
            if P.dtype.char != "d" or not P.flags.c_contiguous or not P.flags.writeable:
                return False
            self.pj_P_obj, self.pj_P, self.pj_sync = P, P, True
        if self.pj_work_obj is None or self.pj_work.shape[0] < 5 * (n + 1):
            import numpy as np  # (here: an import per event costs a lookup)

            self.pj_work_obj = np.empty(5 * max(self.X.shape[0], n + 1))
            self.pj_work = self.pj_work_obj
        if policy._pend is not self.pj_pend_obj or self.pj_pend.shape[0] < 4 * (n + 1):
            import numpy as np

            self._projectron_settle()  # an update pending in the buffer being replaced
            pend = np.empty(4 * max(self.X.shape[0], n + 1))
            policy._pend = self.pj_pend_obj = pend
            self.pj_pend = pend
        return True

    cdef bint _projectron_rewidth(self, Py_ssize_t n) except -1:
        """``Projectron.prepare(support, n + 1)`` where it rebuilds ``P`` for another kernel
        (the ``gamma="auto"`` warm-up moved it), done here in C for a plain RBF: the
        compiled rebuild's steps and bits (streamk/budget/_projectron.pxi's ``_rbf_gram`` into
        a Gram matrix's lower triangle and ``_inverse_by_cholesky`` into ``P``'s, as
        ``Projectron._rebuild`` runs them through ``compiled.support_gram``,
        ``support_gram_kept`` and ``inverse_gram``) without the ~15 us of Python each of the
        warm-up's ~20 rebuilds cost. False, with nothing changed, where ``prepare`` would not
        rebuild (the same kernel: in sync, or a set changed behind the policy), would not take
        these steps (another kernel, a norm expansion that may be inexact, ``P`` to grow),
        would keep the rows' dots for the next rebuild (``KEEP_FROM <= n <= KEEP_UP_TO``:
        there a new width costs ``prepare`` the exps alone, where these steps take the
        ``n² w / 2`` dots again: twice as slow on 50 features), or the inverse fails
        (``prepare`` then inverts with LAPACK)."""
        cdef Py_ssize_t w, i, ldp
        cdef double gamma
        cdef double *G
        cdef double[:, ::1] P
        cdef int ok
        cdef SupportCounters support = self.support
        RBF = _kernel_types()[0]
        kernel = support.kernel
        policy = self.policy
        if n <= 0 or type(kernel) is not RBF or policy._kernel is kernel:
            return False
        if self.pj_keep_lo <= n <= self.pj_keep_hi:
            return False  # Projectron._gram keeps the dots
        if policy._kspec is not None and kernel.to_spec() == policy._kspec:
            return False  # prepare's _in_sync: the same kernel, P kept
        gamma = float(kernel.gamma)
        if support._sq_max * 2.0 * 1e-15 * gamma > 1e-10:  # RBF.expansion_exact, as
            return False  # compiled._gram_applies asks it: else NumPy computes the Gram
        P_obj = policy._P
        if P_obj.dtype.char != "d" or not P_obj.flags.c_contiguous or not P_obj.flags.writeable:
            return False
        if P_obj.shape[0] < n + 1 or P_obj.shape[1] != P_obj.shape[0]:
            return False  # prepare allocates a larger P
        if n > self.X.shape[0] or n > self.sq.shape[0]:
            return False
        if 3 * n * n + 9 * n > self.pj_scr_cap:
            self.pj_scr = <double *>_grown(self.pj_scr, (3 * n * n + 9 * n) * sizeof(double))
            self.pj_scr_cap = 3 * n * n + 9 * n
        P = P_obj
        ldp = P.shape[1]
        w = self.X.shape[1]
        G = self.pj_scr  # the Gram matrix, then _inverse_by_cholesky's 2 n² + 9 n of scratch
        with nogil:
            _rbf_gram(G, n, &self.X[0, 0], w, &self.sq[0], n, gamma, False)
            ok = _inverse_by_cholesky(G, n, &P[0, 0], ldp, G + n * n, self.pj_min_rel, False)
        if not ok:
            return False  # (P untouched) prepare inverts it with LAPACK
        policy._pend_m = -1  # what _rebuild leaves: no update pending, the lower triangle,
        policy._lower = True  # the set's ids and kernel remembered
        policy._remember(support)
        return True

    cdef bint _projectron_settle(self) except -1:
        """The pass over ``P`` a removal or growth left in the policy's ``_pend``, made here
        in C when no ``d = P k`` is to take it (before the policy reads or replaces ``P``):
        ``Projectron._settle``'s update, the same bits, without its O(n²) NumPy temporaries
        (the warm-up's kernel changes and the set's growth call ``prepare`` often)."""
        cdef Py_ssize_t pm
        cdef double[:, ::1] P
        cdef double[::1] pend
        policy = self.policy
        pm = policy._pend_m
        if pm < 0:
            return True
        P = policy._P
        pend = policy._pend
        if P.shape[0] < pm or P.shape[1] < pm or pend.shape[0] < 4 * pm:
            policy._settle()  # (not a state this pass leaves: NumPy checks it)
            return True
        with nogil:
            _settle(&P[0, 0], P.shape[1], &pend[0], pm)
        policy._pend_m = -1
        return True

    cdef bint _projectron_adopt(self, Py_ssize_t n) except -1:
        """``Projectron.adopt`` of the set after :meth:`_insert` (``n`` rows now). After a
        removal (``n`` unchanged) the policy's ids array, when it is still the one the last
        adopt left, takes the two ids that changed in place: what ``adopt`` would copy, and
        its kernel (hence ``to_spec``) is the bound one still. Else ``adopt`` itself."""
        cdef Py_ssize_t i = self.pj_left, last = n - 1
        policy = self.policy
        if (
            i >= 0
            and self.pj_ids_obj is not None
            and policy._ids is self.pj_ids_obj
            and self.pj_ids.shape[0] == n
            and policy._kernel is self.support._kernel  # (the property's value, no call)
        ):
            self.pj_ids[i] = self.ids[i]
            self.pj_ids[last] = self.ids[last]
            policy._lower = True
            return True
        policy.adopt(self.support)
        ids = policy._ids
        if (
            ids.dtype.kind == "i"
            and ids.dtype.itemsize == 8
            and ids.flags.c_contiguous
            and ids.flags.writeable
        ):
            self.pj_ids_obj, self.pj_ids = ids, ids
        else:
            self.pj_ids_obj = None
        return True

    cdef Py_ssize_t _projectron(self, double row_sq) except -2:
        """``Projectron.insert``'s steps for ``self.row`` (coefficients ``self.f``, kernel row
        ``self.k``), in its order: ``d = P k`` and ``delta = k(x, x) - k·d``; projected
        (``coef_S += d fᵀ``, returns -1) when ``n`` and ``delta`` is below ``eta`` or
        ``MIN_REL_DELTA k(x, x)``; else, when full, the removal (the coefficient projected
        onto the others, the last row moved into its slot, ``self.k`` as ``without_slot``
        leaves it, ``d`` and ``delta`` for the smaller set) with ``P``'s downdate and
        block-inverse growth, or the growth alone. Their pass over ``P`` waits in the
        policy's ``_pend`` for the next event's ``d = P k``, which makes it in its own pass
        (one pass over ``P`` per event instead of two; ``Projectron._settle`` applies it
        first wherever else ``P`` is read). Returns the rows the new one joins;
        :meth:`_insert` writes it."""
        cdef Py_ssize_t n = self.support.n, p = self.coef.shape[1], ldp = self.pj_P.shape[0]
        cdef Py_ssize_t s, c, i, cap = self.pj_work.shape[0] // 5, pm
        cdef double kxx = self._kdiag(row_sq), delta, pii
        cdef double *P = &self.pj_P[0, 0]
        cdef double *dv = &self.pj_work[0]
        cdef double *col = dv + cap
        cdef double *row = col + cap
        cdef double *cm = row + cap
        cdef double *scratch = cm + cap
        cdef double *pend = &self.pj_pend[0]
        policy = self.policy
        pm = policy._pend_m
        if pm >= n or (pm >= 0 and policy._pend is not self.pj_pend_obj):
            self._projectron_settle()  # (not for this pass to take)
            pm = -1
        with nogil:
            if pm >= 0:  # the last update's pass over P and this d = P k in one
                delta = _project_pending(P, ldp, self.k, dv, scratch, n, kxx, pend, pm)
            else:
                delta = _project(P, ldp, self.k, dv, scratch, n, kxx)
        if pm >= 0:
            policy._pend_m = -1
        self.pj_left = -1
        if n and (delta <= self.pj_eta or delta <= self.pj_min_rel * kxx):
            for s in range(n):  # SupportSet.add_coefs(d fᵀ)
                for c in range(p):
                    self.coef[s, c] = self.coef[s, c] + dv[s] * self.f[c]
            self.version = self.support.version + 1
            self.support.version = self.version
            return -1
        if self.budget > 0 and n >= self.budget:
            with nogil:
                i = _remove_one(P, ldp, &self.X[0, 0], self.X.shape[1], &self.coef[0, 0], p,
                                &self.sq[0], &self.kdiag[0], &self.ids[0], self.k, col,
                                row, n, &pii)
                delta = _project_without(dv, col, pii, i, n, self.k, kxx)
                _shrink_defer(P, ldp, n, i, col, row, dv, pend, cm, delta)
            policy._pend_m = n - 1  # the rank-two pass waits for the next d = P k
            self.pj_left = i
            return n - 1
        with nogil:
            _grow_defer(P, ldp, dv, n, delta, pend)
        policy._pend_m = n  # the growth's pass waits for the next d = P k too
        return n

    # -- the SVR and novelty rules ----------------------------------------------------------------
    cdef object _predict_value_row(self, model, Py_ssize_t d, bint keep):
        """The SVR's ``predict_one`` (``offset + f``) or novelty's ``score_one`` (eq. 5.2
        with the centre's statistics) of the row in ``self.row`` (``d`` wide), the set not
        empty (and the centre's statistics current); ``keep`` as for :meth:`_say`."""
        cdef double row_sq, W
        cdef Py_ssize_t n = self.support.n
        if not self._margins(d, &row_sq, False):
            return NOT_HANDLED
        if keep:
            self._keep_pre(PRE_ROW, d, row_sq)
        if self.rcode == R_SVR:  # the running mean as learn_rows holds it, if it does
            if not self.s_off_mean:
                return self.s_off + self.f[0]
            return (self.held_y[1] if self.held_stats else model._y_mean) + self.f[0]
        return self._centre_d2(n, self.f[0], self._kdiag(row_sq), <double>model._cc, &W)

    cdef double _centre_d2(self, Py_ssize_t n, double f, double kqq, double cc,
                           double *W) noexcept:
        """Eq. 5.2: the event's squared distance from the centre of the set's ``n``
        vectors (``f = K(x, S) w``, ``kqq = k(x, x)``, ``cc = w' K(S, S) w``), 0 at least,
        as ``KernelNovelty._distances`` computes it; ``W`` receives the weights' sum, and
        where it is not positive (no centre) the distance is ``kqq``."""
        cdef Py_ssize_t s
        cdef double total = 0.0, d2
        for s in range(n):
            total = total + self.coef[s, 0]
        W[0] = total
        if total <= 0.0:
            return kqq
        d2 = kqq - (2.0 / total) * f + cc / (total * total)
        return d2 if d2 > 0.0 else 0.0

    cdef bint _r_current(self, model, Py_ssize_t n) except -1:
        """Whether novelty's ``_r`` is current for the kernel in use and one per slot."""
        r = model._r
        if r is None or model._stats_kernel is not self.support.kernel:
            return False
        return len(r) == n  # (len: no shape tuple made per event)

    cdef bint _take_r(self, model, Py_ssize_t n) except -1:
        """Novelty's ``_r`` (``n`` entries) into ``self.r``, with room for one more; a copy
        only when the learner's ``_r`` is not the view this path last gave it."""
        import numpy as np

        r = model._r
        cap = self.X.shape[0]
        if r is self.r_last and len(self.r_obj) >= cap:
            return True
        if r.dtype.char != "d":
            return False
        buf = np.zeros(max(cap, n + 1))
        buf[:n] = r
        self.r_obj = buf
        self.r = buf
        self.r_last = None
        return True

    cdef object _novelty_cc(self, model, Py_ssize_t n):
        """After a swap (:meth:`_novelty_swap`): ``cc = w' r`` and the count of removals
        followed, as ``KernelNovelty._follow_swap`` leaves them; ``_r`` is this path's view."""
        cdef Py_ssize_t s
        cdef double cc = 0.0
        for s in range(n):
            cc = cc + self.coef[s, 0] * self.r[s]
        model._cc = cc
        model._r_updates = model._r_updates + 1
        self.r_last = self.r_obj[:n]
        model._r = self.r_last

    cdef object _finish_value(self, model, Py_ssize_t d, double y):
        """The rest of ``learn_one`` on the NumPy path for a row already folded into the
        ``gamma="auto"`` estimate (the rare case the compiled step cannot take)."""
        import numpy as np

        self._flush(model)  # the NumPy path reads and moves the counters
        row = np.array([self.row[j] for j in range(d)])
        k_row = model._kernel_row(row)
        if self.rcode == R_SVR:
            model._update(row, float(k_row @ model._support.coef[:, 0]), k_row, y)
        else:
            model._insert(row, k_row)
            model._n_learned += 1
        self._unbind()
        return True

    cdef double _svr_alpha(self, double y, double kxx, double *stats) noexcept:
        """``OnlineSVR._update``'s step for ``f = self.f[0]``: ``y`` into the running
        statistics ``stats = (count, mean, m2)`` (Welford, Python's operations, no fused
        multiply-add), then the soft-threshold step from 0 clipped to ``[-C_, C_]``
        (``_new_alpha``, with Python's ``max``/``min``)."""
        cdef double delta, spread, eps, C, off, r, g, alpha
        cdef volatile double t
        stats[0] = stats[0] + 1.0
        delta = y - stats[1]
        t = delta / stats[0]
        stats[1] = stats[1] + t
        t = y - stats[1]
        t = delta * t
        stats[2] = stats[2] + t
        spread = sqrt(stats[2] / stats[0])
        eps = 0.1 * spread if self.s_eps < 0.0 else self.s_eps
        C = 1.0 * spread if self.s_C < 0.0 else self.s_C
        off = stats[1] if self.s_off_mean else self.s_off
        r = (y - off) - self.f[0]
        if kxx <= 0.0:
            return 0.0
        g = fabs(r) - eps
        if 0.0 > g:
            g = 0.0
        g = copysign(g, r)
        alpha = g / kxx
        if -C > alpha:
            alpha = -C
        if C < alpha:
            alpha = C
        return alpha

    cdef object _learn_value(self, model, x, y):
        """``learn_one`` of the SVR (``y`` a float: it declines a non-finite one, and the
        learner's NumPy path says what is wrong) or of novelty; False (nothing changed)
        when it does not apply."""
        cdef Py_ssize_t d
        cdef double yv = 0.0
        cdef int pre
        if type(x) is not dict or not self._current(model):
            self.pre_kind = 0
            return False
        pre = self.pre_kind  # (what predict left: it serves this learn or none)
        self.pre_kind = 0
        if self.rcode == R_SVR:
            if type(y) is not float:
                return False
            yv = PyFloat_AS_DOUBLE(y)
            if not isfinite(yv) or fabs(yv) > TARGET_LIMIT:  # (the NumPy path says why)
                return False
        d = self._row(<dict>x)
        if d < 0:
            return False
        if self.warming and self.scale.n < AUTO_WINDOW:
            if not self._fold_warm(model, d):
                return False
            # the row is in the estimate now: from here on the event is never handed back
            if not self._current(model):
                return self._finish_value(model, d, yv)
            return self._learn_value_row(model, d, yv, True, 0, None)
        return self._learn_value_row(model, d, yv, False, pre, None)

    cdef object _learn_value_row(self, model, Py_ssize_t d, double yv, bint folded, int pre,
                                 list pred):
        """The SVR's step or novelty's insert, and the counters, for the row in
        ``self.row`` (``d`` wide, target ``yv``): the one core of :meth:`_learn_value` and
        :meth:`learn_rows`; ``folded``, ``pre`` and ``pred`` (what ``predict_one`` says
        before the step: the SVR's ``offset + f`` as :meth:`_predict_value_row` says it,
        novelty's flag from :meth:`_novelty_flag`) as for :meth:`_learn_label`."""
        cdef double row_sq, alpha = 1.0, kxx, f, said = 0.0
        cdef double stats[3]
        cdef Py_ssize_t n, s, slot
        cdef bint track_r = False, swap = False, need_k, full, one_k = False, flag = False
        n = self.support.n
        full = self.budget > 0 and n >= self.budget
        if self._grow_first(n):
            pre = 0  # (new buffers: the set's version moved anyway)
            if not self._current(model):
                return self._finish_value(model, d, yv) if folded else False
        pre = self._take_pre(pre, d, &row_sq)
        if self.rcode == R_NOVELTY:
            track_r = self._r_current(model, n)
            if track_r and full and self.pcode != P_PROJECTRON:  # a vector leaves
                # (a removal policy's swap or Merge's merge; the Projectron's step is
                # followed after it, see below)
                swap = model._r_updates < model._EXACT_EVERY
                track_r = swap  # else stale: recomputed exactly when read
        if pred is not None and self.rcode == R_NOVELTY and n and not track_r:
            return False  # the flag wants r current: the NumPy path computes it
        need_k = (
            self.rcode == R_SVR or track_r or self.pcode == P_PROJECTRON or pred is not None
        )
        if self.pcode == P_FORGETRON and full and not need_k:
            one_k = True  # its removal reads k(x, x_r) alone: one kernel value
        elif self.pcode == P_FORGETRON and full:
            need_k = True
        if need_k and not pre and not self._margins(d, &row_sq, self.rcode == R_NOVELTY):
            return self._finish_value(model, d, yv) if folded else False
        if not need_k and not pre:  # novelty without r to carry: only the row's norm
            row_sq = 0.0
            for s in range(d):
                row_sq = row_sq + self.row[s] * self.row[s]
        if one_k:
            if d > self.X.shape[1] or n > self.cap_k:
                return self._finish_value(model, d, yv) if folded else False
            if not self._expansion_exact(self.support._sq_max + row_sq):
                return self._finish_value(model, d, yv) if folded else False
            slot = self._oldest(n)
            self._column(&self.X[slot, 0], self.X.shape[1], 1, &self.sq[slot], self.row, d,
                         row_sq, &self.k[slot])
        kxx = self._kdiag(row_sq)
        if self.rcode == R_SVR:
            if self.held_stats:
                stats[0], stats[1], stats[2] = self.held_y[0], self.held_y[1], self.held_y[2]
            else:
                stats[0], stats[1], stats[2] = <double>model._y_n, model._y_mean, model._y_m2
            if pred is not None:  # before the step moves the running mean
                said = stats[1] if self.s_off_mean else self.s_off
                if n:  # (an empty set: the offset alone, as predict_one returns it)
                    said = said + self.f[0]
            alpha = self._svr_alpha(yv, kxx, stats)
        if alpha != 0.0:
            if (
                not self._room(d, row_sq)
                or (track_r and not self._take_r(model, n))
                or (swap and not self._expansion_exact(2.0 * max(self.support._sq_max, row_sq)))
            ):
                return self._finish_value(model, d, yv) if folded else False
            f = self.f[0]
            if pred is not None and self.rcode == R_NOVELTY and n:
                flag = self._novelty_flag(model, n, f, kxx)
            self.f[0] = alpha
            new_id = self.support.next_id
            self.swap_r = swap
            try:
                self._insert(d, row_sq)
            finally:
                self.swap_r = False
            if self.rcode == R_SVR:
                if self.support.next_id != new_id:  # added (a Projectron may project it)
                    _record(model._targets, self.support, new_id, yv)  # folded when next read
                self._count(model, C_UPDATES)
            elif swap:  # a vector swapped for the row (or merged): r followed it, cc = w' r
                self._novelty_cc(model, self.support.n)
            elif (
                track_r
                and self.pcode == P_PROJECTRON
                and self.support.n == n
                and model._r_updates < model._EXACT_EVERY
            ):  # projected, or a vector left for the row: r follows, cc = w' r
                self._novelty_projectron(n, self.support.next_id == new_id, kxx)
                self._novelty_cc(model, n)
            elif track_r and self.support.n == n + 1:  # grew by one: r and cc carried forward
                for s in range(n):
                    self.r[s] = self.r[s] + self.k[s]
                self.r[n] = f + kxx
                model._cc = model._cc + (2.0 * f + kxx)
                self.r_last = self.r_obj[: n + 1]
                model._r = self.r_last
            else:
                model._r = None  # stale: the NumPy path recomputes it when read
        if self.rcode == R_SVR:
            if self.holding:
                self.held_y[0], self.held_y[1], self.held_y[2] = stats[0], stats[1], stats[2]
                self.held_stats = True
            else:
                model._y_n = model._y_n + 1
                model._y_mean, model._y_m2 = stats[1], stats[2]
        self._count(model, C_LEARNED)
        if pred is not None:
            pred.append(said if self.rcode == R_SVR else flag)
        return True

    cdef bint _novelty_flag(self, model, Py_ssize_t n, double f, double kqq) except -1:
        """``KernelNovelty.predict_one`` before the insert, from the event's ``f = K(x, S) w``
        and ``kqq = k(x, x)`` and the tracked ``r = K(S, S) w`` (``self.r``, current):
        eq. 5.2's squared distance from the centre above CF 5.3's threshold, each in
        ``score_one``'s and ``threshold_``'s order of operations."""
        cdef Py_ssize_t s
        cdef double W, cc = model._cc, d2, v, top = -INFINITY, kmax = -INFINITY
        cdef double maxdist, esterr, bound, delta = model.delta
        d2 = self._centre_d2(n, f, kqq, cc, &W)
        if W <= 0.0:
            return False  # threshold_ is infinite
        for s in range(n):
            v = (self.kdiag[s] - (2.0 / W) * self.r[s]) + cc / (W * W)
            if v > top:
                top = v
            if self.kdiag[s] > kmax:
                kmax = self.kdiag[s]
        maxdist = sqrt(top if top > 0.0 else 0.0)
        esterr = sqrt(2.0 * kmax / <double>n) * (sqrt(2.0) + sqrt(log(1.0 / delta)))
        bound = maxdist + 2.0 * esterr
        return d2 > bound * bound


def program_row(kernel, const double[:, ::1] X, const double[::1] sq, const double[::1] row):
    """Test hook: ``(k(row, X[s]) for s < len(X), k(row, row))`` as the per-event core
    computes them from ``kernel``'s program (``sq``: the rows' squared norms); ``None``
    for a kernel without one."""
    from streamk.kernels.program import kernel_program

    import numpy as np

    program = kernel_program(kernel)
    if program is None:
        return None
    cdef const double[:, ::1] ops = program.ops
    cdef Py_ssize_t n = X.shape[0], i
    cdef double row_sq = 0.0
    for i in range(row.shape[0]):
        row_sq = row_sq + row[i] * row[i]
    out = np.zeros(n)
    work = np.zeros(max(n, 1) * (program.depth * (2 if program.normalizes else 1) + 1))
    cdef double[::1] o = out
    cdef double[::1] wk = work
    if n:
        _kprog_col(&ops[0, 0], ops.shape[0], program.depth, program.normalizes, &X[0, 0],
                   X.shape[1], n, &sq[0], &row[0], row.shape[0], row_sq, &wk[0], &o[0])
    return out, _kprog_diag(&ops[0, 0], ops.shape[0], row_sq)


#: The deepest program the core's stack takes (``streamk.kernels.program.MAX_DEPTH``).
PROGRAM_STACK = PROGRAM_DEPTH
