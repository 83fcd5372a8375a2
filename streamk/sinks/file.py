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
    open_append,
    read_records,
    reopen_if_moved,
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
    before appending (one WARNING; the resumed run writes its event again).
    :meth:`flush` raises :class:`SinkError` if the file was deleted meanwhile, and goes on
    in a new file at ``path`` if it was moved (rotated): see
    :func:`~streamk.engine.deadletter.reopen_if_moved`.
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
        self._failure: SinkError | None = None  # a write or flush failed: not again on close
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
        self._check_open()
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
        try:
            self._fh.write(data)  # buffered (a block larger than the buffer goes straight
        except OSError as exc:  # through); flush() makes it durable
            raise self._fail(exc) from exc
        self.count += len(predictions)

    def flush(self) -> None:
        """Write buffered records and fsync the file.

        Raises
        ------
        SinkError
            The write or sync failed, now or before, or the file was deleted (its records
            are lost). A file moved away is not an error: its records are in the moved file
            and a new one is opened at ``path``.
        """
        if self._fh.closed:
            return
        self._check_open()
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh = reopen_if_moved(self._fh, self.path, self.format, "prediction")
        except SinkError as exc:
            self._failure = exc
            raise
        except OSError as exc:
            raise self._fail(exc) from exc

    def close(self) -> None:
        """Flush, fsync and close; idempotent.

        After a failure already raised (by :meth:`write_many` or :meth:`flush`) it only
        closes: the records still buffered went with that failure, and closing does not
        try to write them again nor raise the error a second time.
        """
        if self._fh.closed:
            return
        try:
            if self._failure is None:
                self.flush()
        finally:
            try:
                self._fh.close()  # after a failure, its own flush of the buffer fails again
            except OSError as exc:
                if self._failure is None:
                    raise self._fail(exc) from exc

    def _check_open(self) -> None:
        """Refuse to write to a closed or failed file, the failure raised again: after a
        failed write the file may end in part of a record, and records written after it
        would follow a gap."""
        if self._fh.closed:
            raise SinkError(f"prediction file {self.path} is closed")
        if self._failure is not None:
            raise SinkError(str(self._failure))

    def _fail(self, exc: OSError) -> SinkError:
        """Mark the sink failed (``close`` then only closes) and say which file failed."""
        self._failure = SinkError(f"could not write predictions to {self.path}: {exc}")
        return self._failure


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
