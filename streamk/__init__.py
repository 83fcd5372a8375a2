"""streamk: streaming on-line kernel learning.

Budgeted kernel learners with river's API, batch consolidation warm-started from
the on-line model, and safe, checksummed msgpack snapshots, fed from Kafka,
recorded event logs or plain Python iterables.
"""

from __future__ import annotations

__version__ = "0.1.0"  # before the imports: submodules record it in snapshots

from . import budget, errors, kernels, snapshot, solvers
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
from .features import FeatureIndex
from .kernels import (
    RBF,
    Constant,
    Cosine,
    Laplacian,
    Linear,
    Normalized,
    Polynomial,
    Product,
    Scaled,
    Sum,
    kernel_from_spec,
    kernel_from_string,
)
from .learners import (
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    MarginPerceptron,
    OnlineRanker,
    OnlineSVR,
)
from .support import SupportSet

__all__ = [
    "budget",
    "errors",
    "kernels",
    "snapshot",
    "solvers",
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
    "__version__",
]
