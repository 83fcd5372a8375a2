"""Outputs in files: predictions and dead letters as JSON lines or msgpack maps."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgpack

from ..engine.deadletter import (
    DeadLetter,
    DeadLetterFile,
    check_linked,
    open_append,
    read_records,
)
from .base import Format, SinkError, WritesOneAsMany, check_format
from .records import (
    Layout,
    block_map,
    builtin,
    check_layout,
    encode_json,
    expand,
    json_records,
    pack_records,
)

__all__ = ["FilePredictionSink", "FileDeadLetterSink", "read_predictions"]


class FilePredictionSink(WritesOneAsMany):
    """Predictions appended to a file: JSON lines or concatenated msgpack maps.

    Parameters
    ----------
    path : str or path-like
        File to append to (created if missing).
    format : {"jsonl", "msgpack"}
        ``"jsonl"`` is readable with ``jq`` (``proba`` keys become strings);
        ``"msgpack"`` keeps types and is compact. Default: "jsonl".
    layout : {"record", "block"}
        ``"record"``: one map per event; ``"block"``: one map per :meth:`write_many`
        call (see :mod:`streamk.sinks.records`). :func:`read_predictions` reads
        both. Default: "record".

    Notes
    -----
    A partial record a cut-short write left at the end of an existing file is cut off
    before appending (one WARNING; the resumed run writes its event again), and
    :meth:`flush` raises :class:`SinkError` if the file was deleted meanwhile.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        format: Format = "jsonl",
        *,
        layout: Layout = "record",
    ) -> None:
        check_format(format, "prediction file")
        check_layout(layout)
        self.path = Path(path)
        self.format = format
        self.layout = layout
        self.count = 0
        self._failed = False  # a flush failed: reported once, not again on close
        self._fh = open_append(self.path, format, "prediction")

    def write_many(
        self,
        predictions: Sequence[Any],
        *,
        ids: Sequence[Any],
        offsets: Sequence[int | None],
        model_seq: int = 0,
        partition: int | None = None,
        probas: Sequence[dict[Any, float] | None] | None = None,
    ) -> None:
        """Append the predictions of a run of events of one ``partition``.

        ``ids``, ``offsets`` and ``probas`` (optional) run alongside ``predictions``.
        """
        if self._fh.closed:
            raise SinkError(f"prediction file {self.path} is closed")
        columns = (predictions, ids, offsets)
        fields = {"model_seq": model_seq, "partition": partition, "probas": probas}
        if self.layout == "block":
            block = block_map(*columns, **fields)
            if self.format == "jsonl":
                data = encode_json(block).encode() + b"\n"
            else:
                data = msgpack.packb(block, default=builtin)
        elif self.format == "jsonl":
            data = "".join(json_records(*columns, **fields)).encode()
        else:
            data = b"".join(pack_records(*columns, **fields))
        self._fh.write(data)  # buffered; flush() makes it durable
        self.count += len(predictions)

    def flush(self) -> None:
        """Write buffered records and fsync the file.

        Raises
        ------
        SinkError
            The write or sync failed, or the file was deleted (its records are lost).
        """
        if self._fh.closed:
            return
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            check_linked(self._fh, self.path, "prediction")
        except SinkError:
            self._failed = True
            raise
        except OSError as exc:
            self._failed = True
            raise SinkError(f"could not write predictions to {self.path}: {exc}") from exc

    def close(self) -> None:
        """Flush, fsync and close; idempotent. After a failure :meth:`flush` already
        reported, only closes (the error is not raised twice)."""
        if self._fh.closed:
            return
        try:
            if not self._failed:
                self.flush()
        finally:
            try:
                self._fh.close()
            except OSError:
                if not self._failed:
                    raise


class FileDeadLetterSink:
    """Dead letters appended to a file (a :class:`~streamk.engine.deadletter.DeadLetterFile`).

    Parameters
    ----------
    path : str or path-like
        File to append to (created if missing); read back with
        :func:`~streamk.engine.deadletter.read_dead_letters`.
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
        """Append one record; :class:`SinkError` naming the file if that fails."""
        self.file.write(record)

    def flush(self) -> None:
        """Fsync the file (each record is already flushed to the OS by ``write``)."""
        self.file.flush()

    def close(self) -> None:
        """Fsync and close; idempotent."""
        self.file.close()


def read_predictions(
    path: str | os.PathLike[str], format: Format | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the per-event records of a prediction file, whatever its layout.

    The format (``"jsonl"`` or ``"msgpack"``) is sniffed when not given; block maps are
    expanded into the records they hold, in order.

    Raises
    ------
    InvalidEvent
        On a corrupt or truncated record (a write cut short), naming the file and the
        line or byte offset, as :func:`~streamk.engine.deadletter.read_dead_letters` does;
        the records before it have been yielded.
    """
    for _, obj in read_records(path, format, "prediction", strict_map_key=False):
        yield from expand(obj)
