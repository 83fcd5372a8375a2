"""Kafka transport for snapshots: a compacted topic, chunked writes, verified reassembly.

A snapshot of at most ``chunk_size`` bytes travels inline in one *manifest*
message keyed by the model name. A larger one goes first as numbered chunk
messages keyed ``<name>/<snapshot id>/<index>`` (distinct keys, so compaction
keeps them all), then the manifest. Readers trust a snapshot only once its
manifest arrived and its chunks reassemble to the size and SHA-256 the manifest
states; then ``loads`` verifies it like a file. After a newer manifest is
acknowledged the publisher tombstones the previous snapshot's chunk keys so
compaction can drop them. The layout is in ``kafka_scheme.py`` and specified in
docs/snapshot-format.md ("Kafka transport"). Needs ``kafka-python`` (imported lazily).
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, SnapshotError
from .format import Snapshot, loads
from .hotswap import HotSwapModel
from .kafka_scheme import (
    H_INDEX,
    H_KIND,
    TRANSPORT,
    TRANSPORT_VERSION,
    Assembler,
    ManifestInfo,
    build_model,
    check_name,
    encode_manifest,
    headers,
)
from .limits import DEFAULT_LIMITS, Limits

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "TRANSPORT",
    "TRANSPORT_VERSION",
    "HotSwapModel",
    "ManifestInfo",
    "PublishResult",
    "SnapshotPublisher",
    "SnapshotReader",
]

log = logging.getLogger("streamk.snapshot.kafka")

#: Half of Apache Kafka's default message limit (~1 MB), leaving room for key and headers.
DEFAULT_CHUNK_SIZE = 512 * 1024
_OVERHEAD = 4096  # key + headers + record framing, well above what we add


def _kafka() -> Any:
    try:
        import kafka
    except ImportError as exc:  # pragma: no cover - kafka-python is a runtime dependency
        raise SnapshotError(
            "the Kafka snapshot transport needs kafka-python: "
            'pip install "kafka-python[crc32c,lz4,snappy,zstd]"'
        ) from exc
    return kafka


class _Transient(SnapshotError):
    """A send that failed for a reason worth retrying (connection, timeout, leader move)."""


def _error(exc: BaseException, message: str) -> SnapshotError:
    """The error to raise for a client error: :class:`_Transient` when retrying may help."""
    kafka = _kafka()
    retriable = getattr(exc, "retriable", False) or isinstance(
        exc, (kafka.errors.KafkaConnectionError, kafka.errors.KafkaTimeoutError)
    )
    return _Transient(message) if retriable else SnapshotError(message)


def _security(config: dict[str, Any]) -> dict[str, Any]:
    """The client settings an admin client needs too (SSL, SASL, timeouts)."""
    keep = ("security_protocol", "ssl_", "sasl_", "request_timeout_ms", "client_id", "bootstrap_")
    return {k: v for k, v in config.items() if k.startswith(keep)}


def _bounded(client: Any, config: dict[str, Any], timeout: float) -> dict[str, Any]:
    """`config` plus a bootstrap deadline of `timeout` s where the client supports one (3.x)."""
    if "bootstrap_timeout_ms" in getattr(client, "DEFAULT_CONFIG", {}):
        config = {"bootstrap_timeout_ms": max(1, int(timeout * 1000)), **config}
    return config


@dataclass(frozen=True)
class PublishResult:
    """What ``SnapshotPublisher.publish`` wrote: the manifest's position and the snapshot's id."""

    name: str
    id: str
    seq: int
    size: int
    sha256: str
    chunks: int
    partition: int
    offset: int
    tombstones: int


class SnapshotPublisher:
    """Publish snapshot bytes keyed by model name to a compacted topic, chunked when large.

    Parameters
    ----------
    bootstrap_servers, topic
        Where to publish. The topic is created with ``cleanup.policy=compact`` if missing.
    chunk_size
        Largest message payload; larger snapshots are split. Keep it below the broker's
        ``message.max.bytes`` (Apache Kafka: ~1 MB by default).
    producer_config
        Extra ``KafkaProducer`` settings (SSL/SASL pass through; also used to create the topic).
    timeout
        Seconds ``publish`` may take, retries included (and the wait for metadata at
        start). A connection error or an unacknowledged part is retried with backoff
        (0.2 s doubling to 2 s; one WARNING line per publish) until this deadline.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        create_topic: bool = True,
        producer_config: dict[str, Any] | None = None,
        limits: Limits = DEFAULT_LIMITS,
        timeout: float = 30.0,
    ) -> None:
        kafka = _kafka()
        config: dict[str, Any] = {
            "acks": "all",
            "retries": 5,
            "linger_ms": 5,
            "max_block_ms": int(timeout * 1000),
        }
        config = _bounded(kafka.KafkaProducer, {**config, **(producer_config or {})}, timeout)
        max_request = int(config.get("max_request_size", 1048576))
        if not isinstance(chunk_size, int) or not 1 <= chunk_size <= max_request - _OVERHEAD:
            raise ConfigError(
                f"chunk_size={chunk_size!r} must be an int in [1, {max_request - _OVERHEAD}] "
                "(the producer's max_request_size minus room for key and headers)"
            )
        self.bootstrap_servers, self.topic = bootstrap_servers, topic
        self.chunk_size, self.limits, self.timeout = chunk_size, limits, timeout
        self._last: dict[str, PublishResult] = {}
        self._lock = threading.Lock()
        if create_topic:
            self._ensure_topic(config)
        try:
            self._producer = kafka.KafkaProducer(bootstrap_servers=bootstrap_servers, **config)
        except kafka.errors.KafkaError as exc:
            raise SnapshotError(
                f"cannot connect a producer to {bootstrap_servers} for topic {topic!r}: {exc}"
            ) from exc

    def _ensure_topic(self, config: dict[str, Any]) -> None:
        kafka = _kafka()
        from kafka.admin import NewTopic

        try:
            admin = kafka.KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers, **_security(config)
            )
        except kafka.errors.KafkaError as exc:
            raise SnapshotError(
                f"cannot reach {self.bootstrap_servers} to create snapshot topic {self.topic!r}: "
                f"{exc}"
            ) from exc
        try:
            topic = NewTopic(self.topic, 1, 1, topic_configs={"cleanup.policy": "compact"})
            admin.create_topics([topic], timeout_ms=int(self.timeout * 1000))
            log.info("created snapshot topic %r (cleanup.policy=compact)", self.topic)
        except kafka.errors.TopicAlreadyExistsError:
            pass
        except kafka.errors.KafkaError as exc:
            raise SnapshotError(
                f"could not create snapshot topic {self.topic!r}: {exc}; create it with "
                "cleanup.policy=compact, or pass create_topic=False"
            ) from exc
        finally:
            admin.close()

    def _partition(self, name: str) -> int:
        """The partition the default partitioner gives the key `name`; all parts go there."""
        from kafka.partitioner.default import murmur2

        partitions = sorted(self._producer.partitions_for(self.topic) or ())
        if not partitions:
            raise SnapshotError(f"topic {self.topic!r} has no partitions (does it exist?)")
        return partitions[(murmur2(name.encode()) & 0x7FFFFFFF) % len(partitions)]

    def publish(self, name: str, data: bytes | bytearray | memoryview) -> PublishResult:
        """Publish one snapshot; return once the broker acknowledged every part.

        Raises
        ------
        SnapshotError
            If `data` is not a valid snapshot, its seq is below the last one this publisher
            sent for `name`, or the broker did not acknowledge in time (readers then keep
            the previous snapshot: nothing counts before the manifest is acknowledged).
        """
        check_name(name)
        buf = bytes(data)
        try:
            snap = loads(buf, self.limits, build=False)
        except SnapshotError as exc:
            raise SnapshotError(
                f"refusing to publish {name!r}: not a valid snapshot: {exc}"
            ) from exc
        with self._lock:
            prev = self._last.get(name)
            if prev is not None and snap.seq < prev.seq:
                raise SnapshotError(
                    f"snapshot seq {snap.seq} of {name!r} is below the last published "
                    f"({prev.seq}); snapshots only move forward"
                )
            result = self._send(name, buf, snap)
            self._last[name] = result
            return result

    def _send(self, name: str, buf: bytes, snap: Snapshot) -> PublishResult:
        """Send every part, retrying transient failures until ``timeout`` has passed.

        A retry re-sends every part under the same snapshot id (same chunk keys), so a
        half-sent earlier attempt leaves nothing behind that compaction would keep.
        """
        sid, sha = uuid.uuid4().hex, hashlib.sha256(buf).hexdigest()
        deadline = time.monotonic() + self.timeout
        pause, attempts = 0.2, 1
        while True:
            try:
                return self._attempt(name, buf, snap, sid, sha, deadline)
            except _Transient as exc:
                left = deadline - time.monotonic()
                if left <= pause:
                    raise SnapshotError(
                        f"{exc} (gave up after {attempts} attempts in {self.timeout:g} s)"
                    ) from exc.__cause__
                if attempts == 1:
                    log.warning(
                        "publishing %r to %r: %s; retrying for up to %.0f s more",
                        name,
                        self.topic,
                        exc.__cause__ or exc,
                        left,
                    )
                time.sleep(pause)
                pause, attempts = min(2.0, pause * 2), attempts + 1

    def _attempt(
        self, name: str, buf: bytes, snap: Snapshot, sid: str, sha: str, deadline: float
    ) -> PublishResult:
        n = 0 if len(buf) <= self.chunk_size else math.ceil(len(buf) / self.chunk_size)
        try:
            partition = self._partition(name)
        except _kafka().errors.KafkaError as exc:
            raise _error(exc, f"could not look up the partitions of {self.topic!r}") from exc
        common = headers(sid, n, len(buf), sha)
        futures = [
            self._emit(
                f"{name}/{sid}/{i}",
                buf[i * self.chunk_size : (i + 1) * self.chunk_size],
                [(H_KIND, b"chunk"), (H_INDEX, b"%d" % i), *common],
                partition,
            )
            for i in range(n)
        ]
        self._wait(futures, deadline, f"{n} chunks of {name!r}")
        value = encode_manifest(name, sid, n, buf, sha, snap)
        future = self._emit(name, value, [(H_KIND, b"manifest"), *common], partition)
        meta = self._wait([future], deadline, f"the manifest of {name!r}")[0]
        prev = self._last.get(name)
        stale = [f"{name}/{prev.id}/{i}" for i in range(prev.chunks)] if prev else []
        try:  # the new snapshot is committed; leftovers would only cost space
            self._tombstone(stale, partition)
        except SnapshotError as exc:
            log.warning("could not tombstone old chunks of %r: %s", name, exc)
        log.info("published %r seq %d: %d bytes in %d chunks", name, snap.seq, len(buf), n)
        return PublishResult(
            name, sid, snap.seq, len(buf), sha, n, meta.partition, meta.offset, len(stale)
        )

    def _emit(self, key: str, value: bytes | None, hdrs: list, partition: int) -> Any:
        kafka = _kafka()
        try:
            return self._producer.send(
                self.topic, key=key.encode(), value=value, headers=hdrs, partition=partition
            )
        except kafka.errors.KafkaError as exc:
            raise _error(
                exc,
                f"could not send {key!r} to topic {self.topic!r}: {exc}; the snapshot was not "
                "published (readers keep the previous one)",
            ) from exc

    def _wait(self, futures: list, deadline: float, what: str) -> list:
        kafka = _kafka()
        try:
            self._producer.flush(timeout=max(0.0, deadline - time.monotonic()))
            return [f.get(timeout=max(0.1, deadline - time.monotonic())) for f in futures]
        except kafka.errors.KafkaError as exc:
            raise _error(
                exc,
                f"sending {what} to topic {self.topic!r} at {self.bootstrap_servers} failed "
                f"or was not acknowledged within {self.timeout:g} s: {type(exc).__name__}: "
                f"{exc}; the snapshot was not published (readers keep the previous one)",
            ) from exc

    def _tombstone(self, keys: list[str], partition: int) -> None:
        futures = [self._emit(key, None, [], partition) for key in keys]
        self._wait(futures, time.monotonic() + self.timeout, f"{len(keys)} tombstones")

    def sweep(self, name: str, reader: SnapshotReader | None = None) -> int:
        """Tombstone every chunk of `name` on the topic that its newest snapshot does not use.

        ``publish`` tombstones the chunks of the snapshot it replaces, but only those this
        publisher wrote; a restarted writer calls ``sweep`` once to clean up after its
        predecessor (superseded snapshots, and chunks of one that never got a manifest).
        Only the single writer of `name` may call it: it would also tombstone chunks
        another writer is sending right now. Returns the number of tombstones sent.
        """
        check_name(name)
        reader = reader or SnapshotReader(self.bootstrap_servers, self.topic, limits=self.limits)
        with self._lock:
            asm = Assembler(name, self.limits, track_chunks=True)
            reader.scan(asm, self.timeout)
            stale = asm.stale_chunks(name)
            if stale:
                self._tombstone(stale, self._partition(name))
                log.info("swept %d stale chunks of %r from %r", len(stale), name, self.topic)
            return len(stale)

    def close(self, timeout: float = 10.0) -> None:
        """Flush and close the producer."""
        self._producer.close(timeout=timeout)

    def __enter__(self) -> SnapshotPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drained(consumer: Any, tps: list[Any], ends: dict[Any, int]) -> bool:
    """Whether every partition's position reached its end as a fetch response reported it.

    The high watermark comes back with each fetch response, so it is known only once a
    fetch for the partition returned (``None`` before): the listed end offset alone is a
    stale lower bound (tansu: the start of the last batch plus one), not proof of the end.
    """
    for tp in tps:
        high = consumer.highwater(tp)
        if high is None or consumer.position(tp) < max(high, ends[tp]):
            return False
    return True


