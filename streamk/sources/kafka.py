"""A Kafka topic as a :class:`~streamk.sources.base.Source`, on kafka-python.

Two modes:

* **group** (``group_id`` given, ``partitions`` not): the consumer subscribes with a
  rebalance listener; Kafka spreads partitions over the engines of one group (design §9).
* **manual** (``partitions=[...]``): a fixed assignment, no group membership; offsets
  can still be committed and read when a ``group_id`` is given. For tests and
  single-worker runs.

Offsets are never committed implicitly (``enable_auto_commit`` is forced off, and
:meth:`KafkaSource.close` commits nothing): the engine commits through
:meth:`KafkaSource.commit` only after the snapshot covering them is durable (design §7).

Positions are never moved by the client either (``auto_offset_reset`` is forced to
``"none"``): a fetch past the log's end (the topic deleted and recreated with fewer
records while it was read) or a log truncated under the position (KIP-320) raises
:class:`~streamk.errors.OffsetOutOfRange` from :meth:`KafkaSource.poll`, for the engine
to decide, where the client would have jumped to the start or the end in silence. A
position below the log's start (records removed by retention before they were read)
moves to the start, as before, with a WARNING unless it was the partition's offset 0.

Rebalances (group mode) follow the contract of :class:`~streamk.sources.base.Source`:
the engine's *revoked* handler runs before partitions go away, while this member is
still their owner (snapshot and commit there); its *assigned* handler runs after the
new assignment is in place and before fetching starts (seek there). Both run while
the engine's thread is blocked inside :meth:`KafkaSource.poll`, so they never race
with record processing.

Threading (kafka-python 3): the client calls rebalance listeners on its IO thread,
where a blocking consumer call (``commit``, ``committed``) raises ``RuntimeError``.
So the listener here is an ``AsyncConsumerRebalanceListener`` that runs the engine's
handler on a short-lived worker thread and awaits it: the handler may call any method
of this source, and heartbeats keep flowing while it runs. A handler should still be
prompt (well below ``max_poll_interval_ms``). On kafka-python 2.x the handler runs
inline on the polling thread, as that client always did.

Partitions *lost* (KIP-429: the member was evicted, e.g. after missing
``max_poll_interval_ms``) are not revoked: committing would fail or overwrite the new
owner's position. The handler set with :meth:`KafkaSource.on_lost` is called (discard
in-flight work; do not commit); without one the event is only logged and recorded in
:attr:`KafkaSource.rebalances`. The next assignment arrives through *assigned* as usual.

tansu 0.6 reports end offsets wrongly (the start of the last batch, design §8), so
:meth:`KafkaSource.lag` is approximate there; never use it to decide a topic is drained.
:meth:`KafkaSource.beyond_end` is built to be right on tansu and on Apache Kafka alike.

Outages: connection errors never escape :meth:`~KafkaSource.poll` (it returns ``[]``
and backs off, each pause bounded by the poll timeout) nor :meth:`~KafkaSource.committed`
(retried within ``timeout_s``, then :class:`~streamk.errors.BrokerError`);
:meth:`~KafkaSource.commit` raises :class:`CommitFailedError`, at once while the link is
known to be down. One WARNING line marks each loss and each recovery;
:attr:`KafkaSource.outages` and :attr:`KafkaSource.reconnects` count them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka import errors as kafka_errors
from kafka.future import Future
from kafka.structs import OffsetAndMetadata

from ..errors import BrokerError, ConfigError, OffsetOutOfRange
from .base import (
    Committed,
    RebalanceHandler,
    Record,
    Source,
    records_before,
    warn_removed_before_read,
)
from .health import ConnectionHealth

__all__ = ["KafkaSource", "CommitFailedError", "DEFAULT_CONSUMER_CONFIG"]

log = logging.getLogger(__name__)

#: Consumer settings streamk chooses; ``consumer_config`` may override all but
#: ``enable_auto_commit`` (offsets are committed by the engine only). ``read_committed``:
#: a transactional producer's records are read once their transaction commits, never
#: before, and an aborted one's never (kafka-python reads uncommitted by default, where
#: an event of a transaction that then aborts would have been learned; librdkafka's
#: default is this one). The source itself then sets ``auto_offset_reset = "none"`` (see
#: the module docstring); ``"earliest"`` here is for a plain consumer given these
#: settings (the benchmarks' raw ceiling).
DEFAULT_CONSUMER_CONFIG: dict[str, Any] = {
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    "isolation_level": "read_committed",
}

_ASYNC_LISTENER = getattr(kafka, "AsyncConsumerRebalanceListener", None)
#: the probe reads one record: small fetches (kafka-python spelling)
PROBE_FETCH = {"max_partition_fetch_bytes": 1 << 16}
#: kafka-python 3's error for a log truncated under the position (KIP-320), when present
_TRUNCATED = getattr(kafka_errors, "LogTruncationError", kafka_errors.OffsetOutOfRangeError)


class CommitFailedError(BrokerError):
    """An offset commit was refused or timed out (e.g. the group rebalanced meanwhile).

    The snapshot still holds the offsets, so nothing is lost: the next owner of the
    partition restores it and seeks there; the group offset is only a fallback.
    """


class KafkaSource(Source):
    """Consume one topic with kafka-python.

    Parameters
    ----------
    bootstrap_servers : str or list of str
        ``host:port`` of one or more brokers.
    topic : str
        The topic to read; also the source's :attr:`name` in snapshots and dead letters.
    group_id : str or None
        Consumer group. Required in group mode; optional in manual mode (needed there
        only for :meth:`commit` and :meth:`committed`). Default: None.
    partitions : list of int or None
        Manual assignment instead of group membership. Default: None (group mode).
    consumer_config : dict or None
        Extra ``KafkaConsumer`` settings, passed through unchanged (security:
        ``security_protocol``, ``ssl_cafile``, ``sasl_mechanism``,
        ``sasl_plain_username`` ...; tuning: ``max_partition_fetch_bytes`` ...).
        Unknown keys raise :class:`~streamk.errors.ConfigError`. Default: None.
    max_poll_interval_ms : int
        Longest allowed gap between two :meth:`poll` calls before the group evicts this
        member; tansu also waits this long to complete a join, so tests use ~3000.
        A key of the same name in ``consumer_config`` wins. Default: 300000.
    timeout_s : float
        Bound on every blocking call other than :meth:`poll` (commit, committed,
        close). Default: 10.0.
    join_timeout_s : float or None
        Longest wait inside :meth:`poll` for a pending group join to complete (see
        ``_complete_join``). Default: None, meaning the rebalance timeout
        (``max_poll_interval_ms``) plus ``timeout_s``.
    commit_metadata : str
        Metadata string stored with each commit when :meth:`commit` is given none
        (keep it small; a snapshot id fits). Default: "".
    probe_timeout_s : float
        Longest wait of :meth:`beyond_end` for its probe fetch. Default: 5.0.

    Attributes
    ----------
    consumer : kafka.KafkaConsumer
        The underlying client, for settings this class does not expose.
    rebalances : list of (str, list of int)
        Every rebalance callback seen, in order: ``("revoked" | "assigned" | "lost",
        partitions)``; handy in logs and tests.
    health : ConnectionHealth
        The link's state; :attr:`outages`, :attr:`reconnects` and :attr:`connected`
        read it.
    """

    may_be_recreated = True  # a topic: deleted and recreated under its readers

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        group_id: str | None = None,
        *,
        partitions: Iterable[int] | None = None,
        consumer_config: dict[str, Any] | None = None,
        max_poll_interval_ms: int = 300_000,
        timeout_s: float = 10.0,
        join_timeout_s: float | None = None,
        commit_metadata: str = "",
        probe_timeout_s: float = 5.0,
    ) -> None:
        super().__init__()
        self.name = topic
        self.topic = topic
        self.group_id = group_id
        self.partitions = None if partitions is None else sorted({int(p) for p in partitions})
        if self.partitions is None and group_id is None:
            raise ConfigError(
                f"KafkaSource({topic!r}) needs a group_id (group mode) or partitions=[...] "
                "(manual assignment)."
            )
        if self.partitions is not None and not self.partitions:
            raise ConfigError(f"KafkaSource({topic!r}): partitions=[] assigns nothing.")
        user = dict(consumer_config or {})
        if user.get("enable_auto_commit"):
            raise ConfigError(
                "consumer_config enable_auto_commit=True is not allowed: streamk commits "
                "offsets itself, after the snapshot that covers them is durable."
            )
        if user.get("auto_offset_reset", "none") != "none":
            raise ConfigError(
                f"consumer_config auto_offset_reset={user['auto_offset_reset']!r} is not "
                "allowed: streamk positions every partition itself, and a position past the "
                "log's end is the engine's to decide (on_offset_beyond_end), never a silent "
                "jump."
            )
        config: dict[str, Any] = {
            **DEFAULT_CONSUMER_CONFIG,
            "max_poll_interval_ms": int(max_poll_interval_ms),
            **user,
            "bootstrap_servers": bootstrap_servers,
            "group_id": group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "none",
        }
        self.timeout_ms = int(timeout_s * 1000)
        if join_timeout_s is None:  # a join waits up to the rebalance timeout, then syncs
            join_timeout_s = config["max_poll_interval_ms"] / 1000 + timeout_s
        self.join_timeout_ms = int(join_timeout_s * 1000)
        self.commit_metadata = commit_metadata
        self.probe_timeout_s = probe_timeout_s
        # what a short-lived probe consumer needs (security settings, no group)
        self._probe_config = {
            k: v
            for k, v in config.items()
            if k not in ("group_id", "max_poll_interval_ms", "auto_offset_reset")
            and not k.startswith(("session_", "heartbeat_", "partition_assignment"))
        }
        self.health = ConnectionHealth(f"Kafka at {bootstrap_servers} (topic {topic!r})", log)
        self.rebalances: list[tuple[str, list[int]]] = []
        self._on_lost: RebalanceHandler | None = None
        self._closing = False
        self._announced = False
        self._next: dict[int, int] = {}  # partition -> next offset to be returned
        self._epoch: dict[int, int] = {}  # partition -> leader epoch of the last record
        self._probe_consumer: KafkaConsumer | None = None  # see _probe
        self._admin: KafkaAdminClient | None = None  # see topic_id
        try:
            self.consumer = KafkaConsumer(**config)
        except kafka_errors.KafkaConfigurationError as exc:
            raise ConfigError(f"invalid consumer_config for topic {topic!r}: {exc}") from exc
        except kafka_errors.KafkaError as exc:
            raise BrokerError(
                f"cannot connect to Kafka at {bootstrap_servers} for topic {topic!r}: {exc}. "
                "Check the address and that the broker is running."
            ) from exc
        if self.partitions is not None:
            self.consumer.assign([TopicPartition(topic, p) for p in self.partitions])
        else:
            self.consumer.subscribe([topic], listener=_make_listener(self))

    @property
    def outages(self) -> int:  # type: ignore[override]
        """Outage episodes begun (one WARNING line each)."""
        return self.health.outages

    @property
    def reconnects(self) -> int:  # type: ignore[override]
        """Outage episodes ended by a reconnection."""
        return self.health.reconnects

    @property
    def connected(self) -> bool:
        """False from the moment a loss is noticed until the link works again."""
        return self.health.up

    # -- engine callbacks -----------------------------------------------------------------
    def on_lost(self, handler: RebalanceHandler | None) -> None:
        """Register a handler for partitions lost by eviction (discard, never commit)."""
        self._on_lost = handler

    # -- Source ---------------------------------------------------------------------------
    def poll(self, max_records: int, timeout: float) -> list[Record]:
        """Up to ``max_records`` records, per-partition order kept, partitions in order.

        Rebalance handlers run inside this call. Waits at most ``timeout`` seconds
        for data (a group join may take one extra rebalance timeout on tansu). A
        connection error returns ``[]`` after a pause of at most ``timeout``.
        """
        if self.partitions is not None and not self._announced:
            self._announced = True
            self.rebalances.append(("assigned", list(self.partitions)))
            if self._on_assigned is not None:
                self._on_assigned(list(self.partitions))
        try:
            self._complete_join()
            batches = self.consumer.poll(
                timeout_ms=max(0, int(timeout * 1000)), max_records=max(1, int(max_records))
            )
        except (kafka_errors.OffsetOutOfRangeError, _TRUNCATED) as exc:
            self._out_of_range(exc)
            return []
        except kafka_errors.NoOffsetForPartitionError as exc:
            # a partition the engine did not position (it refused its assignment): from
            # its start, as the client's reset did; the engine learns nothing from it
            for tp in exc.args[0] if exc.args else ():
                self.consumer.seek_to_beginning(tp)
            return []
        except kafka_errors.KafkaError as exc:
            if not _is_connection_error(exc):
                raise
            time.sleep(min(self.health.failed(f"{type(exc).__name__}: {exc}"), max(0.0, timeout)))
            return []
        out: list[Record] = []
        for tp in sorted(batches, key=lambda t: t.partition):
            msgs = batches[tp]
            if not msgs:
                continue
            p = tp.partition
            out.extend(
                Record(b"" if m.value is None else m.value, p, m.offset, m.timestamp) for m in msgs
            )
            last = msgs[-1]
            self._next[p] = last.offset + 1
            epoch = getattr(last, "leader_epoch", None)
            if epoch is not None:
                self._epoch[p] = epoch
        # records may come from the client's prefetch buffer: only a live connection
        # proves the link is back
        linked = self._linked()
        if linked and not self.health.up:
            self.health.ok()
        else:
            self.health.observe(linked)
        return out

    def _out_of_range(self, exc: Exception) -> None:
        """A fetch the broker refused as out of range, or a log truncated under our
        position: a position below the log's start moves there (retention removed the
        records before they were read; a WARNING unless it was offset 0); any other raises
        :class:`~streamk.errors.OffsetOutOfRange` (never a silent jump)."""
        fetch = isinstance(exc, kafka_errors.OffsetOutOfRangeError)
        refused = getattr(exc, "divergent_offsets", None) or (exc.args[0] if exc.args else {})
        positions = {  # a fetch error names the refused offset; a truncation, its end
            tp.partition: int(where) if fetch else self._next.get(tp.partition, 0)
            for tp, where in (refused.items() if isinstance(refused, dict) else ())
            if tp.topic == self.topic
        }
        tps = {p: TopicPartition(self.topic, p) for p in positions}
        try:
            low = self.consumer.beginning_offsets(list(tps.values()), timeout_ms=self.timeout_ms)
        except kafka_errors.KafkaError as err:
            raise BrokerError(f"could not read the log start of {self.topic!r}: {err}") from err
        past: dict[int, int] = {}
        for p, pos in positions.items():
            start = int(low.get(tps[p], 0))
            if fetch and pos < start:
                warn_removed_before_read(log, self.topic, p, pos, start)
                self.seek(p, start)
            else:
                past[p] = pos
        if past:
            raise OffsetOutOfRange(
                f"{self.topic}: the broker refused the read positions {past} as out of range "
                f"({type(exc).__name__}): the log no longer reaches them",
                past,
            )

    def _linked(self) -> bool:
        """Whether any broker connection is up: a local look, no network call.

        Reads kafka-python's client (``consumer._client.connected(node)``, present in
        2.x and 3.x); where that is unavailable it answers True and only raised errors
        mark an outage.
        """
        client = getattr(self.consumer, "_client", None)
        connected = getattr(client, "connected", None)
        if connected is None:
            return True
        try:
            nodes: list[Any] = [  # BrokerMetadata.nodeId (2.x), node_id (3.x)
                getattr(b, "node_id", getattr(b, "nodeId", None)) for b in client.cluster.brokers()
            ]
            group = getattr(self.consumer, "_coordinator", None)
            coordinator = getattr(group, "coordinator_id", None)
            if coordinator is not None:
                nodes.append(coordinator)
            return any(connected(n) for n in nodes)
        except Exception:  # noqa: BLE001 - a private API changed: rely on raised errors
            return True

    def _complete_join(self) -> None:
        """Drive a pending group (re)join to its end, bounded by ``join_timeout_s``.

        kafka-python 3.0.12 discards a join that completes between two polls and sends
        a fresh JoinGroup (a completed join task is replaced, not read), so with short
        poll timeouts and work between polls a member can rejoin forever, triggering a
        rebalance of the whole group each time. Nothing is fetched during an eager
        rebalance anyway, so waiting here for the join costs no throughput.
        """
        coordinator = getattr(self.consumer, "_coordinator", None)
        if self.partitions is not None or coordinator is None:
            return
        if coordinator.need_rejoin():
            coordinator.poll(timeout_ms=self.join_timeout_ms)

    def seek(self, partition: int, offset: int) -> None:
        """Read ``partition`` from ``offset`` on; the partition must be assigned."""
        try:
            self.consumer.seek(TopicPartition(self.topic, int(partition)), int(offset))
        except ValueError as exc:
            raise ValueError(
                f"cannot seek {self.topic}[{partition}] to {offset}: {exc} "
                f"(assigned: {self.assignment()})"
            ) from exc
        self._next[int(partition)] = int(offset)
        self._epoch.pop(int(partition), None)

    def committed(self, partitions: list[int]) -> dict[int, Committed]:
        """The group's committed positions; partitions never committed are left out.

        Connection errors are retried with backoff for up to ``timeout_s``.

        Raises
        ------
        BrokerError
            If the broker could not be reached within ``timeout_s`` or refused.
        """
        if self.group_id is None or self._closing:
            return {}
        out: dict[int, Committed] = {}
        deadline = time.monotonic() + self.timeout_ms / 1000
        for p in partitions:
            tp = TopicPartition(self.topic, int(p))
            while True:
                try:
                    got = self.consumer.committed(tp, metadata=True, timeout_ms=self.timeout_ms)
                    break
                except kafka_errors.KafkaError as exc:
                    left = deadline - time.monotonic()
                    if _is_connection_error(exc) and left > 0:
                        time.sleep(min(self.health.failed(exc), left))
                        continue
                    raise BrokerError(
                        f"could not read committed offset of {self.topic}[{p}] for group "
                        f"{self.group_id!r}: {type(exc).__name__}: {exc}"
                    ) from exc
            if got is not None and got.offset is not None and got.offset >= 0:
                out[int(p)] = Committed(int(got.offset), got.metadata or "")
        return out

    def commit(self, positions: dict[int, int], metadata: str | None = None) -> None:
        """Commit ``positions`` (partition -> next offset) for the group, synchronously.

        ``metadata`` (default: ``commit_metadata``) is stored with each partition's
        offset (``OffsetAndMetadata.metadata``).

        Raises
        ------
        CommitFailedError
            If the broker refused the commit, it did not finish within ``timeout_s``,
            or the link to the broker is known to be down (fails at once then).
        """
        if not positions:
            return
        if self.group_id is None:
            raise ConfigError(
                f"KafkaSource({self.topic!r}) has no group_id, so it cannot commit offsets."
            )
        if not self.health.up or self._closing:
            raise CommitFailedError(
                f"not committing {dict(sorted(positions.items()))} on {self.topic!r}: "
                + ("the source is closed." if self._closing else "the broker is unreachable.")
                + " The snapshot still holds these offsets; a restart resumes from it."
            )
        meta = self.commit_metadata if metadata is None else metadata
        offsets = {
            TopicPartition(self.topic, int(p)): OffsetAndMetadata(
                int(off), meta, self._commit_epoch(int(p), int(off))
            )
            for p, off in positions.items()
        }
        try:
            self.consumer.commit(offsets, timeout_ms=self.timeout_ms)
        except kafka_errors.KafkaError as exc:
            if _is_connection_error(exc):
                self.health.failed(f"{type(exc).__name__}: {exc}")
            raise CommitFailedError(
                f"committing {dict(sorted(positions.items()))} on {self.topic!r} for group "
                f"{self.group_id!r} failed: {type(exc).__name__}: {exc}. The snapshot still "
                "holds these offsets; a restart resumes from it."
            ) from exc

    def _commit_epoch(self, partition: int, offset: int) -> int:
        # KIP-320: the leader epoch of the last consumed record, when the commit is
        # exactly our read position; -1 (unknown) otherwise.
        if self._next.get(partition) == offset:
            return self._epoch.get(partition, -1)
        return -1

    def assignment(self) -> list[int]:
        if self._closing:
            return []
        return sorted(tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic)

    def beyond_end(self, targets: dict[int, int]) -> dict[int, int]:
        """Partitions whose target is past the end of the log, mapped to their first offset.

        A target ``T`` is valid when ``T <= end``, that is when offset ``T - 1`` exists
        (or ``T == 0``). Decided in two steps, correct on Apache Kafka and on tansu 0.6:

        1. ``T <= high``, the reported end offset (high watermark): valid. Apache Kafka
           reports the true end; tansu reports at most the true end (the start of the
           last batch), so ``T <= high`` proves validity on both.
        2. Otherwise a short-lived consumer (no group, nothing committed) fetches from
           ``T - 1``: a record with offset ``>= T - 1`` proves ``T - 1`` is (or was)
           in the log, so ``T`` is valid. Nothing within ``probe_timeout_s``, or only
           records below ``T - 1``, means ``T - 1`` is past the end: Apache Kafka answers
           OFFSET_OUT_OF_RANGE and the probe's ``auto_offset_reset="earliest"`` restarts
           at the log start; tansu answers with no records at all (measured on both
           transports: a seek past the end on tansu is silent, no error).

        Records arriving during the probe can only turn "beyond" into "valid", which is
        then true. Connection errors raise :class:`~streamk.errors.BrokerError`.
        """
        if self._closing:
            return {}
        targets = {int(p): int(t) for p, t in targets.items() if int(t) > 0}
        if not targets:
            return {}
        tps = {p: TopicPartition(self.topic, p) for p in targets}
        try:
            low = self.consumer.beginning_offsets(list(tps.values()), timeout_ms=self.timeout_ms)
            high = self.consumer.end_offsets(list(tps.values()), timeout_ms=self.timeout_ms)
        except kafka_errors.KafkaError as exc:
            raise BrokerError(
                f"could not read the offset range of {self.topic!r}: {type(exc).__name__}: {exc}"
            ) from exc
        doubtful = {p: t for p, t in targets.items() if t > int(high.get(tps[p], -1))}
        if not doubtful:
            return {}
        first = {p: got[0] for p, got in self._probe(doubtful).items()}
        return {
            p: int(low.get(tps[p], 0))
            for p, t in doubtful.items()
            if first.get(p) is None or first[p] < t - 1
        }

    def records_before(self, targets: dict[int, int]) -> dict[int, tuple[int | None, bytes]]:
        """The record at ``target - 1`` of each partition, as ``(timestamp_ms, payload)``
        (:func:`streamk.sources.base.records_before`); connection errors raise
        :class:`~streamk.errors.BrokerError`."""
        return records_before(self._probe, targets, self._closing)

    def _probe(self, targets: dict[int, int]) -> dict[int, tuple[int, int | None, bytes]]:
        """The first record fetched from ``target - 1`` per partition, as ``(offset,
        timestamp_ms, payload)`` (missing: nothing came).

        Read by a fresh consumer each time (no group, nothing committed): one kept between
        reads, its partitions paused meanwhile, was ~3 ms a read instead of ~20, but missed
        records within the probe's time on tansu 0.6 with several partitions (a resume
        offset then taken for past the end: test_engine_crash, test_scale_out).
        """
        probe = self._prober()
        first: dict[int, tuple[int, int | None, bytes]] = {}
        try:
            tps = {p: TopicPartition(self.topic, p) for p in targets}
            probe.assign(list(tps.values()))
            for p, t in targets.items():
                probe.seek(tps[p], t - 1)
            deadline = time.monotonic() + self.probe_timeout_s
            while len(first) < len(targets) and (left := deadline - time.monotonic()) > 0:
                got = probe.poll(timeout_ms=int(min(left, 0.5) * 1000), max_records=100)
                for tp, msgs in got.items():
                    if msgs and tp.partition not in first:
                        m = msgs[0]
                        first[tp.partition] = (int(m.offset), m.timestamp, m.value or b"")
                        probe.pause(tp)  # answered: stop fetching it
        except kafka_errors.KafkaError as exc:
            raise BrokerError(f"the offset probe on {self.topic!r} failed: {exc}") from exc
        finally:
            self._close_prober()
        return first

    def _prober(self) -> KafkaConsumer:
        """The probe's consumer, made on first use: small fetches (the broker still sends a
        whole first batch), earliest reset (see :meth:`beyond_end`)."""
        if self._probe_consumer is None:
            try:
                self._probe_consumer = KafkaConsumer(
                    **{
                        **self._probe_config,
                        "group_id": None,
                        "auto_offset_reset": "earliest",
                        **PROBE_FETCH,
                    }
                )
            except kafka_errors.KafkaError as exc:
                raise BrokerError(
                    f"could not start the offset probe on {self.topic!r}: {exc}"
                ) from exc
        return self._probe_consumer

    def _close_prober(self) -> None:
        probe, self._probe_consumer = self._probe_consumer, None
        if probe is not None:
            try:
                probe.close(autocommit=False)
            except kafka_errors.KafkaError as exc:
                log.warning("closing the offset probe of %s: %s", self.topic, exc)

    def topic_id(self) -> str | None:
        """The topic's id now (see :meth:`~streamk.sources.base.Source.topic_id`): one
        metadata request by an admin client kept for it (~0.7 ms of CPU, ~0.8 ms wall on
        tansu 0.6; a fresh probe consumer's read of one record was ~15 ms of CPU).
        ``None`` when the broker names no id (older than 2.8, or the topic is missing,
        as between its deletion and its recreation) or does not answer."""
        try:
            if self._admin is None:
                self._admin = KafkaAdminClient(
                    **{
                        k: v
                        for k, v in self._probe_config.items()
                        if k in KafkaAdminClient.DEFAULT_CONFIG
                    },
                    request_timeout_ms=int(self.probe_timeout_s * 1000),
                )
            (topic,) = self._admin.describe_topics([self.topic])
        except (kafka_errors.KafkaError, ValueError, OSError) as exc:
            log.info("could not read the topic id of %s: %s", self.topic, exc)
            return None
        found = topic.get("topic_id")
        if topic.get("error_code") or found is None or not str(found).strip("0-"):
            return None  # (or the null id: a broker that names none)
        return str(found)

    def lag(self) -> int | None:
        """Records between the read position and the last fetched high watermark.

        Cheap (no network call): uses the high watermarks of recent fetch responses.
        ``None`` until both are known. Approximate on tansu 0.6 (wrong end offsets).
        """
        total, known = 0, False
        for p in self.assignment():
            high = self.consumer.highwater(TopicPartition(self.topic, p))
            pos = self._next.get(p)
            if high is None or pos is None:
                continue
            total += max(0, int(high) - pos)
            known = True
        return total if known else None

    def close(self) -> None:
        """Leave the group and close connections, committing nothing; idempotent.

        The revoked handler is *not* called here: snapshot and commit before closing.
        """
        if self._closing:
            return
        self._closing = True
        self._close_prober()
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except kafka_errors.KafkaError as exc:
                log.warning("closing the admin client of %s: %s", self.topic, exc)
        try:
            self.consumer.close(autocommit=False, timeout_ms=self.timeout_ms)
        except kafka_errors.KafkaError as exc:  # closing must not mask the real outcome
            log.warning("closing the consumer of %s: %s", self.topic, exc)

    # -- rebalance dispatch ---------------------------------------------------------------
    def _partitions(self, tps: Iterable[TopicPartition]) -> list[int]:
        return sorted(tp.partition for tp in tps if tp.topic == self.topic)

    def _handler_for(self, kind: str) -> RebalanceHandler | None:
        if kind == "revoked":
            return self._on_revoked
        return self._on_assigned if kind == "assigned" else self._on_lost

    def _prepare(self, kind: str, tps: Iterable[TopicPartition]) -> Callable[[], None] | None:
        """Record the event; return the call to make, or None when there is nothing to do."""
        parts = self._partitions(tps)
        if self._closing:
            return None
        if kind == "lost":
            if self._on_lost is None:  # (a handler says what it does about it)
                log.warning(
                    "partitions %s of %s lost (member evicted): not committing", parts, self.topic
                )
            for p in parts:
                self._next.pop(p, None)
        if kind == "revoked" and not parts:
            return None  # the first join of a fresh member revokes nothing
        self.rebalances.append((kind, parts))
        handler = self._handler_for(kind)
        if handler is None:
            return None
        return lambda: handler(list(parts))

    async def _dispatch_async(self, kind: str, tps: Iterable[TopicPartition]) -> None:
        call = self._prepare(kind, tps)
        if call is None:
            return
        net = getattr(self.consumer, "_net", None)
        if net is None or not hasattr(net, "call_soon_threadsafe"):
            call()  # no IO thread to keep free: run inline
            return
        done = Future()

        def work() -> None:
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - handed back to the IO loop
                net.call_soon_threadsafe(lambda e=exc: done.failure(e))
            else:
                net.call_soon_threadsafe(lambda: done.success(None))

        threading.Thread(target=work, name=f"streamk-rebalance-{kind}", daemon=True).start()
        await done

    def _dispatch_sync(self, kind: str, tps: Iterable[TopicPartition]) -> None:
        call = self._prepare(kind, tps)
        if call is not None:
            call()


def _is_connection_error(exc: BaseException) -> bool:
    """Whether a kafka-python error means "the broker cannot be reached right now"."""
    return isinstance(exc, kafka_errors.KafkaConnectionError) or bool(
        getattr(exc, "retriable", False)
    )


def _make_listener(source: KafkaSource) -> Any:
    """The rebalance listener for this kafka-python version (see the module docstring)."""
    if _ASYNC_LISTENER is not None:

        class _AsyncListener(_ASYNC_LISTENER):  # type: ignore[misc, valid-type]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                await source._dispatch_async("revoked", revoked)

            async def on_partitions_assigned(self, assigned: Any) -> None:
                await source._dispatch_async("assigned", assigned)

            async def on_partitions_lost(self, lost: Any) -> None:
                await source._dispatch_async("lost", lost)

        return _AsyncListener()

    class _SyncListener(kafka.ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            source._dispatch_sync("revoked", revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            source._dispatch_sync("assigned", assigned)

        def on_partitions_lost(self, lost: Any) -> None:
            source._dispatch_sync("lost", lost)

    return _SyncListener()
