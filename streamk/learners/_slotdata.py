"""Per-support-vector values (labels, targets) that follow the rows of a SupportSet.

A :class:`~streamk.learners.support.SupportSet` moves rows (swap-remove) and budget policies evict
rows the learner never sees, so a learner that needs something per support vector beyond
its coefficient (the adatron's label, the SVR's target) keys it by the rows' insertion
ids and re-aligns it with the current slots on demand: one comparison when nothing moved,
one vectorised sort and search (O(n log n)) when something did.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SlotData"]


class SlotData:
    """Values of width ``width`` keyed by support-row id.

    A row whose id is unknown (e.g. one a budget policy synthesised by merging) reads as NaN;
    learners treat such rows as fixed.
    """

    def __init__(self, width: int = 1) -> None:
        self.ids = np.zeros(0, dtype=np.int64)
        self.values = np.zeros((0, width))

    def add(self, id_: int, value: np.ndarray | float) -> None:
        """Record ``value`` for the row with insertion id ``id_``."""
        value = np.asarray(value, dtype=np.float64).reshape(1, -1)
        self.ids = np.concatenate([self.ids, np.array([id_], dtype=np.int64)])
        self.values = np.concatenate([self.values, value])

    def align(self, ids: np.ndarray) -> np.ndarray:
        """Values for the rows ``ids`` (the support set's current slots), ``(n, width)``.

        Entries of rows no longer present are dropped.
        """
        if self.ids.shape == ids.shape and np.array_equal(self.ids, ids):
            return self.values
        out = np.full((ids.shape[0], self.values.shape[1]), np.nan)
        if self.ids.size and ids.size:
            order = np.argsort(self.ids, kind="stable")
            sorted_ids = self.ids[order]
            pos = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
            found = sorted_ids[pos] == ids
            out[found] = self.values[order[pos[found]]]
        self.ids = np.array(ids, dtype=np.int64)
        self.values = out
        return out

    def state(self) -> list[list[float]]:
        return self.values.tolist()

    @classmethod
    def from_state(cls, ids: np.ndarray, values: list, width: int = 1) -> SlotData:
        data = cls(width)
        data.ids = np.array(ids, dtype=np.int64)
        data.values = np.asarray(values, dtype=np.float64).reshape(len(data.ids), width)
        return data
