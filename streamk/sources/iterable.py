"""Any iterator of ``(x, y)`` pairs (a river dataset, a generator) as a one-partition source.

The offset of a record is its index in the iteration, so a restart from a snapshot
skips exactly the events the snapshot has learned, provided the iterable replays the
same sequence (river datasets and seeded synthetic streams do).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..engine.events import Event
from .base import Record, Source

__all__ = ["IterableSource"]


class IterableSource(Source):
    """Events from an iterable of ``(x, y)`` (``y=None`` for an event to score only).

    Parameters
    ----------
    data
        An iterable, or a zero-argument callable that returns a fresh iterator (needed to
        seek backwards, e.g. after a restart).
    name
        Name recorded in snapshots and dead letters.
    """

    def __init__(
        self, data: Iterable[tuple[Any, Any]] | Callable[[], Iterable], name: str = "iterable"
    ):
        super().__init__()
        self.name = name
        self._factory = data if callable(data) else None
        self._data = None if callable(data) else data
        self._iter: Iterator | None = None
        self._next = 0
        self._done = False
        self._assigned = False

    def assignment(self) -> list[int]:
        return [0]

    def seek(self, partition: int, offset: int) -> None:
        if partition != 0:
            raise ValueError(f"an iterable source has one partition (0), not {partition}")
        if offset < self._next or self._iter is None:
            if self._factory is not None:
                self._iter = iter(self._factory())
            elif self._iter is None:
                self._iter = iter(self._data)
            else:
                raise ValueError("cannot seek backwards in a one-shot iterable; pass a callable")
            self._next = 0
        skip = offset - self._next
        consumed = sum(1 for _ in itertools.islice(self._iter, skip))
        self._next += consumed
        self._done = False

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        if not self._assigned:
            self._assigned = True
            if self._on_assigned is not None:
                self._on_assigned([0])
        if self._iter is None:
            self.seek(0, 0)
        out = []
        for x, y in itertools.islice(self._iter, max_records):
            out.append(Record(None, 0, self._next, None, Event(x, y)))
            self._next += 1
        if len(out) < max_records:
            self._done = True
        return out

    def exhausted(self) -> bool:
        return self._done
