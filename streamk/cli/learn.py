"""``streamk learn``: prequential evaluation of a learner on a data set or CSV file.

The task comes from the data: river's task tag for a named data set, the target column's
values for a CSV file (:func:`streamk.engine.registry.csv_task`). Classification is scored
by accuracy, regression by MAE and R²; without ``--learner`` the task's default learner is
used (``perceptron`` or ``svr``). Features are standardised on-line in front of the
learner (as river's ``StandardScaler`` does) unless ``--scale none``: ``gamma="auto"`` is
one width for every feature, so one feature in large units (Agrawal's salary,
TrumpApproval's ordinal date) would otherwise decide every kernel value.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
from typing import Any

from .output import SCHEMA_VERSION, Progress, machine

__all__ = ["cmd_learn", "add_learn_parser", "LEARN_EXAMPLES", "SCALES", "build_model"]

LEARN_EXAMPLES = """examples:
  # prequential accuracy of the default kernel perceptron on river's Bananas
  streamk learn Bananas
  # a regression data set: the on-line SVR, scored by MAE and R^2
  streamk learn TrumpApproval
  # a budget of 200 support vectors, an RBF kernel with a bias, blocks of 500 events
  streamk learn Bananas --budget 200 --kernel rbf:2+bias --batch-size 500
  # your own CSV (header row; the target is the last column unless --target says)
  streamk learn data.csv --target label --json
  # the raw features, without the on-line standardisation in front of the learner
  streamk learn Agrawal --scale none
"""

#: ``--scale`` choices: what goes in front of the learner
SCALES = ("standard", "none")


def add_learn_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``learn`` command to the ``streamk`` sub-parsers ``sub``."""
    from ..engine.registry import DATASETS, LEARNER_TASKS

    learn = sub.add_parser(
        "learn",
        help="prequential evaluation of a learner on a data set or CSV file",
        description=inspect.cleandoc(cmd_learn.__doc__ or ""),
        epilog=LEARN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    learn.add_argument(
        "dataset", help=f"a data set name ({', '.join(DATASETS)}) or the path of a CSV file"
    )
    learners = ", ".join(f"{name} ({task})" for name, task in LEARNER_TASKS.items())
    learn.add_argument(
        "--learner",
        choices=list(LEARNER_TASKS),
        metavar="LEARNER",
        help=f"one of: {learners} (default: perceptron for classification, svr for regression)",
    )
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
        "--scale",
        choices=SCALES,
        default="standard",
        help="standard: standardise each feature on-line (as river's StandardScaler) in front of "
        "the learner; none: raw features (default: standard)",
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
    return learn


def build_model(learner: Any, scale: str) -> Any:
    """``learner`` with the ``scale`` choice in front.

    ``standard`` wraps it in :func:`streamk.learners.scaling.standard_scaled`, which learns and
    predicts exactly as river's ``StandardScaler() | learner`` (tests/test_scaling.py), also
    in blocks: river's ``StandardScaler.transform_many`` fails on integer column names
    (Friedman's), and its ``learn_many`` standardises a block with the whole block's statistics.
    """
    if scale == "standard":
        from ..learners.scaling import standard_scaled

        return standard_scaled(learner)
    return learner


def cmd_learn(args: argparse.Namespace) -> int:
    """Prequential (test-then-train) evaluation of a learner on a data set or CSV file.

    The data set decides the task (river's tag, or the CSV target's values): accuracy for
    classification, MAE and R^2 for regression. Features are standardised on-line first
    unless --scale none.
    """
    from river import metrics

    from ..engine.registry import (
        REGRESSION,
        build_learner,
        choose_learner,
        csv_task,
        dataset_task,
        iter_csv,
        load_dataset,
    )
    from .evaluate import default_metric, prequential

    if os.path.exists(args.dataset):
        task = csv_task(args.dataset, args.target)
        stream = iter_csv(args.dataset, args.target)
    else:
        task = dataset_task(args.dataset)
        stream = load_dataset(args.dataset, n=args.n)
    name = choose_learner(task, args.learner)
    learner = build_learner(name, args.kernel, args.budget, args.policy)
    model = build_model(learner, args.scale)
    metric = default_metric(learner)
    extra = [metrics.R2()] if task == REGRESSION else []
    progress = Progress(type(metric).__name__, args.quiet or args.json)
    result = prequential(
        model,
        stream,
        metric,
        batch_size=args.batch_size,
        limit=args.limit,
        every=args.every,
        on_progress=progress,
        extra=extra,
    )
    progress.close()
    if args.json:
        out = {
            "schema_version": SCHEMA_VERSION,
            "command": "learn",
            "dataset": args.dataset,
            "task": task,
            "learner": name,
            "scale": args.scale,
            "model": repr(learner),
            "kernel": repr(learner.kernel_),
            "batch_size": args.batch_size,
            **result.to_dict(),
            "machine": machine(),
        }
        out.pop("checkpoints")
        print(json.dumps(out, indent=2))
        return 0
    rows = [
        ("data set", f"{args.dataset} ({task})"),
        ("learner", repr(learner).replace("\n", " ")),
        ("features", "standardised on-line" if args.scale == "standard" else "raw"),
        ("kernel in use", repr(learner.kernel_)),
        ("events", f"{result.n_events:,}"),
        (result.metric_name.lower(), f"{result.metric:.4f}"),
        *((key.lower(), f"{value:.4f}") for key, value in result.extra.items()),
        ("events/s", f"{result.events_per_second:,.0f}"),
        ("support vectors", f"{result.n_support:,}"),
        ("model memory", f"{result.memory_bytes / 1024:,.1f} KiB"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0
