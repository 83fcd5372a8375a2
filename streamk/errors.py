"""Exceptions raised by streamk.

Every error says what was wrong and what to do about it. All derive from
:class:`StreamkError`, so a caller can catch the whole family at once.
"""

from __future__ import annotations

__all__ = [
    "StreamkError",
    "SinkError",
    "InvalidInput",
    "OutsideConfiguration",
    "InvalidEvent",
    "SnapshotError",
    "ConfigError",
    "BrokerError",
    "OffsetOutOfRange",
    "SolverError",
    "ConvergenceWarning",
    "MergeError",
]


class StreamkError(Exception):
    """Base class of every streamk error."""


class InvalidInput(StreamkError, ValueError):
    """A learner was given input it cannot use (non-finite number, wrong type, ...)."""


class ConfigError(StreamkError, ValueError):
    """A hyper-parameter or configuration value is invalid."""


class OutsideConfiguration(InvalidInput, ConfigError):
    """Input the learner's configuration rules out (a label outside a fixed set of ranks).

    On a stream it is refused like any invalid input (a dead letter); an evaluation
    (``streamk learn``) stops on it: every such row would be refused, so the
    configuration, not the row, is what to fix.
    """


class InvalidEvent(StreamkError, ValueError):
    """An event failed decoding or validation; on a stream it goes to the dead-letter sink.

    ``code`` is a stable identifier (``non_finite``, ``undecodable``, ...) for counting,
    ``reason`` the human-readable explanation.
    """

    def __init__(self, message: str, *, code: str | None = None, reason: str | None = None):
        super().__init__(message)
        self.code = code
        self.reason = message if reason is None else reason


class SnapshotError(StreamkError):
    """A snapshot could not be written, read, verified or decoded."""


class BrokerError(StreamkError):
    """The local Kafka-compatible broker could not be started, reached or stopped."""


class OffsetOutOfRange(BrokerError):
    """A partition's read position lies past its log's end (the broker answered
    OFFSET_OUT_OF_RANGE, or the log was truncated under it): the topic was deleted and
    recreated, or truncated, while it was read. Raised by a Kafka source's ``poll``
    instead of letting the client reset the position silently.

    Attributes
    ----------
    positions
        Partition -> the read position the broker refused.
    """

    def __init__(self, message: str, positions: dict[int, int]):
        super().__init__(message)
        self.positions = dict(positions)


class SinkError(StreamkError):
    """Outputs could not be delivered; the engine must not commit past them (re-exported by
    :mod:`streamk.sinks`; here so that the dead-letter file, which the sinks import, can
    raise it without an import cycle)."""


class SolverError(StreamkError):
    """A batch solver was given an unusable problem (shapes, non-finite Gram matrix, ...)."""


class ConvergenceWarning(UserWarning):
    """A solver stopped at its iteration limit before meeting its tolerance."""


class MergeError(StreamkError, ValueError):
    """Worker models cannot be merged into one (different classes, kernels, parameters)."""
