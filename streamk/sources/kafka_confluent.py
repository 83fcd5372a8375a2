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

Call every method from the polling thread (or from a handler): a ``committed`` call
from another thread while ``consume`` runs was seen to hang past its timeout.
``commit`` and ``committed`` block up to librdkafka's own request timeouts (commit has
no timeout argument in confluent-kafka). Lag uses cached watermarks (no network call)
and is approximate on tansu 0.6, whose end offsets are wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from ..errors import BrokerError, ConfigError
from .base import RebalanceHandler, Record, Source
from .kafka import CommitFailedError

__all__ = ["ConfluentKafkaSource"]

log = logging.getLogger(__name__)
_PARTITION = attrgetter("partition")

SETTING_NAMES = {
    # kafka-python's security settings, as streamk run passes them (config.kafka_settings)
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "max_poll_interval_ms": "max.poll.interval.ms",
    "session_timeout_ms": "session.timeout.ms",
    "heartbeat_interval_ms": "heartbeat.interval.ms",
    "auto_offset_reset": "auto.offset.reset",
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
        Bound on ``committed`` and ``close``. Default: 10.0.
    """

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
        config: dict[str, Any] = {
            "auto.offset.reset": "earliest",
            "max.poll.interval.ms": int(max_poll_interval_ms),
            **user,
            "bootstrap.servers": bootstrap_servers,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
        if "session.timeout.ms" not in config:  # librdkafka needs session <= poll interval
            config["session.timeout.ms"] = min(45_000, int(config["max.poll.interval.ms"]))
        # a group id is needed even for manual mode (librdkafka requires one to commit)
        config["group.id"] = group_id if group_id is not None else f"streamk-manual-{topic}"
        self.timeout_s = timeout_s
        self.rebalances: list[tuple[str, list[int]]] = []
        self._on_lost: RebalanceHandler | None = None
        self._closing = False
        self._announced = False
        self._in_assign: dict[int, int] | None = None  # seeks made in the assigned handler
        self._next: dict[int, int] = {}
        try:
            self.consumer = ck.Consumer(config)
        except ck.KafkaException as exc:
            raise ConfigError(f"invalid consumer_config for topic {topic!r}: {exc}") from exc
        if self.partitions is None:
            self.consumer.subscribe(
                [topic], on_assign=self._assign_cb, on_revoke=self._revoke_cb, on_lost=self._lost_cb
            )

    def on_lost(self, handler: RebalanceHandler | None) -> None:
        """Register a handler for partitions lost by eviction (discard, never commit)."""
        self._on_lost = handler

    # -- rebalance callbacks (run inside consume()) -----------------------------------------
    def _parts(self, tps: Iterable[Any]) -> list[int]:
        return sorted(tp.partition for tp in tps if tp.topic == self.topic)

    def _assign_cb(self, consumer: Any, tps: list[Any]) -> None:
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
        consumer.assign(tps)

    def _revoke_cb(self, consumer: Any, tps: list[Any]) -> None:
        parts = self._parts(tps)
        if parts and not self._closing:
            self.rebalances.append(("revoked", parts))
            if self._on_revoked is not None:
                self._on_revoked(list(parts))
        consumer.unassign()

    def _lost_cb(self, consumer: Any, tps: list[Any]) -> None:
        parts = self._parts(tps)
        log.warning("partitions %s of %s lost (member evicted): not committing", parts, self.topic)
        for p in parts:
            self._next.pop(p, None)
        if not self._closing:
            self.rebalances.append(("lost", parts))
            if self._on_lost is not None:
                self._on_lost(list(parts))
        consumer.unassign()

    # -- Source ---------------------------------------------------------------------------
    def poll(self, max_records: int, timeout: float) -> list[Record]:
        """Up to ``max_records`` records, per-partition order kept, partitions in order."""
        if self.partitions is not None and not self._announced:
            self._announced = True
            tps = [self._ck.TopicPartition(self.topic, p) for p in self.partitions]
            self._assign_cb(self.consumer, tps)
        msgs = self.consumer.consume(num_messages=max(1, int(max_records)), timeout=timeout)
        out: list[Record] = []
        append, no_timestamp = out.append, self._ck.TIMESTAMP_NOT_AVAILABLE
        for m in msgs:
            if m.error() is not None:
                self._raise_unless_eof(m.error())
                continue
            ts_type, ts = m.timestamp()
            value = m.value()
            append(
                Record(
                    b"" if value is None else value,
                    m.partition(),
                    m.offset(),
                    None if ts_type == no_timestamp else ts,
                )
            )
        if out:
            out.sort(key=_PARTITION)  # stable: per-partition order is kept
            self._next.update({r.partition: r.offset + 1 for r in out})  # the last one wins
        return out

    def _raise_unless_eof(self, err: Any) -> None:
        if err.code() != self._ck.KafkaError._PARTITION_EOF:
            raise BrokerError(f"consuming {self.topic!r} failed: {err}")

    def seek(self, partition: int, offset: int) -> None:
        """Read ``partition`` from ``offset`` on; the partition must be assigned."""
        p, off = int(partition), int(offset)
        if self._in_assign is not None:  # inside the assigned handler: start offset
            self._in_assign[p] = off
            return
        if p not in self.assignment():
            raise ValueError(
                f"cannot seek {self.topic}[{p}] to {off}: not assigned "
                f"(assigned: {self.assignment()})"
            )
        try:
            self.consumer.seek(self._ck.TopicPartition(self.topic, p, off))
        except self._ck.KafkaException:  # not fetching yet: restart the assignment there
            tps = self.consumer.assignment()
            for tp in tps:
                if tp.partition == p and tp.topic == self.topic:
                    tp.offset = off
            self.consumer.assign(tps)
        self._next[p] = off

    def committed(self, partitions: list[int]) -> dict[int, int]:
        if self.group_id is None:
            return {}
        tps = [self._ck.TopicPartition(self.topic, int(p)) for p in partitions]
        try:
            got = self.consumer.committed(tps, timeout=self.timeout_s)
        except self._ck.KafkaException as exc:
            raise BrokerError(
                f"could not read committed offsets of {self.topic!r} for group "
                f"{self.group_id!r}: {exc}"
            ) from exc
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}

    def commit(self, positions: dict[int, int], metadata: str | None = None) -> None:
        """Commit ``positions`` (partition -> next offset) synchronously.

        Raises
        ------
        CommitFailedError
            If the broker refused the commit.
        """
        if not positions:
            return
        if self.group_id is None:
            raise ConfigError(
                f"ConfluentKafkaSource({self.topic!r}) has no group_id, so it cannot commit."
            )
        tps = [self._ck.TopicPartition(self.topic, int(p), int(o)) for p, o in positions.items()]
        try:
            result = self.consumer.commit(offsets=tps, asynchronous=False)
        except self._ck.KafkaException as exc:
            raise CommitFailedError(
                f"committing {dict(sorted(positions.items()))} on {self.topic!r} for group "
                f"{self.group_id!r} failed: {exc}. The snapshot still holds these offsets."
            ) from exc
        failed = [tp for tp in result or () if tp.error is not None]
        if failed:
            raise CommitFailedError(
                f"committing on {self.topic!r} failed for partitions "
                f"{[(tp.partition, str(tp.error)) for tp in failed]}"
            )

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic)

    def lag(self) -> int | None:
        """Records between the read position and the cached high watermark (approximate)."""
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
        """Leave the group and close, calling no handler and committing nothing; idempotent."""
        if self._closing:
            return
        self._closing = True
        try:
            self.consumer.close()
        except (RuntimeError, self._ck.KafkaException) as exc:
            log.warning("closing the consumer of %s: %s", self.topic, exc)
