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

from .base import DeadLetterSink, PredictionSink, SinkError
from .file import FileDeadLetterSink, FilePredictionSink, read_predictions
from .kafka import KafkaDeadLetterSink, KafkaPredictionSink, _KafkaSink  # noqa: F401 - streamk.produce
from .records import prediction_record

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
