"""``streamk learn``: prequential evaluation of a learner on a data set or CSV file."""

from __future__ import annotations

import argparse
import json
import os

from .output import SCHEMA_VERSION, Progress, machine

__all__ = ["cmd_learn", "LEARN_EXAMPLES"]

LEARN_EXAMPLES = """examples:
  # prequential accuracy of the default kernel perceptron on river's Bananas
  streamk learn Bananas
  # a budget of 200 support vectors, an RBF kernel with a bias, blocks of 500 events
  streamk learn Bananas --budget 200 --kernel rbf:2+bias --batch-size 500
  # your own CSV (header row; the target is the last column unless --target says)
  streamk learn data.csv --target label --json
"""


def cmd_learn(args: argparse.Namespace) -> int:
    """Prequential (test-then-train) evaluation of a learner on a data set or CSV file."""
    from ..engine.registry import build_learner, iter_csv, load_dataset
    from .evaluate import default_metric, prequential

    if os.path.exists(args.dataset):
        stream = iter_csv(args.dataset, args.target)
    else:
        stream = load_dataset(args.dataset, n=args.n)
    model = build_learner(args.learner, args.kernel, args.budget, args.policy)
    metric = default_metric(model)
    progress = Progress(type(metric).__name__, args.quiet or args.json)
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
            "machine": machine(),
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
