"""Recorded event logs replayed as a one-partition source, with the same positions every time.

Two formats, by file extension:

* ``.jsonl`` / ``.ndjson``: one JSON event map per line;
* anything else (``.msgpack``, ``.mpk``, ``.log``): msgpack event maps written one after
  another (what appending ``streamk.engine.events.encode_event(...)`` to a file gives).

The offset of a record is its index in the file (0-based), so a replay of the same log
gives the same positions and, with ``sync`` consolidation, the same models. A msgpack
log whose tail cannot be decoded yields that tail as one last record, which the engine
dead-letters with the reason; nothing is dropped silently.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgpack

from ..engine.events import encode_event
from .base import Record, Source

__all__ = ["ReplaySource", "write_log"]

_JSON_SUFFIXES = (".jsonl", ".ndjson")


class ReplaySource(Source):
    """Replay a recorded log file.

    Parameters
    ----------
    path
        The log file.
    follow
        Keep polling for records appended to the file (like ``tail -f``) instead of
        reporting the source exhausted at the end.
    """

    def __init__(self, path: str | os.PathLike[str], follow: bool = False):
        super().__init__()
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no event log at {self.path}")
        self.name = str(self.path)
        self.follow = follow
        self.json = self.path.suffix.lower() in _JSON_SUFFIXES
        self._assigned = False
        self._reader: Iterator[bytes] | None = None
        self._next = 0
        self._done = False

    # -- Source ---------------------------------------------------------------------------
    def assignment(self) -> list[int]:
        return [0]

    def seek(self, partition: int, offset: int) -> None:
        if partition != 0:
            raise ValueError(f"a replayed log has one partition (0), not {partition}")
        self._reader = self._records()
        self._next = 0
        self._done = False
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
        return out

    def exhausted(self) -> bool:
        return self._done

    # -- reading --------------------------------------------------------------------------
    def _records(self) -> Iterator[bytes]:
        if self.json:
            with open(self.path, "rb") as fh:
                for line in fh:
                    line = line.strip()
                    if line:
                        yield line
            return
        with open(self.path, "rb") as fh:
            data = fh.read()
        unpacker = msgpack.Unpacker(
            io.BytesIO(data), raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1)
        )
        start = 0
        while start < len(data):
            try:
                unpacker.skip()
            except msgpack.OutOfData:
                yield data[start:]  # a truncated last record: dead-lettered, not dropped
                return
            except Exception:  # noqa: BLE001 - any undecodable byte sequence ends framing
                yield data[start:]
                return
            end = unpacker.tell()
            yield data[start:end]
            start = end


def decode_json_record(payload: bytes) -> Any:
    """The event map of one JSON-lines record, re-packed as msgpack for the one decoder."""
    return msgpack.packb(json.loads(payload))


def write_log(path: str | os.PathLike[str], events: Iterable[dict[str, Any]]) -> int:
    """Write event maps (``{"x": ..., "y": ...}``) as a log in the format the suffix names."""
    path = Path(path)
    n = 0
    with open(path, "wb") as fh:
        for event in events:
            if path.suffix.lower() in _JSON_SUFFIXES:
                fh.write(json.dumps(event).encode() + b"\n")
            else:
                fh.write(encode_event(**event))
            n += 1
    return n