class SnapshotReader:
    """Read snapshots back from a topic: the newest complete one, or follow new ones.

    Partitions are assigned manually and read from the beginning (no group join, no
    committed offsets). A scan ends when every partition's position reached both the end
    offset listed at the start and the high watermark of a fetch response the consumer
    received for it. An empty poll alone never ends it (a poll can come back before its
    fetch does, and the listed end is only a lower bound: tansu lists the start of the last
    batch plus one, design §8), and none is waited for at the end, so reading a small topic
    takes a few round trips rather than a whole ``idle_timeout`` (how long one poll waits).

    Parameters
    ----------
    consumer_config
        Extra ``KafkaConsumer`` settings (SSL/SASL pass through).
    limits
        Snapshot decoding limits; ``max_bytes`` also bounds buffered chunks.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        *,
        consumer_config: dict[str, Any] | None = None,
        limits: Limits = DEFAULT_LIMITS,
        idle_timeout: float = 1.0,
    ) -> None:
        self.bootstrap_servers, self.topic = bootstrap_servers, topic
        self.limits, self.idle_timeout = limits, idle_timeout
        self.consumer_config = {"enable_auto_commit": False, "auto_offset_reset": "earliest"}
        self.consumer_config.update(consumer_config or {})
        self.consumer_config["group_id"] = None  # manual assignment only

    def _consumer(self, timeout: float) -> Any:
        kafka = _kafka()
        config = _bounded(kafka.KafkaConsumer, self.consumer_config, timeout)
        try:
            return kafka.KafkaConsumer(bootstrap_servers=self.bootstrap_servers, **config)
        except kafka.errors.KafkaError as exc:
            raise SnapshotError(
                f"cannot connect to {self.bootstrap_servers} to read snapshot topic "
                f"{self.topic!r}: {exc}"
            ) from exc

    def _assign(self, consumer: Any) -> list[Any]:
        """Assign every partition of the topic from the beginning; [] if it does not exist."""
        kafka = _kafka()
        parts = consumer.partitions_for_topic(self.topic) or set()
        tps = [kafka.TopicPartition(self.topic, p) for p in sorted(parts)]
        if tps:
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
        return tps

    def scan(self, asm: Assembler, timeout: float) -> bool:
        """Feed every record from the beginning until drained (see class doc) or `timeout`.

        Returns True when the topic was read to its end, False when it does not exist or
        the deadline cut the read short (logged as a WARNING: the caller saw part of it).
        """
        kafka = _kafka()
        deadline = time.monotonic() + timeout
        consumer = self._consumer(timeout)
        try:
            tps = self._assign(consumer)
            if not tps:
                log.info("snapshot topic %r does not exist (yet)", self.topic)
                return False
            ends = consumer.end_offsets(tps, timeout_ms=int(timeout * 1000))
            while (remaining := deadline - time.monotonic()) > 0:
                got = consumer.poll(
                    timeout_ms=max(1, int(min(self.idle_timeout, remaining) * 1000))
                )
                for records in got.values():
                    for record in records:
                        asm.feed(record)
                if _drained(consumer, tps, ends):
                    return True
            log.warning(
                "reading topic %r took over %g s; using what was read (positions %s, listed "
                "ends %s, fetched high watermarks %s)",
                self.topic,
                timeout,
                [consumer.position(tp) for tp in tps],
                [ends[tp] for tp in tps],
                [consumer.highwater(tp) for tp in tps],
            )
            return False
        except kafka.errors.KafkaError as exc:
            raise SnapshotError(f"reading snapshot topic {self.topic!r} failed: {exc}") from exc
        finally:
            asm.finish()
            consumer.close()

    def latest(self, name: str, timeout: float = 30.0, *, build: bool = True) -> Snapshot | None:
        """The newest (highest seq) complete, verified snapshot of `name`, or None.

        Incomplete, duplicate, stale and corrupt snapshots are skipped with the reason
        logged on ``streamk.snapshot.kafka``.

        Raises
        ------
        SnapshotError
            If the broker cannot be reached, or the newest valid snapshot cannot be built
            (class not allowed, ``from_state`` failing): falling back would fail the same way.
        """
        asm = Assembler(check_name(name), self.limits)
        self.scan(asm, timeout)
        snap = asm.best.get(name)
        return build_model(snap) if snap is not None and build else snap

    def list(self, timeout: float = 30.0) -> list[ManifestInfo]:
        """Every manifest on the topic in topic order, each with its status and reason."""
        asm = Assembler(None, self.limits)
        self.scan(asm, timeout)
        for info in asm.best_info.values():
            info.status = "latest"
        return list(asm.manifests)

    def follow(
        self,
        name: str,
        callback: Callable[[Snapshot], Any],
        stop_event: threading.Event | None = None,
        poll_timeout: float = 1.0,
        *,
        after_seq: int = -1,
        connect_timeout: float = 30.0,
    ) -> None:
        """Call `callback` with each new complete snapshot of `name` (higher seq), until stopped.

        Reads from the beginning, so the first call brings the current snapshot; a batch
        holding several snapshots yields only its newest. Returns when `stop_event` is set
        (checked every `poll_timeout` seconds). Snapshots that cannot be built are logged
        and skipped; a deleted model (tombstone on its key) is logged, not called back.
        Exceptions from `callback` propagate; Kafka errors become ``SnapshotError``.
        """
        kafka = _kafka()
        asm = Assembler(check_name(name), self.limits)
        stop = stop_event or threading.Event()
        consumer = self._consumer(connect_timeout)
        try:
            while not self._assign(consumer):
                if stop.wait(poll_timeout):
                    return
            while not stop.is_set():
                got = consumer.poll(timeout_ms=int(poll_timeout * 1000))
                for records in got.values():
                    for record in records:
                        asm.feed(record)
                snap = asm.best.get(name)
                if name not in asm.fresh or snap is None or snap.seq <= after_seq:
                    continue
                asm.fresh.discard(name)
                try:
                    build_model(snap)
                except SnapshotError as exc:
                    log.error("cannot use snapshot %r seq %d: %s", name, snap.seq, exc)
                    continue
                after_seq = snap.seq
                callback(snap)
        except kafka.errors.KafkaError as exc:
            raise SnapshotError(f"following snapshot topic {self.topic!r} failed: {exc}") from exc
        finally:
            consumer.close()
