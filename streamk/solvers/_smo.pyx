# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Compiled SMO core: LIBSVM's ``Solver`` and ``Solver_NU`` with a byte-budgeted column cache.

Solves ``min 0.5 a'Qa + p'a  s.t.  y'a = delta, 0 <= a_t <= C_t`` (``Q_st = y_s y_t Kbar_st``;
with ``nu`` the two equalities of one sign group each) as LIBSVM 3.x does: second-order
working-set selection (Fan, Chen & Lin, JMLR 6, 2005), shrinking with ``G_bar`` and gradient
reconstruction, and an LRU cache of ``Q`` columns whose total size is bounded in bytes, with
LIBSVM's ``swap_index`` so active variables stay contiguous. Names follow LIBSVM's ``svm.cpp``.
As in LIBSVM, cached ``Q`` entries are single precision (half the memory traffic and page
faults: 15-25% faster at n = 8000); ``alpha``, the gradients and the objective are double, so the
result differs from the all-double NumPy path by the rounding of ``Q`` (about 2e-8 relative on
the objective). :mod:`streamk.solvers._smo64` is the same core with a double cache: kernel values
that differ in the last bit (features in another order) then stay that close, where rounding
to float can move one by 6e-8 and the run down another path. The first pass of each selection is fused into the previous gradient update.

``Kbar_st = k(row[base_s], row[base_t])`` comes from one of three sources, so a window never
needs its ``n x n`` Gram matrix:

* ``GRAM``: a precomputed C-contiguous Gram matrix (entries gathered);
* ``RBF``: rows ``X`` and their squared norms, ``exp(-gamma ||a - b||^2)`` computed here with
  the core's exponential (``_fastexp.h``), so values match :mod:`streamk.kernels` to rounding;
* ``CALL``: any kernel through a Python callable ``f(i, idx) -> k(row_i, rows[idx])`` called once
  per missing column block.

The NumPy solver in :mod:`streamk.solvers.smo` is the reference this is tested against; both are
tested against scikit-learn's LIBSVM.
"""

ctypedef float Qfloat  # LIBSVM's type for cached Q entries: half the memory traffic

include "_smo_impl.pxi"
