"""Names the command line and config files use for learners and data sets."""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import ConfigError
from ..sources.replay import STREAM_ERRORS

__all__ = [
    "LEARNERS",
    "LEARNER_TASKS",
    "learner_class",
    "build_learner",
    "parse_ranks",
    "RANKS_HELP",
    "NOVELTY",
    "choose_learner",
    "DATASETS",
    "load_dataset",
    "dataset_task",
    "iter_csv",
    "csv_task",
    "csv_header",
    "csv_rows",
    "csv_number",
    "parse_label",
    "CSV_FORM",
]

CLASSIFICATION, REGRESSION = "classification", "regression"
#: an unsupervised task: labels, where a data set has them, only score the flags
NOVELTY = "novelty detection"

#: learner name -> "module:Class" (imported only when used)
LEARNERS: dict[str, str] = {
    "perceptron": "streamk.learners.perceptron:KernelPerceptron",
    "margin-perceptron": "streamk.learners.budgeted:MarginPerceptron",
    "adatron": "streamk.learners.adatron:KernelAdatron",
    "svr": "streamk.learners.svr:OnlineSVR",
    "ranker": "streamk.learners.ranking:OnlineRanker",
    "novelty": "streamk.learners.novelty:KernelNovelty",
}

#: learner name -> the task it learns (a ranker learns ordinal labels: a classification data set)
LEARNER_TASKS: dict[str, str] = {
    "perceptron": CLASSIFICATION,
    "margin-perceptron": CLASSIFICATION,
    "adatron": CLASSIFICATION,
    "svr": REGRESSION,
    "ranker": CLASSIFICATION,
    "novelty": NOVELTY,
}

#: task -> the learner ``streamk learn`` uses when ``--learner`` is not given
DEFAULT_LEARNERS: dict[str, str] = {CLASSIFICATION: "perceptron", REGRESSION: "svr"}


def choose_learner(task: str, name: str | None = None) -> str:
    """The learner for a data set's ``task``: ``name`` if it fits, the task's default if None.

    A classifier on regression targets would count exact matches of real numbers (issue 19:
    "accuracy 0.1020" on TrumpApproval), so a mismatch is a clear error, not a silent figure.
    """
    if name is None:
        return DEFAULT_LEARNERS[task]
    learner_class(name)  # unknown names fail here, with the list
    if LEARNER_TASKS[name] == NOVELTY:  # learns x alone: any data set will do
        return name
    if LEARNER_TASKS[name] != task:
        fits = sorted(k for k, v in LEARNER_TASKS.items() if v == task)
        raise ConfigError(
            f"learner {name!r} learns {LEARNER_TASKS[name]} but the data set's target is for "
            f"{task}; choose one of {fits} (or leave out --learner)"
        )
    return name


def learner_class(name: str) -> type:
    """The learner class registered under ``name``."""
    try:
        module, _, attr = LEARNERS[name].partition(":")
    except KeyError:
        raise ConfigError(f"unknown learner {name!r}; choose one of {sorted(LEARNERS)}") from None
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"learner {name!r} is not available in this build: {exc}") from None


def build_learner(
    name: str,
    kernel: str | None = None,
    budget: int | None = None,
    policy: str = "RemoveOldest",
    ranks: str | None = None,
) -> Any:
    """A learner from command-line style options: kernel text, budget size, policy name.

    ``kernel=None`` keeps the learner's default (``RBF(gamma="auto")``); ``budget=None`` (or
    0) means unbounded. ``ranks`` is the ranker's text form (:func:`parse_ranks`); empty or
    None lets the ranker take its ranks from the labels, and any other learner refuses it.
    """
    from ..budget import policy_from_spec
    from ..kernels import kernel_from_string

    cls = learner_class(name)
    params: dict[str, Any] = {}
    if kernel:
        params["kernel"] = kernel_from_string(kernel)
    if budget:
        params["budget"] = policy_from_spec({"name": policy, "budget": budget})
    fixed = parse_ranks(ranks)
    if fixed is not None:
        if name != "ranker":
            raise ConfigError(
                f"ranks applies to learner 'ranker' only, not {name!r}; leave ranks empty "
                "or choose learner = ranker"
            )
        params["ranks"] = fixed
    return cls(**params)


