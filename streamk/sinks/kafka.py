"""Outputs on Kafka through kafka-python: predictions and dead letters.

Each sink owns one ``KafkaProducer``; delivery failures are collected from the send
futures and raised by :meth:`~KafkaSink.flush` as :class:`~streamk.sinks.SinkError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..engine.deadletter import DeadLetter
from ..errors import ConfigError
from .base import SinkError, WritesOneAsMany
from .messages import encode_messages
from .records import Layout, check_layout

__all__ = ["KafkaPredictionSink", "KafkaDeadLetterSink"]


class KafkaSink:
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
        self.count = 0  # records written (predictions, dead letters)
        self._errors: list[BaseException] = []
        self._closed = False
        config = {"linger_ms": 5, **(producer_config or {})}
        # With kafka-python's own partitioner, a one-partition topic needs no hashing.
        self._default_partitioner = "partitioner" not in config
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

    def _send_many(self, values: list[bytes], keys: list[bytes | None]) -> None:
        """``_send`` for many records without headers, at a lower cost per record; the
        caller counts what it wrote."""
        if self._closed:
            raise SinkError(f"sink for topic {self.topic!r} is closed")
        send, topic, errback = self._producer.send, self.topic, self._errors.append
        try:
            partition = self._only_partition()
            for value, key in zip(values, keys):
                send(topic, value=value, key=key, partition=partition).add_errback(errback)
        except Exception as exc:  # noqa: BLE001 - buffer full, record too large, closed ...
            raise SinkError(f"could not queue a record for topic {self.topic!r}: {exc}") from exc

    def _only_partition(self) -> int | None:
        """The topic's partition when it has exactly one and the default partitioner is in
        use (where every record goes anyway), else None: the partitioner decides."""
        if not self._default_partitioner:
            return None
        partitions = self._producer.partitions_for(self.topic)  # cached metadata
        return next(iter(partitions)) if partitions is not None and len(partitions) == 1 else None

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


class KafkaPredictionSink(WritesOneAsMany, KafkaSink):
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
    layout : {"record", "block"}
        ``"record"``: one message per event, keyed by its id (UTF-8 text; no key
        without one). ``"block"``: one message per :meth:`write_many` call holding the
        whole run (:mod:`streamk.sinks.records`), keyed by the source partition
        number, so a partition's blocks stay in order. Default: "record".
    timeout_s : float
        Bound on :meth:`flush` and :meth:`close`. Default: 30.0.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        producer_config: dict[str, Any] | None = None,
        *,
        layout: Layout = "record",
        timeout_s: float = 30.0,
    ) -> None:
        check_layout(layout)
        self.layout = layout
        super().__init__(bootstrap_servers, topic, producer_config, timeout_s)

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
        """Queue the predictions of a run of events of one ``partition``.

        ``ids``, ``offsets`` and ``probas`` (optional) run alongside ``predictions``.
        """
        values, keys = encode_messages(
            self.layout, predictions, ids, offsets, model_seq, partition, probas
        )
        self._send_many(values, keys)
        self.count += len(predictions)


#: The largest dead-letter record sent by default: under the producer's and Apache Kafka's
#: default record limits (1 MiB each, with a batch's framing around the record).
MAX_DEAD_LETTER_BYTES = 1_000_000


class KafkaDeadLetterSink(KafkaSink):
    """Dead letters on a Kafka topic: value ``DeadLetter.to_msgpack()``, key the reason code.

    Headers ``source``, ``partition`` and ``offset`` (UTF-8 text; absent when unknown)
    let tools route or count without decoding the value.

    A record that would exceed the topic's record size keeps only the head of its payload,
    and its reason says how much: the whole of an ``oversize`` payload (above
    ``max_payload_bytes``, 1 MiB by default) can never be sent, and refusing the dead
    letter would stop the engine at that record on every restart.

    Parameters
    ----------
    bootstrap_servers, topic, producer_config, timeout_s
        As for :class:`KafkaPredictionSink`.
    max_record_bytes
        The largest record sent. Default: :data:`MAX_DEAD_LETTER_BYTES`, or 16 KiB under
        ``producer_config["max_request_size"]`` where that is set.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        producer_config: dict[str, Any] | None = None,
        *,
        timeout_s: float = 30.0,
        max_record_bytes: int | None = None,
    ) -> None:
        super().__init__(bootstrap_servers, topic, producer_config, timeout_s)
        request = (producer_config or {}).get("max_request_size")
        if max_record_bytes is None:
            max_record_bytes = MAX_DEAD_LETTER_BYTES if request is None else request - (16 << 10)
        if max_record_bytes < 4096:
            raise ConfigError(f"a dead letter needs room: max_record_bytes={max_record_bytes}")
        self.max_record_bytes = max_record_bytes

    def write(self, record: DeadLetter) -> None:
        headers = [("source", str(record.source).encode("utf-8"))]
        for name in ("partition", "offset"):
            value = getattr(record, name)
            if value is not None:
                headers.append((name, str(value).encode("ascii")))
        value = record.to_msgpack()
        if len(value) > self.max_record_bytes:
            value = _cut(record, len(value), self.max_record_bytes).to_msgpack()
        self._send(value, (record.code or "unknown").encode("utf-8"), headers)


def _cut(record: DeadLetter, size: int, limit: int) -> DeadLetter:
    """``record`` with the head of its payload that fits a ``limit``-byte record (``size``:
    its whole record's), the reason saying how much was kept."""
    whole = len(record.payload)
    keep = max(0, whole - (size - limit) - 512)  # 512: the reason's note and framing
    note = f" [payload cut to its first {keep:,} of {whole:,} bytes to fit the topic's records]"
    return replace(record, payload=record.payload[:keep], reason=record.reason + note)
