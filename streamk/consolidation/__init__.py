"""Consolidation: hand an on-line learner to a warm-started batch solver and adopt the result.

design.md §6. :class:`Consolidator` holds the trigger policy, the training window and the mode;
:func:`solve_learner` does one step; :func:`Consolidated` wraps a learner as a river estimator.
"""

from __future__ import annotations

from .consolidator import Consolidator
from .solve import Outcome, adopt_state, compress_project, learner_budget, solve_learner
from .window import TrainingWindow
from .wrapper import Consolidated, ConsolidatedClassifier, ConsolidatedRegressor

__all__ = [
    "Consolidator",
    "Consolidated",
    "ConsolidatedClassifier",
    "ConsolidatedRegressor",
    "TrainingWindow",
    "Outcome",
    "solve_learner",
    "adopt_state",
    "compress_project",
    "learner_budget",
]