#: how ranks are written, for error messages and help texts
RANKS_HELP = (
    "the ranker's ranks, lowest first: empty (taken from the labels seen), a number N >= 2 "
    "(the ranks 1..N), or at least two distinct labels separated by commas, e.g. "
    "'1,2,3' or 'low,mid,high' (whole numbers become integers, true and false booleans)"
)


def parse_ranks(text: Any) -> tuple[Any, ...] | None:
    """The ranks a ``ranks`` setting names: None for empty, ``(1, ..., N)`` for a number N,
    else the comma-separated labels in order (integers where they parse as one).

    Raises :class:`ConfigError` naming what is accepted (:data:`RANKS_HELP`).
    """
    if text is None:
        return None
    text = str(text).strip()
    if not text:
        return None
    items = [t.strip() for t in text.split(",")]
    if len(items) == 1:
        try:
            n = int(items[0])
        except ValueError:
            n = 0
        if not 2 <= n <= 65_536:
            raise ConfigError(
                f"ranks must be {RANKS_HELP}; got {text!r:.100}"
                + (" (at most 65536 ranks)" if n > 65_536 else "")
            )
        return tuple(range(1, n + 1))
    ranks = tuple(_parse_rank(t) for t in items)
    if "" in ranks or len(set(ranks)) != len(ranks):
        raise ConfigError(
            f"ranks must be {RANKS_HELP}; got {text!r:.100} (an empty or repeated label)"
        )
    return ranks


def _parse_rank(text: str) -> Any:
    if text in ("true", "false"):  # JSON's spelling, as events carry boolean labels
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return text


#: data sets shipped inside river (no download) and synthetic streams
DATASETS: dict[str, str] = {
    "Bananas": "shipped with river: 5,300 2-D points, two interleaved bananas (binary)",
    "Phishing": "shipped with river: 1,250 web pages, 9 features (binary)",
    "ImageSegments": "shipped with river: 2,310 image regions, 18 features, 7 classes",
    "Shuttle": "shipped with river: 49,097 events, 9 features (binary)",
    "TrumpApproval": "shipped with river: 1,001 days, 6 features (regression)",
    "Hyperplane": "synthetic: rotating hyperplane, 10 features (binary; use --n)",
    "SEA": "synthetic: SEA concepts, 3 features (binary; use --n)",
    "Agrawal": "synthetic: Agrawal loan function 0, 9 features (binary; use --n)",
    "Friedman": "synthetic: Friedman #1, 10 features (regression; use --n)",
}


def _river_dataset(name: str, seed: int) -> tuple[Any, bool]:
    """river's data set object for a name in :data:`DATASETS` and whether it is synthetic."""
    from river import datasets
    from river.datasets import synth

    factories = {
        "Bananas": lambda: datasets.Bananas(),
        "Phishing": lambda: datasets.Phishing(),
        "ImageSegments": lambda: datasets.ImageSegments(),
        "Shuttle": lambda: datasets.Shuttle(),
        "TrumpApproval": lambda: datasets.TrumpApproval(),
        "Hyperplane": lambda: synth.Hyperplane(seed=seed, n_features=10),
        "SEA": lambda: synth.SEA(seed=seed),
        "Agrawal": lambda: synth.Agrawal(seed=seed),
        "Friedman": lambda: synth.Friedman(seed=seed),
    }
    matches = [k for k in factories if k.lower() == name.lower()]
    if not matches and ("/" in name or os.sep in name or os.path.splitext(name)[1]):
        raise ConfigError(f"no such file: {name!r} (nor is it a data set: {sorted(factories)})")
    if not matches:
        raise ConfigError(
            f"unknown data set {name!r}; choose one of {sorted(factories)} "
            "or give the path of a CSV file"
        )
    data = factories[matches[0]]()
    return data, isinstance(data, datasets.base.SyntheticDataset)


def load_dataset(name: str, n: int | None = None, seed: int = 42) -> Any:
    """An iterable of ``(x, y)`` for a name in :data:`DATASETS`.

    ``n`` is the length of a synthetic stream (default 20,000); a fixed data set has its
    own length, so ``n`` there is a :class:`ConfigError` rather than silently ignored.
    """
    data, synthetic = _river_dataset(name, seed)
    if n is not None and not synthetic:
        raise ConfigError(
            f"--n sets the length of a synthetic stream, but {name!r} is a fixed data set "
            f"({data.n_samples:,} events); use --limit to stop after fewer"
        )
    return data.take(n or 20_000) if synthetic else data


