"""Scoring a run of unlabelled events: one block call, or event by event where the model
refuses the block, the refused events dead-lettered (the engine's and the scorer's path).

A model refuses an event it cannot score (a value too large for its kernels); scoring the
run's block then raises for the whole run. Event by event, the others are scored and
published with their ids and offsets, and the engine or scorer goes on: a poison message
never stops it (a scorer that stopped would read the same batch again after a restart).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidEvent, StreamkError
from ..sources.base import Record
from .runs import Run, invalid

__all__ = ["REFUSALS", "as_invalid", "kept_run", "probabilities", "score_run"]

#: What a model raises for an event it refuses (streamk's errors; river's and NumPy's).
REFUSALS = (StreamkError, ValueError, TypeError)


def as_invalid(exc: Exception) -> InvalidEvent:
    """A model's refusal as a dead letter's reason."""
    return invalid("rejected_by_model", f"the model rejected the event: {exc}")


def kept_run(run: Run, keep: list[int]) -> Run:
    """An unlabelled run of the events at ``keep`` (the others were dead-lettered), for
    publishing their predictions with their ids and offsets."""
    if len(keep) == len(run):
        return run
    ids = [run.ids[i] for i in keep] if run.ids else run.ids
    return Run(labelled=False, records=[run.records[i] for i in keep], ids=ids)


def probabilities(model: Any, X: Any) -> list[dict[Any, float]]:
    """Each row's class probabilities as ``{label: p}`` (``predict_proba_many``)."""
    frame = model.predict_proba_many(X)
    labels = frame.columns.tolist()
    return [dict(zip(labels, row)) for row in frame.to_numpy().tolist()]


def score_run(
    model: Any,
    run: Run,
    X: Any | None,
    proba: bool,
    dead_letter: Callable[[Record, InvalidEvent], None],
) -> tuple[Run, list[Any], list[dict[Any, float]] | None]:
    """Predict an unlabelled run (and, with ``proba``, its probabilities).

    Returns the run of the events scored, their predictions and probabilities: the whole
    run from one ``predict_many`` call where the model has one and takes the block, else
    (and when ``X`` is ``None``: a run too short to pay for its frame) event by event,
    each refused event handed to ``dead_letter`` and left out.
    """
    blocks = (
        X is not None
        and callable(getattr(model, "predict_many", None))
        and (not proba or callable(getattr(model, "predict_proba_many", None)))
    )
    if blocks:  # else (a river model without them) event by event
        try:
            predictions = model.predict_many(X).tolist()
            return run, predictions, probabilities(model, X) if proba else None
        except REFUSALS:
            pass
    predictions, keep = [], []
    probas: list[dict[Any, float]] | None = [] if proba else None
    for i in range(len(run)):
        x = run.row(i)
        try:
            p = model.predict_one(x)
            if probas is not None:
                probas.append(model.predict_proba_one(x))
        except REFUSALS as exc:
            dead_letter(run.records[i], as_invalid(exc))
            continue
        predictions.append(p)
        keep.append(i)
    return kept_run(run, keep), predictions, probas
