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

__all__ = ["Committed", "Record", "Source", "RebalanceHandler"]

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


@dataclass(frozen=True, slots=True)
class Committed:
    """A group's committed position of one partition: the next offset, and its metadata.

    ``metadata`` is the string stored with the commit (the engine puts the model name
    and snapshot seq there, design §7); ``""`` when none was stored *or the broker does
    not keep it*: tansu 0.6 accepts commit metadata and returns it as null on both
    transports, so readers must treat ``""`` as "author unknown".
    """

    offset: int
    metadata: str = ""


class Source(ABC):
    """A partitioned, replayable stream of :class:`Record`.

    Sources call the engine's rebalance handlers (set with :meth:`on_rebalance`) from
    inside :meth:`poll`: ``on_revoked`` before partitions go away (snapshot and commit
    there), ``on_assigned`` after new ones arrive (seek there).
    """

    #: topic name or file path, used in snapshots' ``stream`` map and dead letters
    name: str
    #: broker outages begun and ended (network sources; see ``sources.health``), for metrics
    outages: int = 0
    reconnects: int = 0

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

    def committed(self, partitions: list[int]) -> dict[int, Committed]:
        """The group's committed positions, where a source has them (absent: never committed)."""
        return {}

    def commit(  # noqa: B027 - optional hook
        self, positions: dict[int, int], metadata: str | None = None
    ) -> None:
        """Record ``positions`` (partition -> next offset) as processed; default: nothing.

        ``metadata`` (a short string) is stored with every partition's offset where the
        source can, and read back by :meth:`committed`.
        """

    def beyond_end(self, targets: dict[int, int]) -> dict[int, int]:
        """Partitions whose target offset lies past the partition's end, with their start.

        ``targets`` maps assigned partitions to the offsets the engine is about to seek
        to (e.g. from a snapshot). The answer maps each partition whose target is beyond
        the last record + 1 (the topic was deleted and recreated, or the snapshot comes
        from another cluster) to the partition's first available offset, where an
        ``earliest`` policy would resume. Finite and in-memory sources: never (``{}``).
        """
        return {}

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
