"""What every command prints: the machine line, progress lines, the JSON schema version."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from .._version import __version__

__all__ = ["SCHEMA_VERSION", "machine", "Progress", "EngineProgress", "describe_start"]

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
