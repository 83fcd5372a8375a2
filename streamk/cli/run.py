"""``streamk run``: the engine on a Kafka topic; the engine runner ``replay`` shares."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .output import SCHEMA_VERSION, EngineProgress, describe_start, format_summary, machine, plain

__all__ = ["cmd_run", "run_engine", "engine_overrides", "RUN_EXAMPLES"]

RUN_EXAMPLES = """examples:
  # consume a topic with the settings of a TOML file (every key: docs/configuration.md)
  streamk run --config streamk.toml
  # flags override the file and STREAMK_* variables
  streamk run --bootstrap-servers kafka:9092 --topic events --group scorers \\
      --predictions-topic predictions --dead-letter-topic events.dlq --snapshot-every 5000
"""


def engine_overrides(args: argparse.Namespace) -> dict[str, Any]:
    from ..engine.config import DEFAULTS

    return {k: getattr(args, k) for k in DEFAULTS if getattr(args, k, None) is not None}


def run_engine(config: dict[str, Any], source: Any, args: argparse.Namespace) -> int:
    from ..engine.runner import build_engine, install_signal_handlers

    progress = EngineProgress("metric", args.quiet or args.json)
    plot = getattr(args, "plot", None)
    curve = None
    if plot:
        from .curve import LearningCurve, require_matplotlib, throttled

        require_matplotlib()
        curve = LearningCurve("metric", 0)
        console = throttled(progress, 1.0)

        def on_progress(point: dict[str, Any]) -> None:
            curve.record(point)
            console(point)

        engine = build_engine(config, source=source, on_progress=on_progress)
        engine.config.progress_seconds = 0.0  # a point after every batch; the console throttled
        curve.engine = engine
    else:
        engine = build_engine(config, source=source, on_progress=progress)
    engine.restore()
    if curve is not None:
        curve.metric = _metric_name(engine.model)
        curve.window = engine.config.rolling_window
    # Said even with --quiet (which silences progress): where a restart resumed matters.
    print(describe_start(engine, config["snapshot_dir"]), file=sys.stderr, flush=True)
    install_signal_handlers(engine)
    result = engine.run()
    progress.close()
    summary = {
        "schema_version": SCHEMA_VERSION,
        "records": result.records,
        "learned": result.learned,
        "scored": result.scored,
        "dead_lettered": result.dead_lettered,
        "dead_letter_reasons": result.metrics.get("dead_letter_reasons", {}),
        "snapshots": result.snapshots,
        "seq": result.seq,
        "seconds": result.seconds,
        "events_per_second": result.events_per_second,
        "positions": result.positions,
        "support": engine.progress()["support"],
        "rolling_metric": engine.progress()["rolling_metric"],
        "snapshot_dir": config["snapshot_dir"],
        "machine": machine(),
    }
    if _metric_name(engine.model) == "fraction flagged":  # a detector: how much it flagged
        flagged = int(engine.metrics.get("events_flagged"))
        summary["flagged"] = flagged
        summary["flagged_fraction"] = flagged / result.learned if result.learned else None
    if curve is not None:
        curve.record()  # the end, if the last batch's point missed it
        source_name = getattr(args, "log", None) or f"topic {config['topic']}"
        title = (
            f"streamk replay {source_name}: {config['learner']}, kernel {config['kernel']}, "
            f"budget {config['budget'] or 'unbounded'}"
        )
        png, data = curve.write(plot, title)
        summary["plot"], summary["plot_data"] = str(png), str(data)
    if args.json:
        print(json.dumps(plain(summary), indent=2, allow_nan=False))
    else:
        print(format_summary(summary, skip=("schema_version", "machine")))
    return 0


def _metric_name(model: Any) -> str:
    """What the engine's rolling metric is for ``model`` (RollingScore's two forms)."""
    from river import base

    from .evaluate import final_step

    if isinstance(final_step(model), base.AnomalyDetector):
        return "fraction flagged"
    return "MAE" if isinstance(model, base.Regressor) else "accuracy"


def cmd_run(args: argparse.Namespace) -> int:
    """Run the engine on a Kafka topic (production)."""
    from ..engine.config import load_config

    config = load_config(args.config, engine_overrides(args))
    # The client may retry for a while before it gives up on an unreachable broker.
    print(
        f"connecting to {config['bootstrap_servers']} (topic {config['topic']!r}, "
        f"group {config['group']!r}, {config['transport']})",
        file=sys.stderr,
        flush=True,
    )
    return run_engine(config, None, args)
