"""``streamk replay``: the engine over a recorded event log, with snapshots."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .run import engine_overrides, run_engine

__all__ = ["cmd_replay", "REPLAY_EXAMPLES"]

REPLAY_EXAMPLES = """examples:
  # learn from a recorded log, snapshots to ./snapshots, rejected records to ./dead
  streamk replay events.jsonl --dead-letter-dir ./dead
  # the same log again resumes after the newest snapshot: nothing is learned twice
  streamk replay events.msgpack --learner perceptron --budget 200 --json
  # the learning curve as a picture (curve.png) and as numbers (curve.json)
  streamk replay events.jsonl --plot curve.png
  # a compressed log (gzip, bzip2 or xz), read as a stream
  streamk replay events.jsonl.gz
"""


def cmd_replay(args: argparse.Namespace) -> int:
    """Run the engine over a recorded event log (.jsonl or msgpack, either possibly .gz,
    .bz2 or .xz), with snapshots."""
    from ..engine.config import load_config
    from ..sources.replay import ReplaySource

    config = load_config(args.config, engine_overrides(args))
    if getattr(args, "plot", None):
        check_plot_path(args.plot)
    return run_engine(config, ReplaySource(args.log), args)


def check_plot_path(plot: str | os.PathLike[str]) -> None:
    """Refuse a ``--plot`` path that cannot be written, before anything is learned.

    The curve is written after the run, and by then the run has learned and snapshotted:
    a resumed run would learn nothing new to draw, so the run's curve would be lost. The
    PNG and its sibling ``.json`` need an existing, writable directory.
    """
    from ..errors import ConfigError

    path = Path(plot)
    folder = path.parent
    if path.is_dir():
        raise ConfigError(f"--plot {str(plot)!r} is a directory; give a file name, e.g. curve.png")
    if not folder.is_dir():
        raise ConfigError(
            f"--plot {str(plot)!r}: no directory {str(folder)!r}; create it first "
            f"(mkdir -p {folder}) or give a path in an existing one"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(
            f"--plot {str(plot)!r}: the directory {str(folder)!r} is not writable; "
            "give a path in one you can write to"
        )
