"""The Kafka snapshot record layout: keys, headers, manifests, and reassembly in topic order.

Pure functions and an in-memory assembler, no client: ``kafka.py`` feeds it records
(anything with ``key``, ``value``, ``headers``, ``partition``, ``offset``). The layout
is specified in docs/snapshot-format.md, "Kafka transport".
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

import msgpack

from ..errors import ConfigError, SnapshotError
from .format import Snapshot, loads
from .limits import Limits
from .registry import resolve_class

__all__ = [
    "TRANSPORT",
    "TRANSPORT_VERSION",
    "Assembler",
    "ManifestInfo",
    "build_model",
    "check_name",
    "encode_manifest",
    "parse_manifest",
]

log = logging.getLogger("streamk.snapshot.kafka")

TRANSPORT = "streamk.snapshot.kafka"
TRANSPORT_VERSION = 1
H_FORMAT, H_KIND, H_ID = "streamk.format", "streamk.kind", "streamk.id"
H_INDEX, H_COUNT = "streamk.chunk", "streamk.chunks"
H_SIZE, H_SHA = "streamk.size", "streamk.sha256"
MAX_CHUNKS = 1 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_HEX = re.compile(r"[0-9a-f]{64}")


def check_name(name: Any) -> str:
    """A model name is a record key: the file store's name rules, so no '/' (kept for chunks)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"model name {name!r} must be 1-128 characters from A-Z a-z 0-9 . _ - "
            "starting with a letter or digit (it is the record key; '/' is reserved for chunks)"
        )
    return name


def headers(sid: str, count: int, size: int, sha: str) -> list[tuple[str, bytes]]:
    """Headers common to a snapshot's chunks and manifest."""
    return [
        (H_FORMAT, b"%d" % TRANSPORT_VERSION),
        (H_ID, sid.encode()),
        (H_COUNT, b"%d" % count),
        (H_SIZE, b"%d" % size),
        (H_SHA, sha.encode()),
    ]


def encode_manifest(
    name: str, sid: str, chunks: int, data: bytes, sha: str, snap: Snapshot
) -> bytes:
    """The manifest value: ids, sizes and checksum, a summary of the snapshot, inline data."""
    manifest: dict[str, Any] = {
        "format": TRANSPORT,
        "version": TRANSPORT_VERSION,
        "name": name,
        "id": sid,
        "chunks": chunks,
        "size": len(data),
        "sha256": sha,
        "seq": snap.seq,
        "class": snap.class_name,
        "created_at": snap.created_at,
        "snapshot_version": snap.version,
    }
    if chunks == 0:
        manifest["data"] = data
    return msgpack.packb(manifest, use_bin_type=True)


@dataclass
class ManifestInfo:
    """One manifest seen on the topic.

    ``status`` is ``latest`` (the snapshot ``latest()`` returns), ``ok`` (valid, superseded),
    ``stale`` (valid but below a seq already held), ``duplicate``, ``incomplete`` or
    ``corrupt``; ``reason`` says why for the last four.
    """

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


def _int_header(hdrs: dict[str, bytes], key: str, hi: int) -> int:
    raw = hdrs.get(key, b"")
    if not raw.isdigit() or len(raw) > 19 or int(raw) > hi:
        raise ValueError(f"header {key!r} must be a decimal int <= {hi}, got {raw[:24]!r}")
    return int(raw)


