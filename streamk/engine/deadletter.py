"""Dead-letter records: a rejected event's original bytes, the reason, and where it came from.

Re-exported by :mod:`streamk.engine.events`. A dead-letter *file* is JSON lines (one
record per line, payload in base64) or concatenated msgpack maps (payload as
bin); :class:`DeadLetterFile` appends and flushes each record and fsyncs on
close, :func:`read_dead_letters` reads either format back.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgpack

from ..errors import ConfigError, InvalidEvent

__all__ = ["DeadLetter", "DeadLetterFile", "read_dead_letters"]

_FIELDS = ("payload", "reason", "source", "partition", "offset", "timestamp_ms", "code")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class DeadLetter:
    """One rejected event.

    Parameters
    ----------
    payload
        The original message bytes, unchanged.
    reason
        Why it was rejected (``InvalidEvent.reason``).
    source
        Topic name or file path it came from.
    partition, offset
        Its position in the source (``None`` where the source has none).
    timestamp_ms
        The source record's timestamp if known, else the time of rejection.
    code
        Stable reason identifier (``InvalidEvent.code``), handy for counting.
    """

    payload: bytes
    reason: str
    source: str
    partition: int | None = None
    offset: int | None = None
    timestamp_ms: int = field(default_factory=_now_ms)
    code: str | None = None

    @classmethod
    def from_error(
        cls,
        payload: bytes,
        error: Exception,
        source: str,
        partition: int | None = None,
        offset: int | None = None,
        timestamp_ms: int | None = None,
    ) -> DeadLetter:
        """Build a record from the error that rejected an event (``InvalidEvent`` from
        ``decode``, or what a model raised): its reason, and its code or ``"rejected"``."""
        return cls(
            bytes(payload),
            getattr(error, "reason", str(error)),
            source,
            partition,
            offset,
            timestamp_ms or _now_ms(),
            getattr(error, "code", None) or "rejected",
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``payload`` stays bytes)."""
        return asdict(self)

    def to_msgpack(self) -> bytes:
        """One msgpack map, payload as bin."""
        return msgpack.packb(self.to_dict(), use_bin_type=True)

    def to_json(self) -> str:
        """One line of JSON, payload as base64 under ``payload_b64``."""
        data = self.to_dict()
        data["payload_b64"] = base64.b64encode(data.pop("payload")).decode("ascii")
        return json.dumps(data, ensure_ascii=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeadLetter:
        """Inverse of :meth:`to_dict` (also accepts ``payload_b64``)."""
        if not isinstance(data, dict):
            raise InvalidEvent(f"a dead-letter record must be a map, got {type(data).__name__}")
        data = dict(data)
        if "payload_b64" in data:
            data["payload"] = base64.b64decode(data.pop("payload_b64"), validate=True)
        unknown = set(data) - set(_FIELDS)
        if unknown or not isinstance(data.get("payload"), bytes):
            raise InvalidEvent(f"not a dead-letter record (fields {sorted(map(str, data))})")
        return cls(**data)


class DeadLetterFile:
    """Append dead-letter records to a file, flushing each; fsync on close.

    Parameters
    ----------
    path
        File to append to (created if missing).
    format
        ``"jsonl"`` (readable with ``jq``) or ``"msgpack"`` (compact).
    """

    def __init__(self, path: str | os.PathLike[str], format: Literal["jsonl", "msgpack"] = "jsonl"):
        if format not in ("jsonl", "msgpack"):
            raise ConfigError(f"dead-letter format must be 'jsonl' or 'msgpack', not {format!r}.")
        self.path = Path(path)
        self.format = format
        self.count = 0
        self._fh = open(self.path, "ab")  # noqa: SIM115 - closed in close()

    def write(self, record: DeadLetter) -> None:
        """Append one record and flush it to the OS."""
        if self._fh.closed:
            raise ValueError(f"dead-letter file {self.path} is closed")
        if self.format == "jsonl":
            data = record.to_json().encode("ascii") + b"\n"
        else:
            data = record.to_msgpack()
        self._fh.write(data)
        self._fh.flush()
        self.count += 1

    def close(self) -> None:
        """Flush, fsync and close; idempotent."""
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()

    def __enter__(self) -> DeadLetterFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_dead_letters(
    path: str | os.PathLike[str], format: Literal["jsonl", "msgpack"] | None = None
) -> Iterator[DeadLetter]:
    """Yield the records of a dead-letter file; the format is sniffed when not given.

    Raises
    ------
    InvalidEvent
        On a corrupt or truncated record, naming the line or byte offset.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        if format is None:
            head = fh.read(1)
            format = "jsonl" if head in (b"{", b"", b"\n") else "msgpack"
            fh.seek(0)
        if format == "jsonl":
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield DeadLetter.from_dict(json.loads(line))
                except (ValueError, TypeError) as exc:
                    raise InvalidEvent(f"{path}:{lineno}: not a dead-letter record: {exc}") from exc
            return
        unpacker = msgpack.Unpacker(fh, raw=False, max_buffer_size=256 << 20)
        position = 0
        while True:
            try:
                obj = unpacker.unpack()
            except msgpack.OutOfData:
                break  # clean end, or a torn tail caught below
            except Exception as exc:
                raise InvalidEvent(f"{path} @ byte {position}: corrupt record: {exc}") from exc
            try:
                record = DeadLetter.from_dict(obj)
            except (ValueError, TypeError) as exc:
                raise InvalidEvent(f"{path} @ byte {position}: {exc}") from exc
            position = unpacker.tell()
            yield record
        size = path.stat().st_size
        if position != size:
            raise InvalidEvent(f"{path}: truncated dead-letter record at byte {position} of {size}")
