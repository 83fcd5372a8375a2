"""What the engine needs from a source of events: records with positions, seek, commit.

A position is ``(partition, offset)``; the engine's snapshots store, per partition, the
*next* offset to read, so a restart seeks there and every event affects the model
exactly once. Kafka topics, recorded logs and in-memory iterables all look alike here.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

__all__ = [
    "Committed",
    "Record",
    "RecordColumns",
    "Source",
    "RebalanceHandler",
    "records_before",
    "warn_removed_before_read",
]

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


class RecordColumns(Sequence[Record]):
    """A polled batch held as columns; a :class:`Record` is made only when one is asked for.

    A source that receives messages in bulk (confluent-kafka's ``consume``) returns this
    instead of a list: the engine decodes ``payloads`` in one pass
    (:func:`streamk.engine.runs.split_runs`) and builds a ``Record`` only for a dead
    letter or a fallback, so the hot path makes no per-message Python object. Indexing,
    slicing, iteration and ``==`` behave as on the equivalent ``list[Record]``.

    Parameters
    ----------
    payloads, partitions, offsets
        One entry per message, in the batch's order.
    timestamp
        ``timestamp(i)``: message ``i``'s timestamp in ms, or ``None`` (asked lazily).
    """

    __slots__ = ("payloads", "partitions", "offsets", "_timestamp", "_start")

    def __init__(
        self,
        payloads: list[bytes],
        partitions: list[int],
        offsets: list[int],
        timestamp: Callable[[int], int | None],
        _start: int = 0,
    ):
        self.payloads, self.partitions, self.offsets = payloads, partitions, offsets
        self._timestamp, self._start = timestamp, _start

    def __len__(self) -> int:
        return len(self.payloads)

    @overload
    def __getitem__(self, i: int) -> Record: ...
    @overload
    def __getitem__(self, i: slice) -> RecordColumns: ...
    def __getitem__(self, i: int | slice) -> Record | RecordColumns:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self.payloads))
            if step != 1:
                return [self[j] for j in range(start, stop, step)]  # type: ignore[return-value]
            return RecordColumns(
                self.payloads[start:stop],
                self.partitions[start:stop],
                self.offsets[start:stop],
                self._timestamp,
                self._start + start,
            )
        if i < 0:
            i += len(self.payloads)
        if not 0 <= i < len(self.payloads):
            raise IndexError("record index out of range")
        payload = self.payloads[i]
        return Record(
            b"" if payload is None else payload,
            self.partitions[i],
            self.offsets[i],
            self._timestamp(self._start + i),
        )

    def __iter__(self) -> Iterator[Record]:
        for i in range(len(self.payloads)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    def __add__(self, other: Sequence[Record]) -> list[Record]:
        return [*self, *other]

    def __radd__(self, other: Sequence[Record]) -> list[Record]:
        return [*other, *self]

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, like a list

    def __repr__(self) -> str:
        return f"RecordColumns({len(self)} records)"


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
    #: whether the log can be deleted and recreated under a running reader (a Kafka topic):
    #: the engine then checks, at each checkpoint, that it still holds what was learned
    may_be_recreated: bool = False
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

    def topic_id(self) -> str | None:
        """The log's identity as the broker names it now, or ``None`` where there is none.

        A Kafka topic deleted and recreated gets a new topic id (KIP-516): while the id
        is the one read at assignment, every record read since comes from the same log
        (the engine's check before each snapshot). ``None``: no id to compare (a finite
        source, a broker without ids, the topic missing, an error): the engine then
        reads records back instead (``records_before``).
        """
        return None

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


#: A probe of a Kafka source: the first record fetched from ``target - 1`` per partition,
#: as ``(offset, timestamp_ms, payload)`` (missing: nothing came).
Probe = Callable[[dict[int, int]], dict[int, tuple[int, int | None, bytes]]]


def records_before(
    probe: Probe, targets: dict[int, int], closing: bool
) -> dict[int, tuple[int | None, bytes]]:
    """The record at ``target - 1`` of each partition, as ``(timestamp_ms, payload)``, read
    with ``probe`` (both Kafka sources' ``records_before``).

    What the engine compares with the last record its snapshot learned: a topic deleted and
    recreated since holds another record there. Missing where it cannot be read (past the
    end, removed by retention or compaction, nothing within the probe's time).
    """
    targets = {int(p): int(t) for p, t in targets.items() if int(t) > 0}
    if closing or not targets:
        return {}
    return {
        p: (stamp, payload)
        for p, (offset, stamp, payload) in probe(targets).items()
        if offset == targets[p] - 1
    }


def warn_removed_before_read(
    log: logging.Logger, topic: str, partition: int, position: int, start: int
) -> None:
    """The WARNING of a read position below the log's start (``start``), where both Kafka
    sources move it: retention removed those records before they were read. None for
    position 0 (a partition read from its beginning) nor at the start itself."""
    if 0 < position < start:
        log.warning(
            "%s[%d]: offsets %d..%d were removed (retention) before they were read; reading "
            "from the log start %d",
            topic,
            partition,
            position,
            start - 1,
            start,
        )
