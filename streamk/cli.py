"""The ``streamk`` command.

Each sub-command is a ``cmd_*`` function that returns an exit code; ``main(argv)`` parses
and dispatches, so tests call it without a subprocess. Run ``streamk COMMAND --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from typing import Any

from . import __version__
from .errors import StreamkError

__all__ = ["main", "build_parser"]

SCHEMA_VERSION = 1

LEARN_EXAMPLES = """examples:
  # prequential accuracy of the default kernel perceptron on river's Bananas
  streamk learn Bananas
  # a budget of 200 support vectors, an RBF kernel with a bias, blocks of 500 events
  streamk learn Bananas --budget 200 --kernel rbf:2+bias --batch-size 500
  # your own CSV (header row; the target is the last column unless --target says)
  streamk learn data.csv --target label --json
"""


def _machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "streamk": __version__,
    }


class _Progress:
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


def cmd_learn(args: argparse.Namespace) -> int:
    """Prequential (test-then-train) evaluation of a learner on a data set or CSV file."""
    from .evaluate import default_metric, prequential
    from .registry import build_learner, iter_csv, load_dataset

    if os.path.exists(args.dataset):
        stream = iter_csv(args.dataset, args.target)
    else:
        stream = load_dataset(args.dataset, n=args.n)
    model = build_learner(args.learner, args.kernel, args.budget, args.policy)
    metric = default_metric(model)
    progress = _Progress(type(metric).__name__, args.quiet or args.json)
    result = prequential(
        model,
        stream,
        metric,
        batch_size=args.batch_size,
        limit=args.limit,
        every=args.every,
        on_progress=progress,
    )
    progress.close()
    if args.json:
        out = {
            "schema_version": SCHEMA_VERSION,
            "command": "learn",
            "dataset": args.dataset,
            "learner": args.learner,
            "model": repr(model),
            "kernel": repr(model.kernel_),
            "batch_size": args.batch_size,
            **result.to_dict(),
            "machine": _machine(),
        }
        out.pop("checkpoints")
        print(json.dumps(out, indent=2))
        return 0
    rows = [
        ("data set", args.dataset),
        ("learner", repr(model).replace("\n", " ")),
        ("kernel in use", repr(model.kernel_)),
        ("events", f"{result.n_events:,}"),
        (result.metric_name.lower(), f"{result.metric:.4f}"),
        ("events/s", f"{result.events_per_second:,.0f}"),
        ("support vectors", f"{result.n_support:,}"),
        ("model memory", f"{result.memory_bytes / 1024:,.1f} KiB"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


REPLAY_EXAMPLES = """examples:
  # learn from a recorded log, snapshots to ./snapshots, rejected records to ./dead
  streamk replay events.jsonl --dead-letter-dir ./dead
  # the same log again resumes after the newest snapshot: nothing is learned twice
  streamk replay events.msgpack --learner perceptron --budget 200 --json
"""

RUN_EXAMPLES = """examples:
  # consume a topic with the settings of a TOML file (every key: docs/configuration.md)
  streamk run --config streamk.toml
  # flags override the file and STREAMK_* variables
  streamk run --bootstrap-servers kafka:9092 --topic events --group scorers \\
      --predictions-topic predictions --dead-letter-topic events.dlq --snapshot-every 5000
"""


class _EngineProgress(_Progress):
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


def _engine_overrides(args: argparse.Namespace) -> dict[str, Any]:
    from .config import DEFAULTS

    return {k: getattr(args, k) for k in DEFAULTS if getattr(args, k, None) is not None}


def _run_engine(config: dict[str, Any], source: Any, args: argparse.Namespace) -> int:
    from .runner import build_engine, install_signal_handlers

    progress = _EngineProgress("metric", args.quiet or args.json)
    engine = build_engine(config, source=source, on_progress=progress)
    install_signal_handlers(engine)
    result = engine.run()
    progress.close()
    summary = {
        "schema_version": SCHEMA_VERSION,
        "records": result.records,
        "learned": result.learned,
        "scored": result.scored,
        "dead_lettered": result.dead_lettered,
        "snapshots": result.snapshots,
        "seq": result.seq,
        "seconds": result.seconds,
        "events_per_second": result.events_per_second,
        "positions": result.positions,
        "support": engine.progress()["support"],
        "rolling_metric": engine.progress()["rolling_metric"],
        "snapshot_dir": config["snapshot_dir"],
        "machine": _machine(),
    }
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        width = max(len(k) for k in summary)
        for key, value in summary.items():
            if key not in ("schema_version", "machine"):
                print(f"{key:<{width}}  {value}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Run the engine over a recorded event log (.jsonl or msgpack), with snapshots."""
    from .config import load_config
    from .sources.replay import ReplaySource

    config = load_config(args.config, _engine_overrides(args))
    return _run_engine(config, ReplaySource(args.log), args)


def cmd_run(args: argparse.Namespace) -> int:
    """Run the engine on a Kafka topic (production)."""
    from .config import load_config

    config = load_config(args.config, _engine_overrides(args))
    return _run_engine(config, None, args)


