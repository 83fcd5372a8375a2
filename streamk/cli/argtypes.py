"""Argument types for the command line's numbers: a bad value is argparse's clear error
(``streamk learn: error: argument --limit: must be a whole number >= 1, got '-1'``, exit 2),
never a traceback from deep inside (``--limit -1``) or a silent stand-in (``--batch-size
0`` ran in blocks of one)."""

from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """A whole number >= 1 (counts, sizes, budgets)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (a budget, where 0 means none, as the engine's ``budget``)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number in 1-65535, got {text!r}")
    return value


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
