"""Batch solvers on a precomputed Gram matrix (pure NumPy), used for warm-started consolidation.

SMO with second-order working-set selection (Fan, Chen & Lin 2005) for the duals with a box and at
most one equality per sign group (:func:`svc`, :func:`nu_svc`, :func:`svr`, :func:`nu_svr`,
:func:`one_class`, :func:`hypersphere`), exact coordinate ascent for the no-bias duals
(:func:`adatron_dual`, :func:`svr_dual_no_bias`), Cholesky kernel ridge regression
(:func:`ridge`, :class:`RidgeWindow`) and the batch soft-ranking dual of Code Fragment 8.1
(:func:`rank`). Every solver returns a :class:`SolverResult`.
"""

from __future__ import annotations

from ._common import SolverResult, convergence_notes, project_box_equality
from .coordinate import adatron_dual, svr_dual_no_bias
from .ranking import rank
from .ridge import RidgeWindow, ridge
from .svm import hypersphere, nu_svc, one_class, svc
from .svr import nu_svr, svr

__all__ = [
    "SolverResult",
    "project_box_equality",
    "convergence_notes",
    "svc",
    "nu_svc",
    "svr",
    "nu_svr",
    "one_class",
    "hypersphere",
    "adatron_dual",
    "svr_dual_no_bias",
    "ridge",
    "RidgeWindow",
    "rank",
]
