"""``streamk replay``: the engine over a recorded event log, with snapshots."""

from __future__ import annotations

import argparse

from .run import engine_overrides, run_engine

__all__ = ["cmd_replay", "REPLAY_EXAMPLES"]

REPLAY_EXAMPLES = """examples:
  # learn from a recorded log, snapshots to ./snapshots, rejected records to ./dead
  streamk replay events.jsonl --dead-letter-dir ./dead
  # the same log again resumes after the newest snapshot: nothing is learned twice
  streamk replay events.msgpack --learner perceptron --budget 200 --json
  # the learning curve as a picture (curve.png) and as numbers (curve.json)
  streamk replay events.jsonl --plot curve.png
"""


def cmd_replay(args: argparse.Namespace) -> int:
    """Run the engine over a recorded event log (.jsonl or msgpack), with snapshots."""
    from ..engine.config import load_config
    from ..sources.replay import ReplaySource

    config = load_config(args.config, engine_overrides(args))
    return run_engine(config, ReplaySource(args.log), args)
