"""Snapshot envelope and body: ``dumps`` a learner to checksummed bytes, ``loads`` it back."""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack

from .._version import __version__
from ..errors import SnapshotError
from .codec import as_bytes, from_plain, to_plain, unpack
from .implied import check_implied
from .limits import DEFAULT_LIMITS, CorruptSnapshot, Limits
from .objects import decode_objects, encode_objects
from .registry import class_name_of, resolve_class

__all__ = ["FORMAT", "VERSION", "Snapshot", "dumps", "loads", "seal", "verify_bytes"]

FORMAT = "streamk.snapshot"
VERSION = 1
_U63 = (1 << 63) - 1
_PARTITION = re.compile(r"0|[1-9][0-9]{0,9}")
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass
class Snapshot:
    """A decoded snapshot.

    Attributes
    ----------
    model
        The learner rebuilt with ``cls.from_state(state)``; None if loaded with ``build=False``.
    state
        The decoded plain-data state (arrays are fresh, writable NumPy arrays).
    class_name
        The allow-list name of the learner's class.
    offsets
        ``{source: {partition: next_offset}}``: the first offset *not* yet learned.
    seq, created_at, metrics, meta
        Snapshot sequence number, Unix time (s, UTC) of writing, numeric metrics, free metadata.
    checksum
        Lowercase hex SHA-256 of the body bytes (verified on load).
    version, size, writer
        Format version, total size in bytes, and the writer's ``"streamk X.Y.Z"`` string.
    """

    model: Any
    state: dict[str, Any]
    class_name: str
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    seq: int = 0
    created_at: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    checksum: str = ""
    version: int = VERSION
    size: int = 0
    writer: str | None = None


