"""Recorded event logs replayed as a one-partition source, with the same positions every time.

Two formats, by file extension:

* ``.jsonl`` / ``.ndjson``: one JSON event map per line;
* anything else (``.msgpack``, ``.mpk``, ``.log``): msgpack event maps written one after
  another (what appending ``streamk.engine.events.encode_event(...)`` to a file gives).

Either may be compressed, named with the compressor's extension after the format's:
``events.jsonl.gz``, ``events.msgpack.xz`` (gzip ``.gz``, bzip2 ``.bz2``, xz ``.xz``; read
as a stream, never decompressed to disk). A compressed log cannot be followed, and one cut
short (a copy interrupted) is read up to the cut, with a WARNING, like a log whose last
record is incomplete.

A file that is neither is refused when the source is made, before anything is learned: a
``.csv`` (learn it with ``streamk learn``, or ``streamk produce`` it to a topic), and a
msgpack log whose first byte does not open a map (every event and block is one), such as
a JSON array, a ``.json`` file or any other text. Read as msgpack, such a file would be one
record per byte or so, every one dead-lettered.

The offset of a record is its index in the file (0-based), so a replay of the same log
gives the same positions and, with ``sync`` consolidation, the same models. A log that ends
in an incomplete record (a msgpack tail that cannot be framed, a last line without its
newline that is not valid JSON) is taken for one still being written: it is left, with a
WARNING, for the next replay, which reads it once it is whole (dead-lettered, its offset
would be used up and the finished event never learned). A well-formed record msgpack
cannot decode (nested deeper than its stack) is framed alone, so the records after it are
still learned. With ``follow``, a last record or line still being written is left until it
is whole. A JSON line longer than
``max_line_bytes`` is never held whole: its first ``max_line_bytes + 1`` bytes become the
record (dead-lettered as oversize) and the rest of the line is skipped.

**Identity.** The source's :attr:`~ReplaySource.name` (the key of its offsets in snapshots)
comes from the file itself, ``replay:<basename>:<n>:<sha256 of the first n bytes, 16 hex>``
with ``n = min(size, 64 KiB)`` and the basename of the resolved path, so ``../events.jsonl``,
``/abs/events.jsonl`` and a symlink to it resume alike. A log that grew (appended records)
still answers to the names of its shorter self, and snapshots written before this naming
(keyed by the path as typed) answer through :meth:`~ReplaySource.answers_to`.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import logging
import lzma
import os
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from ..engine.events import DEFAULT_LIMITS, encode_event
from ..errors import InvalidInput
from .base import Record, Source

log = logging.getLogger(__name__)

__all__ = [
    "ReplaySource",
    "write_log",
    "decode_json_record",
    "log_suffix",
    "JSON_SUFFIXES",
    "open_file",
    "is_compressed",
    "STREAM_ERRORS",
]

#: a JSON-lines log's extensions (any other is msgpack)
JSON_SUFFIXES = (".jsonl", ".ndjson")
_CSV_SUFFIXES = (".csv", ".tsv")
#: compressed logs: extension -> the stdlib opener that reads them as a stream
_COMPRESSED: dict[str, Callable[..., BinaryIO]] = {
    ".gz": gzip.open,
    ".bz2": bz2.open,
    ".xz": lzma.open,
}
#: what a compressed stream cut short (or not of its kind) raises while it is read
STREAM_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error)


def open_file(path: str | os.PathLike[str], mode: str = "rb", **text: Any) -> Any:
    """``path`` opened for reading, through the decompressor its extension names (``.gz``,
    ``.bz2``, ``.xz``), else as it is; ``mode`` ``"rb"`` or ``"rt"`` (``text``: ``open``'s
    ``encoding``, ``newline``, ``errors``)."""
    return _COMPRESSED.get(Path(path).suffix.lower(), open)(path, mode, **text)


def is_compressed(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is named as a compressed file (``.gz``, ``.bz2``, ``.xz``)."""
    return Path(path).suffix.lower() in _COMPRESSED


def log_suffix(path: str | os.PathLike[str]) -> str:
    """A log's format extension, lower case, past a compression extension
    (``events.jsonl.gz`` -> ``.jsonl``): what decides how its records are framed."""
    path = Path(path)
    if path.suffix.lower() in _COMPRESSED:
        path = path.with_suffix("")
    return path.suffix.lower()


