"""Dead-letter records: a rejected event's original bytes, the reason, and where it came from.

Re-exported by :mod:`streamk.engine.events`. A dead-letter *file* is JSON lines (one
record per line, payload in base64) or concatenated msgpack maps (payload as
bin); :class:`DeadLetterFile` appends and flushes each record and fsyncs on
flush and close, :func:`read_dead_letters` reads either format back.

A write cut short (disk full, a crash) can leave a partial record at the end of a file;
:func:`open_append`, which both dead-letter and prediction files open through, cuts it off
before appending, so the next run's records never join onto it and the file stays readable.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import msgpack

from ..errors import ConfigError, InvalidEvent, SinkError

__all__ = ["DeadLetter", "DeadLetterFile", "DeadLetterLog", "read_dead_letters", "read_records"]

log = logging.getLogger(__name__)

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


def _complete_end(fh: BinaryIO, size: int, format: Literal["jsonl", "msgpack"]) -> int:
    """Byte offset just after the last complete record of an open file of ``size`` bytes.

    JSON lines: just after the last newline. Msgpack: decoded forward, record by record,
    since a map's bytes hold no end marker; a record that is not a torn prefix (bytes no
    writer of ours produced) raises ``ValueError`` rather than cutting off what follows.
    """
    if format == "jsonl":
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            fh.seek(start)
            chunk = fh.read(end - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            end = start
        return 0
    fh.seek(0)
    unpacker = msgpack.Unpacker(fh, raw=False, strict_map_key=False, max_buffer_size=256 << 20)
    position = 0
    while True:
        try:
            unpacker.skip()
        except msgpack.OutOfData:
            return position
        except Exception as exc:
            raise ValueError(f"corrupt msgpack record at byte {position}: {exc}") from exc
        position = unpacker.tell()


def open_append(path: Path, format: Literal["jsonl", "msgpack"], what: str) -> BinaryIO:
    """Open ``path`` for appending records, first cutting off a partial last record.

    A failed or interrupted write leaves part of a record at the end of the file;
    appended straight after it, the next record would join it and make the file
    unreadable. The cut is logged (one WARNING naming the file and the bytes dropped);
    the record it held is written again by the resumed run (outputs are at-least-once).

    Parameters
    ----------
    path
        File to append to (created if missing).
    format
        ``"jsonl"`` or ``"msgpack"``: what a complete record is.
    what
        What the file holds, for messages (``"dead-letter"``, ``"prediction"``).

    Raises
    ------
    SinkError
        When the file cannot be opened, or its msgpack records are corrupt (not merely
        cut short), naming the file.
    """

    try:
        fh = open(path, "ab")  # noqa: SIM115 - the caller closes it
        try:
            size = os.fstat(fh.fileno()).st_size
            if size:
                with open(path, "rb") as reader:
                    end = _complete_end(reader, size, format)
                if end < size:
                    os.truncate(fh.fileno(), end)
                    log.warning(
                        "%s file %s ended in a partial record (a write cut short): "
                        "dropped its last %d bytes, from byte %d; the resumed run writes "
                        "that record again",
                        what,
                        path,
                        size - end,
                        end,
                    )
        except BaseException:
            fh.close()
            raise
    except ValueError as exc:
        raise SinkError(f"cannot append to {what} file {path}: {exc}") from exc
    except OSError as exc:
        raise SinkError(f"cannot open {what} file {path}: {exc}") from exc
    return fh


def reopen_if_moved(
    fh: BinaryIO, path: Path, format: Literal["jsonl", "msgpack"], what: str
) -> BinaryIO:
    """The file to write next, checked after a sync of the open file ``fh`` at ``path``.

    Deleted (no link left: ``rm``, or its directory removed): raises
    :class:`~streamk.sinks.SinkError`. Writes to a deleted file succeed and are lost; the
    engine must stop before committing past them.

    Moved (renamed, as logrotate's default ``create`` mode rotates a file: ``fh`` still has
    a link, but ``path`` no longer names it): the records written so far are whole and
    synced in the moved file, so ``fh`` is closed and ``path`` opened afresh (created, or a
    file put there appended to). Rotation then needs no restart and no ``copytruncate``,
    which loses what is written between its copy and its truncation. One INFO line.
    """
    now = os.fstat(fh.fileno())
    if now.st_nlink == 0:
        raise SinkError(f"{what} file {path} was deleted while being written")
    try:
        named = os.stat(path)
    except FileNotFoundError:
        named = None
    if named is not None and (named.st_dev, named.st_ino) == (now.st_dev, now.st_ino):
        return fh
    fh.close()
    log.info(
        "%s file %s was moved (rotated?): the records so far are in the moved file; "
        "appending to %s from now on",
        what,
        path,
        path,
    )
    return open_append(path, format, what)


class DeadLetterFile:
    """Append dead-letter records to a file, flushing each; fsync on flush and close.

    A partial record a cut-short write left at the end of the file is cut off first (see
    :func:`open_append`). Write failures raise :class:`~streamk.sinks.SinkError` naming
    the file.

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
        self._failed = False  # a write or sync failed: reported once, not again on close
        self._fh = open_append(self.path, format, "dead-letter")

    def write(self, record: DeadLetter) -> None:
        """Append one record and flush it to the OS."""

        if self._fh.closed:
            raise SinkError(f"dead-letter file {self.path} is closed")
        if self.format == "jsonl":
            data = record.to_json().encode("ascii") + b"\n"
        else:
            data = record.to_msgpack()
        try:
            self._fh.write(data)
            self._fh.flush()
        except OSError as exc:
            self._failed = True
            raise SinkError(f"could not write a dead letter to {self.path}: {exc}") from exc
        self.count += 1

    def flush(self) -> None:
        """Fsync the file; raise :class:`~streamk.sinks.SinkError` if it was deleted, and
        go on in a new file if it was moved (:func:`reopen_if_moved`).

        The engine calls it before each commit, so dead letters are durable first.
        """
        if self._fh.closed:
            return
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh = reopen_if_moved(self._fh, self.path, self.format, "dead-letter")
        except SinkError:
            self._failed = True
            raise
        except OSError as exc:
            self._failed = True
            raise SinkError(f"could not sync dead letters to {self.path}: {exc}") from exc

    def close(self) -> None:
        """Flush, fsync and close; idempotent. After a failure :meth:`write` or
        :meth:`flush` already reported, only closes (the error is not raised twice)."""
        if self._fh.closed:
            return
        if self._failed:
            try:
                self._fh.close()
            except OSError:
                pass  # the buffered bytes that failed before: already reported
            return
        try:
            self.flush()
        finally:
            if not self._fh.closed:
                try:
                    self._fh.close()
                except OSError:
                    if not self._failed:
                        raise

    def __enter__(self) -> DeadLetterFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DeadLetterLog:
    """Where dead letters go when no destination is set: the log, without flooding it.

    With neither ``dead_letter_dir`` nor ``dead_letter_topic``, a rejected record's bytes are
    not kept, only its position (the source still holds it) and reason. A WARNING per
    record would flood the log at the rate of a bad producer (every event of a regression
    stream fed to a classifier, say) and slow the engine down, so the first ``in_full``
    letters of each reason code are logged in full, the first of all saying how to keep
    the records; after that, letters are counted and one WARNING sums them up by reason
    at most every ``every`` seconds, and at :meth:`close`. The metrics count every letter
    whatever is logged.

    Parameters
    ----------
    in_full
        Letters of each reason code logged one by one.
    every
        Least seconds between two summaries.
    clock
        Monotonic seconds (a parameter for tests).
    """

    def __init__(
        self, in_full: int = 5, every: float = 60.0, clock: Callable[[], float] = time.monotonic
    ):
        self.in_full = in_full
        self.every = every
        self.count = 0
        self._clock = clock
        self._logged: dict[str, int] = {}  # per code, letters logged one by one
        self._held: dict[str, int] = {}  # per code, letters counted since the last summary
        self._last_summary = clock()

    def write(self, record: DeadLetter) -> None:
        """Log the letter in full, or count it for the next summary."""
        self.count += 1
        code = record.code or "unknown"
        if self._logged.get(code, 0) < self.in_full:
            if not self._logged:
                log.warning(
                    "dead letters are logged, not kept: set dead_letter_dir or "
                    "dead_letter_topic to keep their records (the first %d of each reason "
                    "in full, then a count every %g s)",
                    self.in_full,
                    self.every,
                )
            self._logged[code] = self._logged.get(code, 0) + 1
            log.warning(
                "dead letter at %s[%s]@%s: %s",
                record.source,
                record.partition,
                record.offset,
                record.reason,
            )
            return
        self._held[code] = self._held.get(code, 0) + 1
        self.flush()

    def flush(self) -> None:
        """The summary, if one is due (after a held letter, and at each checkpoint)."""
        if self._held and self._clock() - self._last_summary >= self.every:
            self._summarise()

    def close(self) -> None:
        """The summary of the letters not yet reported."""
        if self._held:
            self._summarise()

    def _summarise(self) -> None:
        n = sum(self._held.values())
        by_code = ", ".join(f"{code} {k:,}" for code, k in sorted(self._held.items()))
        letters = "dead letter" if n == 1 else "dead letters"
        log.warning("%s more %s, not logged one by one: %s", f"{n:,}", letters, by_code)
        self._held.clear()
        self._last_summary = self._clock()


