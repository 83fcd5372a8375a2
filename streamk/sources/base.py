"""What the engine needs from a source of events: records with positions, seek, commit.

A position is ``(partition, offset)``; the engine's snapshots store, per partition, the
*next* offset to read, so a restart seeks there and every event affects the model
exactly once. Kafka topics, recorded logs and in-memory iterables all look alike here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Record", "Source", "RebalanceHandler"]

#: called with the partitions assigned or about to be revoked
RebalanceHandler = Callable[[list[int]], None]


@dataclass(slots=True)
class Record:
    """One message: its original bytes and where it came from.

    ``value`` may carry an already-built event (in-memory sources, whose ``payload`` is
    then ``None`` until a dead letter needs it); otherwise the engine decodes ``payload``.
    """

    payload: bytes | None
    partition: int
    offset: int
    timestamp_ms: int | None = None
    value: Any = None


class Source(ABC):
    """A partitioned, replayable stream of :class:`Record`.

    Sources call the engine's rebalance handlers (set with :meth:`on_rebalance`) from
    inside :meth:`poll`: ``on_revoked`` before partitions go away (snapshot and commit
    there), ``on_assigned`` after new ones arrive (seek there).
    """

    #: topic name or file path, used in snapshots' ``stream`` map and dead letters
    name: str

    def __init__(self) -> None:
        self._on_assigned: RebalanceHandler | None = None
        self._on_revoked: RebalanceHandler | None = None

    def on_rebalance(self, assigned: RebalanceHandler, revoked: RebalanceHandler) -> None:
        """Register the engine's callbacks."""
        self._on_assigned = assigned
        self._on_revoked = revoked

    @abstractmethod
    def poll(self, max_records: int, timeout: float) -> list[Record]:
        """Up to ``max_records`` records, waiting at most ``timeout`` seconds for the first."""

    @abstractmethod
    def seek(self, partition: int, offset: int) -> None:
        """Read ``partition`` from ``offset`` on (the next record returned has that offset)."""

    def committed(self, partitions: list[int]) -> dict[int, int]:
        """The group's committed next offsets, where a source has them."""
        return {}

    def commit(  # noqa: B027 - optional hook
        self, positions: dict[int, int], metadata: str | None = None
    ) -> None:
        """Record ``positions`` (partition -> next offset) as processed, with ``metadata``
        (which model's snapshot covers them); default: nothing."""

    @abstractmethod
    def assignment(self) -> list[int]:
        """Partitions currently owned by this reader."""

    def exhausted(self) -> bool:
        """True when a finite source has nothing more to give (a live topic never is)."""
        return False

    def lag(self) -> int | None:
        """Records not yet read, where the source can tell cheaply."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and files."""
