"""Names the command line and config files use for learners and data sets."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import ConfigError

__all__ = ["LEARNERS", "learner_class", "build_learner", "DATASETS", "load_dataset"]

#: learner name -> "module:Class" (imported only when used)
LEARNERS: dict[str, str] = {
    "perceptron": "streamk.learners.perceptron:KernelPerceptron",
    "margin-perceptron": "streamk.learners.budgeted:MarginPerceptron",
    "adatron": "streamk.learners.adatron:KernelAdatron",
    "svr": "streamk.learners.svr:OnlineSVR",
    "ranker": "streamk.learners.ranking:OnlineRanker",
}


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
    name: str, kernel: str | None = None, budget: int | None = None, policy: str = "RemoveOldest"
) -> Any:
    """A learner from command-line style options: kernel text, budget size, policy name.

    ``kernel=None`` keeps the learner's default (``RBF(gamma="auto")``); ``budget=None`` (or
    0) means unbounded.
    """
    from ..budget import policy_from_spec
    from ..kernels import kernel_from_string

    params: dict[str, Any] = {}
    if kernel:
        params["kernel"] = kernel_from_string(kernel)
    if budget:
        params["budget"] = policy_from_spec({"name": policy, "budget": budget})
    return learner_class(name)(**params)


#: data sets shipped inside river (no download) and synthetic streams
DATASETS: dict[str, str] = {
    "Bananas": "shipped with river: 5,300 2-D points, two interleaved bananas (binary)",
    "Phishing": "shipped with river: 1,250 web pages, 9 features (binary)",
    "ImageSegments": "shipped with river: 2,310 image regions, 18 features, 7 classes",
    "Shuttle": "shipped with river: 58,000 events, 9 features, 7 classes",
    "TrumpApproval": "shipped with river: 1,001 days, 6 features (regression)",
    "Hyperplane": "synthetic: rotating hyperplane, 10 features (binary; use --n)",
    "SEA": "synthetic: SEA concepts, 3 features (binary; use --n)",
    "Agrawal": "synthetic: Agrawal loan function 0, 9 features (binary; use --n)",
    "Friedman": "synthetic: Friedman #1, 10 features (regression; use --n)",
}


def load_dataset(name: str, n: int | None = None, seed: int = 42) -> Any:
    """An iterable of ``(x, y)`` for a name in :data:`DATASETS` (synthetic ones need ``n``)."""
    from river import datasets
    from river.datasets import synth

    n_synth = n or 20_000
    factories = {
        "Bananas": lambda: datasets.Bananas(),
        "Phishing": lambda: datasets.Phishing(),
        "ImageSegments": lambda: datasets.ImageSegments(),
        "Shuttle": lambda: datasets.Shuttle(),
        "TrumpApproval": lambda: datasets.TrumpApproval(),
        "Hyperplane": lambda: synth.Hyperplane(seed=seed, n_features=10).take(n_synth),
        "SEA": lambda: synth.SEA(seed=seed).take(n_synth),
        "Agrawal": lambda: synth.Agrawal(seed=seed).take(n_synth),
        "Friedman": lambda: synth.Friedman(seed=seed).take(n_synth),
    }
    matches = [k for k in factories if k.lower() == name.lower()]
    if not matches:
        raise ConfigError(
            f"unknown data set {name!r}; choose one of {sorted(factories)} "
            "or give the path of a CSV file"
        )
    return factories[matches[0]]()


def iter_csv(path: str, target: str | None = None):
    """``(x, y)`` pairs from a CSV file with a header; the target is the last column by default.

    Feature values must be numbers (an empty cell means the feature is absent); the
    target is read as an int, else a float, else kept as text (a class label).
    """
    import csv

    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames:
            raise ConfigError(f"{path}: no header row; the first line must name the columns")
        target = target or reader.fieldnames[-1]
        if target not in reader.fieldnames:
            raise ConfigError(f"{path}: no column {target!r}; columns are {reader.fieldnames}")
        for line, row in enumerate(reader, start=2):
            y_text = row.pop(target)
            try:
                x = {k: float(v) for k, v in row.items() if v not in ("", None)}
            except ValueError as exc:
                raise ConfigError(f"{path}:{line}: a feature is not a number ({exc})") from None
            yield x, _parse_label(y_text)


def _parse_label(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text
