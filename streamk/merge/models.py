"""``merge_models``: several workers' learners -> one fresh learner of the same class."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..consolidation import learner_budget
from ..consolidation.wrapper import served_learner
from ..errors import MergeError
from .compress import METHODS, compress_state
from .expansions import union_state
from .provenance import snapshot_sources

__all__ = ["MergeResult", "merge_models", "merge_snapshots", "default_method"]


@dataclass
class MergeResult:
    """A merged model and how it was made."""

    model: Any
    weights: list[float]
    n_union: int  # support rows before compression
    n_support: int  # after
    method: str  # compression used ("none" when the union fitted)
    gamma_spread: float  # relative spread of the workers' resolved gamma (0: one kernel)
    seconds: float
    sources: list[dict[str, Any]] = field(default_factory=list)


def default_method(cls: type) -> str:
    """``compress="auto"``: the batch solver for :class:`KernelPerceptron`, the projection for
    every other learner.

    Measured with ``python -m benchmarks.scale_out`` (2 streams, 2-4 workers, 3 repeats; see
    docs/operations.md, *Merging models*): on ``KernelPerceptron`` the solver's merged model was
    never below the best worker nor more than a point below one model on the whole stream (18 of
    18), the projection fell 6.3 points below once; on ``MarginPerceptron(Projectron)`` the
    solver fell below one model by more than a point in 9 of 18 and the projection in none; on
    the adatron they tie on Bananas and the projection leads on the hyperplane.
    """
    return "solve" if cls.__name__ == "KernelPerceptron" else "project"


def _merge(
    models: Sequence[Any],
    weights: Sequence[float] | None,
    budget: int | None,
    compress: str,
    gamma: str,
    solve_options: Mapping[str, Any] | None,
    names: Sequence[str] | None = None,
) -> MergeResult:
    t0 = time.perf_counter()
    models = list(models)
    if not models:
        raise MergeError("merge_models needs at least one model")
    own = learner_budget(models[0])
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1
    ):
        raise MergeError(f"budget must be None or a positive int, got {budget!r}")
    target = own if budget is None else int(budget)
    if own is not None and target is not None and target > own:
        raise MergeError(
            f"budget={target} exceeds the learner's own budget {own}: its policy would never "
            "bring the merged set back under it; pass budget <= the learner's budget"
        )
    if compress != "auto" and compress not in METHODS:
        raise MergeError(f"compress must be 'auto' or one of {METHODS}, got {compress!r}")
    u = union_state(models, weights, gamma, names)
    cls = type(models[0])
    state, method = u.state, "none"
    if target is not None and u.n_rows > target:
        method = default_method(cls) if compress == "auto" else compress
        state = compress_state(cls, state, target, method, dict(solve_options or {}))
    model = cls.from_state(state)
    return MergeResult(
        model=model,
        weights=u.weights.tolist(),
        n_union=u.n_rows,
        n_support=model.n_support,
        method=method,
        gamma_spread=u.gamma_spread,
        seconds=time.perf_counter() - t0,
    )


def merge_models(
    models: Sequence[Any],
    weights: Sequence[float] | None = None,
    budget: int | None = None,
    *,
    compress: str = "auto",
    gamma: str = "pool",
    solve_options: Mapping[str, Any] | None = None,
) -> Any:
    """One fresh learner from several workers' learners of one class and configuration.

    The merged function is ``sum_i w_i f_i`` (the union of the support sets, worker ``i``'s
    coefficients times ``w_i``; the novelty detector's centre is ``sum_i w_i centre_i``), then
    compressed to ``budget`` support vectors. The result predicts and keeps learning like any
    learner of its class; its ``n_learned`` is the workers' total.

    Parameters
    ----------
    models
        Learners of one class with equal parameters (``type`` and ``state()['params']``).
    weights
        One number ``>= 0`` per model, normalised to sum 1. Default: each model's
        ``n_learned`` (its share of the stream).
    budget
        Support vectors to keep. Default: the learner's own budget (``None`` if unbudgeted:
        then nothing is compressed). It may not exceed the learner's budget.
    compress
        ``"project"``, ``"solve"``, ``"policy"`` (see :mod:`streamk.merge.compress`) or
        ``"auto"`` (:func:`default_method`).
    gamma
        How ``gamma="auto"`` widths resolved differently by the workers are reconciled:
        ``"pool"`` (re-resolve from the pooled warm-up statistics, keep the coefficients) or
        ``"strict"`` (raise). Fixed kernels must be equal either way.
    solve_options
        Keyword arguments for :func:`streamk.consolidation.solve_learner` (``compress="solve"``).

    Raises
    ------
    MergeError
        Different classes, parameters or fixed kernels; bad weights or budget.
    """
    return _merge(models, weights, budget, compress, gamma, solve_options).model


def merge_snapshots(
    snapshots: Mapping[str, Any] | Iterable[tuple[str, Any]],
    weights: Sequence[float] | None = None,
    budget: int | None = None,
    **options: Any,
) -> MergeResult:
    """Merge the models of workers' snapshots (``{model_name: Snapshot}``); the result's
    ``sources`` (:func:`snapshot_sources`) names the snapshots that went in."""
    items = list(snapshots.items() if isinstance(snapshots, Mapping) else snapshots)
    items.sort(key=lambda kv: str(kv[0]))
    missing = [name for name, snap in items if getattr(snap, "model", None) is None]
    if missing:
        raise MergeError(f"snapshots {missing} were loaded with build=False: no model to merge")
    result = _merge(
        # a worker with consolidation on snapshots its wrapper: merge the learner that serves
        [served_learner(snap.model) for _, snap in items],
        weights,
        budget,
        options.pop("compress", "auto"),
        options.pop("gamma", "pool"),
        options.pop("solve_options", None),
        [str(name) for name, _ in items],
    )
    if options:
        raise MergeError(f"unknown merge options {sorted(options)}")
    result.sources = snapshot_sources(items)
    return result
