"""Kernels: values on blocks of rows, their specs, the gamma estimator (design §3).

- :mod:`~streamk.kernels.base`: the kernel objects (``RBF``, ``Linear``, ``Polynomial``,
  ``Laplacian``, ``Cosine``, ``Constant``) and their combinators (``Sum``, ``Product``,
  ``Scaled``, ``Normalized``);
- :mod:`~streamk.kernels.specs`: plain-data specs and ``"rbf(0.5) + const(1)"`` text;
- :mod:`~streamk.kernels.strings` and :mod:`~streamk.kernels.trees`: the string and tree
  kernels of the book's ch. 11 (``Spectrum``, ``Mismatch``, ``RestrictedGapWeighted``,
  ``GapWeightedSubsequences``, ``CoRootedSubtree``, ``AllSubtree``), on lists of objects;
- :mod:`~streamk.kernels.scale`: the running feature variances that resolve ``"auto"``;
- :mod:`~streamk.kernels.measures`: kernel-matrix measures (alignment, FSM, MMD drift),
  imported on its own (``from streamk.kernels import measures``).
"""

from __future__ import annotations

from .base import (
    RBF,
    VALUE_RANGE,
    Constant,
    Cosine,
    Kernel,
    Laplacian,
    Linear,
    Normalized,
    Polynomial,
    Product,
    Scaled,
    Sum,
    sqnorm_window,
)
from .scale import ScaleEstimator
from .specs import kernel_from_spec, kernel_from_string
from .strings import (
    CharacterWeightedSubsequences,
    GapNumberWeightedSubsequences,
    GapWeightedSubsequences,
    Mismatch,
    RestrictedGapWeighted,
    SoftMatchingSubsequences,
    Spectrum,
)
from .trees import AllSubtree, CoRootedSubtree

__all__ = [
    "Kernel",
    "Linear",
    "Polynomial",
    "RBF",
    "Laplacian",
    "Constant",
    "Sum",
    "Product",
    "Scaled",
    "Normalized",
    "Cosine",
    "VALUE_RANGE",
    "sqnorm_window",
    "ScaleEstimator",
    "kernel_from_spec",
    "kernel_from_string",
    "GapWeightedSubsequences",
    "Spectrum",
    "Mismatch",
    "RestrictedGapWeighted",
    "CharacterWeightedSubsequences",
    "SoftMatchingSubsequences",
    "GapNumberWeightedSubsequences",
    "CoRootedSubtree",
    "AllSubtree",
]