#: Bytes at the head of a msgpack log looked at to tell it from text.
_SNIFF_BYTES = 4096
_FORMATS = (
    "an event log is a .jsonl/.ndjson file (one JSON event map per line, such as "
    '{"x": [1.0, 2.0], "y": 1}) or a msgpack log (any other name: event maps one after '
    "another, as streamk.engine.events.encode_event packs them)"
)
#: Bytes at the head of a log that its fingerprint covers.
FINGERPRINT_BYTES = 64 * 1024
_PREFIX = "replay:"


class ReplaySource(Source):
    """Replay a recorded log file.

    Parameters
    ----------
    path
        The log file.
    follow
        Keep polling for records appended to the file (like ``tail -f``) instead of
        reporting the source exhausted at the end. A last line without its newline is
        then left until it is complete.
    max_line_bytes
        Longest JSON line held in memory (default: the events' ``max_payload_bytes``).

    Attributes
    ----------
    name
        The log's identity from its content (see the module docstring).
    aliases
        The legacy names of this log: the path as typed, absolute, and resolved.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        follow: bool = False,
        max_line_bytes: int = DEFAULT_LIMITS.max_payload_bytes,
    ):
        super().__init__()
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no event log at {self.path}")
        self.real = Path(os.path.realpath(self.path))
        self.aliases = tuple(
            dict.fromkeys([str(self.path), os.path.abspath(self.path), str(self.real)])
        )
        self._fingerprint: tuple[int, str] = (-1, "")
        self.follow = follow
        self.max_line_bytes = max_line_bytes
        self.json = log_suffix(self.path) in JSON_SUFFIXES
        self.compressed = is_compressed(self.path)
        if follow and self.compressed:
            raise InvalidInput(
                f"{self.path} is compressed: a compressed log cannot be followed (its end is "
                "written last); replay it whole, or follow the uncompressed log"
            )
        self._check_format()
        self._assigned = False
        self._reader: Iterator[bytes] | None = None
        self._next = 0
        self._done = False
        self._at: tuple[int, bytes | None, Iterator[bytes] | None] | None = None  # _record_at

    def _check_format(self) -> None:
        """Refuse a file that is not an event log, naming what it looks like and the fix.

        Raises
        ------
        InvalidInput
            A CSV file, or a msgpack log (any name but ``.jsonl``/``.ndjson``) whose first
            byte does not open a msgpack map. An empty log is accepted: with ``follow`` it
            may be written later.
        """
        path = self.path
        if log_suffix(path) in _CSV_SUFFIXES:
            raise InvalidInput(
                f"{path} is a CSV file, not an event log; {_FORMATS}. To learn from a CSV, "
                f"run `streamk learn {path}`, or send it to a topic with "
                f"`streamk produce {path} --topic TOPIC` and run the engine on that topic "
                "(`streamk run --topic TOPIC`)."
            )
        try:
            with self._open() as fh:
                head = fh.read(_SNIFF_BYTES)
        except STREAM_ERRORS as exc:  # (a plain file's read errors are not format errors)
            if not self.compressed:
                raise
            raise InvalidInput(
                f"{path} cannot be decompressed as its extension says "
                f"({path.suffix.lower()}): {exc}"
            ) from None
        if self.json or not head or head[0] in _MAP_HEADS:
            return
        raise InvalidInput(f"{path} is not an event log: {_FORMATS}; {_looks_like(head)}")

    def _open(self) -> BinaryIO:
        """The log's bytes as a stream: decompressed for a compressed log."""
        return open_file(self.path)

    # -- identity -------------------------------------------------------------------------
    @property
    def name(self) -> str:  # type: ignore[override]
        """``replay:<basename>:<n>:<sha256 of the first n bytes, 16 hex>``, n <= 64 KiB."""
        n, digest = self._fingerprint
        if n < FINGERPRINT_BYTES:  # a short (growing) log: cover what is there now
            size = min(self.real.stat().st_size, FINGERPRINT_BYTES)
            if size != n:
                self._fingerprint = n, digest = size, self._head_digest(size)
        return f"{_PREFIX}{self.real.name}:{n}:{digest}"

    def _head_digest(self, n: int) -> str | None:
        """SHA-256 (16 hex) of the log's first ``n`` bytes; None if it is shorter."""
        with open(self.real, "rb") as fh:
            head = fh.read(n)
        if len(head) != n:
            return None
        return hashlib.sha256(head).hexdigest()[:16]

    def answers_to(self, name: str) -> bool:
        """True if offsets recorded under ``name`` are this log's.

        That is: a fingerprint name of this log or of a shorter version of it (the same
        first ``n`` bytes: the log was appended to), or a legacy path name (as typed,
        absolute or resolved) that leads to this file.
        """
        if not isinstance(name, str):
            return False
        if name.startswith(_PREFIX):
            parts = name[len(_PREFIX) :].rsplit(":", 2)
            if len(parts) != 3 or not parts[1].isascii() or not parts[1].isdigit():
                return False
            n = int(parts[1][:7])  # a longer count is above the fingerprint's anyway
            if len(parts[1]) > 7 or not 1 <= n <= FINGERPRINT_BYTES or len(parts[2]) != 16:
                return False
            return self._head_digest(n) == parts[2]
        if name in self.aliases:
            return True
        try:
            return Path(name).is_file() and os.path.samefile(name, self.real)
        except (OSError, ValueError):
            return False

    # -- Source ---------------------------------------------------------------------------
    def assignment(self) -> list[int]:
        return [0]

    def seek(self, partition: int, offset: int) -> None:
        if partition != 0:
            raise ValueError(f"a replayed log has one partition (0), not {partition}")
        self._done = False
        at, self._at = self._at, None
        if at is not None and at[2] is not None and at[0] == offset - 1:
            self._reader, self._next = at[2], offset  # the checks' pass stopped right there
            return
        self._reader = self._records()
        self._next = 0
        for _ in range(offset):
            if next(self._reader, None) is None:
                break
            self._next += 1

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        if not self._assigned:
            self._assigned = True
            if self._on_assigned is not None:
                self._on_assigned([0])
        if self._reader is None:
            self.seek(0, 0)
        out: list[Record] = []
        for payload in self._reader:
            out.append(Record(payload, 0, self._next))
            self._next += 1
            if len(out) >= max_records:
                break
        else:
            if not self.follow:
                self._done = True
            else:  # pick up appended records on the next poll
                self.seek(0, self._next)
                if not out:  # nothing new: wait as a consumer's poll would, not spin
                    time.sleep(max(0.0, timeout))
        return out

    def exhausted(self) -> bool:
        return self._done

    # -- the engine's checks of a resume offset (as for a Kafka topic) ----------------------
    def beyond_end(self, targets: dict[int, int]) -> dict[int, int]:
        """``{0: 0}`` when the resume offset is past the log's end (a log truncated under
        its snapshot), else ``{}``: the engine never skips that silently."""
        target = int(targets.get(0, 0))
        if target <= 0:
            return {}
        return {0: 0} if self._record_at(target - 1) is None else {}

    def records_before(self, targets: dict[int, int]) -> dict[int, tuple[int | None, bytes]]:
        """``{0: (None, record)}``: the record before the resume offset (a log carries no
        timestamps), which the engine compares with the last record its snapshot learned.
        A log rewritten under its snapshot keeps its name when its first 64 KiB are the
        same (the name is their digest), and was resumed at the old offset in silence."""
        target = int(targets.get(0, 0))
        payload = self._record_at(target - 1) if target > 0 else None
        return {} if payload is None else {0: (None, payload)}

    def _record_at(self, offset: int) -> bytes | None:
        """Record ``offset`` of the log (``None`` when it is shorter). One pass serves the
        two checks of an assignment and the seek after them: the reader is kept where it
        stopped, just after that record, which is where the resume offset points."""
        if self._at is None or self._at[0] != offset:
            reader, found = self._records(), None
            for i, payload in enumerate(reader):
                if i == offset:
                    found = payload
                    break
            self._at = (offset, found, reader if found is not None else None)
        return self._at[1]

    # -- reading --------------------------------------------------------------------------
    def _records(self) -> Iterator[bytes]:
        if self.json:
            yield from self._lines()
            return
        with self._open() as fh:
            data = self._read_all(fh)
        start = base = 0
        unpacker = _unpacker(data, base)
        while start < len(data):
            try:
                unpacker.skip()
                end = base + unpacker.tell()
            except msgpack.OutOfData:  # a record still being written: read it when whole
                if not self.follow:
                    _incomplete(self.path, start)
                return
            except Exception:  # noqa: BLE001 - e.g. nested deeper than msgpack's stack
                end = _skip_one(data, start)  # well-formed but undecodable: frame it alone
                if end is None:  # not msgpack at all: the rest is one dead letter
                    yield data[start:]
                    return
                base = end
                unpacker = _unpacker(data, base)
            yield data[start:end]
            start = end

    def _read_all(self, fh: BinaryIO) -> bytes:
        """The whole (decompressed) log; of a compressed one cut short, what precedes the
        cut, with a WARNING (its last record, incomplete, is then left as any is)."""
        if not self.compressed:
            return fh.read()
        chunks = []
        try:  # (read1: what one decompressed block gives, so a cut loses one block at most)
            while chunk := fh.read1(1 << 16):  # type: ignore[attr-defined]
                chunks.append(chunk)
        except STREAM_ERRORS as exc:
            _cut_short(self.path, exc)
        return b"".join(chunks)

    def _lines(self) -> Iterator[bytes]:
        """Non-blank lines, stripped, each read with at most ``max_line_bytes + 1`` bytes."""
        limit = self.max_line_bytes
        with self._open() as fh:
            while True:
                try:
                    line = fh.readline(limit + 1)
                except STREAM_ERRORS as exc:
                    if not self.compressed:
                        raise
                    _cut_short(self.path, exc)
                    return
                if not line:
                    return
                if not line.endswith(b"\n"):
                    if len(line) > limit:  # too long: keep the head, skip the rest
                        while (more := fh.readline(1 << 16)) and not more.endswith(b"\n"):
                            pass
                        if more or not self.follow:
                            yield line
                            continue
                    if self.follow:  # a line still being written: wait for its newline
                        return
                    if not _parses(line):  # the same, found at the end of a plain replay
                        _incomplete(self.path, fh.tell() - len(line))
                        return
                line = line.strip()
                if line:
                    yield line


