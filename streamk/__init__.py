"""streamk: streaming on-line kernel learning.

Budgeted kernel learners with river's API, batch consolidation warm-started from
the on-line model, and safe, checksummed msgpack snapshots, fed from Kafka,
recorded event logs or plain Python iterables.
"""

from __future__ import annotations

from . import budget, errors, kernels
from .budget import RemoveOldest, Unbounded
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
)
from .learners import KernelPerceptron
from .support import SupportSet

__version__ = "0.1.0"

__all__ = [
    "budget",
    "errors",
    "kernels",
    "FeatureIndex",
    "SupportSet",
    "KernelPerceptron",
    "RemoveOldest",
    "Unbounded",
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
    "__version__",
]