def read_dead_letters(
    path: str | os.PathLike[str], format: Literal["jsonl", "msgpack"] | None = None
) -> Iterator[DeadLetter]:
    """Yield the records of a dead-letter file; the format is sniffed when not given.

    Raises
    ------
    InvalidEvent
        On a corrupt or truncated record, naming the line or byte offset.
    """
    for where, obj in read_records(path, format, "dead-letter"):
        try:
            yield DeadLetter.from_dict(obj)
        except (ValueError, TypeError) as exc:
            raise InvalidEvent(f"{where}: not a dead-letter record: {exc}") from exc


def read_records(
    path: str | os.PathLike[str],
    format: Literal["jsonl", "msgpack"] | None,
    what: str,
    strict_map_key: bool = True,
) -> Iterator[tuple[str, Any]]:
    """The decoded records of a file of ``what`` records (dead letters, predictions), each
    with where it starts (``path:line`` or ``path @ byte N``) for an error about it.

    JSON lines or msgpack maps one after another, sniffed when ``format`` is not given.
    ``strict_map_key=False`` takes maps keyed by other than strings (a prediction's
    probabilities by class).

    Raises
    ------
    InvalidEvent
        On a line that is not JSON, a corrupt msgpack record, or a torn last one (a write
        cut short), naming the place; the records before it have been yielded.
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
                    obj = json.loads(line)
                except ValueError as exc:
                    raise InvalidEvent(f"{path}:{lineno}: not a {what} record: {exc}") from exc
                yield f"{path}:{lineno}", obj
            return
        unpacker = msgpack.Unpacker(
            fh, raw=False, strict_map_key=strict_map_key, max_buffer_size=256 << 20
        )
        position = 0
        while True:
            try:
                obj = unpacker.unpack()
            except msgpack.OutOfData:
                break  # clean end, or a torn tail caught below
            except Exception as exc:
                raise InvalidEvent(f"{path} @ byte {position}: corrupt record: {exc}") from exc
            yield f"{path} @ byte {position}", obj
            position = unpacker.tell()
        size = path.stat().st_size
        if position != size:
            raise InvalidEvent(f"{path}: truncated {what} record at byte {position} of {size}")