def dumps(
    model: Any,
    offsets: dict[str, dict[int, int]] | None = None,
    seq: int = 0,
    metrics: dict[str, float] | None = None,
    *,
    created_at: float | None = None,
    limits: Limits = DEFAULT_LIMITS,
    **meta: Any,
) -> bytes:
    """Encode `model` and its stream position as snapshot bytes (see docs/snapshot-format.md).

    Parameters
    ----------
    model
        A learner whose exact class is registered (see ``register_class``).
    offsets
        ``{source: {partition: next_offset}}``, the first offset not yet learned.
    seq
        Snapshot sequence number, 0 <= seq < 2**63.
    metrics
        Numeric metrics (str -> int or float).
    created_at
        Unix time in seconds; defaults to now. Pass it to make bytes reproducible.
    limits
        The snapshot must decode within these; default ``DEFAULT_LIMITS``.
    **meta
        Free plain-data metadata (same value types as ``state()``).

    Raises
    ------
    SnapshotError
        If the class is not registered, ``state()`` fails or is not plain data,
        an argument is malformed, or the result would exceed `limits` (its bytes, or the
        counts and implied allocation :func:`loads` checks: more than ``max_support``
        support vectors, say).
    """
    class_name = class_name_of(model)
    try:
        state = model.state()
    except Exception as exc:
        raise SnapshotError(f"{class_name}.state() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(state, dict):
        raise SnapshotError(f"{class_name}.state() returned a {type(state).__name__}, not a dict")
    _check_support_sets(state, class_name)
    try:  # the counts and implied bytes the reader checks (check_implied), checked here
        check_implied(state, limits)
    except CorruptSnapshot as exc:
        raise SnapshotError(
            f"{class_name}: readers would refuse this snapshot ({exc}); shrink the budget, "
            "or raise the limit on the writer and on every reader"
        ) from None
    return _seal_body(
        {
            "model": {
                "class": class_name,
                "state": to_plain(encode_objects(state, limits), limits=limits),
            },
            "stream": _offsets_to_plain(offsets or {}),
            "seq": _check_seq(seq),
            "created_at": _check_time(time.time() if created_at is None else created_at),
            "metrics": _check_metrics(to_plain(metrics or {}, limits=limits, path="metrics")),
            "meta": to_plain(meta, limits=limits, path="meta"),
            "writer": f"streamk {__version__}",
        },
        limits,
    )


def _check_support_sets(state: dict[str, Any], class_name: str) -> None:
    """Refuse to write a state whose support sets the loader would refuse.

    Every ``support`` map with coefficients in the state (the learner's; a wrapper's inner
    learner's; a consolidation guard's shadow's) goes through the loader's own checks,
    :func:`~streamk.learners.support.check_support_state` (finite coefficients, ids,
    ``next_id``) and :func:`~streamk.learners.support.cached_kernel_values` (finite cached
    ``k(x, x)`` and Gram), so writer and reader cannot disagree. Without it a learner whose
    coefficients had overflowed (a Projectron under consolidation reached inf) was written
    snapshot after snapshot, and every one of them failed to load. Cost: one pass over the
    state's maps and one ``isfinite`` over each support set's arrays, O(state size).
    """
    from ..learners.support import cached_kernel_values, check_support_state

    pending: list[tuple[str, Any]] = [("", state)]
    while pending:
        path, node = pending.pop()
        if isinstance(node, list):
            pending.extend((f"{path}[{i}]", v) for i, v in enumerate(node) if _is_container(v))
            continue
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "support" and isinstance(value, dict) and "coef" in value:
                try:
                    _coef, ids, _next = check_support_state(value, where)
                    cached_kernel_values(value.get("cache"), ids, value.get("keep_gram") is True)
                except SnapshotError as exc:
                    raise SnapshotError(
                        f"{class_name} was not written: its state at {where!r} would not load "
                        f"({exc}); the previous snapshots are kept"
                    ) from exc
            elif _is_container(value):
                pending.append((where, value))


def _is_container(value: Any) -> bool:
    """Maps and lists are walked; arrays and scalars are leaves (not iterated)."""
    return isinstance(value, dict | list)


def _seal_body(body: dict[str, Any], limits: Limits) -> bytes:
    try:
        packed = msgpack.packb(body, use_bin_type=True)
    except Exception as exc:
        raise SnapshotError(f"snapshot body could not be encoded: {exc}") from None
    out = seal(packed)
    if len(out) > limits.max_bytes:
        raise SnapshotError(
            f"snapshot of {len(out)} bytes exceeds max_bytes={limits.max_bytes}; readers "
            "would refuse it (shrink the budget or raise Limits.max_bytes on both sides)"
        )
    return out


def seal(body: bytes) -> bytes:
    """Wrap msgpack body bytes in the envelope with their SHA-256 (no validation of the body)."""
    return msgpack.packb(
        {"format": FORMAT, "version": VERSION, "body": body, "sha256": _sha256(body)},
        use_bin_type=True,
    )


def loads(
    data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS, *, build: bool = True
) -> Snapshot:
    """Decode snapshot bytes safely and rebuild the learner.

    Order: total size; envelope (pre-scanned, then msgpack with limits); format and
    version; SHA-256 of the body; body (pre-scanned, then msgpack with limits);
    schema and arrays; support strings/trees (flat form, see :mod:`.objects`); what
    rebuilding implies (support size, features, outputs, Gram and total bytes; see
    :mod:`.implied`); class from the allow-list;
    ``cls.from_state(state)``.
    Nothing executes on load but the registered class's import and ``from_state``.

    Parameters
    ----------
    build
        If False, stop before resolving the class: ``model`` is None. Useful for
        inspecting snapshots of learners this process cannot import.

    Raises
    ------
    CorruptSnapshot
        (a SnapshotError) if the bytes are not a valid snapshot.
    SnapshotError
        If the version is newer than this reader, the class is not allowed or
        cannot be imported, or ``from_state`` rejects the state.
    """
    buf = as_bytes(data, "snapshot")
    size = len(buf)
    body, checksum = _open_envelope(buf, limits)
    tree = unpack(body, limits, "body")
    del body
    snap = _parse_body(tree, limits)
    check_implied(snap.state, limits)
    snap = replace(snap, checksum=checksum, size=size)
    if build:
        snap.model = _build(snap.class_name, snap.state)
    return snap


def verify_bytes(
    data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS
) -> tuple[bool, str]:
    """Run exactly the validation of :func:`loads`, rebuilding the learner: ``(ok, reason)``.

    It accepts a file exactly when ``loads`` (and so the engine) would, as ``streamk
    snapshot verify`` does (which also tells damage from an intact file this reader cannot
    load: :func:`~streamk.snapshot.limits.is_intact`).
    """
    try:
        loads(data, limits, build=True)
    except SnapshotError as exc:
        return False, str(exc)
    return True, "ok"


def _open_envelope(buf: bytes | memoryview, limits: Limits) -> tuple[bytes, str]:
    if len(buf) > limits.max_bytes:
        raise CorruptSnapshot(f"snapshot of {len(buf)} bytes exceeds max_bytes={limits.max_bytes}")
    outer_limits = Limits(
        max_bytes=limits.max_bytes,
        max_depth=4,
        max_objects=256,
        max_str_len=4096,
        max_container_len=64,
    )
    outer = unpack(buf, outer_limits, "envelope")
    if not isinstance(outer, dict) or outer.get("format") != FORMAT:
        raise CorruptSnapshot(f"not a streamk snapshot (no 'format': {FORMAT!r} envelope)")
    version = outer.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise CorruptSnapshot(f"envelope 'version' must be a positive int, got {version!r}")
    if version > VERSION:
        raise SnapshotError(
            f"snapshot format version {version} is newer than this reader ({VERSION}); "
            "upgrade streamk to load it"
        )
    body, digest = outer.get("body"), outer.get("sha256")
    if not isinstance(body, bytes):
        raise CorruptSnapshot("envelope 'body' must be bin (msgpack bytes)")
    if not isinstance(digest, str) or not _HEX.fullmatch(digest):
        raise CorruptSnapshot("envelope 'sha256' must be 64 lowercase hex digits")
    actual = _sha256(body)
    if not hmac.compare_digest(actual, digest):
        raise CorruptSnapshot(
            f"checksum mismatch: body hashes to {actual[:16]}…, envelope says "
            f"{digest[:16]}…; the snapshot is damaged"
        )
    return body, actual


def _parse_body(tree: Any, limits: Limits) -> Snapshot:
    if not isinstance(tree, dict):
        raise CorruptSnapshot("body must be a msgpack map")
    missing = [
        k for k in ("model", "stream", "seq", "created_at", "metrics", "meta") if k not in tree
    ]
    if missing:
        raise CorruptSnapshot(f"body lacks required keys {missing}")
    model = tree["model"]
    if not isinstance(model, dict) or not isinstance(model.get("class"), str):
        raise CorruptSnapshot("body 'model' must be a map with a str 'class'")
    if not isinstance(model.get("state"), dict):
        raise CorruptSnapshot("body 'model.state' must be a map")
    writer = tree.get("writer")
    if writer is not None and not isinstance(writer, str):
        raise CorruptSnapshot("body 'writer' must be a str")
    try:
        seq = _check_seq(tree["seq"])
        created_at = _check_time(tree["created_at"])
        offsets = _offsets_from_plain(tree["stream"])
        metrics = _check_metrics(tree["metrics"])
    except SnapshotError as exc:
        raise CorruptSnapshot(str(exc)) from None
    meta = from_plain(tree["meta"], limits=limits, path="meta")
    if not isinstance(meta, dict):
        raise CorruptSnapshot("body 'meta' must be a map")
    return Snapshot(
        model=None,
        state=decode_objects(from_plain(model["state"], limits=limits, path="state"), limits),
        class_name=model["class"],
        offsets=offsets,
        seq=seq,
        created_at=created_at,
        metrics=metrics,
        meta=meta,
        writer=writer,
    )


def _build(class_name: str, state: dict[str, Any]) -> Any:
    cls = resolve_class(class_name)
    try:
        model = cls.from_state(state)
    except Exception as exc:
        raise SnapshotError(
            f"{class_name}.from_state rejected the snapshot's state: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(model, cls):
        raise SnapshotError(f"{class_name}.from_state returned a {type(model).__name__}")
    return model


def _sha256(body: bytes | memoryview) -> str:
    return hashlib.sha256(body).hexdigest()


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_seq(seq: Any) -> int:
    if not _is_int(seq) or not 0 <= seq <= _U63:
        raise SnapshotError(f"seq must be an int in [0, 2**63), got {seq!r}")
    return int(seq)


def _check_time(t: Any) -> float:
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
        raise SnapshotError(f"created_at must be finite non-negative Unix seconds, got {t!r}")
    return float(t)


def _check_metrics(metrics: Any) -> dict[str, float]:
    if not isinstance(metrics, dict):
        raise SnapshotError("metrics must be a map of str to number")
    for key, value in metrics.items():
        if (
            not isinstance(key, str)
            or isinstance(value, bool)
            or not isinstance(value, int | float)
        ):
            raise SnapshotError(f"metric {key!r} must map a str to an int or float, got {value!r}")
    return metrics


def _offsets_to_plain(offsets: Any) -> dict[str, dict[str, int]]:
    if not isinstance(offsets, dict):
        raise SnapshotError("offsets must be {source: {partition: next_offset}}")
    out: dict[str, dict[str, int]] = {}
    for source, parts in offsets.items():
        if not isinstance(source, str) or not source or not isinstance(parts, dict):
            raise SnapshotError(
                f"offsets: source {source!r} must be a non-empty str mapping to a dict"
            )
        row = out[source] = {}
        for part, off in parts.items():
            part = int(part) if hasattr(part, "__index__") and not isinstance(part, bool) else part
            off = int(off) if hasattr(off, "__index__") and not isinstance(off, bool) else off
            if (
                not _is_int(part)
                or not 0 <= part < 10**10
                or not _is_int(off)
                or not 0 <= off <= _U63
            ):
                raise SnapshotError(
                    f"offsets[{source!r}]: partition {part!r} -> offset {off!r} must be "
                    "non-negative ints (partition < 10**10, offset < 2**63)"
                )
            row[str(part)] = off
    return out


def _offsets_from_plain(stream: Any) -> dict[str, dict[int, int]]:
    if not isinstance(stream, dict):
        raise SnapshotError("body 'stream' must be a map")
    out: dict[str, dict[int, int]] = {}
    for source, parts in stream.items():
        if not isinstance(source, str) or not source or not isinstance(parts, dict):
            raise SnapshotError(
                f"stream: source {source!r} must be a non-empty str mapping to a map"
            )
        row = out[source] = {}
        for part, off in parts.items():
            if not isinstance(part, str) or not _PARTITION.fullmatch(part):
                raise SnapshotError(f"stream[{source!r}]: partition key {part!r} is not a decimal")
            if not _is_int(off) or not 0 <= off <= _U63:
                raise SnapshotError(
                    f"stream[{source!r}][{part}]: offset {off!r} is not in [0, 2**63)"
                )
            row[int(part)] = off
    return out
