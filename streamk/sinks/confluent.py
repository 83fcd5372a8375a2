"""Predictions on Kafka through confluent-kafka (librdkafka): the ``[kafka-fast]`` sink.

Same records, keys and partitions as :class:`~streamk.sinks.KafkaPredictionSink`:
librdkafka's ``murmur2_random`` partitioner is the Java client's (and kafka-python's)
hash for keyed records and a random partition for the rest. Producing a message is one
call into C, so publishing costs about a microsecond per prediction instead of the
tens that kafka-python's producer spends in Python. Delivery reports are requested for
failures only; :meth:`ConfluentPredictionSink.flush` waits for every message and raises
:class:`~streamk.sinks.SinkError` for any that failed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from ..sources.kafka_confluent import SETTING_NAMES as _SOURCE_NAMES
from .base import SinkError, WritesOneAsMany
from .messages import encode_messages
from .records import Layout, check_layout

__all__ = ["ConfluentPredictionSink", "producer_settings"]

log = logging.getLogger(__name__)

#: kafka-python spellings (as ``streamk.engine.runner.kafka_settings`` gives them) -> librdkafka
_TRANSLATED = {
    **{k: v for k, v in _SOURCE_NAMES.items() if k.startswith(("security", "sasl", "ssl"))},
    "linger_ms": "linger.ms",
    "batch_size": "batch.size",
    "compression_type": "compression.type",
    "acks": "acks",
}


def producer_settings(config: dict[str, Any] | None) -> dict[str, Any]:
    """librdkafka settings from ``config``, kafka-python spellings translated."""
    return {_TRANSLATED.get(k, k): v for k, v in (config or {}).items()}


class ConfluentPredictionSink(WritesOneAsMany):
    """Predictions as msgpack records on a Kafka topic, through confluent-kafka.

    Parameters
    ----------
    bootstrap_servers : str or list of str
        ``host:port`` of one or more brokers.
    topic : str
        Destination topic (not created here).
    producer_config : dict or None
        Extra librdkafka settings (dotted names; the kafka-python names of the security
        settings, ``linger_ms``, ``batch_size``, ``compression_type`` and ``acks`` are
        translated). Default: None, i.e. ``acks=all``, idempotent, ``linger.ms=5``.
    layout : {"record", "block"}
        As for :class:`~streamk.sinks.KafkaPredictionSink`. Default: "record".
    timeout_s : float
        Bound on :meth:`flush`, :meth:`close` and on waiting for queue space. Default: 30.0.
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
        try:
            import confluent_kafka as ck
        except ImportError as exc:
            raise ConfigError(
                "the confluent prediction sink needs the confluent-kafka package; install it "
                'with `pip install "streamk[kafka-fast]"`, or use KafkaPredictionSink.'
            ) from exc
        self.topic = topic
        self.layout = layout
        self.timeout_s = timeout_s
        self.count = 0  # predictions written
        self._errors: list[Any] = []
        self._closed = False
        servers = (
            bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
        )
        config: dict[str, Any] = {
            "enable.idempotence": True,  # as kafka-python's default: acks=all, no duplicates
            "linger.ms": 5,
            "partitioner": "murmur2_random",  # kafka-python's and the Java client's placement
            **producer_settings(producer_config),
            "bootstrap.servers": servers,
            "delivery.report.only.error": True,
            "on_delivery": self._on_delivery,
            "logger": log,  # librdkafka's messages through logging, not onto stderr
        }
        try:
            self._producer = ck.Producer(config)
        except (ck.KafkaException, TypeError, ValueError) as exc:
            raise ConfigError(f"invalid producer_config for sink {topic!r}: {exc}") from exc

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append(err)

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
        if self._closed:
            raise SinkError(f"sink for topic {self.topic!r} is closed")
        values, keys = encode_messages(
            self.layout, predictions, ids, offsets, model_seq, partition, probas
        )
        produce, topic = self._producer.produce, self.topic
        sent = 0
        try:
            for value, key in zip(values, keys):
                produce(topic, value, key)
                sent += 1
        except BufferError:  # the local queue is full: wait for room, then go on
            self._produce_slowly(values[sent:], keys[sent:])
        except Exception as exc:  # noqa: BLE001 - message too large, unknown topic ...
            raise SinkError(f"could not queue a record for topic {self.topic!r}: {exc}") from exc
        self.count += len(predictions)
        self._producer.poll(0)  # serve delivery reports (failures only)

    def _produce_slowly(self, values: list[bytes], keys: list[bytes | None]) -> None:
        deadline = time.monotonic() + self.timeout_s
        for value, key in zip(values, keys):
            while True:
                try:
                    self._producer.produce(self.topic, value, key)
                    break
                except BufferError:
                    if time.monotonic() > deadline:
                        raise SinkError(
                            f"the producer queue for topic {self.topic!r} stayed full for "
                            f"{self.timeout_s:g}s. Is the broker up?"
                        ) from None
                    self._producer.poll(0.05)
                except Exception as exc:  # noqa: BLE001
                    raise SinkError(
                        f"could not queue a record for topic {self.topic!r}: {exc}"
                    ) from exc

    def flush(self) -> None:
        """Block until every record queued so far is acknowledged; raise :class:`SinkError`."""
        if self._closed:
            return
        left = self._producer.flush(self.timeout_s)
        if left:
            raise SinkError(
                f"{left} record(s) for topic {self.topic!r} were not acknowledged within "
                f"{self.timeout_s:g}s. Is the broker up?"
            )
        if self._errors:
            errors, self._errors = self._errors, []
            raise SinkError(
                f"{len(errors)} record(s) for topic {self.topic!r} failed; first: {errors[0]}"
            )

    def close(self) -> None:
        """Flush, then drop anything still queued; idempotent."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._producer.purge()  # after a failed flush those records are undeliverable
            self._producer.flush(0)
