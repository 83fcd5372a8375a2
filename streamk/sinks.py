"""Where the engine writes its outputs: predictions and dead letters, to Kafka or files.

Every sink has ``write(...)``, ``flush()`` and ``close()``. ``write`` only queues;
``flush`` blocks until everything written so far is durable (acknowledged by the
broker, or fsync'ed to disk) and raises :class:`SinkError` if any of it failed. The
engine flushes its sinks before it writes a snapshot and commits offsets, so outputs
are **at-least-once**: after a crash, the events since the last snapshot are scored
again and their predictions written again. Consumers of the prediction topic should
be idempotent on ``(id, model_seq)`` or on ``(partition, offset)``.

A prediction record is a map ``{id, prediction, proba?, model_seq, partition, offset}``
(``proba`` only when given): msgpack on Kafka (keyed by ``id`` when there is one), and
JSON lines or concatenated msgpack maps in a file. A dead letter on Kafka is
:meth:`~streamk.deadletter.DeadLetter.to_msgpack` keyed by its reason code, with
``source``, ``partition`` and ``offset`` headers.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import msgpack
import numpy as np

from .deadletter import DeadLetter, DeadLetterFile
from .errors import ConfigError, StreamkError

__all__ = [
    "SinkError",
    "PredictionSink",
    "DeadLetterSink",
    "KafkaPredictionSink",
    "FilePredictionSink",
    "KafkaDeadLetterSink",
    "FileDeadLetterSink",
    "prediction_record",
    "read_predictions",
]

Format = Literal["jsonl", "msgpack"]


class SinkError(StreamkError):
    """Outputs could not be delivered; the engine must not commit past them."""


@runtime_checkable
class PredictionSink(Protocol):
    """Destination of predictions."""

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
        """Queue one prediction of the model version ``model_seq`` for the event at
        ``(partition, offset)``."""

    def flush(self) -> None:
        """Block until every queued prediction is durable; raise :class:`SinkError`."""

    def close(self) -> None:
        """Flush and release resources; idempotent."""


@runtime_checkable
class DeadLetterSink(Protocol):
    """Destination of rejected events."""

    def write(self, record: DeadLetter) -> None:
        """Queue one dead letter."""

    def flush(self) -> None:
        """Block until every queued dead letter is durable; raise :class:`SinkError`."""

    def close(self) -> None:
        """Flush and release resources; idempotent."""


def _builtin(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot write a {type(obj).__name__} in a prediction record")


def prediction_record(
    prediction: Any,
    *,
    id: Any = None,
    proba: dict[Any, float] | None = None,
    model_seq: int = 0,
    partition: int | None = None,
    offset: int | None = None,
) -> dict[str, Any]:
    """The map a prediction sink writes (``proba`` left out when ``None``)."""
    record: dict[str, Any] = {
        "id": id,
        "prediction": prediction,
        "model_seq": model_seq,
        "partition": partition,
        "offset": offset,
    }
    if proba is not None:
        record["proba"] = proba
    return record


def _check_format(format: str, what: str) -> None:
    if format not in ("jsonl", "msgpack"):
        raise ConfigError(f"{what} format must be 'jsonl' or 'msgpack', not {format!r}.")


# -- Kafka ------------------------------------------------------------------------------
class _KafkaSink:
    """A producer whose failures are collected and raised by :meth:`flush`."""

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        producer_config: dict[str, Any] | None,
        timeout_s: float,
    ) -> None:
        from kafka import KafkaProducer
        from kafka import errors as kafka_errors

        self.topic = topic
        self.timeout_s = timeout_s
        self.count = 0
        self._errors: list[BaseException] = []
        self._closed = False
        config = {"linger_ms": 5, **(producer_config or {})}
        try:
            self._producer = KafkaProducer(bootstrap_servers=bootstrap_servers, **config)
        except kafka_errors.KafkaConfigurationError as exc:
            raise ConfigError(f"invalid producer_config for sink {topic!r}: {exc}") from exc
        except kafka_errors.KafkaError as exc:
            raise SinkError(
                f"cannot connect to Kafka at {bootstrap_servers} for sink topic {topic!r}: {exc}"
            ) from exc

    def _send(self, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]]) -> None:
        if self._closed:
            raise SinkError(f"sink for topic {self.topic!r} is closed")
        try:
            future = self._producer.send(self.topic, value=value, key=key, headers=headers or None)
        except Exception as exc:  # noqa: BLE001 - buffer full, record too large, closed ...
            raise SinkError(f"could not queue a record for topic {self.topic!r}: {exc}") from exc
        future.add_errback(self._errors.append)
        self.count += 1

    def flush(self) -> None:
        """Block until every record sent so far is acknowledged (``acks`` setting)."""
        if self._closed:
            return
        try:
            self._producer.flush(timeout=self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError and friends
            raise SinkError(
                f"records for topic {self.topic!r} were not acknowledged within "
                f"{self.timeout_s:g}s: {exc}. Is the broker up?"
            ) from exc
        if self._errors:
            errors, self._errors = self._errors, []
            raise SinkError(
                f"{len(errors)} record(s) for topic {self.topic!r} failed; first: "
                f"{type(errors[0]).__name__}: {errors[0]}"
            ) from errors[0]

    def close(self) -> None:
        """Flush, then close the producer; idempotent."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._close_producer()

    def _close_producer(self) -> None:
        # kafka-python's close() flushes again and raises while records are pending,
        # leaving its sender thread running; after a failed flush those records are
        # undeliverable (the error was raised), so stop the sender outright.
        try:
            self._producer.close(timeout=self.timeout_s)
        except Exception:  # noqa: BLE001 - already reported by flush()
            sender = getattr(self._producer, "_sender", None)
            if sender is not None:
                sender.force_close()
            self._producer._closed = True  # no second attempt from __del__


