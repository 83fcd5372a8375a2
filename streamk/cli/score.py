"""``streamk score``: predictions for an unlabelled topic with the merged model (issue 18)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from .output import SCHEMA_VERSION, format_summary, machine

__all__ = ["cmd_score", "SCORE_EXAMPLES"]

SCORE_EXAMPLES = """examples:
  # score the topic `requests` with the newest merged model, predictions to `predictions`
  streamk score --config streamk.toml --score-topic requests --predictions-topic predictions
  # follow a merged model in a file store instead of the snapshot topic
  streamk score --snapshot-dir ./snapshots --score-topic requests --predictions-file p.jsonl
"""


def cmd_score(args: argparse.Namespace) -> int:
    """Publish a prediction for every event of `score_topic` with the merged model.

    Follows `merge_name` (on `snapshot_topic`, else in `snapshot_dir`) and hot-swaps to each
    new merge; each prediction carries the seq of the model that made it. Reads in its own
    consumer group (`score_group`) and never learns. Predictions are at-least-once.
    """
    from ..engine.config import load_config
    from ..merge.serve import SCORE_METRICS, Scorer, role_metrics, serve_metrics
    from .run import engine_overrides

    config = load_config(args.config, engine_overrides(args))
    quiet = args.quiet or args.json

    def progress(p: dict[str, Any]) -> None:
        if not quiet:
            print(
                f"{p['records']:>10,} records {p['rate']:>9,.0f} ev/s  "
                f"model {config['merge_name']!r} seq {p['seq']}  dead {p['dead']:,}",
                file=sys.stderr,
                flush=True,
            )

    metrics = role_metrics(SCORE_METRICS)
    scorer = Scorer(config, on_progress=progress, metrics=metrics)

    def handler(signum: int, frame: Any) -> None:
        print(f"streamk: {signal.Signals(signum).name}: stopping", file=sys.stderr)
        scorer.stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        serve_metrics(config, metrics, "streamk score")
        result = scorer.run()
    finally:
        metrics.close()
    summary = {
        "schema_version": SCHEMA_VERSION,
        "records": result.records,
        "scored": result.scored,
        "dead_lettered": result.dead_lettered,
        "dead_letter_reasons": metrics.snapshot().get("dead_letter_reasons", {}),
        "model": config["merge_name"],
        "model_seqs": result.model_seqs,
        "seconds": result.seconds,
        "busy_seconds": result.busy_seconds,
        "events_per_second": result.events_per_second,
        "positions": result.positions,
        "machine": machine(),
    }
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:  # --quiet silences progress only, as for run, replay, demo and learn
        print(format_summary(summary, skip=("schema_version", "machine")))
    return 0