def _cut_short(path: Path, exc: BaseException) -> None:
    """Say that a compressed log ends before its stream does (a copy cut short): what was
    read is replayed, the rest cannot be."""
    log.warning(
        "%s: the compressed stream is cut short (%s): the records read before the cut are "
        "replayed, the rest cannot be read; copy the log again",
        path,
        exc,
    )


def _parses(line: bytes) -> bool:
    """Whether a JSON line is whole (what a last line without its newline must be to be
    read: else it is taken for one still being written)."""
    try:
        decode_json_record(line.strip())
    except ValueError:
        return False
    return True


def _incomplete(path: Path, at: int) -> None:
    """Say that the log ends in an incomplete record, left for the next replay: a writer
    may still be appending it (dead-lettered, its offset would be used up and the finished
    event never learned)."""
    log.warning(
        "%s ends in an incomplete record at byte %d (still being written?): left for the "
        "next replay, which reads it once it is whole; if it never will be, cut it off",
        path,
        at,
    )


#: First bytes of a msgpack map: fixmap, map 16, map 32.
_MAP_HEADS = frozenset([*range(0x80, 0x90), 0xDE, 0xDF])


def _looks_like(head: bytes) -> str:
    """What the head of a file that is not a msgpack log looks like, and the fix if known."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3 or b"\0" in head:  # not just a character cut at the end
            return "its first byte does not open a msgpack map, as every event's does."
        text = head[: exc.start].decode("utf-8")
    if any(c < " " and c not in "\t\n\r\f" for c in text):  # control characters: binary
        return "its first byte does not open a msgpack map, as every event's does."
    first = text.lstrip()[:1]
    if first == "[":
        return "it looks like a JSON array. Write one event map per line to a .jsonl file."
    if first == "{":
        return "it looks like JSON. If it holds one event map per line, name it .jsonl."
    return "it looks like text. Convert it to one of those formats."


def _unpacker(data: bytes, start: int) -> msgpack.Unpacker:
    rest = memoryview(data)[start:]
    return msgpack.Unpacker(
        io.BytesIO(rest), raw=False, strict_map_key=False, max_buffer_size=max(len(rest), 1)
    )


#: msgpack first byte -> (header bytes, width of the length/count that follows, kind)
_FIXED = {
    **dict.fromkeys((0xC0, 0xC2, 0xC3), (1, 0, "")),
    0xCA: (5, 0, ""), 0xCB: (9, 0, ""), 0xCC: (2, 0, ""), 0xCD: (3, 0, ""),
    0xCE: (5, 0, ""), 0xCF: (9, 0, ""), 0xD0: (2, 0, ""), 0xD1: (3, 0, ""),
    0xD2: (5, 0, ""), 0xD3: (9, 0, ""), 0xD4: (3, 0, ""), 0xD5: (4, 0, ""),
    0xD6: (6, 0, ""), 0xD7: (10, 0, ""), 0xD8: (18, 0, ""),
    0xC4: (2, 1, "bytes"), 0xC5: (3, 2, "bytes"), 0xC6: (5, 4, "bytes"),
    0xD9: (2, 1, "bytes"), 0xDA: (3, 2, "bytes"), 0xDB: (5, 4, "bytes"),
    0xC7: (3, 1, "bytes"), 0xC8: (4, 2, "bytes"), 0xC9: (6, 4, "bytes"),
    0xDC: (3, 2, "items"), 0xDD: (5, 4, "items"), 0xDE: (3, 2, "pairs"), 0xDF: (5, 4, "pairs"),
}  # fmt: skip


def _skip_one(data: bytes, pos: int) -> int | None:
    """End of the msgpack object at ``pos``, without recursion (any nesting depth).

    None if the bytes are not one well-formed object. Each step consumes at least one
    byte, so the work is bounded by the data's length whatever the declared counts.
    """
    pending, n = 1, len(data)
    while pending:
        if pos >= n:
            return None
        b = data[pos]
        pending -= 1
        if b <= 0x7F or b >= 0xE0:
            pos += 1
        elif b <= 0x8F:
            pos, pending = pos + 1, pending + 2 * (b & 0x0F)
        elif b <= 0x9F:
            pos, pending = pos + 1, pending + (b & 0x0F)
        elif b <= 0xBF:
            pos += 1 + (b & 0x1F)
        elif b in _FIXED:
            head, width, kind = _FIXED[b]
            count = int.from_bytes(data[pos + 1 : pos + 1 + width], "big") if width else 0
            if pos + 1 + width > n:
                return None
            pos += head
            if kind == "bytes":
                pos += count
            elif kind == "items":
                pending += count
            elif kind == "pairs":
                pending += 2 * count
        else:  # 0xC1: never used
            return None
    return pos if pos <= n else None


def decode_json_record(payload: bytes) -> bytes:
    """The event map of one JSON-lines record, re-packed as msgpack for the one decoder.

    Raises
    ------
    ValueError
        For every line that cannot become an event payload, with the reason: invalid JSON
        or UTF-8, nesting deeper than the parser allows, or integers msgpack cannot hold
        (beyond 64 bits). Nothing else escapes, so the engine dead-letters the line and goes
        on. ``NaN``/``Infinity`` literals are let through as floats: event validation
        rejects them with the code ``non_finite``, as for any other non-finite number.
    """
    try:
        obj = json.loads(payload)  # NaN/Infinity literals parse: validation names them
    except RecursionError:
        raise ValueError("nested too deeply to decode") from None
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except OverflowError:
        raise ValueError("an integer does not fit in 64 bits") from None
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. msgpack's nesting limit
        raise ValueError(f"cannot be re-encoded as an event ({exc})") from None


def write_log(path: str | os.PathLike[str], events: Iterable[dict[str, Any]]) -> int:
    """Write event maps (``{"x": ..., "y": ...}``) as a log in the format the suffix names."""
    path = Path(path)
    n = 0
    with open(path, "wb") as fh:
        for event in events:
            if path.suffix.lower() in JSON_SUFFIXES:
                fh.write(json.dumps(event).encode() + b"\n")
            else:
                fh.write(encode_event(**event))
            n += 1
    return n
