"""Where the engine writes its outputs: predictions and dead letters, to Kafka or files.

Every sink has ``write(...)``, ``flush()`` and ``close()``; prediction sinks also have
``write_many(...)``, which takes a whole run of predictions in one call (the engine uses
it when a sink has it). Writing only queues; ``flush`` blocks until everything written
so far is durable (acknowledged by the broker, or fsync'ed to disk) and raises
:class:`SinkError` if any of it failed. The engine flushes its sinks before it writes a
snapshot and commits offsets, so outputs are **at-least-once**: after a crash, the
events since the last snapshot are scored again and their predictions written again.
Consumers of the prediction topic should be idempotent on ``(id, model_seq)`` or on
``(partition, offset)``.

A prediction record is a map ``{id, prediction, proba?, model_seq, partition, offset}``
(``proba`` only when given): msgpack on Kafka (keyed by ``id`` when there is one), and
JSON lines or concatenated msgpack maps in a file. The opt-in block layout writes one
map per run instead (:mod:`streamk.sinks.records`); :func:`decode_predictions` and
:func:`read_predictions` give per-event records for either. A dead letter on Kafka is
:meth:`~streamk.engine.deadletter.DeadLetter.to_msgpack` keyed by its reason code, with
``source``, ``partition`` and ``offset`` headers.

Modules: :mod:`~streamk.sinks.base` (contracts), :mod:`~streamk.sinks.records` (the
record and block maps), :mod:`~streamk.sinks.kafka` (kafka-python),
:mod:`~streamk.sinks.confluent` (confluent-kafka, the ``[kafka-fast]`` extra),
:mod:`~streamk.sinks.file` (files).
"""

from __future__ import annotations

from .base import DeadLetterSink, PredictionSink, SinkError
from .confluent import ConfluentPredictionSink
from .file import FileDeadLetterSink, FilePredictionSink, read_predictions
from .kafka import KafkaDeadLetterSink, KafkaPredictionSink, KafkaSink  # noqa: F401 - produce
from .records import Layout, decode_predictions, prediction_record

__all__ = [
    "SinkError",
    "PredictionSink",
    "DeadLetterSink",
    "KafkaPredictionSink",
    "ConfluentPredictionSink",
    "FilePredictionSink",
    "KafkaDeadLetterSink",
    "FileDeadLetterSink",
    "Layout",
    "prediction_record",
    "decode_predictions",
    "read_predictions",
]
