"""Merge workers' models into one: the machine-learning half of scaling out (design.md §9).

Workers of one consumer group each learn a kernel expansion from their share of the stream.
:func:`merge_models` turns them into one learner of the same class: the union of their support
sets, each worker's coefficients weighted by its share of the stream, compressed to the budget.
:func:`snapshot_sources` lists which worker snapshots went into a merge (for its metadata).
"""

from __future__ import annotations

from .compress import METHODS, compress_state, project_rows
from .expansions import Union, normalise_weights, union_state
from .models import MergeResult, merge_models, merge_snapshots
from .provenance import snapshot_sources

__all__ = [
    "METHODS",
    "MergeResult",
    "Union",
    "compress_state",
    "merge_models",
    "merge_snapshots",
    "normalise_weights",
    "project_rows",
    "snapshot_sources",
    "union_state",
]
