"""Exceptions raised by streamk.

Every error says what was wrong and what to do about it. All derive from
:class:`StreamkError`, so a caller can catch the whole family at once.
"""

from __future__ import annotations

__all__ = [
    "StreamkError",
    "InvalidInput",
    "InvalidEvent",
    "SnapshotError",
    "ConfigError",
    "BrokerError",
    "SolverError",
    "ConvergenceWarning",
]


class StreamkError(Exception):
    """Base class of every streamk error."""


class InvalidInput(StreamkError, ValueError):
    """A learner was given input it cannot use (non-finite number, wrong type, ...)."""


class InvalidEvent(StreamkError, ValueError):
    """An event on a stream failed decoding or validation; it goes to the dead-letter destination."""


class SnapshotError(StreamkError):
    """A snapshot could not be written, read, verified or decoded."""


class ConfigError(StreamkError, ValueError):
    """A hyper-parameter or configuration value is invalid."""


class BrokerError(StreamkError):
    """The local Kafka-compatible broker could not be started, reached or stopped."""


class SolverError(StreamkError):
    """A batch solver was given an unusable problem (shapes, non-finite Gram matrix, ...)."""


class ConvergenceWarning(UserWarning):
    """A solver stopped at its iteration limit before meeting its tolerance."""
