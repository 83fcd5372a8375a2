"""Turn a polled batch of records into runs the model can take in one call.

A run is a stretch of consecutive events of one kind: labelled (to score for the rolling
metric, then learn with ``learn_many``) or unlabelled (to score with ``predict_many`` and
publish). Splitting in stream order keeps test-then-train semantics: an event is scored
by the model that has learned every labelled event before it. A block event stays one
NumPy array end to end; per-event maps become a DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InvalidEvent
from .events import Block, Limits, Schema, decode
from .sources.base import Record

__all__ = ["Run", "decode_record", "split_runs", "invalid"]


def invalid(code: str, reason: str) -> InvalidEvent:
    """An :class:`InvalidEvent` with the ``code``/``reason`` that ``events.decode`` sets."""
    return InvalidEvent(f"invalid event [{code}]: {reason}", code=code, reason=reason)


@dataclass
class Run:
    """Consecutive events of one kind, with the record each came from."""

    labelled: bool
    records: list[Record] = field(default_factory=list)
    xs: list[dict] = field(default_factory=list)  # per-event maps ...
    vectors: list[list[float]] | None = None  # ... or per-event lists (a run holds one form)
    X: np.ndarray | None = None  # ... or one block's rows
    ys: list[Any] = field(default_factory=list)
    ids: list[Any] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)

    def frame(self) -> Any:
        """The run's features as the model's ``*_many`` methods take them."""
        if self.X is not None:
            return self.X
        if self.vectors is not None:
            if len({len(v) for v in self.vectors}) == 1:
                return np.asarray(self.vectors, dtype=np.float64)
            return _frame([dict(enumerate(v)) for v in self.vectors])
        return _frame(self.xs)

    def row(self, i: int) -> dict:
        """Event ``i``'s features as a dict (for one-by-one fallbacks)."""
        if self.X is not None:
            return dict(enumerate(self.X[i].tolist()))
        if self.vectors is not None:
            return dict(enumerate(self.vectors[i]))
        return self.xs[i]


def decode_record(record: Record, limits: Limits, schema: Schema | None) -> Any:
    """The record's :class:`Event` or :class:`Block`; raises :class:`InvalidEvent`."""
    value = record.value
    if value is None:
        payload = record.payload
        if payload[:1] in (b"{", b"[") and payload[-1:] in (b"}", b"]"):
            from .sources.replay import decode_json_record

            try:
                payload = decode_json_record(payload)
            except ValueError as exc:
                raise invalid("undecodable", f"not valid JSON: {exc}") from None
        value = decode(payload, limits, schema)
    if not isinstance(value, Block) and isinstance(value.x, str):
        raise invalid(
            "text_unsupported", "text features need a string kernel; this learner takes numbers"
        )
    return value


def split_runs(
    batch: list[Record],
    limits: Limits,
    schema: Schema | None,
    on_invalid: Callable[[Record, InvalidEvent], None],
) -> Iterator[Run]:
    """Decode ``batch`` and yield its runs in stream order; bad records go to ``on_invalid``."""
    run: Run | None = None
    for record in batch:
        try:
            value = decode_record(record, limits, schema)
        except InvalidEvent as exc:
            on_invalid(record, exc)
            continue
        if isinstance(value, Block):
            if run is not None:
                yield run
                run = None
            yield from _block_runs(record, value)
            continue
        labelled = value.y is not None
        x = value.x
        vector = isinstance(x, list)
        if run is None or run.labelled != labelled or (run.vectors is not None) != vector:
            if run is not None:
                yield run
            run = Run(labelled, vectors=[] if vector else None)
        run.records.append(record)
        if vector:
            run.vectors.append(x)
        else:
            run.xs.append(x)
        run.ys.append(value.y)
        run.ids.append(value.id)
    if run is not None:
        yield run


def _block_runs(record: Record, block: Block) -> Iterator[Run]:
    n = len(block)
    ys = block.y.tolist() if isinstance(block.y, np.ndarray) else block.y
    ids = block.ids if block.ids is not None else [None] * n
    if ys is None:
        yield Run(False, [record] * n, X=block.X, ys=[None] * n, ids=list(ids))
        return
    start = 0
    while start < n:  # a block may mix labelled and unlabelled rows: split where they change
        labelled = ys[start] is not None
        end = start + 1
        while end < n and (ys[end] is not None) == labelled:
            end += 1
        yield Run(
            labelled,
            [record] * (end - start),
            X=block.X[start:end],
            ys=ys[start:end],
            ids=list(ids[start:end]),
        )
        start = end


def _frame(xs: list[dict]) -> Any:
    """A DataFrame of feature dicts; fast when they share one key order (the usual case)."""
    import pandas as pd

    keys = tuple(xs[0])
    if all(tuple(x) == keys for x in xs):
        try:
            values = np.array([list(x.values()) for x in xs], dtype=np.float64)
            return pd.DataFrame(values, columns=list(keys))
        except (TypeError, ValueError):
            pass  # e.g. None values: let the model judge them
    return pd.DataFrame(xs)
