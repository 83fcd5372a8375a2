"""A Kafka topic as a :class:`~streamk.sources.base.Source`, on confluent-kafka (librdkafka).

The optional fast transport (``pip install "streamk[kafka-fast]"``), with the same
interface and semantics as :class:`streamk.sources.kafka.KafkaSource`: group or manual
mode, no implicit commits, the engine's *revoked* handler called before partitions go
away and *assigned* after they arrive, *lost* partitions (KIP-429) reported to the
handler set with :meth:`ConfluentKafkaSource.on_lost` and never revoked, and
:meth:`~ConfluentKafkaSource.close` calling no handler and committing nothing.

librdkafka calls rebalance callbacks from inside ``consume()`` on the polling thread,
so handlers may call any method of the source. A seek made in the *assigned* handler
becomes the starting offset of the assignment (librdkafka cannot seek a partition
that is not fetching yet).

``consumer_config`` takes librdkafka's dotted keys (``security.protocol``,
``sasl.mechanism``, ``ssl.ca.location`` ...). The kafka-python spellings of the group
timing keys (``max_poll_interval_ms``, ``session_timeout_ms``,
``heartbeat_interval_ms``) and ``auto_offset_reset`` are translated, so
``streamk.cli.broker.QUICK_GROUP_CONFIG`` works with both transports.

Positions are never moved by librdkafka (``auto.offset.reset`` is forced to
``"error"``): a fetch past the log's end (the topic deleted and recreated with fewer
records while it was read) raises :class:`~streamk.errors.OffsetOutOfRange` from
:meth:`ConfluentKafkaSource.poll`, for the engine to decide; a position below the log's
start (retention) moves to the start, with a WARNING unless it was offset 0.

Call every method from the polling thread (or from a handler): confluent-kafka lets
one call at a time into a consumer, so a call from another thread waits for the one
in progress (a ``committed`` call from another thread while ``consume`` runs was seen
to hang past its timeout). ``committed`` is bounded by ``timeout_s``; lag uses cached
watermarks (no network call) and is approximate on tansu 0.6, whose end offsets are
wrong; :meth:`beyond_end` follows the reasoning of
:meth:`streamk.sources.kafka.KafkaSource.beyond_end`.

Commits are asynchronous. librdkafka's synchronous commit has no timeout and waits as
long as the group coordinator is unreachable; run on a helper thread it still held the
consumer, so the polling thread's next ``consume`` waited behind it for the whole
outage (and for ever in a test whose polling thread restores the link).
:meth:`~ConfluentKafkaSource.commit` hands the offsets to librdkafka without waiting
and then serves the consumer's queue itself until the answer (``on_commit``) arrives,
at most ``timeout_s``; records that come out of the queue meanwhile are held, in
order, for the next :meth:`~ConfluentKafkaSource.poll`. A commit not answered in time
stays queued in librdkafka (commits are sent in order) and its answer is taken in,
and logged, by a later poll; until then later commits fail at once. The snapshot holds
the offsets either way: a commit is the group's bookmark, never the only copy.

Outages: librdkafka reconnects by itself, but reports transport errors to the
application. Here connection errors never escape :meth:`~ConfluentKafkaSource.poll`
(they mark the link down, one WARNING line; a cheap metadata request per backoff step
tells when it is back, one more line), :meth:`~ConfluentKafkaSource.commit` fails with
:class:`~streamk.sources.kafka.CommitFailedError` at once while the link is down and
after ``timeout_s`` at most otherwise, and :meth:`~ConfluentKafkaSource.committed`
retries within ``timeout_s``. After :meth:`~ConfluentKafkaSource.close`, ``assignment``,
``lag``, ``committed`` and ``beyond_end`` answer empty instead of raising.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable
from operator import methodcaller
from typing import Any

from ..errors import BrokerError, ConfigError, OffsetOutOfRange
from .base import (
    Committed,
    RebalanceHandler,
    Record,
    RecordColumns,
    Source,
    records_before,
    warn_removed_before_read,
)
from .health import ConnectionHealth
from .kafka import CommitFailedError

__all__ = ["ConfluentKafkaSource"]

log = logging.getLogger(__name__)
_PARTITION_OF = methodcaller("partition")
_HOLD_BATCH = 1000  # records taken per consume() while a commit waits for its answer


class _Commit:
    """One asynchronous commit: what it was for, and librdkafka's answer once it came."""

    __slots__ = ("what", "answered", "error", "given_up")

    def __init__(self, what: str) -> None:
        self.what = what
        self.answered = False
        self.error: str | None = None  # the refusal, once answered
        self.given_up = False  # commit() stopped waiting: a later poll takes the answer