def parse_manifest(value: bytes, limits: Limits) -> dict[str, Any]:
    """Decode and check a manifest value (a small msgpack map; `data` inline when 0 chunks)."""
    m = msgpack.unpackb(
        value,
        raw=False,
        max_bin_len=len(value),
        max_str_len=4096,
        max_array_len=0,
        max_map_len=64,
        max_ext_len=0,
    )
    if not isinstance(m, dict) or m.get("format") != TRANSPORT:
        raise ValueError(f"not a {TRANSPORT} manifest")
    if not isinstance(m.get("version"), int) or m["version"] > TRANSPORT_VERSION:
        raise ValueError(f"manifest version {m.get('version')!r} unknown to this reader")
    for key, kind in (("id", str), ("chunks", int), ("size", int), ("seq", int), ("sha256", str)):
        if not isinstance(m.get(key), kind) or isinstance(m[key], bool):
            raise ValueError(f"manifest field {key!r} missing or not {kind.__name__}")
    if not _HEX.fullmatch(m["sha256"]) or not 0 <= m["size"] <= limits.max_bytes:
        raise ValueError("manifest 'sha256' or 'size' out of range")
    created, cls = m.get("created_at"), m.get("class")  # summary only: never trusted
    ok_time = isinstance(created, int | float) and not isinstance(created, bool)
    m["created_at"] = float(created) if ok_time else 0.0
    m["class"] = cls if isinstance(cls, str) else "?"
    inline = isinstance(m.get("data"), bytes)
    if not 0 <= m["chunks"] <= MAX_CHUNKS or (m["chunks"] == 0) != inline:
        raise ValueError("manifest 'chunks' must be 0 exactly when 'data' is inline")
    return m


def build_model(snap: Snapshot) -> Snapshot:
    """Rebuild ``snap.model`` from its verified state through the allow-list (in place)."""
    cls = resolve_class(snap.class_name)
    try:
        snap.model = cls.from_state(snap.state)
    except Exception as exc:
        raise SnapshotError(f"{snap.class_name}.from_state rejected the state: {exc}") from exc
    return snap


