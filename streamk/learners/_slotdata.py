"""Per-support-vector values (labels, targets) that follow the rows of a SupportSet.

A :class:`~streamk.learners.support.SupportSet` moves rows (swap-remove) and budget policies evict
rows the learner never sees, so a learner that needs something per support vector beyond
its coefficient (the adatron's label, the SVR's target) keys it by the rows' insertion
ids and re-aligns it with the current slots on demand: one comparison when nothing moved,
one vectorised search when something did (a sort only when the stored ids are out of order).

Entries of evicted rows stay until the next :meth:`SlotData.align`; a learner that seldom
aligns calls :meth:`SlotData.prune` with the support set's current ids after recording, which
drops them once they outnumber the live rows (memory stays proportional to the budget, not to
the stream).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SlotData"]

#: Stored entries beyond ``PRUNE_FACTOR`` times the live rows (plus ``PRUNE_SLACK``) are pruned.
PRUNE_FACTOR = 2
PRUNE_SLACK = 8
#: :meth:`SlotData.settle` folds and prunes past this many pending entries beyond the live rows
#: (the compiled per-event path, streamk/learners/_event.pyx, keeps a copy).
SETTLE_SLACK = 64


class SlotData:
    """Values of width ``width`` keyed by support-row id.

    A row whose id is unknown (e.g. one a budget policy synthesised by merging) reads as NaN;
    learners treat such rows as fixed.

    Parameters
    ----------
    width
        Values per row.
    """

    def __init__(self, width: int = 1) -> None:
        self._ids = np.zeros(0, dtype=np.int64)
        self._values = np.zeros((0, width))
        #: ids recorded by :meth:`add` and not yet folded into the arrays, and their values
        #: (two lists, not a list of pairs: a pair is a tuple the garbage collector tracks,
        #: one an update of the compiled ``learn_one``, and their count set off collections;
        #: a full one costs ~0.1 s with a few hundred thousand objects alive)
        self.pending: list[int] = []
        self.pending_values: list[np.ndarray | float] = []

    @property
    def ids(self) -> np.ndarray:
        """The stored ids, in insertion order (pending entries folded in first)."""
        self.fold()
        return self._ids

    @property
    def values(self) -> np.ndarray:
        """The stored values, ``(len(ids), width)``, row for row with :attr:`ids`."""
        self.fold()
        return self._values

    def add(self, id_: int, value: np.ndarray | float) -> None:
        """Record ``value`` for the row with insertion id ``id_``: amortised O(1) (a list
        append, folded into the arrays by the next reader), since the compiled
        ``learn_one`` records one value per update."""
        self.pending.append(id_)
        self.pending_values.append(value)

    def fold(self) -> None:
        """Move the entries :meth:`add` recorded into the arrays, in insertion order."""
        if self.pending:
            ids, values = self.pending, self.pending_values
            self.pending, self.pending_values = [], []
            self._append(np.array(ids, dtype=np.int64), values)

    def settle(self, support: Any, slack: int = SETTLE_SLACK) -> None:
        """Keep memory bounded for a learner that records but seldom reads: once more than
        ``slack`` entries beyond the rows of ``support`` (a support set) are pending, fold
        and :meth:`prune` against its ids. One comparison otherwise (it runs every event)."""
        if len(self.pending) > support.n + slack:
            self.fold()
            self.prune(support.ids)

    def extend(self, ids: np.ndarray, values: np.ndarray) -> None:
        """Record ``values[i]`` for the row with id ``ids[i]``, for all rows at once."""
        self.fold()
        self._append(ids, values)

    def _append(self, ids: np.ndarray, values: Any) -> None:
        values = np.asarray(values, dtype=np.float64).reshape(len(ids), self._values.shape[1])
        self._ids = np.concatenate([self._ids, np.asarray(ids, dtype=np.int64)])
        self._values = np.concatenate([self._values, values])

    def prune(self, ids: np.ndarray) -> None:
        """Drop the entries of rows not in ``ids`` once more than twice as many are stored.

        A filter in stored order, done only past the bound so that its cost is amortised
        over the additions that made it necessary; unlike :meth:`align` it adds nothing for a
        live row not recorded yet (a caller may prune between a row's insertion and the
        recording of its value, which must then be the only entry of that id).
        """
        if self.ids.shape[0] > PRUNE_FACTOR * ids.shape[0] + PRUNE_SLACK:
            keep = np.isin(self.ids, ids)
            self._ids = self.ids[keep]
            self._values = self.values[keep]

    def align(self, ids: np.ndarray) -> np.ndarray:
        """Values for the rows ``ids`` (the support set's current slots), ``(n, width)``.

        Entries of rows no longer present are dropped.
        """
        own = self.ids
        if own.shape == ids.shape and (own == ids).all():
            return self.values
        m = own.shape[0]
        if m and ids.shape[0]:
            if m > 1 and not (own[1:] > own[:-1]).all():  # sorted already: ids only grow
                order = own.argsort(kind="stable")
                own = own[order]
            else:
                order = None
            pos = own.searchsorted(ids)
            np.minimum(pos, m - 1, out=pos)
            found = own[pos] == ids
            src = pos if order is None else order[pos]
            if found.all():
                out = self.values[src]
            else:
                out = np.full((ids.shape[0], self.values.shape[1]), np.nan)
                out[found] = self.values[src[found]]
        else:
            out = np.full((ids.shape[0], self.values.shape[1]), np.nan)
        self._ids = np.array(ids, dtype=np.int64)
        self._values = out
        return out

    def state(self) -> list[list[float]]:
        return self.values.tolist()

    @classmethod
    def from_state(
        cls,
        ids: np.ndarray,
        values: list,
        width: int = 1,
    ) -> SlotData:
        data = cls(width)
        data._ids = np.array(ids, dtype=np.int64)
        data._values = np.asarray(values, dtype=np.float64).reshape(len(data._ids), width)
        return data
