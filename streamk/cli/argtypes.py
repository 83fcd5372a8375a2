"""Argument types for the command line's numbers: a bad value is argparse's clear error
(``streamk learn: error: argument --limit: must be a whole number >= 1, got '-1'``, exit 2),
never a traceback from deep inside (``--limit -1``) or a silent stand-in (``--batch-size
0`` ran in blocks of one)."""

from __future__ import annotations

import argparse
import math


def _whole(text: str, low: int, high: int | None, what: str) -> int:
    """``text`` as a whole number in ``[low, high]`` (``high=None``: no upper bound)."""
    try:
        value: int | None = int(text)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1 (counts, sizes)."""
    return _whole(text, 1, None, "a whole number >= 1")


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (a budget, where 0 means none, as the engine's ``budget``)."""
    return _whole(text, 0, None, "a whole number >= 0")


def port(text: str) -> int:
    """A TCP port, 1-65535."""
    return _whole(text, 1, 65535, "a port number in 1-65535")


def non_negative_seconds(text: str) -> float:
    """A finite duration in seconds, >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0.0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A finite duration in seconds, > 0 (a timeout)."""
    value = non_negative_seconds(text)
    if value == 0.0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value