class Assembler:
    """Reassemble snapshots from records in topic order; keep the best verified one per model.

    Chunks wait in memory (at most ``limits.max_bytes`` in all; the oldest pending snapshot
    is dropped beyond that) until their manifest arrives. A complete snapshot whose bytes
    match the manifest's size and SHA-256 and that ``loads`` verifies becomes the model's
    best unless a higher seq is already held (an equal seq replaces: a deterministic replay).
    Every rejection is logged with its reason and recorded on its ``ManifestInfo``.

    Parameters
    ----------
    name
        Only this model's records are kept; None keeps every model's (for listing).
    track_chunks
        Remember every live chunk key (for ``stale_chunks``, i.e. sweeping).
    """

    def __init__(self, name: str | None, limits: Limits, *, track_chunks: bool = False) -> None:
        self.name, self.limits, self.track_chunks = name, limits, track_chunks
        self.pending: dict[str, dict[int, bytes]] = {}  # snapshot id -> index -> bytes
        self.counts: dict[str, int] = {}  # snapshot id -> chunk count from the headers
        self.pending_bytes = 0
        self.finished: set[str] = set()  # ids whose manifest was seen
        self.live_chunks: set[str] = set()  # chunk keys not (yet) tombstoned
        self.manifests: deque[ManifestInfo] = deque(maxlen=100_000)
        self.best: dict[str, Snapshot] = {}
        self.best_info: dict[str, ManifestInfo] = {}
        self.fresh: set[str] = set()  # models whose best changed since the caller looked

    def feed(self, record: Any) -> None:
        """Take one record (in partition order)."""
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
            self.live_chunks.discard(key)
            self._drop(rest.partition("/")[0])
        else:
            if self.track_chunks:
                self.live_chunks.add(key)
            self._chunk(model, rest, record)

    def _chunk(self, model: str, rest: str, record: Any) -> None:
        hdrs = dict(record.headers or [])
        try:
            sid = hdrs[H_ID].decode()
            index = _int_header(hdrs, H_INDEX, MAX_CHUNKS)
            count = _int_header(hdrs, H_COUNT, MAX_CHUNKS)
            if rest != f"{sid}/{index}" or index >= count:
                raise ValueError(f"key {rest!r}, id {sid!r} and index {index} disagree")
        except (AttributeError, KeyError, UnicodeDecodeError, ValueError) as exc:
            where = f"{record.partition}/{record.offset}"
            log.warning("ignoring chunk %r of %r at %s: bad headers: %s", rest, model, where, exc)
            return
        if sid in self.finished:
            log.warning(
                "ignoring chunk %d of %r snapshot %s: after its manifest", index, model, sid
            )
            return
        parts = self.pending.setdefault(sid, {})
        self.counts.setdefault(sid, count)
        old = parts.get(index)
        parts[index] = record.value
        self.pending_bytes += len(record.value) - (0 if old is None else len(old))
        while self.pending_bytes > self.limits.max_bytes and self.pending:
            victim = next(iter(self.pending))
            log.warning("dropping snapshot %s: buffered chunks exceed max_bytes", victim)
            self._drop(victim)

    def _drop(self, sid: str) -> dict[int, bytes] | None:
        self.counts.pop(sid, None)
        parts = self.pending.pop(sid, None)
        if parts is not None:
            self.pending_bytes -= sum(len(p) for p in parts.values())
        return parts

    def _manifest(self, model: str, record: Any) -> None:
        where = f"{model!r} at {record.partition}/{record.offset}"
        if record.value is None:
            log.info("snapshot %s deleted by a tombstone", where)
            self.best.pop(model, None)
            self.best_info.pop(model, None)
            self.fresh.discard(model)
            return
        try:
            m = parse_manifest(record.value, self.limits)
        except Exception as exc:  # msgpack raises several types on bad input
            log.warning("ignoring manifest %s: %s", where, exc)
            return
        info = ManifestInfo(
            model, m["id"], m["seq"], m["size"], m["chunks"], m["sha256"], m["created_at"],
            m["class"], record.partition, record.offset,
        )  # fmt: skip
        self.manifests.append(info)
        status, reason = self._accept(model, m, info)
        if status != "ok":
            info.status, info.reason = status, reason
            level = logging.INFO if status in ("stale", "duplicate") else logging.WARNING
            log.log(level, "ignoring snapshot %s seq %d (%s): %s", where, m["seq"], status, reason)

    def _accept(self, model: str, m: dict[str, Any], info: ManifestInfo) -> tuple[str, str]:
        """Make the snapshot `model`'s best if complete, valid and newest: (status, reason)."""
        sid = m["id"]
        if sid in self.finished:
            return "duplicate", f"snapshot {sid} was already seen"
        self.finished.add(sid)
        count = self.counts.pop(sid, m["chunks"])
        parts = self._drop(sid) or {}
        if m["chunks"]:
            missing = [i for i in range(m["chunks"]) if i not in parts]
            if missing or count != m["chunks"]:
                return "incomplete", (
                    f"{len(missing)} of {m['chunks']} chunks missing (first {missing[:5]}); "
                    f"chunk headers say {count}"
                )
        data = m["data"] if m["chunks"] == 0 else b"".join(parts[i] for i in range(m["chunks"]))
        actual = hashlib.sha256(data).hexdigest()
        if len(data) != m["size"] or not hmac.compare_digest(actual, m["sha256"]):
            return "corrupt", (
                f"reassembled {len(data)} bytes hash to {actual[:16]}…, manifest says "
                f"{m['size']} bytes, {m['sha256'][:16]}…"
            )
        current = self.best.get(model)
        if current is not None and m["seq"] < current.seq:
            return "stale", f"seq {m['seq']} < {current.seq} already held"
        try:
            snap = loads(data, self.limits, build=False)
        except SnapshotError as exc:
            return "corrupt", str(exc)
        if snap.seq != m["seq"]:
            return "corrupt", f"snapshot seq {snap.seq} != manifest seq {m['seq']}"
        self.best[model], self.best_info[model] = snap, info
        self.fresh.add(model)
        return "ok", ""

    def finish(self) -> None:
        """Log snapshots whose chunks never got a manifest (a writer that died mid-snapshot)."""
        for sid, parts in self.pending.items():
            log.info(
                "ignoring incomplete snapshot %s: %d of %d chunks and no manifest",
                sid, len(parts), self.counts.get(sid, 0),
            )  # fmt: skip

    def stale_chunks(self, name: str) -> list[str]:
        """Live chunk keys of `name` that no longer serve its best snapshot (for tombstoning)."""
        keep = self.best_info.get(name)
        kept = f"{name}/{keep.id}/" if keep is not None else "/"  # no key starts with "/"
        mine = (k for k in self.live_chunks if k.startswith(f"{name}/"))
        return sorted(k for k in mine if not k.startswith(kept))