class KafkaPredictionSink(_KafkaSink):
    """Predictions as msgpack records on a Kafka topic, keyed by event id when present.

    Parameters
    ----------
    bootstrap_servers : str or list of str
        ``host:port`` of one or more brokers.
    topic : str
        Destination topic (not created here).
    producer_config : dict or None
        Extra ``KafkaProducer`` settings (security, ``acks``, ``compression_type`` ...).
        Default: None, i.e. kafka-python's defaults (``acks="all"``, idempotent)
        with ``linger_ms=5``.
    timeout_s : float
        Bound on :meth:`flush` and :meth:`close`. Default: 30.0.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        producer_config: dict[str, Any] | None = None,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        super().__init__(bootstrap_servers, topic, producer_config, timeout_s)

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
        record = prediction_record(
            prediction, id=id, proba=proba, model_seq=model_seq, partition=partition, offset=offset
        )
        value = msgpack.packb(record, default=_builtin)
        key = None if id is None else str(id).encode("utf-8")
        self._send(value, key, [])


class KafkaDeadLetterSink(_KafkaSink):
    """Dead letters on a Kafka topic: value ``DeadLetter.to_msgpack()``, key the reason code.

    Headers ``source``, ``partition`` and ``offset`` (UTF-8 text; absent when unknown)
    let tools route or count without decoding the value.

    Parameters
    ----------
    bootstrap_servers, topic, producer_config, timeout_s
        As for :class:`KafkaPredictionSink`.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        producer_config: dict[str, Any] | None = None,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        super().__init__(bootstrap_servers, topic, producer_config, timeout_s)

    def write(self, record: DeadLetter) -> None:
        headers = [("source", str(record.source).encode("utf-8"))]
        for name in ("partition", "offset"):
            value = getattr(record, name)
            if value is not None:
                headers.append((name, str(value).encode("ascii")))
        self._send(record.to_msgpack(), (record.code or "unknown").encode("utf-8"), headers)


# -- files ------------------------------------------------------------------------------
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
        _check_format(format, "prediction file")
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
            data = json.dumps(record, default=_builtin, separators=(",", ":")).encode() + b"\n"
        else:
            data = msgpack.packb(record, default=_builtin)
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
        _check_format(format, "dead-letter")
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