def dataset_task(name: str) -> str:
    """``"regression"`` or ``"classification"``, from river's task tag of the data set."""
    from river.datasets import base

    data, _ = _river_dataset(name, seed=0)
    return REGRESSION if data.task == base.REG else CLASSIFICATION


def csv_task(path: str, target: str | None = None, peek: int = 1000) -> str:
    """The task a CSV file's target asks for, from its first ``peek`` non-empty values
    (:func:`labels_task`). Empty target cells (unlabelled rows) do not count: one gap in a
    column of numbers must not make it a column of class names."""
    return labels_task(iter_csv(path, target), peek)


def labels_task(pairs: Any, peek: int = 1000) -> str:
    """The task the labels of ``(x, y)`` pairs ask for, from the first ``peek`` labels.

    Text or a boolean means classification; a non-integral number regression; if every
    value is an integer, more than 20 distinct values means regression (counts, amounts),
    otherwise classification (class codes). Pairs without a label (``y`` None) do not count.
    """
    import itertools

    labelled = (y for _, y in pairs if y is not None)
    values = list(itertools.islice(labelled, peek))
    if any(isinstance(v, str | bool) for v in values):
        return CLASSIFICATION
    if any(isinstance(v, float) for v in values):
        return REGRESSION
    return REGRESSION if len(set(values)) > 20 else CLASSIFICATION


#: what a CSV file must look like, said by every error about one
CSV_FORM = (
    "streamk reads comma-separated files whose first row names the columns "
    "(the target is the last column unless --target names another)"
)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def csv_header(path: str | os.PathLike[str], target: str | None = None) -> tuple[list[str], int]:
    """The header row of a CSV file and the target's index in it, checked.

    The file must have a header row (not a row of numbers: the first data row would
    silently become the column names) naming each column once, the target column, and at
    least one feature column besides it (one column per row is what a file with another
    delimiter looks like). Raises :class:`ConfigError` saying which, and what streamk reads
    (:data:`CSV_FORM`).
    """
    import csv

    with _csv_file(path) as fh:
        try:
            header = next(csv.reader(fh), None)
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: not UTF-8 text (byte {exc.start}); {CSV_FORM}, as text (a "
                "compressed file is read when named so: .csv.gz, .csv.bz2, .csv.xz)"
            ) from None
        except STREAM_ERRORS as exc:
            raise ConfigError(f"{path}: cannot be read as its name says: {exc}") from None
    if not header or not any(cell.strip() for cell in header):
        raise ConfigError(f"{path}: no header row; {CSV_FORM}")
    cells = [c.strip() for c in header]
    if any(_is_number(c) for c in cells) and all(
        _is_number(c) or c.lower() in ("true", "false", "") for c in cells
    ):
        raise ConfigError(
            f"{path}: the first row looks like data ({','.join(header)[:80]}): a CSV needs a "
            "header row naming the columns; add one, e.g. x1,x2,...,label"
        )
    if len(header) < 2:
        other = [d for d in (";", "\t", "|") if d in header[0]]
        hint = f" (the header holds {other[0]!r}: is that the delimiter?)" if other else ""
        raise ConfigError(
            f"{path}: one column ({header[0][:80]!r}), so no feature besides the target{hint}; "
            f"{CSV_FORM}: convert the file to commas"
        )
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:  # a row's dict would keep one of the cells and drop the other
        raise ConfigError(
            f"{path}: the header names {', '.join(map(repr, repeated))} more than once; give "
            "every column its own name"
        )
    target = target or header[-1]
    if target not in header:
        raise ConfigError(f"{path}: no column {target!r}; columns are {header}")
    return header, header.index(target)


