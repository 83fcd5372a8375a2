"""Outputs in files: predictions and dead letters as JSON lines or msgpack maps."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

from ..deadletter import DeadLetter, DeadLetterFile
from .base import Format, SinkError, check_format
from .records import builtin, prediction_record

__all__ = ["FilePredictionSink", "FileDeadLetterSink", "read_predictions"]


class FilePredictionSink:
    """Predictions appended to a file: JSON lines or concatenated msgpack maps.

    Parameters
    ----------
    path : str or path-like
        File to append to (created if missing).
    format : {"jsonl", "msgpack"}
        ``"jsonl"`` is readable with ``jq`` (``proba`` keys become strings);
        ``"msgpack"`` keeps types and is compact. Default: "jsonl".
    """

    def __init__(self, path: str | os.PathLike[str], format: Format = "jsonl") -> None:
        check_format(format, "prediction file")
        self.path = Path(path)
        self.format = format
        self.count = 0
        self._fh = open(self.path, "ab")  # noqa: SIM115 - closed in close()

    def write(
        self,
        prediction: Any,
        *,
        id: Any = None,
        proba: dict[Any, float] | None = None,
        model_seq: int = 0,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        if self._fh.closed:
            raise SinkError(f"prediction file {self.path} is closed")
        record = prediction_record(
            prediction, id=id, proba=proba, model_seq=model_seq, partition=partition, offset=offset
        )
        if self.format == "jsonl":
            data = json.dumps(record, default=builtin, separators=(",", ":")).encode() + b"\n"
        else:
            data = msgpack.packb(record, default=builtin)
        self._fh.write(data)  # buffered; flush() makes it durable
        self.count += 1

    def flush(self) -> None:
        """Write buffered records and fsync the file."""
        if self._fh.closed:
            return
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError as exc:
            raise SinkError(f"could not write predictions to {self.path}: {exc}") from exc

    def close(self) -> None:
        """Flush, fsync and close; idempotent."""
        if not self._fh.closed:
            try:
                self.flush()
            finally:
                self._fh.close()


class FileDeadLetterSink:
    """Dead letters appended to a file (a :class:`~streamk.deadletter.DeadLetterFile`).

    Parameters
    ----------
    path : str or path-like
        File to append to (created if missing); read back with
        :func:`~streamk.deadletter.read_dead_letters`.
    format : {"jsonl", "msgpack"}
        Default: "jsonl".
    """

    def __init__(self, path: str | os.PathLike[str], format: Format = "jsonl") -> None:
        check_format(format, "dead-letter")
        self.file = DeadLetterFile(path, format)
        self.path = self.file.path

    @property
    def count(self) -> int:
        return self.file.count

    def write(self, record: DeadLetter) -> None:
        try:
            self.file.write(record)
        except (OSError, ValueError) as exc:
            raise SinkError(f"could not write a dead letter to {self.path}: {exc}") from exc

    def flush(self) -> None:
        """Fsync the file (each record is already flushed to the OS by ``write``)."""
        fh = getattr(self.file, "_fh", None)
        if fh is None or fh.closed:
            return
        try:
            fh.flush()
            os.fsync(fh.fileno())
        except OSError as exc:
            raise SinkError(f"could not sync dead letters to {self.path}: {exc}") from exc

    def close(self) -> None:
        self.file.close()


def read_predictions(
    path: str | os.PathLike[str], format: Format | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the records of a prediction file; the format is sniffed when not given."""
    path = Path(path)
    with open(path, "rb") as fh:
        data = fh.read()
    if format is None:
        format = "jsonl" if data[:1] in (b"{", b"") else "msgpack"
    if format == "jsonl":
        for line in data.splitlines():
            if line.strip():
                yield json.loads(line)
        return
    yield from msgpack.Unpacker(io.BytesIO(data), raw=False, strict_map_key=False)
