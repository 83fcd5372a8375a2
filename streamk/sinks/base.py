"""The sink contracts: what the engine calls on a prediction or dead-letter destination."""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from ..engine.deadletter import DeadLetter
from ..errors import ConfigError, SinkError

__all__ = [
    "SinkError",
    "PredictionSink",
    "DeadLetterSink",
    "WritesOneAsMany",
    "Format",
    "check_format",
]

Format = Literal["jsonl", "msgpack"]


@runtime_checkable
class PredictionSink(Protocol):
    """Destination of predictions.

    A sink may also have ``write_many(predictions, *, ids, offsets, model_seq=0,
    partition=None, probas=None)`` for a run of events of one partition (every sink in
    :mod:`streamk.sinks` has); the engine then hands it each run in one call, and calls
    ``write`` once per event otherwise.
    """

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


class WritesOneAsMany:
    """``write`` for a prediction sink built around ``write_many``: a run of one."""

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
        """Write one prediction (a block of one in the block layout)."""
        self.write_many(  # type: ignore[attr-defined]
            [prediction],
            ids=[id],
            offsets=[offset],
            model_seq=model_seq,
            partition=partition,
            probas=None if proba is None else [proba],
        )


@runtime_checkable
class DeadLetterSink(Protocol):
    """Destination of rejected events."""

    def write(self, record: DeadLetter) -> None:
        """Queue one dead letter."""

    def flush(self) -> None:
        """Block until every queued dead letter is durable; raise :class:`SinkError`."""

    def close(self) -> None:
        """Flush and release resources; idempotent."""


def check_format(format: str, what: str) -> None:
    """Raise :class:`~streamk.errors.ConfigError` unless ``format`` is a file format."""
    if format not in ("jsonl", "msgpack"):
        raise ConfigError(f"{what} format must be 'jsonl' or 'msgpack', not {format!r}.")
