"""What every command prints: the machine line, progress lines, the JSON schema version."""

from __future__ import annotations

import math
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from .._version import __version__

__all__ = [
    "SCHEMA_VERSION",
    "machine",
    "Progress",
    "EngineProgress",
    "describe_start",
    "plain",
    "format_value",
    "format_summary",
]

SCHEMA_VERSION = 1


def machine() -> dict[str, Any]:
    """Python, platform, CPUs and streamk version, recorded with every JSON summary."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "streamk": __version__,
    }


class Progress:
    """One status line on stderr: rewritten in place on a terminal, appended otherwise."""

    def __init__(self, metric_name: str, quiet: bool):
        self.metric_name = metric_name
        self.quiet = quiet
        self.tty = sys.stderr.isatty()

    def __call__(self, point: dict[str, Any]) -> None:
        if self.quiet:
            return
        line = (
            f"{point['events']:>10,} events  {point['events_per_second']:>9,.0f} ev/s  "
            f"{self.metric_name} {point['metric']:.4f}  support {point['n_support']:,}"
        )
        end = "\r" if self.tty else "\n"
        print(line, end=end, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty and not self.quiet:
            print(file=sys.stderr)


class EngineProgress(Progress):
    """The engine's status line: records, rate, lag, support, rolling metric, dead letters."""

    def __call__(self, p: dict[str, Any]) -> None:
        if self.quiet:
            return
        lag = "?" if p["lag"] is None else f"{p['lag']:,}"
        metric = "-" if p["rolling_metric"] is None else f"{p['rolling_metric']:.4f}"
        line = (
            f"{p['records']:>10,} records {p['events_per_second']:>9,.0f} ev/s  lag {lag}  "
            f"support {p['support']:,}  rolling {self.metric_name} {metric}  "
            f"dead {p['dead_lettered']:,}  snapshots {p['snapshots']}"
        )
        print(line, end="\r" if self.tty else "\n", file=sys.stderr, flush=True)


def describe_start(engine: Any, where: str) -> str:
    """What the engine starts from (the snapshot it restored, or a fresh model) and whether
    it runs the compiled core: two lines.

    Printed at start-up by ``streamk run``, ``replay`` and ``demo`` so that an operator
    sees at once whether a restart resumed, and from where.
    """
    from .. import accel

    name = engine.config.model_name
    info = engine.restored
    if info is None:
        line = f"model      {name!r}: no snapshot in {where}, starting a fresh model"
    else:
        offsets = ", ".join(f"{p}:{o}" for p, o in sorted(info["offsets"].items())) or "none"
        line = (
            f"model      {name!r}: restored seq {info['seq']} ({info['class']}) from {where}, "
            f"offsets {offsets}"
        )
    return f"{line}\nengine     {accel.describe()}"


#: How a float summary value is shown, by key; any other float is a metric (4 decimals).
FLOAT_FORMATS: dict[str, str] = {
    "seconds": "{:,.2f}",
    "events_per_second": "{:,.1f}",
}


def plain(value: Any) -> Any:
    """``value`` as plain JSON types: dict (string keys), list, str, int, float, bool, None.

    NumPy scalars become Python numbers, paths become strings, non-finite floats become
    ``None`` (JSON has no NaN). Anything else is a programming error: it raises rather
    than being turned into its ``repr`` (what ``json.dumps(default=str)`` used to do).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # a NumPy scalar
        value = value.item()
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    raise TypeError(f"summary value {value!r} has no JSON form")


#: Summary keys whose maps hold counts (thousands separators), not positions.
COUNT_MAPS = frozenset({"dead_letter_reasons"})


def format_value(key: str, value: Any) -> str:
    """One summary value as a person reads it.

    Counts get thousands separators (``12,345``), rates and durations fixed decimals
    (``10,146.7``, ``0.29``), metrics four decimals (``0.9490``), a missing value ``-``,
    a partition → offset map ``0:5302 1:4990`` (offsets are positions, not counts:
    no separators) and a map of counts (:data:`COUNT_MAPS`) ``rejected_by_model:2,000``.
    Never ``None`` or a Python ``repr``.
    """
    value = plain(value)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return FLOAT_FORMATS.get(key, "{:.4f}").format(value)
    if isinstance(value, dict):
        if not value:
            return "-"
        items = sorted(value.items(), key=lambda kv: (len(kv[0]), kv[0]))  # 2 before 10
        if key in COUNT_MAPS:
            return " ".join(f"{k}:{format_value(key, v)}" for k, v in items)
        return " ".join(
            f"{k}:{v if isinstance(v, int) else format_value(key, v)}" for k, v in items
        )
    if isinstance(value, list):
        return ", ".join(format_value(key, v) for v in value) or "-"
    return str(value)


def format_summary(summary: Mapping[str, Any], skip: tuple[str, ...] = ()) -> str:
    """The summary as aligned ``key  value`` lines (``skip`` leaves keys out)."""
    rows = [(k, format_value(k, v)) for k, v in summary.items() if k not in skip]
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
