"""The ``streamk`` command: the argument parser and the dispatch, in one place.

Each command lives in its own module (``learn``, ``run``, ``replay``, ``demo``,
``broker``, ``produce``, ``snapshot``) as a ``cmd_*`` function that returns an exit code;
``main(argv)`` parses and dispatches, so tests call it without a subprocess. Run
``streamk COMMAND --help``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from typing import Any

from .. import accel
from .._version import __version__
from ..errors import StreamkError
from .argtypes import port, positive_int
from .broker import BROKER_EXAMPLES, cmd_broker
from .demo import DEMO_EXAMPLES, cmd_demo
from .learn import add_learn_parser
from .replay import REPLAY_EXAMPLES, cmd_replay
from .run import RUN_EXAMPLES, cmd_run

__all__ = ["main", "build_parser"]

MAIN_EXAMPLES = """examples:
  streamk demo                       # everything locally, nothing to set up
  streamk learn Bananas              # a learner on a data set, prequentially
  streamk run --config streamk.toml  # production: the engine on a Kafka topic
"""


def _add_engine_options(p: argparse.ArgumentParser, kafka: bool) -> None:
    from ..engine.config import DEFAULTS

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
        epilog=MAIN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # --version's lines as they are
    )
    parser.add_argument(
        "--version", action="version", version=f"streamk {__version__}\n{accel.describe()}"
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="what the engine logs to stderr (default: WARNING: fallbacks, rewinds, retries)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="everything locally: broker, events, engine, snapshots",
        description=cmd_demo.__doc__,
        epilog=DEMO_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--dir", default=".", help="where ./snapshots goes (default: .)")
    demo.add_argument(
        "--n", type=positive_int, default=20_000, help="events of the drifting stream"
    )
    demo.add_argument(
        "--text",
        action="store_true",
        help="a text stream instead: DNA-like reads with planted motifs, a string kernel",
    )
    demo.add_argument("--json", action="store_true", help="print the summary as JSON")
    demo.add_argument("--quiet", action="store_true", help="no progress display")
    demo.set_defaults(func=cmd_demo)

    add_learn_parser(sub)

    replay = sub.add_parser(
        "replay",
        help="run the engine over a recorded event log",
        description=cmd_replay.__doc__,
        epilog=REPLAY_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument("log", help="event log: .jsonl (one JSON event per line) or msgpack")
    replay.add_argument(
        "--plot",
        metavar="PNG",
        help="write the learning curve (rolling metric and support size per batch, with "
        "snapshots, consolidations and dead letters marked) to PNG, and its numbers to the "
        "sibling .json; needs matplotlib (pip install 'streamk[plot]')",
    )
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
        help="a local Kafka-compatible broker, for trying things out",
        description=cmd_broker.__doc__,
        epilog=BROKER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    broker.add_argument("--port", type=port, help="port on 127.0.0.1 (default: a free one)")
    broker.set_defaults(func=cmd_broker)

    from .merge import MERGE_EXAMPLES, cmd_merge

    merge = sub.add_parser(
        "merge",
        help="merge the workers' newest snapshots into one published model (scale-out)",
        description=cmd_merge.__doc__,
        epilog=MERGE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_engine_options(merge, kafka=True)
    merge.add_argument("--once", action="store_true", help="one pass, then exit")
    merge.set_defaults(func=cmd_merge)

    from .score import SCORE_EXAMPLES, cmd_score

    score = sub.add_parser(
        "score",
        help="predictions for an unlabelled topic with the merged model (scale-out)",
        description=cmd_score.__doc__,
        epilog=SCORE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_engine_options(score, kafka=True)
    score.set_defaults(func=cmd_score)

    _add_optional_commands(sub)
    return parser


def _add_optional_commands(sub: Any) -> None:
    """Commands whose modules register their own arguments."""
    from . import produce, snapshot

    snapshot.add_arguments(sub)
    produce.add_arguments(sub)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.log_level)
    # A value too large for the kernels overflows a norm on its way to being refused (a dead
    # letter, a skipped row, with the reason): NumPy's own warning about it is noise here.
    warnings.filterwarnings(
        "ignore", message="overflow encountered", category=RuntimeWarning, module=r"streamk\."
    )
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


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (tests swap it)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _configure_logging(level: str) -> None:
    """Send streamk's log lines (snapshot fallbacks, rewinds, retries) to stderr.

    Only the ``streamk`` loggers, and only when the application has not configured them.
    """
    logger = logging.getLogger("streamk")
    if logger.handlers:
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("streamk: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