class _Stamps:
    """Message ``i``'s timestamp in ms (``None`` when the broker gave none), asked lazily."""

    __slots__ = ("msgs", "none")

    def __init__(self, msgs: list[Any], ck: Any):
        self.msgs, self.none = msgs, ck.TIMESTAMP_NOT_AVAILABLE

    def __call__(self, i: int) -> int | None:
        return _timestamp(self.msgs[i], self.none)


def _timestamp(msg: Any, none: int) -> int | None:
    """A message's timestamp in ms; ``None`` when its type is ``none`` (not available)."""
    ts_type, ts = msg.timestamp()
    return None if ts_type == none else ts


SETTING_NAMES = {
    # kafka-python's security settings, as streamk run passes them (config.kafka_settings)
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "max_poll_interval_ms": "max.poll.interval.ms",
    "session_timeout_ms": "session.timeout.ms",
    "heartbeat_interval_ms": "heartbeat.interval.ms",
    "auto_offset_reset": "auto.offset.reset",
    "isolation_level": "isolation.level",
}


def _confluent() -> Any:
    try:
        import confluent_kafka
    except ImportError as exc:
        raise ConfigError(
            "the confluent-kafka transport needs the confluent-kafka package, which is not "
            'installed; install it with `pip install "streamk[kafka-fast]"`, or use '
            "streamk.sources.kafka.KafkaSource (kafka-python)."
        ) from exc
    return confluent_kafka


#: the settings of the consumer's that the admin client of :meth:`ConfluentKafkaSource.
#: topic_id takes (where and how to connect; a consumer's own would only be warned about)
_ADMIN_KEYS = (
    "bootstrap.servers",
    "client.id",
    "security.",
    "ssl.",
    "sasl.",
    "socket.",
    "broker.",
    "reconnect.",
    "api.version",
    "logger",
    "log_level",
)


