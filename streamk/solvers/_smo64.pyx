# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The compiled SMO core of :mod:`streamk.solvers._smo` with a double-precision column cache.

Same code (``_smo_impl.pxi``); cached ``Q`` entries are ``double``, so results match the NumPy
path to rounding and do not depend on the order of the features beyond it (twice the cache
memory per column).
"""

ctypedef double Qfloat

include "_smo_impl.pxi"