def csv_rows(path: str | os.PathLike[str], width: int):
    """``(line, cells)`` for every data row of a CSV file (blank lines skipped).

    A row with more or fewer cells than the ``width`` of the header raises
    :class:`InvalidInput` naming the file, the line and both counts: the cells cannot be
    matched to their columns, and guessing would learn the wrong features.
    """
    import csv

    from ..errors import InvalidInput

    with _csv_file(path) as fh:
        reader = csv.reader(fh)
        next(reader, None)
        for row in _rows_read(path, reader):
            if not row:
                continue
            if len(row) != width:
                raise InvalidInput(
                    f"{path}:{reader.line_num}: {len(row)} cells, but the header has {width}; "
                    "give every row one cell per column (an empty cell for a missing value, "
                    "quote a cell that holds a comma)."
                )
            yield reader.line_num, row


def _csv_file(path: str | os.PathLike[str]) -> Any:
    """A CSV file opened as text, decompressed as its name says (``.csv.gz``...)."""
    from ..sources.replay import open_file

    return open_file(path, "rt", newline="", encoding="utf-8")


def _rows_read(path: str | os.PathLike[str], reader: Any):
    """``reader``'s rows; text that is not UTF-8, or a compressed file cut short, raises
    :class:`InvalidInput` naming the line (what was read before it was learned)."""
    from ..errors import InvalidInput

    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            line = reader.line_num + 1
            raise InvalidInput(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None
        except STREAM_ERRORS as exc:
            raise InvalidInput(f"{path}: cut short after line {reader.line_num}: {exc}") from None
        yield row


def csv_number(path: str | os.PathLike[str], line: int, column: str, cell: str) -> float:
    """A feature cell as a float; :class:`InvalidInput` naming where, if it is not one."""
    from ..errors import InvalidInput

    try:
        return float(cell)
    except ValueError:
        raise InvalidInput(f"{path}:{line}: column {column!r} is {cell!r}, not a number.") from None


def is_event_log(path: str | os.PathLike[str]) -> bool:
    """Whether a file is named as an event log (``.jsonl``, ``.ndjson``, ``.msgpack``,
    ``.mpk``, each possibly compressed), which ``streamk learn`` reads as the engine does,
    rather than as a CSV file."""
    from ..sources.replay import JSON_SUFFIXES, log_suffix

    return log_suffix(path) in (*JSON_SUFFIXES, ".msgpack", ".mpk")


def iter_log(path: str | os.PathLike[str]):
    """``(x, y)`` for every event of an event log, as the engine decodes it (a block's
    rows one by one; ``x`` a list becomes features ``0..d-1``, as a NumPy row's are).

    A record the engine would dead-letter raises :class:`InvalidInput` naming its offset
    and the reason: an evaluation over the rest would not be the log's.
    """
    from ..errors import InvalidEvent, InvalidInput
    from ..sources.replay import ReplaySource
    from .runs import decode_record
    from .schema import DEFAULT_LIMITS, Block

    source = ReplaySource(path)
    while not source.exhausted():
        for record in source.poll(10_000, 0.0):
            try:
                value = decode_record(record, DEFAULT_LIMITS, None)
            except InvalidEvent as exc:
                raise InvalidInput(f"{path}: record {record.offset}: {exc.reason}") from None
            for event in value.rows() if isinstance(value, Block) else (value,):
                x = event.x
                yield (dict(enumerate(x)) if isinstance(x, list) else x), event.y


def iter_csv(path: str, target: str | None = None):
    """``(x, y)`` pairs from a CSV file with a header; the target is the last column by default.

    Feature values must be numbers (an empty cell means the feature is absent); the target
    is read by :func:`parse_label`, so an empty target cell gives ``y = None``: an
    unlabelled row. The header and every row are checked (:func:`csv_header`,
    :func:`csv_rows`): ``streamk learn`` and ``streamk produce`` read CSV files alike.
    """
    header, t = csv_header(path, target)
    for line, cells in csv_rows(path, len(header)):
        x = {
            c: csv_number(path, line, c, v)
            for i, (c, v) in enumerate(zip(header, cells))
            if i != t and v != ""
        }
        yield x, parse_label(cells[t])


def parse_label(text: str | None) -> Any:
    """A label cell as a value: None if empty (unlabelled), an int, else a float, ``true`` or
    ``false`` in any case a bool (as JSON events and river's data sets carry them), else the
    text (a class name)."""
    if text is None or text.strip() == "":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    return text
