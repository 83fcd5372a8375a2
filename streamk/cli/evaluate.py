"""Prequential (test-then-train) evaluation with progress, used by ``streamk learn``.

Each event is first predicted, the prediction is scored, then the model learns the
event, as ``river.evaluate.progressive_val_score`` does (a ``None`` prediction, made
before any label was seen, is not scored). With ``batch_size > 1`` a model with
``learn_predict_many`` (every streamk learner, novelty's flags too) learns each block in
one pass and returns exactly the per-event predictions; other models have the block
scored with ``predict_many`` before ``learn_many`` learns it (each prediction then misses
the block's earlier events).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from river import base, metrics

__all__ = ["PrequentialResult", "prequential", "default_metric", "final_step", "FlaggedFraction"]


class FlaggedFraction:
    """The fraction of events a novelty detector flagged (its prequential figure).

    ``update(y, flag)`` ignores ``y``: a detector learns without labels, and a data set's
    labels need not mean "novel".
    """

    def __init__(self) -> None:
        self.n = 0
        self.flagged = 0

    def update(self, y_true: Any, y_pred: Any) -> None:
        self.n += 1
        self.flagged += bool(y_pred)

    def get(self) -> float:
        return self.flagged / self.n if self.n else 0.0


@dataclass
class PrequentialResult:
    """What a prequential run measured."""

    metric_name: str
    #: None when no prediction was scored (no rows, or none labelled): no value, not 0
    metric: float | None
    n_events: int
    seconds: float
    n_support: int
    memory_bytes: int
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    #: further metrics updated alongside (name -> final value), e.g. ``{"R2": 0.93}``
    extra: dict[str, float | None] = field(default_factory=dict)
    #: events the model refused (a value too large for its kernels, a NaN label): skipped
    skipped: int = 0
    #: the first refused event's 0-based index in the stream and the model's reason
    first_skipped: str = ""

    @property
    def events_per_second(self) -> float:
        return self.n_events / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["events_per_second"] = self.events_per_second
        return out


def _objects(xs: list[Any]) -> Any:
    """Texts or trees as one object Series (a tree, itself a list, stays one item)."""
    import pandas as pd

    series = pd.Series([None] * len(xs), dtype=object)
    series[:] = xs
    return series


def default_metric(model: base.Estimator) -> Any:
    """Accuracy for classifiers, MAE for regressors, the fraction flagged for detectors."""
    if isinstance(final_step(model), base.AnomalyDetector):
        return FlaggedFraction()
    return metrics.MAE() if isinstance(model, base.Regressor) else metrics.Accuracy()


def final_step(model: Any) -> Any:
    """The learner at the end of a river pipeline or inside a scaling wrapper (else the model)."""
    from river import compose

    if isinstance(model, compose.Pipeline):
        return model[-1]
    inner = model.__dict__.get("model") if hasattr(model, "scaler_") else None
    return inner if inner is not None else model


def _support_size(model: Any) -> int:
    return int(getattr(final_step(model), "n_support", 0))


def prequential(
    model: base.Estimator,
    stream: Iterable[tuple[dict, Any]],
    metric: metrics.base.Metric | None = None,
    *,
    batch_size: int = 1,
    limit: int | None = None,
    every: float = 1.0,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    extra: Sequence[metrics.base.Metric] = (),
) -> PrequentialResult:
    """Run test-then-train over ``stream`` and return the final figures.

    Parameters
    ----------
    batch_size
        Events per ``predict_many``/``learn_many`` block; 1 means one event at a time.
    limit
        Stop after this many events.
    every
        Seconds between progress callbacks (and checkpoints).
    on_progress
        Called with a dict (events, events/s, metric, support size) every ``every`` s.
    extra
        Further metrics updated with the same predictions (reported in ``extra``).

    An event the model refuses is skipped and counted (``skipped``, ``first_skipped``),
    never learned nor scored, and the run goes on; one its configuration rules out
    (:class:`~streamk.errors.OutsideConfiguration`: a rank outside fixed ``ranks``) stops
    it, since every such event would be refused. In blocks, a model that says how many
    events it learned (``n_learned``) goes on one event at a time from the refused block's
    first unlearned event: the events it learned before refusing are not scored (their
    predictions were not returned); a model that cannot say learns one event at a time.
    """
    import pandas as pd

    from ..engine.scoring import REFUSALS
    from ..errors import OutsideConfiguration

    metric = metric or default_metric(model)
    scored = [metric, *extra]
    if isinstance(final_step(model), base.AnomalyDetector):  # learns x alone
        learn_one: Callable[[dict, Any], Any] = lambda x, y: model.learn_one(x)  # noqa: E731
        learn_many: Callable[[Any, Any], Any] = lambda X, y: model.learn_many(X)  # noqa: E731
    else:
        learn_one, learn_many = model.learn_one, getattr(model, "learn_many", None)
    stream = itertools.islice(stream, limit) if limit is not None else iter(stream)
    n = 0
    n_scored = 0  # predictions scored: none means the metrics have no value
    skipped = 0
    first_skipped = ""  # the first refused event's index and the model's reason
    start = last = time.perf_counter()
    checkpoints: list[dict[str, Any]] = []

    def report(now: float) -> None:
        point = {
            "events": n,
            "seconds": now - start,
            "events_per_second": n / max(now - start, 1e-9),
            "metric": metric.get(),
            "n_support": _support_size(model),
        }
        checkpoints.append(point)
        if on_progress is not None:
            on_progress(point)

    def one(x: Any, y: Any, index: int) -> None:
        """Test-then-train one event; a refusal skips it (counted)."""
        nonlocal skipped, first_skipped, n_scored
        try:
            y_pred = model.predict_one(x)
            learn_one(x, y)
        except OutsideConfiguration:
            raise
        except REFUSALS as exc:
            skipped += 1
            first_skipped = first_skipped or f"event {index}: {exc}"
            return
        if y_pred is not None:  # as river: no guess, no score
            n_scored += 1
            for m in scored:
                m.update(y, y_pred)

    blocks = batch_size > 1 and getattr(model, "n_learned", None) is not None
    if not blocks:
        for x, y in stream:
            one(x, y, n)
            n += 1
            if n % 64 == 0 and (now := time.perf_counter()) - last >= every:
                last = now
                report(now)
    else:
        from ..engine.runs import dicts_frame

        learn_predict = getattr(model, "learn_predict_many", None)
        while chunk := list(itertools.islice(stream, batch_size)):
            xs = [x for x, _ in chunk]
            ys = [y for _, y in chunk]
            before = model.n_learned
            try:
                X = dicts_frame(xs) if isinstance(xs[0], dict) else _objects(xs)
                if learn_predict is not None:  # exact per-event test-then-train, one pass
                    predictions = learn_predict(X, ys)
                else:  # block-level: the block is scored before any of it is learned
                    predictions = model.predict_many(X).tolist()
                    learn_many(X, pd.Series(ys, dtype=object))
            except OutsideConfiguration:
                raise
            except REFUSALS:  # from the first event not learned, one at a time
                done = model.n_learned - before
                for i in range(done, len(chunk)):
                    one(*chunk[i], n + i)
                predictions = [None] * len(chunk)
            for y, p in zip(ys, predictions):
                if p is not None:
                    n_scored += 1
                    for m in scored:
                        m.update(y, p)
            n += len(chunk)
            if (now := time.perf_counter()) - last >= every:
                last = now
                report(now)
    seconds = time.perf_counter() - start
    report(time.perf_counter())
    return PrequentialResult(
        metric_name=type(metric).__name__,
        metric=float(metric.get()) if n_scored else None,
        n_events=n,
        seconds=seconds,
        n_support=_support_size(model),
        memory_bytes=int(getattr(final_step(model), "_raw_memory_usage", 0)),
        checkpoints=checkpoints,
        extra={type(m).__name__: float(m.get()) if n_scored else None for m in extra},
        skipped=skipped,
        first_skipped=first_skipped,
    )