class ConfluentKafkaSource(Source):
    """Consume one topic with confluent-kafka.

    Parameters
    ----------
    bootstrap_servers : str
        Comma-separated ``host:port`` list.
    topic : str
        The topic to read; also the source's :attr:`name`.
    group_id : str or None
        Consumer group; required in group mode. Default: None.
    partitions : list of int or None
        Manual assignment instead of group membership. Default: None.
    consumer_config : dict or None
        Extra librdkafka settings, passed through (see the module docstring).
        Default: None.
    max_poll_interval_ms : int
        ``max.poll.interval.ms``; a key in ``consumer_config`` wins. Default: 300000.
    timeout_s : float
        Bound on ``commit``, ``committed`` and ``close``. Default: 10.0.
    commit_metadata : str
        Metadata stored with each commit when :meth:`commit` is given none. Default: "".
    probe_timeout_s : float
        Longest wait of :meth:`beyond_end` for its probe fetch. Default: 5.0.
    """

    may_be_recreated = True  # a topic: deleted and recreated under its readers

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        group_id: str | None = None,
        *,
        partitions: Iterable[int] | None = None,
        consumer_config: dict[str, Any] | None = None,
        max_poll_interval_ms: int = 300_000,
        timeout_s: float = 10.0,
        commit_metadata: str = "",
        probe_timeout_s: float = 5.0,
    ) -> None:
        super().__init__()
        ck = _confluent()
        self._ck = ck
        self.name = self.topic = topic
        self.group_id = group_id
        self.partitions = None if partitions is None else sorted({int(p) for p in partitions})
        if self.partitions is None and group_id is None:
            raise ConfigError(
                f"ConfluentKafkaSource({topic!r}) needs a group_id (group mode) or "
                "partitions=[...] (manual assignment)."
            )
        user = {SETTING_NAMES.get(k, k): v for k, v in (consumer_config or {}).items()}
        if str(user.get("enable.auto.commit", "false")).lower() == "true":
            raise ConfigError(
                "consumer_config enable.auto.commit=true is not allowed: streamk commits "
                "offsets itself, after the snapshot that covers them is durable."
            )
        if str(user.get("auto.offset.reset", "error")) != "error":
            raise ConfigError(
                f"consumer_config auto.offset.reset={user['auto.offset.reset']!r} is not "
                "allowed: streamk positions every partition itself, and a position past the "
                "log's end is the engine's to decide (on_offset_beyond_end), never a silent "
                "jump."
            )
        config: dict[str, Any] = {
            "isolation.level": "read_committed",  # (librdkafka's default, said: see kafka.py)
            "max.poll.interval.ms": int(max_poll_interval_ms),
            **user,
            "bootstrap.servers": bootstrap_servers,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
        }
        if "session.timeout.ms" not in config:  # librdkafka needs session <= poll interval
            config["session.timeout.ms"] = min(45_000, int(config["max.poll.interval.ms"]))
        # a group id is needed even for manual mode (librdkafka requires one to commit)
        config["group.id"] = group_id if group_id is not None else f"streamk-manual-{topic}"
        self.timeout_s = timeout_s
        self.commit_metadata = commit_metadata
        self.probe_timeout_s = probe_timeout_s
        self._probe_config = {
            k: v
            for k, v in config.items()
            if k not in ("group.id", "max.poll.interval.ms", "auto.offset.reset")
            and not k.startswith(("session.", "heartbeat.", "partition.assignment"))
        }
        self.health = ConnectionHealth(f"Kafka at {bootstrap_servers} (topic {topic!r})", log)
        self._pending: _Commit | None = None  # the commit librdkafka has not answered yet
        self._held: deque[Any] = deque()  # messages consumed while a commit waited
        self._in_callback = 0  # > 0 while a rebalance callback runs (inside consume())
        self._next_check = 0.0  # while down: when to ask the broker again
        config.setdefault("error_cb", self._error_cb)
        self._user_on_commit = config.pop("on_commit", None)
        config["on_commit"] = self._commit_answered
        self.rebalances: list[tuple[str, list[int]]] = []
        self._on_lost: RebalanceHandler | None = None
        self._closing = False
        self._announced = False
        self._in_assign: dict[int, int] | None = None  # seeks made in the assigned handler
        self._next: dict[int, int] = {}
        self._probe_consumer: Any = None  # see _probe
        self._admin: Any = None  # see topic_id
        try:
            self.consumer = ck.Consumer(config)
        except ck.KafkaException as exc:
            raise ConfigError(f"invalid consumer_config for topic {topic!r}: {exc}") from exc
        if self.partitions is None:
            self.consumer.subscribe(
                [topic], on_assign=self._assign_cb, on_revoke=self._revoke_cb, on_lost=self._lost_cb
            )

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

    def _evicted(self, err: Any) -> bool:
        """Whether ``err`` says this member missed ``max_poll_interval_ms`` (said once, as
        what it is: librdkafka leaves the group, the partitions are reported lost, and the
        next poll rejoins; the connection never went away)."""
        if err.code() != self._ck.KafkaError._MAX_POLL_EXCEEDED:
            return False
        log.warning(
            "%s: this worker missed max_poll_interval_ms (a batch took longer); it leaves the "
            "group and rejoins, and its partitions are lost, not committed",
            self.topic,
        )
        return True

    def _error_cb(self, err: Any) -> None:
        """librdkafka's global errors (served inside consume()): transport trouble only."""
        if self._evicted(err):
            return
        if self._is_connection_error(err):
            self.health.failed(err.str() if hasattr(err, "str") else err)
        else:
            log.warning("Kafka client error on %s: %s", self.topic, err)

    def _is_connection_error(self, err: Any) -> bool:
        ke = self._ck.KafkaError
        codes = {
            ke._ALL_BROKERS_DOWN,
            ke._TRANSPORT,
            ke._TIMED_OUT,
            ke._RESOLVE,
            ke._WAIT_COORD,
        }
        # a lone _TRANSPORT (one broker's connection dropped, e.g. recycled) may be brief:
        # the next metadata request (_check_link) or record ends it with a second line.
        return err.code() in codes or (bool(err.retriable()) and not err.fatal())

    def on_lost(self, handler: RebalanceHandler | None) -> None:
        """Register a handler for partitions lost by eviction (discard, never commit)."""
        self._on_lost = handler

    # -- rebalance callbacks (run inside consume()) -----------------------------------------
    def _parts(self, tps: Iterable[Any]) -> list[int]:
        return sorted(tp.partition for tp in tps if tp.topic == self.topic)

    def _assign_cb(self, consumer: Any, tps: list[Any]) -> None:
        self._in_callback += 1
        try:
            self._assign(consumer, tps)
        finally:
            self._in_callback -= 1

    def _assign(self, consumer: Any, tps: list[Any]) -> None:
        parts = self._parts(tps)
        self.rebalances.append(("assigned", parts))
        self._in_assign = {}
        try:
            if self._on_assigned is not None and not self._closing:
                self._on_assigned(list(parts))
            seeks = self._in_assign
        finally:
            self._in_assign = None
        for tp in tps:
            if tp.topic == self.topic and tp.partition in seeks:
                tp.offset = seeks[tp.partition]
                self._next[tp.partition] = tp.offset
        self._start_unpositioned(consumer, [tp for tp in tps if tp.partition not in seeks])
        consumer.assign(tps)

    def _start_unpositioned(self, consumer: Any, tps: list[Any]) -> None:
        """Partitions the handler did not seek start at the group's commit, else at their
        beginning: what ``auto.offset.reset = earliest`` did, which is off (it would also
        move a position past a recreated topic's end in silence)."""
        committed = getattr(consumer, "committed", None)
        if not tps or committed is None:
            return
        try:
            got = {
                tp.partition: tp.offset
                for tp in committed(
                    [self._ck.TopicPartition(tp.topic, tp.partition) for tp in tps],
                    timeout=self.timeout_s,
                )
            }
        except self._ck.KafkaException as exc:
            raise BrokerError(f"could not read committed offsets of {self.topic!r}: {exc}") from exc
        for tp in tps:
            offset = got.get(tp.partition, -1)
            tp.offset = offset if offset >= 0 else self._ck.OFFSET_BEGINNING

    def _revoke_cb(self, consumer: Any, tps: list[Any]) -> None:
        parts = self._parts(tps)
        self._held.clear()  # fetched for the assignment that ends; refetched if reassigned
        self._in_callback += 1
        try:
            if parts and not self._closing:
                self.rebalances.append(("revoked", parts))
                if self._on_revoked is not None:
                    self._on_revoked(list(parts))
        finally:
            self._in_callback -= 1
        consumer.unassign()

    def _lost_cb(self, consumer: Any, tps: list[Any]) -> None:
        parts = self._parts(tps)
        if self._on_lost is None:  # (a handler says what it does about it)
            log.warning(
                "partitions %s of %s lost (member evicted): not committing", parts, self.topic
            )
        self._held.clear()
        for p in parts:
            self._next.pop(p, None)
        self._in_callback += 1
        try:
            if not self._closing:
                self.rebalances.append(("lost", parts))
                if self._on_lost is not None:
                    self._on_lost(list(parts))
        finally:
            self._in_callback -= 1
        consumer.unassign()

    def _commit_answered(self, err: Any, tps: list[Any] | None) -> None:
        """librdkafka's answer to the pending commit (``on_commit``, served inside consume())."""
        pending, self._pending = self._pending, None
        if self._user_on_commit is not None:
            self._user_on_commit(err, tps)
        if pending is None:  # not one of ours (commits are only made by commit())
            return
        failed = [(tp.partition, str(tp.error)) for tp in tps or () if tp.error is not None]
        pending.answered = True
        if err is not None:
            pending.error = str(err)
        elif failed:
            pending.error = f"failed for partitions {failed}"
        if pending.given_up:  # commit() returned without the answer: it is logged here
            if pending.error is None:
                log.info("%s: answered after the call returned: committed", pending.what)
            else:
                log.warning("%s: answered after the call returned: %s", pending.what, pending.error)

    # -- Source ---------------------------------------------------------------------------
    def poll(self, max_records: int, timeout: float) -> list[Record] | RecordColumns:
        """Up to ``max_records`` records, per-partition order kept, partitions in order
        (as columns: see :class:`~streamk.sources.base.RecordColumns`)."""
        if self.partitions is not None and not self._announced:
            self._announced = True
            tps = [self._ck.TopicPartition(self.topic, p) for p in self.partitions]
            self._assign_cb(self.consumer, tps)
        if self._closing:
            return []
        deadline = time.monotonic() + timeout
        n = max(1, int(max_records))
        if not self.health.up:
            self._check_link(timeout)
        if self._held:
            # Records a commit took from the queue come first. consume() still runs (not
            # waiting), so librdkafka sees the application poll (max.poll.interval.ms)
            # and serves its events (a rebalance drops the held records it ends).
            more = self._consume(n, 0.0)
            self._held.extend(more)
            held = self._held
            msgs = [held.popleft() for _ in range(min(n, len(held)))]
        else:
            msgs = self._consume(n, timeout)
        if not msgs:
            return []
        # Columns, not one Record per message: the engine decodes the payloads in one pass
        # and makes a Record only for a dead letter (see RecordColumns).
        if any([m.error() is not None for m in msgs]):
            bad = [m for m in msgs if m.error() is not None]
            msgs = [m for m in msgs if m.error() is None]
            for m in bad:
                self._raise_unless_eof(m.error())
            resets = [m for m in bad if m.error().code() == self._ck.KafkaError._AUTO_OFFSET_RESET]
            if resets:
                # the good records come with the next poll; a re-assignment (seek) resumes
                # their partitions after them, and OffsetOutOfRange loses none of them
                self._next.update((m.partition(), m.offset() + 1) for m in msgs)
                self._held.extendleft(reversed(msgs))
                self._out_of_range(resets)  # raises, or re-positions (a reset's only error)
                return self.poll(max_records, max(0.0, deadline - time.monotonic()))
            if not msgs:
                return []
        partitions = [m.partition() for m in msgs]
        first = partitions[0]
        if partitions.count(first) != len(partitions):  # several partitions: group them
            msgs.sort(key=_PARTITION_OF)  # stable: per-partition order is kept
            partitions = [m.partition() for m in msgs]
        offsets = [m.offset() for m in msgs]
        payloads = [m.value() for m in msgs]
        if None in payloads:  # a tombstone: an empty payload, dead-lettered as undecodable
            payloads = [b"" if v is None else v for v in payloads]
        self._next.update(zip(partitions, [o + 1 for o in offsets]))  # the last one wins
        # records may come from librdkafka's prefetch queue, so they prove nothing about
        # the link: only _check_link's metadata request ends an outage
        return RecordColumns(payloads, partitions, offsets, _Stamps(msgs, self._ck))

    def _consume(self, n: int, timeout: float) -> list[Any]:
        """``consume()``; a connection error marks the link down and pauses (within
        ``timeout``) instead of escaping, any other error is a :class:`BrokerError`."""
        try:
            return self.consumer.consume(num_messages=n, timeout=timeout)
        except self._ck.KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if err is None or not self._is_connection_error(err):
                raise BrokerError(f"consuming {self.topic!r} failed: {exc}") from exc
            time.sleep(min(self.health.failed(err), max(0.0, timeout)))
            return []

    def _check_link(self, timeout: float) -> None:
        """While down: one metadata request per backoff step (bounded by ``timeout``)."""
        now = time.monotonic()
        if now < self._next_check:
            return
        try:
            self.consumer.list_topics(self.topic, timeout=max(0.1, min(1.0, timeout)))
        except self._ck.KafkaException as exc:
            self._next_check = time.monotonic() + self.health.failed(exc)
            return
        self.health.ok()

    def _watermarks(self, partition: int, what: str) -> tuple[int, int]:
        """``(low, high)`` of ``partition`` asked of the broker; :class:`BrokerError`
        naming ``what`` was wanted where it does not answer."""
        try:
            low, high = self.consumer.get_watermark_offsets(
                self._ck.TopicPartition(self.topic, partition), timeout=self.timeout_s
            )
        except self._ck.KafkaException as exc:
            raise BrokerError(
                f"could not read the {what} of {self.topic}[{partition}]: {exc}"
            ) from exc
        return int(low), int(high)

    def _out_of_range(self, errors: list[Any]) -> None:
        """librdkafka's ``_AUTO_OFFSET_RESET`` errors (``auto.offset.reset = error``): a
        position below the log's start moves there (retention; a WARNING unless it was
        offset 0); one past the end raises :class:`~streamk.errors.OffsetOutOfRange`."""
        past: dict[int, int] = {}
        for m in errors:
            if m.error().code() != self._ck.KafkaError._AUTO_OFFSET_RESET:
                continue
            p, pos = m.partition(), m.offset()
            if pos is None or pos < 0:  # no position at all (never seeked): from the start
                pos = -1
            low, _ = self._watermarks(p, "log start")
            if pos <= low:
                warn_removed_before_read(log, self.topic, p, pos, low)
                self._held = deque(m for m in self._held if m.partition() != p)
                self._reassign(p, int(low))
            else:
                past[p] = int(pos)
        if past:
            raise OffsetOutOfRange(
                f"{self.topic}: the broker refused the read positions {past} as out of range: "
                "the log no longer reaches them",
                past,
            )

    def _raise_unless_eof(self, err: Any) -> None:
        if err.code() in (
            self._ck.KafkaError._PARTITION_EOF,
            self._ck.KafkaError._AUTO_OFFSET_RESET,
        ):
            return  # (an out-of-range position was handled by _out_of_range)
        if self._evicted(err):
            return
        if self._is_connection_error(err):
            self.health.failed(err.str())
            return
        raise BrokerError(f"consuming {self.topic!r} failed: {err}")

    def seek(self, partition: int, offset: int) -> None:
        """Read ``partition`` from ``offset`` on; the partition must be assigned."""
        p, off = int(partition), int(offset)
        if self._in_assign is not None:  # inside the assigned handler: start offset
            self._in_assign[p] = off
            return
        if self._held:  # held records of p precede the new position: they go
            self._held = deque(m for m in self._held if m.partition() != p)
        if p not in self.assignment():
            raise ValueError(
                f"cannot seek {self.topic}[{p}] to {off}: not assigned "
                f"(assigned: {self.assignment()})"
            )
        try:
            self.consumer.seek(self._ck.TopicPartition(self.topic, p, off))
        except self._ck.KafkaException:  # not fetching yet: restart the assignment there
            self._reassign(p, off)
        self._next[p] = off

    def _reassign(self, partition: int, offset: int) -> None:
        """Restart the assignment with ``partition`` at ``offset`` (a partition that is not
        fetching, or stopped by a reset error, does not take a seek); the others go on
        after what poll returned (the assignment's own offsets are not positions)."""
        tps = self.consumer.assignment()
        for tp in tps:
            if tp.topic == self.topic:
                tp.offset = (
                    offset
                    if tp.partition == partition
                    else self._next.get(tp.partition, self._ck.OFFSET_INVALID)
                )
        self.consumer.unassign()  # (an assign over the same partitions keeps their state)
        self.consumer.assign(tps)
        self._next[partition] = offset

    def committed(self, partitions: list[int]) -> dict[int, Committed]:
        """The group's committed positions; partitions never committed are left out.

        Connection errors are retried with backoff within ``timeout_s``; empty once closed.

        Raises
        ------
        BrokerError
            If the broker could not be reached within ``timeout_s`` or refused.
        """
        if self.group_id is None or self._closing or not partitions:
            return {}
        tps = [self._ck.TopicPartition(self.topic, int(p)) for p in partitions]
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                got = self.consumer.committed(tps, timeout=max(0.1, left))
                break
            except self._ck.KafkaException as exc:
                err = exc.args[0] if exc.args else None
                left = deadline - time.monotonic()
                if err is not None and self._is_connection_error(err) and left > 0:
                    time.sleep(min(self.health.failed(err), left))
                    continue
                raise BrokerError(
                    f"could not read committed offsets of {self.topic!r} for group "
                    f"{self.group_id!r}: {exc}"
                ) from exc
        return {
            tp.partition: Committed(int(tp.offset), tp.metadata or "")
            for tp in got
            if tp.offset >= 0
        }

    def commit(self, positions: dict[int, int], metadata: str | None = None) -> None:
        """Commit ``positions`` (partition -> next offset), waiting at most ``timeout_s``.

        ``metadata`` (default: ``commit_metadata``) is stored with each partition's offset.
        The commit is asynchronous (see the module docstring): this call serves the
        consumer's queue until librdkafka answers, holding any records for the next
        :meth:`poll`, so no other call ever waits behind it. Inside a rebalance callback
        it does not wait (the answer can only come with a later poll) and fails only if
        librdkafka refuses the request at once.

        Raises
        ------
        CommitFailedError
            If the broker refused the commit, it was not answered within ``timeout_s``,
            the link to the broker was known to be down when called, an earlier commit
            is still unanswered, or the source is closed.
        """
        if not positions:
            return
        if self.group_id is None:
            raise ConfigError(
                f"ConfluentKafkaSource({self.topic!r}) has no group_id, so it cannot commit."
            )
        what = f"committing {dict(sorted(positions.items()))} on {self.topic!r}"
        keep = "The snapshot still holds these offsets; a restart resumes from it."
        if self._closing or not self.health.up:
            why = "the source is closed" if self._closing else "the broker is unreachable"
            raise CommitFailedError(f"{what}: not attempted, {why}. {keep}")
        if self._pending is not None:  # never two in flight: answers stay attributable
            raise CommitFailedError(f"{what}: an earlier commit is still unanswered. {keep}")
        meta = self.commit_metadata if metadata is None else metadata
        tps = [
            self._ck.TopicPartition(self.topic, int(p), int(o), metadata=meta)
            for p, o in positions.items()
        ]
        pending = self._pending = _Commit(f"{what} for group {self.group_id!r}")
        try:
            self.consumer.commit(offsets=tps, asynchronous=True)
        except self._ck.KafkaException as exc:
            self._pending = None
            raise CommitFailedError(f"{pending.what} failed: {exc}. {keep}") from exc
        if self._in_callback:
            pending.given_up = True
            return
        try:
            self._await_answer(pending)
        finally:
            pending.given_up = not pending.answered
        if not pending.answered:
            if self.health.up:
                self.health.failed(f"offset commit unanswered for {self.timeout_s:g} s")
            raise CommitFailedError(
                f"{pending.what}: no answer within {self.timeout_s:g} s (broker unreachable?); "
                f"it stays queued in the client. {keep}"
            )
        if pending.error is not None:
            raise CommitFailedError(f"{pending.what} failed: {pending.error}. {keep}")

    def _await_answer(self, pending: _Commit) -> None:
        """Serve the consumer's queue until ``pending`` is answered or ``timeout_s`` passes;
        records taken meanwhile are held for poll().

        A link reported down meanwhile does not end the wait: the coordinator may be back
        within ``timeout_s``, and rebalance events (partitions lost to a session timeout,
        which drop the held records of that assignment) are served here as in poll().
        """
        deadline = time.monotonic() + self.timeout_s
        while not pending.answered and not self._closing:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                msgs = self.consumer.consume(num_messages=_HOLD_BATCH, timeout=min(left, 0.1))
            except self._ck.KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if err is None or not self._is_connection_error(err):
                    raise CommitFailedError(f"{pending.what}: {exc}") from exc
                time.sleep(min(self.health.failed(err), max(0.0, deadline - time.monotonic())))
                continue
            self._held.extend(msgs)

    def assignment(self) -> list[int]:
        """Partitions owned now; ``[]`` once closed."""
        if self._closing:
            return []
        return sorted(tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic)

    def beyond_end(self, targets: dict[int, int]) -> dict[int, int]:
        """Partitions whose target is past the end of the log, mapped to their first offset.

        Same rule as :meth:`streamk.sources.kafka.KafkaSource.beyond_end`: valid when
        ``T <= high watermark``; otherwise a probe consumer (own throw-away group,
        nothing committed, ``auto.offset.reset=earliest``) fetches from ``T - 1`` and
        ``T`` is valid only if a record with offset ``>= T - 1`` comes back. Empty once
        closed.
        """
        if self._closing:
            return {}
        targets = {int(p): int(t) for p, t in targets.items() if int(t) > 0}
        bounds: dict[int, tuple[int, int]] = {}
        for p in targets:
            bounds[p] = self._watermarks(p, "offset range")
        doubtful = {p: t for p, t in targets.items() if t > bounds[p][1]}
        if not doubtful:
            return {}
        first = {p: got[0] for p, got in self._probe(doubtful).items()}
        return {
            p: bounds[p][0] for p, t in doubtful.items() if first.get(p) is None or first[p] < t - 1
        }

    def records_before(self, targets: dict[int, int]) -> dict[int, tuple[int | None, bytes]]:
        """The record at ``target - 1`` of each partition, as ``(timestamp_ms, payload)``
        (:func:`streamk.sources.base.records_before`); connection errors raise
        :class:`~streamk.errors.BrokerError`."""
        return records_before(self._probe, targets, self._closing)

    def _probe(self, targets: dict[int, int]) -> dict[int, tuple[int, int | None, bytes]]:
        """The first record fetched from ``target - 1`` per partition, as ``(offset,
        timestamp_ms, payload)`` (missing: nothing came).

        Read by a second consumer kept between calls (as
        :meth:`streamk.sources.kafka.KafkaSource._probe`), unassigned between them so that
        it prefetches nothing meanwhile.
        """
        ck = self._ck
        probe = self._prober()
        first: dict[int, tuple[int, int | None, bytes]] = {}
        try:
            probe.assign([ck.TopicPartition(self.topic, p, t - 1) for p, t in targets.items()])
            deadline = time.monotonic() + self.probe_timeout_s
            while len(first) < len(targets) and (left := deadline - time.monotonic()) > 0:
                for m in probe.consume(100, timeout=min(left, 0.5)):
                    if m.error() is None and m.partition() not in first:
                        stamp = _timestamp(m, ck.TIMESTAMP_NOT_AVAILABLE)
                        first[m.partition()] = (int(m.offset()), stamp, m.value() or b"")
            probe.unassign()
        except ck.KafkaException as exc:
            self._close_prober()  # a fresh one next time
            raise BrokerError(f"the offset probe on {self.topic!r} failed: {exc}") from exc
        return first

    def _prober(self) -> Any:
        """The probe's consumer, made on first use (its own throw-away group, nothing
        committed, small fetches, earliest reset: see :meth:`beyond_end`)."""
        if self._probe_consumer is None:
            conf = {
                **self._probe_config,
                "group.id": f"streamk-probe-{uuid.uuid4().hex[:12]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "max.partition.fetch.bytes": 1 << 16,
                "queued.max.messages.kbytes": 64,  # no prefetch past what it reads
                "fetch.queue.backoff.ms": 1,  # (and no wait for the next read)
                "fetch.wait.max.ms": 10,  # a fetch held by the broker delays the next assign
                "socket.nagle.disable": True,
            }
            conf.pop("error_cb", None)
            conf.pop("on_commit", None)
            self._probe_consumer = self._ck.Consumer(conf)
        return self._probe_consumer

    def _close_prober(self) -> None:
        probe, self._probe_consumer = self._probe_consumer, None
        if probe is not None:
            try:
                probe.close()
            except (RuntimeError, self._ck.KafkaException) as exc:
                log.warning("closing the offset probe of %s: %s", self.topic, exc)

    def topic_id(self) -> str | None:
        """The topic's id now (see :meth:`~streamk.sources.base.Source.topic_id`): one
        ``describe_topics`` by an admin client kept for it (~0.2 ms of CPU, ~0.3 ms wall
        on tansu 0.6; ``list_topics`` names no id). ``None`` when the broker names none
        (older than 2.8, or the topic is missing, as between its deletion and its
        recreation) or does not answer."""
        ck = self._ck
        try:
            if self._admin is None:
                from confluent_kafka.admin import AdminClient

                self._admin = AdminClient(
                    {k: v for k, v in self._probe_config.items() if k.startswith(_ADMIN_KEYS)}
                )
            futures = self._admin.describe_topics(
                ck.TopicCollection([self.topic]), request_timeout=self.probe_timeout_s
            )
            found = futures[self.topic].result(timeout=self.probe_timeout_s + 1).topic_id
        except (ck.KafkaException, TimeoutError, ValueError, RuntimeError) as exc:
            log.info("could not read the topic id of %s: %s", self.topic, exc)
            return None
        if found is None or not (
            found.get_most_significant_bits() or found.get_least_significant_bits()
        ):
            return None  # (the null id: a broker that names none)
        return str(found)

    def lag(self) -> int | None:
        """Records between the read position and the cached high watermark (approximate)."""
        if self._closing:
            return None
        total, known = 0, False
        for p in self.assignment():
            pos = self._next.get(p)
            if pos is None:
                continue
            try:
                _, high = self.consumer.get_watermark_offsets(
                    self._ck.TopicPartition(self.topic, p), cached=True
                )
            except self._ck.KafkaException:
                continue
            if high is None or high < 0:
                continue
            total += max(0, int(high) - pos)
            known = True
        return total if known else None

    def close(self) -> None:
        """Leave the group and close, calling no handler and committing nothing; idempotent.

        Bounded by ``timeout_s``: librdkafka's close waits as long as the group
        coordinator is unreachable (with a commit still queued across a network cut it
        hung), so it runs on a helper thread; one that does not return in time is left
        to finish in the background (a daemon thread: it does not keep the process
        alive), with a warning.
        """
        if self._closing:
            return
        self._closing = True
        self._held.clear()
        self._close_prober()
        self._admin = None  # (librdkafka's admin handle closes when collected)
        closer = threading.Thread(target=self._close_consumer, name="streamk-close", daemon=True)
        closer.start()
        closer.join(self.timeout_s)
        if closer.is_alive():
            log.warning(
                "closing the consumer of %s: no answer within %g s (broker unreachable?); "
                "left to finish in the background. Nothing was committed by the close.",
                self.topic,
                self.timeout_s,
            )

    def _close_consumer(self) -> None:
        try:
            self.consumer.close()
        except (RuntimeError, self._ck.KafkaException) as exc:
            log.warning("closing the consumer of %s: %s", self.topic, exc)