def cmd_demo(args: argparse.Namespace) -> int:
    """Embedded broker, a shipped data set as Kafka events, the engine, snapshots: all local."""
    from .demo import run_demo

    progress = _EngineProgress("accuracy", args.quiet or args.json)
    summary = run_demo(
        args.dir, n_drift=args.n, quiet=args.quiet or args.json, on_progress=progress
    )
    progress.close()
    if args.json:
        print(
            json.dumps(
                {"schema_version": SCHEMA_VERSION, **summary, "machine": _machine()}, indent=2
            )
        )
        return 0
    width = max(len(k) for k in summary)
    print()
    for key, value in summary.items():
        shown = f"{value:,.4f}" if isinstance(value, float) else value
        print(f"{key:<{width}}  {shown}")
    print("\nlook inside a snapshot:  streamk snapshot show " + summary["snapshot_dir"])
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    """Start the local Kafka-compatible broker (tansu) in the foreground until Ctrl-C."""
    from .broker import serve

    return serve(args.port)


def _add_engine_options(p: argparse.ArgumentParser, kafka: bool) -> None:
    from .config import DEFAULTS

    p.add_argument("--config", help="TOML configuration file")
    # a replay still publishes snapshots or outputs to Kafka if asked; it only reads a file
    skip = (
        set()
        if kafka
        else {
            "topic",
            "group",
            "transport",
            "max_poll_interval_ms",
            "session_timeout_ms",
            "heartbeat_interval_ms",
        }
    )
    for key, opt in DEFAULTS.items():
        if key in skip:
            continue
        help_text = f"{opt.help} (default: {opt.default!r}) [env: STREAMK_{key.upper()}]"
        if opt.kind is bool:  # --key / --no-key; absent leaves the file's or env's value
            p.add_argument(
                "--" + key.replace("_", "-"),
                dest=key,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
            continue
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=opt.kind, help=help_text)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress display")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamk",
        description="Streaming on-line kernel learning. Run `streamk COMMAND --help` for details.",
    )
    parser.add_argument("--version", action="version", version=f"streamk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="the whole pipeline locally: broker, events, engine, snapshots",
        description=cmd_demo.__doc__,
    )
    demo.add_argument("--dir", default=".", help="where ./snapshots goes (default: .)")
    demo.add_argument("--n", type=int, default=20_000, help="events of the drifting stream")
    demo.add_argument("--json", action="store_true", help="print the summary as JSON")
    demo.add_argument("--quiet", action="store_true", help="no progress display")
    demo.set_defaults(func=cmd_demo)

    learn = sub.add_parser(
        "learn",
        help="prequential evaluation of a learner on a data set or CSV file",
        description=cmd_learn.__doc__,
        epilog=LEARN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    learn.add_argument(
        "dataset",
        help="a data set name (Bananas, Phishing, ImageSegments, "
        "Shuttle, TrumpApproval, Hyperplane, SEA, Agrawal, Friedman) or a CSV path",
    )
    learn.add_argument("--learner", default="perceptron", help="learner name (default: perceptron)")
    learn.add_argument(
        "--kernel",
        help="e.g. rbf, rbf:0.5, rbf:2+bias, linear, poly:3, laplacian "
        "(default: the learner's, RBF with gamma=auto)",
    )
    learn.add_argument("--budget", type=int, help="maximum number of support vectors")
    learn.add_argument(
        "--policy",
        default="RemoveOldest",
        help="budget policy used with --budget (default: RemoveOldest)",
    )
    learn.add_argument(
        "--batch-size",
        type=int,
        default=1,
        help="events per predict_many/learn_many block (default: 1)",
    )
    learn.add_argument("--limit", type=int, help="stop after this many events")
    learn.add_argument("--n", type=int, help="length of a synthetic stream (default 20,000)")
    learn.add_argument("--target", help="CSV target column (default: the last one)")
    learn.add_argument("--every", type=float, default=1.0, help="seconds between progress lines")
    learn.add_argument("--json", action="store_true", help="print the result as JSON")
    learn.add_argument("--quiet", action="store_true", help="no progress display")
    learn.set_defaults(func=cmd_learn)

    replay = sub.add_parser(
        "replay",
        help="run the engine over a recorded event log",
        description=cmd_replay.__doc__,
        epilog=REPLAY_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument("log", help="event log: .jsonl (one JSON event per line) or msgpack")
    _add_engine_options(replay, kafka=False)
    replay.set_defaults(func=cmd_replay)

    run = sub.add_parser(
        "run",
        help="run the engine on a Kafka topic",
        description=cmd_run.__doc__,
        epilog=RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_engine_options(run, kafka=True)
    run.set_defaults(func=cmd_run)

    broker = sub.add_parser(
        "broker",
        help="start the local Kafka-compatible broker (for trying streamk out)",
        description=cmd_broker.__doc__,
    )
    broker.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    broker.set_defaults(func=cmd_broker)

    _add_optional_commands(sub)
    return parser


def _add_optional_commands(sub: Any) -> None:
    """Commands whose modules register their own arguments."""
    from . import produce, snapshot_cli

    snapshot_cli.add_arguments(sub)
    produce.add_arguments(sub)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (StreamkError, OSError) as exc:
        print(f"streamk: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("streamk: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
