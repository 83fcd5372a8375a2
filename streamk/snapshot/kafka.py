"""Kafka transport for snapshots: a compacted topic, chunked writes, verified reassembly.

A snapshot of at most ``chunk_size`` bytes travels inline in one *manifest*
message keyed by the model name. A larger one goes first as numbered chunk
messages keyed ``<name>/<snapshot id>/<index>`` (distinct keys, so compaction
keeps them all), then the manifest. Readers trust a snapshot only once its
manifest arrived and its chunks reassemble to the size and SHA-256 the manifest
states; then ``loads`` verifies it like a file. After a newer manifest is
acknowledged the publisher tombstones the previous snapshot's chunk keys so
compaction can drop them. The scheme is specified in docs/snapshot-format.md
("Kafka transport"). Needs ``kafka-python`` (imported lazily).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from ..errors import ConfigError, SnapshotError
from .format import Snapshot, loads
from .limits import DEFAULT_LIMITS, Limits
from .registry import resolve_class

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

TRANSPORT = "streamk.snapshot.kafka"
TRANSPORT_VERSION = 1
#: Half of Apache Kafka's default message limit (~1 MB), leaving room for key and headers.
DEFAULT_CHUNK_SIZE = 512 * 1024
_OVERHEAD = 4096  # key + headers + record framing, well above what we add
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_HEX = re.compile(r"[0-9a-f]{64}")
_MAX_CHUNKS = 1 << 20
H_FORMAT, H_KIND, H_ID = "streamk.format", "streamk.kind", "streamk.id"
H_INDEX, H_COUNT, H_SIZE, H_SHA = (
    "streamk.chunk",
    "streamk.chunks",
    "streamk.size",
    "streamk.sha256",
)


def _kafka() -> Any:
    try:
        import kafka
    except ImportError as exc:  # pragma: no cover - kafka-python is a runtime dependency
        raise SnapshotError(
            'the Kafka snapshot transport needs kafka-python: pip install "kafka-python[crc32c]"'
        ) from exc
    return kafka


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"model name {name!r} must be 1-128 characters from A-Z a-z 0-9 . _ - "
            "starting with a letter or digit (it is the record key; '/' is reserved for chunks)"
        )
    return name


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


@dataclass
class ManifestInfo:
    """One manifest seen on the topic; ``status`` is ok, incomplete, corrupt or deleted."""

    name: str
    id: str
    seq: int
    size: int
    chunks: int
    sha256: str
    created_at: float
    class_name: str
    partition: int
    offset: int
    status: str = "ok"
    reason: str = ""


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
        Seconds to wait for acknowledgements in ``publish`` (and metadata at start).
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
        config = {"acks": "all", "retries": 5, "linger_ms": 5, "max_block_ms": int(timeout * 1000)}
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
        _check_name(name)
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
        sid, sha = uuid.uuid4().hex, hashlib.sha256(buf).hexdigest()
        n = 0 if len(buf) <= self.chunk_size else math.ceil(len(buf) / self.chunk_size)
        deadline = time.monotonic() + self.timeout
        partition = self._partition(name)
        common = [(H_FORMAT, b"1"), (H_ID, sid.encode()), (H_COUNT, b"%d" % n)]
        common += [(H_SIZE, b"%d" % len(buf)), (H_SHA, sha.encode())]
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
        manifest: dict[str, Any] = {
            "format": TRANSPORT,
            "version": TRANSPORT_VERSION,
            "name": name,
            "id": sid,
            "chunks": n,
            "size": len(buf),
            "sha256": sha,
            "seq": snap.seq,
            "class": snap.class_name,
            "created_at": snap.created_at,
            "snapshot_version": snap.version,
        }
        if n == 0:
            manifest["data"] = buf
        value = msgpack.packb(manifest, use_bin_type=True)
        future = self._emit(name, value, [(H_KIND, b"manifest"), *common], partition)
        meta = self._wait([future], deadline, f"the manifest of {name!r}")[0]
        prev = self._last.get(name)
        stale = [f"{name}/{prev.id}/{i}" for i in range(prev.chunks)] if prev else []
        try:  # the new snapshot is committed; leftovers would only cost space
            tomb = [self._emit(key, None, [], partition) for key in stale]
            self._wait(tomb, time.monotonic() + self.timeout, "tombstones")
        except SnapshotError as exc:
            log.warning("could not tombstone old chunks of %r: %s", name, exc)
        log.info("published %r seq %d: %d bytes in %d chunks", name, snap.seq, len(buf), n)
        return PublishResult(
            name, sid, snap.seq, len(buf), sha, n, meta.partition, meta.offset, len(stale)
        )

    def _emit(self, key: str, value: bytes | None, headers: list, partition: int) -> Any:
        kafka = _kafka()
        try:
            return self._producer.send(
                self.topic, key=key.encode(), value=value, headers=headers, partition=partition
            )
        except kafka.errors.KafkaError as exc:
            raise SnapshotError(
                f"could not send {key!r} to topic {self.topic!r}: {exc}; the snapshot was not "
                "published (readers keep the previous one)"
            ) from exc

    def _wait(self, futures: list, deadline: float, what: str) -> list:
        kafka = _kafka()
        try:
            self._producer.flush(timeout=max(0.0, deadline - time.monotonic()))
            return [f.get(timeout=max(0.1, deadline - time.monotonic())) for f in futures]
        except kafka.errors.KafkaError as exc:
            raise SnapshotError(
                f"broker at {self.bootstrap_servers} did not acknowledge {what} on topic "
                f"{self.topic!r} within {self.timeout:g} s: {exc}; the snapshot was not "
                "published (readers keep the previous one)"
            ) from exc

    def close(self, timeout: float = 10.0) -> None:
        """Flush and close the producer."""
        self._producer.close(timeout=timeout)

    def __enter__(self) -> SnapshotPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _int_header(headers: dict[str, bytes], key: str, hi: int) -> int:
    raw = headers.get(key, b"")
    if not raw.isdigit() or len(raw) > 19 or int(raw) > hi:
        raise ValueError(f"header {key!r} must be a decimal int <= {hi}, got {raw[:24]!r}")
    return int(raw)


def _parse_manifest(value: bytes, limits: Limits) -> dict[str, Any]:
    m = msgpack.unpackb(
        value, raw=False, max_bin_len=len(value), max_str_len=4096, max_array_len=0,
        max_map_len=64, max_ext_len=0, strict_map_key=True,
    )  # fmt: skip
    if not isinstance(m, dict) or m.get("format") != TRANSPORT:
        raise ValueError(f"not a {TRANSPORT} manifest")
    if not isinstance(m.get("version"), int) or m["version"] > TRANSPORT_VERSION:
        raise ValueError(f"manifest version {m.get('version')!r} unknown to this reader")
    for key, kind in (("id", str), ("chunks", int), ("size", int), ("seq", int), ("sha256", str)):
        if not isinstance(m.get(key), kind) or isinstance(m[key], bool):
            raise ValueError(f"manifest field {key!r} missing or not {kind.__name__}")
    if not _HEX.fullmatch(m["sha256"]) or not 0 <= m["size"] <= limits.max_bytes:
        raise ValueError("manifest sha256 or size out of range")
    if not 0 <= m["chunks"] <= _MAX_CHUNKS or (m["chunks"] == 0) != isinstance(
        m.get("data"), bytes
    ):
        raise ValueError("manifest 'chunks' must be 0 exactly when the data is inline")
    return m


class _Assembler:
    """Reassemble snapshots from records in topic order; keep the best verified one per name."""

    def __init__(self, name: str | None, limits: Limits) -> None:
        self.name, self.limits = name, limits
        self.pending: dict[str, dict[str, Any]] = {}  # snapshot id -> headers and parts
        self.pending_bytes = 0
        self.finished: set[str] = set()
        self.manifests: deque[ManifestInfo] = deque(maxlen=100_000)
        self.best: dict[str, Snapshot] = {}
        self.best_info: dict[str, ManifestInfo] = {}
        self.fresh: set[str] = set()

    def feed(self, record: Any) -> None:
        try:
            key = record.key.decode()
        except (AttributeError, UnicodeDecodeError):
            return
        model, sep, rest = key.partition("/")
        if self.name is not None and model != self.name:
            return
        if not sep:
            self._manifest(model, record)
        elif record.value is None:  # tombstone of a chunk key
            sid = rest.partition("/")[0]
            part = self.pending.get(sid)
            if part is not None:
                self._drop(sid)
        else:
            self._chunk(model, rest, record)

    def _chunk(self, model: str, rest: str, record: Any) -> None:
        headers = {k: v for k, v in (record.headers or [])}
        try:
            sid = headers[H_ID].decode()
            index = _int_header(headers, H_INDEX, _MAX_CHUNKS)
            count = _int_header(headers, H_COUNT, _MAX_CHUNKS)
            size = _int_header(headers, H_SIZE, self.limits.max_bytes)
            if rest != f"{sid}/{index}" or index >= count:
                raise ValueError("key, id and index disagree")
        except (KeyError, UnicodeDecodeError, ValueError) as exc:
            log.warning("ignoring chunk %r at %d/%d: bad headers: %s", rest, record.partition,
                        record.offset, exc)  # fmt: skip
            return
        if sid in self.finished:
            log.warning("ignoring chunk %d of %r snapshot %s: it arrived after its manifest",
                        index, model, sid)  # fmt: skip
            return
        entry = self.pending.setdefault(sid, {"count": count, "size": size, "parts": {}})
        old = entry["parts"].get(index)
        entry["parts"][index] = record.value
        self.pending_bytes += len(record.value) - (len(old) if old is not None else 0)
        while self.pending_bytes > self.limits.max_bytes and len(self.pending) > 1:
            victim = next(iter(self.pending))
            log.warning("dropping incomplete snapshot %s: pending chunks exceed max_bytes", victim)
            self._drop(victim)

    def _drop(self, sid: str) -> dict[str, Any] | None:
        entry = self.pending.pop(sid, None)
        if entry is not None:
            self.pending_bytes -= sum(len(p) for p in entry["parts"].values())
        return entry

    def _manifest(self, model: str, record: Any) -> None:
        where = f"{model!r} at {record.partition}/{record.offset}"
        if record.value is None:
            log.info("snapshot %s deleted by a tombstone", where)
            self.best.pop(model, None)
            self.best_info.pop(model, None)
            self.fresh.discard(model)
            return
        try:
            m = _parse_manifest(record.value, self.limits)
        except Exception as exc:  # msgpack raises several types on bad input
            log.warning("ignoring manifest %s: %s", where, exc)
            return
        sid = m["id"]
        info = ManifestInfo(model, sid, m["seq"], m["size"], m["chunks"], m["sha256"],
                            float(m.get("created_at", 0.0)), str(m.get("class", "?")),
                            record.partition, record.offset)  # fmt: skip
        self.manifests.append(info)
        if sid in self.finished:
            info.status, info.reason = "duplicate", f"snapshot {sid} was already seen"
            log.info("ignoring duplicate manifest %s for snapshot %s", where, sid)
            return
        self.finished.add(sid)
        data = m["data"] if m["chunks"] == 0 else self._join(sid, m, info)
        if data is None:
            return
        actual = hashlib.sha256(data).hexdigest()
        if len(data) != m["size"] or not hmac.compare_digest(actual, m["sha256"]):
            info.status = "corrupt"
            info.reason = (f"reassembled {len(data)} bytes hash to {actual[:16]}…, manifest says "
                           f"{m['size']} bytes, {m['sha256'][:16]}…")  # fmt: skip
            log.warning("rejecting snapshot %s seq %d: %s", where, m["seq"], info.reason)
            return
        current = self.best.get(model)
        if current is not None and m["seq"] <= current.seq:
            info.status, info.reason = "stale", f"seq {m['seq']} <= {current.seq} already held"
            log.info("ignoring snapshot %s: %s", where, info.reason)
            return
        try:
            snap = loads(data, self.limits, build=False)
            if snap.seq != m["seq"]:
                raise SnapshotError(f"snapshot seq {snap.seq} != manifest seq {m['seq']}")
        except SnapshotError as exc:
            info.status, info.reason = "corrupt", str(exc)
            log.warning("rejecting snapshot %s: %s", where, exc)
            return
        self.best[model], self.best_info[model] = snap, info
        self.fresh.add(model)

    def _join(self, sid: str, m: dict[str, Any], info: ManifestInfo) -> bytes | None:
        entry = self._drop(sid) or {"count": m["chunks"], "parts": {}}
        missing = [i for i in range(m["chunks"]) if i not in entry["parts"]]
        if missing or entry["count"] != m["chunks"]:
            info.status = "incomplete"
            info.reason = (f"{len(missing)} of {m['chunks']} chunks missing (first: "
                           f"{missing[:5]}); chunk headers say {entry['count']}")  # fmt: skip
            log.warning("ignoring snapshot %r seq %d: %s", info.name, m["seq"], info.reason)
            return None
        return b"".join(entry["parts"][i] for i in range(m["chunks"]))

    def finish(self) -> None:
        """Log chunks that never got a manifest (a publisher that died mid-snapshot)."""
        for sid, entry in self.pending.items():
            log.info("ignoring incomplete snapshot %s: %d of %d chunks, no manifest",
                     sid, len(entry["parts"]), entry["count"])  # fmt: skip


def build_model(snap: Snapshot) -> Snapshot:
    """Rebuild ``snap.model`` from its verified state through the allow-list."""
    cls = resolve_class(snap.class_name)
    try:
        snap.model = cls.from_state(snap.state)
    except Exception as exc:
        raise SnapshotError(
            f"{snap.class_name}.from_state rejected the snapshot's state: {exc}"
        ) from exc
    return snap


class SnapshotReader:
    """Read snapshots back from a topic: the newest complete one, or follow new ones.

    Partitions are assigned manually and read from the beginning (no group join, no
    committed offsets). A scan ends when every partition reached the end offset the
    broker reports *and* then nothing arrived for ``idle_timeout`` seconds (tansu
    under-reports end offsets, so they only serve as a lower bound).

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

    def _scan(self, asm: _Assembler, timeout: float) -> None:
        """Feed every record from the beginning until drained (see class doc) or `timeout`."""
        deadline = time.monotonic() + timeout
        consumer = self._consumer(timeout)
        try:
            tps = self._assign(consumer)
            if not tps:
                log.info("snapshot topic %r does not exist (yet)", self.topic)
                return
            ends = consumer.end_offsets(tps, timeout_ms=int(timeout * 1000))
            while (remaining := deadline - time.monotonic()) > 0:
                got = consumer.poll(timeout_ms=int(min(self.idle_timeout, remaining) * 1000))
                for records in got.values():
                    for record in records:
                        asm.feed(record)
                if not got and all(consumer.position(tp) >= ends[tp] for tp in tps):
                    return
            log.warning(
                "reading snapshot topic %r took longer than %g s; using what was read", self.topic,
                timeout,
            )  # fmt: skip
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
        asm = _Assembler(_check_name(name), self.limits)
        self._scan(asm, timeout)
        snap = asm.best.get(name)
        return build_model(snap) if snap is not None and build else snap

    def list(self, timeout: float = 30.0) -> list[ManifestInfo]:
        """Every manifest on the topic in topic order, each with its status and reason."""
        asm = _Assembler(None, self.limits)
        self._scan(asm, timeout)
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
        and skipped. Exceptions from `callback` propagate.
        """
        asm = _Assembler(_check_name(name), self.limits)
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
        finally:
            consumer.close()


class HotSwapModel:
    """A scorer's view of the newest snapshot of `name`, swapped atomically as new ones arrive.

    ``predict_one`` uses whichever model is current when it is called; a background
    thread runs ``reader.follow`` and replaces the model when a higher seq arrives.

    Examples
    --------
    >>> with HotSwapModel(SnapshotReader(servers, "snapshots"), "fraud") as live:  # doctest: +SKIP
    ...     live.wait_for(0, timeout=30)
    ...     live.predict_one(x)
    """

    def __init__(self, reader: SnapshotReader, name: str, *, poll_timeout: float = 0.5) -> None:
        self.reader, self.name, self.poll_timeout = reader, _check_name(name), poll_timeout
        self._snap: Snapshot | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> HotSwapModel:
        """Start following in a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"hotswap-{self.name}", daemon=True
            )
            self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.reader.follow(self.name, self._swap, self._stop, self.poll_timeout)
        except BaseException as exc:  # keep serving the current model; report the failure
            self.error = exc
            log.error("following snapshots of %r stopped: %s", self.name, exc)

    def _swap(self, snap: Snapshot) -> None:
        with self._cond:
            if self._snap is None or snap.seq > self._snap.seq:
                self._snap = snap  # one reference assignment: readers see old or new, whole
                log.info("hot-swapped %r to seq %d", self.name, snap.seq)
            self._cond.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop following (the current model stays usable)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_for(self, seq: int, timeout: float) -> bool:
        """Block until a snapshot with seq >= `seq` is current, at most `timeout` s."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._snap is not None and self._snap.seq >= seq, timeout
            )

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snap

    @property
    def seq(self) -> int | None:
        snap = self._snap
        return None if snap is None else snap.seq

    @property
    def model(self) -> Any:
        snap = self._snap
        if snap is None:
            raise SnapshotError(f"no snapshot of {self.name!r} has arrived yet")
        return snap.model

    def predict_one(self, x: Any) -> Any:
        return self.model.predict_one(x)

    def predict_proba_one(self, x: Any) -> Any:
        return self.model.predict_proba_one(x)

    def __enter__(self) -> HotSwapModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
