"""On-line kernel learners with river's API (one module per algorithm)."""

from __future__ import annotations

from .adatron import KernelAdatron
from .budgeted import MarginPerceptron
from .novelty import KernelNovelty
from .perceptron import KernelPerceptron
from .ranking import OnlineRanker
from .svr import OnlineSVR

__all__ = [
    "KernelAdatron",
    "KernelNovelty",
    "KernelPerceptron",
    "MarginPerceptron",
    "OnlineRanker",
    "OnlineSVR",
]
