"""``streamk learn``: prequential evaluation of a learner on a data set, CSV file or
event log.

The task comes from the data: river's task tag for a named data set, the target column's
values for a CSV file (:func:`streamk.engine.registry.csv_task`; a row with an empty target
cell is unlabelled: skipped, counted, never scored). Classification is scored
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

from .argtypes import non_negative_int, non_negative_seconds, positive_int
from .output import SCHEMA_VERSION, Progress, machine, plain

__all__ = [
    "cmd_learn",
    "add_learn_parser",
    "LEARN_EXAMPLES",
    "SCALES",
    "build_model",
    "iter_text_rows",
]

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
  # a text column of a CSV or JSONL file, with a string kernel (default norm-spectrum:3)
  streamk learn reads.csv --text-column read --target label --kernel spectrum:4 --budget 500
  # trees (nested lists [label, child, ...]) in a JSONL field, the all-subtree kernel
  streamk learn parses.jsonl --text-column tree --kernel norm-subtree
"""

#: the kernel ``--text-column`` uses when ``--kernel`` is not given
DEFAULT_TEXT_KERNEL = "norm-spectrum:3"

#: ``--scale`` choices: what goes in front of the learner
SCALES = ("standard", "none")


def add_learn_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``learn`` command to the ``streamk`` sub-parsers ``sub``."""
    from ..engine.registry import DATASETS, LEARNER_TASKS, RANKS_HELP

    learn = sub.add_parser(
        "learn",
        help="prequential evaluation of a learner on a data set, CSV file or event log",
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
        "(default: the learner's, RBF with gamma=auto); on text: spectrum:p, "
        "mismatch:k:m[:alphabet], gap:p[:lam], rgap:p:m[:lam], on trees: subtree, corooted; "
        f"a norm- prefix normalises (default with --text-column: {DEFAULT_TEXT_KERNEL})",
    )
    learn.add_argument(
        "--text-column",
        metavar="COLUMN",
        help="learn from this column's text (CSV or .jsonl file; in JSONL also a tree "
        "[label, child, ...]) with a string/tree kernel, instead of numeric features",
    )
    learn.add_argument(
        "--budget",
        type=non_negative_int,
        help="maximum number of support vectors (0 or absent: no budget)",
    )
    learn.add_argument(
        "--policy",
        help="budget policy used with --budget (default: RemoveOldest)",
    )
    learn.add_argument("--ranks", help=f"ranker only: {RANKS_HELP}")
    learn.add_argument(
        "--scale",
        choices=SCALES,
        default="standard",
        help="standard: standardise each feature on-line (as river's StandardScaler) in front of "
        "the learner; none: raw features (default: standard)",
    )
    learn.add_argument(
        "--batch-size",
        type=positive_int,
        default=1,
        help="events per predict_many/learn_many block (default: 1)",
    )
    learn.add_argument("--limit", type=positive_int, help="stop after this many events")
    learn.add_argument(
        "--n",
        type=positive_int,
        help="length of a synthetic stream (default 20,000; not for a fixed data set or file)",
    )
    learn.add_argument("--target", help="CSV target column (default: the last one)")
    learn.add_argument(
        "--every", type=non_negative_seconds, default=1.0, help="seconds between progress lines"
    )
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
        from river import base

        if isinstance(learner, base.AnomalyDetector):  # no snapshot here: river's pipeline
            from river import preprocessing

            return preprocessing.StandardScaler() | learner
        from ..learners.scaling import standard_scaled

        return standard_scaled(learner)
    return learner


def cmd_learn(args: argparse.Namespace) -> int:
    """Prequential (test-then-train) evaluation of a learner on a data set or CSV file.

    The data set decides the task (river's tag, or the CSV target's values): accuracy for
    classification, MAE and R^2 for regression. Features are standardised on-line first
    unless --scale none.
    """

    from ..engine.registry import (
        LEARNER_TASKS,
        NOVELTY,
        build_learner,
        choose_learner,
        csv_task,
        dataset_task,
        is_event_log,
        iter_csv,
        iter_log,
        labels_task,
        load_dataset,
    )
    from ..errors import ConfigError

    if args.policy is not None and not args.budget:
        raise ConfigError(
            f"--policy {args.policy} keeps a budget of support vectors: give its size with "
            "--budget N (without it the support set is unbounded and no policy acts)"
        )
    args.policy = args.policy or "RemoveOldest"
    if args.text_column:
        return _learn_text(args)
    _refuse_text_kernel(args.kernel)
    unlabelled = [0]
    if os.path.exists(args.dataset):
        if args.n is not None:
            raise ConfigError(
                f"--n sets the length of a synthetic stream, not of a file ({args.dataset}); "
                "use --limit to stop after fewer events"
            )
        if is_event_log(args.dataset):  # read as the engine reads it
            if args.target is not None:
                raise ConfigError(
                    f"--target names a CSV column; an event log's label is each event's y "
                    f"({args.dataset})"
                )
            task = labels_task(iter_log(args.dataset))
            stream = _labelled(iter_log(args.dataset), unlabelled)
        else:
            task = csv_task(args.dataset, args.target)
            stream = _labelled(iter_csv(args.dataset, args.target), unlabelled)
    else:
        task = dataset_task(args.dataset)
        stream = load_dataset(args.dataset, n=args.n)
    name = choose_learner(task, args.learner)
    if LEARNER_TASKS[name] == NOVELTY:
        task = NOVELTY
    learner = build_learner(name, args.kernel, args.budget, args.policy, args.ranks)
    model = build_model(learner, args.scale)
    result = _score(model, stream, learner, task, args)
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
            "unlabelled": unlabelled[0],
            "machine": machine(),
        }
        out.pop("checkpoints")
        print(json.dumps(plain(out), indent=2, allow_nan=False))
        return 0
    rows = [
        ("data set", f"{args.dataset} ({task})"),
        ("learner", repr(learner).replace("\n", " ")),
        ("features", "standardised on-line" if args.scale == "standard" else "raw"),
        ("kernel in use", repr(learner.kernel_)),
        ("events", f"{result.n_events:,}"),
        *_unlabelled_row(unlabelled[0]),
        *_skipped_row(result.skipped, result.first_skipped),
        (
            ("flagged", f"{_figure(result.metric)} of events (novel before learning)")
            if task == NOVELTY
            else (result.metric_name.lower(), _figure(result.metric))
        ),
        *((key.lower(), _figure(value)) for key, value in result.extra.items()),
        ("events/s", f"{result.events_per_second:,.0f}"),
        ("support vectors", f"{result.n_support:,}"),
        ("model memory", f"{result.memory_bytes / 1024:,.1f} KiB"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


# -- text and trees ----------------------------------------------------------------------------


def _refuse_text_kernel(kernel: str | None) -> None:
    from ..engine.schema import input_schema
    from ..kernels import kernel_from_string
    from ..learners.perceptron import KernelPerceptron

    if kernel and input_schema(KernelPerceptron(kernel=kernel_from_string(kernel))) is not None:
        from ..errors import ConfigError

        raise ConfigError(
            f"kernel {kernel!r} takes strings or trees: name the column that holds them "
            "with --text-column"
        )


def iter_text_rows(path: str, column: str, target: str | None = None):
    """``(text, y)`` from a CSV (header row) or JSONL file: ``column``'s value and the target.

    The target is the last column (CSV) or the last key of each object (JSONL) unless
    ``target`` names it; in JSONL the value may also be a tree (a nested list). A label
    is read by :func:`~streamk.engine.registry.parse_label`; an empty one (or JSON null)
    is None, an unlabelled row. CSV files go through the checks every CSV reader of
    streamk makes (a header row, rows as wide as it).
    """
    from ..engine.registry import csv_header, csv_rows, parse_label
    from ..errors import ConfigError

    if path.endswith((".jsonl", ".ndjson", ".json")):
        with open(path, encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as exc:
                    raise ConfigError(f"{path}:{line_no}: not a JSON object ({exc})") from None
                if not isinstance(obj, dict) or column not in obj:
                    raise ConfigError(f"{path}:{line_no}: no field {column!r}")
                key = target or list(obj)[-1]
                if key not in obj or key == column:
                    raise ConfigError(f"{path}:{line_no}: no target field {key!r} (--target)")
                y = obj[key]
                yield obj[column], parse_label(y) if isinstance(y, str) else y
        return
    header, t = csv_header(path, target)
    if column not in header or header[t] == column:
        raise ConfigError(
            f"{path}: needs a header with the text column {column!r} and a target "
            f"column ({header[t]!r}); columns are {header}"
        )
    c = header.index(column)
    for _, cells in csv_rows(path, len(header)):
        yield cells[c], parse_label(cells[t])


def _text_task(labels: list[Any]) -> str:
    from ..engine.registry import CLASSIFICATION, REGRESSION

    if any(isinstance(v, str | bool) for v in labels):
        return CLASSIFICATION
    if any(isinstance(v, float) for v in labels):
        return REGRESSION
    return REGRESSION if len(set(labels)) > 20 else CLASSIFICATION


def _learn_text(args: argparse.Namespace) -> int:
    """``streamk learn FILE --text-column C``: prequential evaluation on text or trees.

    Rows whose value the kernel refuses (not a string, invalid, over its length limit,
    a malformed tree) are skipped and counted, never learned.
    """
    import itertools

    from ..engine.registry import build_learner, choose_learner
    from ..engine.schema import input_schema
    from ..errors import ConfigError, InvalidInput
    from ..learners.objects import validate_object

    if not os.path.exists(args.dataset):
        raise ConfigError(f"--text-column needs a CSV or JSONL file; {args.dataset!r} is not one")
    labels = (y for _, y in iter_text_rows(args.dataset, args.text_column, args.target))
    peek = list(itertools.islice((y for y in labels if y is not None), 1000))
    task = _text_task(peek)
    name = choose_learner(task, args.learner)
    kernel = args.kernel or DEFAULT_TEXT_KERNEL
    learner = build_learner(name, kernel, args.budget, args.policy)
    if input_schema(learner) is None:
        raise ConfigError(
            f"--text-column needs a string or tree kernel (e.g. {DEFAULT_TEXT_KERNEL}), "
            f"not {kernel!r}"
        )
    skipped = {"count": 0, "first": ""}
    unlabelled = [0]

    def rows():
        text_rows = iter_text_rows(args.dataset, args.text_column, args.target)
        for x, y in _labelled(text_rows, unlabelled):
            try:
                yield validate_object(learner.kernel_, x), y
            except InvalidInput as exc:
                skipped["count"] += 1
                skipped["first"] = skipped["first"] or str(exc)

    result = _score(learner, rows(), learner, task, args)
    out = {
        "schema_version": SCHEMA_VERSION,
        "command": "learn",
        "dataset": args.dataset,
        "text_column": args.text_column,
        "task": task,
        "learner": name,
        "scale": "none",
        "model": repr(learner),
        "kernel": repr(learner.kernel_),
        "batch_size": args.batch_size,
        **result.to_dict(),
        "unlabelled": unlabelled[0],
        "machine": machine(),
    }
    out.pop("checkpoints")
    # rows the kernel refused before the model saw them, and rows the model refused
    out["skipped"] = skipped["count"] + result.skipped
    out["first_skipped"] = skipped["first"] or result.first_skipped
    if args.json:
        print(json.dumps(plain(out), indent=2, allow_nan=False))
        return 0
    rows_out = [
        ("data set", f"{args.dataset} ({task}, text column {args.text_column!r})"),
        ("learner", repr(learner).replace("\n", " ")),
        ("kernel in use", repr(learner.kernel_)),
        ("events", f"{result.n_events:,}"),
        *_unlabelled_row(unlabelled[0]),
        *_skipped_row(out["skipped"], out["first_skipped"], always=True),
        (result.metric_name.lower(), _figure(result.metric)),
        *((key.lower(), _figure(value)) for key, value in result.extra.items()),
        ("events/s", f"{result.events_per_second:,.0f}"),
        ("support vectors", f"{result.n_support:,}"),
    ]
    width = max(len(k) for k, _ in rows_out)
    for key, value in rows_out:
        print(f"{key:<{width}}  {value}")
    return 0


def _labelled(stream: Any, unlabelled: list[int]) -> Any:
    """The rows of ``stream`` that have a label; ``unlabelled[0]`` counts the others.

    A prequential figure scores a prediction against the row's label, and learning needs
    it: an unlabelled row (an empty target cell) has nothing to score or learn, so it is
    skipped, and counted so that the summary says how many.
    """
    for x, y in stream:
        if y is None:
            unlabelled[0] += 1
            continue
        yield x, y


def _figure(value: float | None) -> str:
    """A metric in the summary: four decimals, ``-`` when there is none (nothing scored)."""
    return "-" if value is None else f"{value:.4f}"


def _unlabelled_row(count: int) -> list[tuple[str, str]]:
    """The summary's line for rows without a label (none without any)."""
    if not count:
        return []
    return [("unlabelled rows", f"{count:,} (empty target: skipped, not scored nor learned)")]


def _skipped_row(count: int, first: str, always: bool = False) -> list[tuple[str, str]]:
    """The summary's line for rows skipped as refused (none without any, unless ``always``)."""
    if not count and not always:
        return []
    return [("skipped rows", f"{count:,}" + (f" (first: {first})" if first else ""))]


def _score(model: Any, stream: Any, learner: Any, task: str, args: argparse.Namespace) -> Any:
    """Run ``model`` test-then-train over ``stream`` with ``learner``'s default metric (and
    R² for regression), showing progress unless ``--quiet``/``--json``."""
    from river import metrics

    from ..engine.registry import REGRESSION
    from .evaluate import default_metric, prequential

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
    return result
