"""streamk: streaming on-line kernel learning.

Budgeted kernel learners with river's API, batch consolidation warm-started from
the on-line model, and safe, checksummed msgpack snapshots, fed from Kafka,
recorded event logs or plain Python iterables.
"""

from __future__ import annotations

from . import budget, consolidation, errors, kernels, snapshot, solvers
from ._version import __version__
from .budget import (
    BudgetPolicy,
    Forgetron,
    Merge,
    Projectron,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    Unbounded,
)
from .consolidation import Consolidated, Consolidator
from .kernels import (
    RBF,
    AllSubtree,
    Constant,
    CoRootedSubtree,
    Cosine,
    GapWeightedSubsequences,
    Laplacian,
    Linear,
    Mismatch,
    Normalized,
    Polynomial,
    Product,
    RestrictedGapWeighted,
    Scaled,
    Spectrum,
    Sum,
    kernel_from_spec,
    kernel_from_string,
    measures,
)
from .kernels.measures import MMDDrift, alignment, fsm, select_kernel
from .learners import (
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    MarginPerceptron,
    OnlineRanker,
    OnlineSVR,
)
from .learners.features import FeatureIndex
from .learners.support import SupportSet

__all__ = [
    "budget",
    "consolidation",
    "errors",
    "measures",
    "kernels",
    "snapshot",
    "solvers",
    "Consolidated",
    "Consolidator",
    "MMDDrift",
    "alignment",
    "fsm",
    "select_kernel",
    "FeatureIndex",
    "SupportSet",
    "KernelPerceptron",
    "MarginPerceptron",
    "KernelAdatron",
    "OnlineSVR",
    "OnlineRanker",
    "KernelNovelty",
    "BudgetPolicy",
    "Unbounded",
    "RemoveOldest",
    "RemoveRandom",
    "RemoveSmallest",
    "Forgetron",
    "Projectron",
    "Merge",
    "RBF",
    "Constant",
    "Cosine",
    "Laplacian",
    "Linear",
    "Normalized",
    "Polynomial",
    "Product",
    "Scaled",
    "Sum",
    "kernel_from_spec",
    "kernel_from_string",
    "GapWeightedSubsequences",
    "Spectrum",
    "Mismatch",
    "RestrictedGapWeighted",
    "CoRootedSubtree",
    "AllSubtree",
    "__version__",
]
