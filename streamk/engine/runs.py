"""Turn a polled batch of records into runs the model can take in one call.

A run is a stretch of consecutive events of one kind: labelled (to score for the rolling
metric, then learn with ``learn_many``) or unlabelled (to score with ``predict_many`` and
publish). Splitting in stream order keeps test-then-train semantics: an event is scored
by the model that has learned every labelled event before it. A block event stays one
NumPy array end to end; per-event maps become a DataFrame.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from math import isfinite
from typing import Any

import msgpack
import numpy as np

from ..errors import InvalidEvent
from ..sources.base import Record, RecordColumns
from .columns import decode_columns
from .events import decode
from .schema import _ID_TYPES, _PLAIN_LABELS, Block, Limits, Schema, _check_label

_unpackb = msgpack.unpackb

__all__ = ["BLOCK_MIN", "Run", "decode_record", "split_runs", "invalid"]


@functools.cache
def _weights_ignored() -> None:
    """Say once per process that events' weights are not used (docs/user-guide.md, Events)."""
    logging.getLogger("streamk.engine").warning(
        "events carry weights ('w'), which streamk's learners do not use: each labelled event "
        "is learned once, as if its weight were 1"
    )


def invalid(code: str, reason: str) -> InvalidEvent:
    """An :class:`InvalidEvent` with the ``code``/``reason`` that ``events.decode`` sets."""
    return InvalidEvent(f"invalid event [{code}]: {reason}", code=code, reason=reason)


#: A run shorter than this is learned and scored event by event, without its frame: a
#: stream that interleaves labelled events and events to score comes in runs of one, and
#: their frames cost far more than the events (``python -m benchmarks.short_runs``).
BLOCK_MIN = 32


@dataclass
class Run:
    """Consecutive events of one kind from one partition, with the record each came from."""

    labelled: bool
    records: list[Record] = field(default_factory=list)
    xs: list[dict] = field(default_factory=list)  # per-event maps ...
    vectors: list[list[float]] | None = None  # ... or per-event lists (a run holds one form)
    objects: list[Any] | None = None  # ... or texts / trees (string and tree kernels)
    X: np.ndarray | None = None  # ... or one block's rows
    ys: list[Any] = field(default_factory=list)
    ids: list[Any] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def partition(self) -> int:
        return self.records[-1].partition

    @property
    def next_offset(self) -> int:
        """The offset after the run's last record: where its partition stands once handled."""
        return self.records[-1].offset + 1

    def frame(self) -> Any:
        """The run's features as the model's ``*_many`` methods take them."""
        if self.X is not None:
            return self.X
        if self.objects is not None:
            import pandas as pd

            series = pd.Series([None] * len(self.objects), dtype=object)
            series[:] = self.objects  # element-wise: a tree (a list) stays one item
            return series
        if self.vectors is not None:
            widths = set(map(len, self.vectors))
            if len(widths) == 1:  # one C pass over the flat values: no nested-list parsing
                n, d = len(self.vectors), widths.pop()
                flat = np.fromiter(chain.from_iterable(self.vectors), np.float64, n * d)
                return flat.reshape(n, d)
            return dicts_frame([dict(enumerate(v)) for v in self.vectors])
        return dicts_frame(self.xs)

    def row(self, i: int) -> dict:
        """Event ``i``'s features as a dict (for one-by-one fallbacks)."""
        if self.X is not None:
            return dict(enumerate(self.X[i].tolist()))
        if self.objects is not None:
            return self.objects[i]
        if self.vectors is not None:
            return dict(enumerate(self.vectors[i]))
        return self.xs[i]


def decode_record(record: Record, limits: Limits, schema: Schema | None) -> Any:
    """The record's :class:`Event` or :class:`Block`; raises :class:`InvalidEvent`."""
    value = record.value
    if value is None:
        payload = record.payload
        if payload[:1] in (b"{", b"[") and payload[-1:] in (b"}", b"]"):
            from ..sources.replay import decode_json_record

            if len(payload) > limits.max_payload_bytes:  # never parse what decode would refuse
                raise invalid(
                    "oversize",
                    f"JSON payload of {len(payload)} bytes is above "
                    f"max_payload_bytes={limits.max_payload_bytes}",
                )
            try:
                payload = decode_json_record(payload)
            except ValueError as exc:
                raise invalid("undecodable", f"not valid JSON: {exc}") from None
        try:
            value = decode(payload, limits, schema)
        except InvalidEvent as exc:
            text = exc.code == "undecodable" and _as_text(payload)
            if text:  # JSON-looking text that is no event map: say so, not "msgpack"
                raise invalid("undecodable", _json_reason(text)) from None
            raise
    if not isinstance(value, Block) and isinstance(value.x, str) and not _objects(schema):
        raise invalid(
            "text_unsupported", "text features need a string kernel; this learner takes numbers"
        )
    return value


def _as_text(payload: bytes) -> str | None:
    """``payload`` as text if it reads as a line of UTF-8 text (what a JSON record is),
    else ``None`` (a msgpack payload that is not one)."""
    try:
        text = bytes(payload).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.strip() and text.isprintable() else None


def _json_reason(text: str) -> str:
    """Why a text record is not an event: its JSON error, or the JSON value it holds."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"neither msgpack nor JSON: {exc.msg} at column {exc.colno}"
    except RecursionError:
        return "neither msgpack nor JSON: nested too deeply"
    kind = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}.get(
        type(value), "null"
    )
    return f'a JSON {kind}, not an event map ({{"x": ..., "y": ...}})'


def _objects(schema: Schema | None) -> bool:
    return schema is not None and schema.objects


def _fast_event(payload: Any, limits: Limits, schema: Schema | None) -> Any:
    """``(x, y, id)`` of the common event (``x`` a list of numbers; ``y``, ``id``), or None.

    Accepts exactly what :func:`~streamk.engine.events.decode` accepts for that shape, with the
    same msgpack caps; anything else (other keys, maps, blocks, JSON, any doubt, any
    error) returns None and goes through the full decoder, which gives the reason.
    """
    if type(payload) is not bytes or _objects(schema):
        return None
    n = len(payload)
    if n > limits._floor:
        return None
    try:
        # msgpack's default caps are the payload's length (half of it for maps, which
        # cannot be longer), what ``decode`` sets for a payload this small
        obj = _unpackb(payload, strict_map_key=False)
        x = obj["x"]
        y = obj.get("y")
        ident = obj.get("id")
        if (
            type(x) is not list
            or len(obj) != 1 + (y is not None) + (ident is not None)
            or len(x) > limits.max_features
            or not isfinite(sum(x))  # TypeError for non-numbers: full decoder
            or (ident is not None and type(ident) not in _ID_TYPES)
        ):
            return None
        if schema is not None:
            if schema.dim is not None and len(x) != schema.dim:
                return None
            if y is not None:
                _check_label(y, "'y'", schema)
        elif y is not None and type(y) not in _PLAIN_LABELS:
            if type(y) is not float or not isfinite(y):
                return None
        return x, y, ident
    except Exception:  # noqa: BLE001 - e.g. not msgpack, not a map, no 'x': full decoder
        return None


def _column_runs(
    batch: RecordColumns, X: np.ndarray, ys: list[Any], ids: list[Any]
) -> Iterator[Run]:
    """The runs of a batch decoded by :func:`_fast_columns`: split where the partition or
    labelled-ness changes, each run one block of rows."""
    parts = batch.partitions
    n = len(ys)
    if parts.count(parts[0]) == n and ys.count(None) in (0, n):  # the usual batch: one run
        yield Run(ys[0] is not None, batch, X=X, ys=ys, ids=ids)
        return
    start = 0
    while start < n:
        labelled, partition = ys[start] is not None, parts[start]
        end = start + 1
        while end < n and (ys[end] is not None) is labelled and parts[end] == partition:
            end += 1
        yield Run(labelled, batch[start:end], X=X[start:end], ys=ys[start:end], ids=ids[start:end])
        start = end


def split_runs(
    batch: list[Record],
    limits: Limits,
    schema: Schema | None,
    on_invalid: Callable[[Record, InvalidEvent], None],
) -> Iterator[Run]:
    """Decode ``batch`` and yield its runs in stream order; bad records go to ``on_invalid``.

    A run never spans partitions, so its last record gives its partition's position.
    The pending run is yielded before a bad record is reported, so outputs and positions
    follow stream order.
    """
    if type(batch) is RecordColumns and not _objects(schema):  # a tree can be a list
        columns = decode_columns(batch.payloads, limits, schema)
        if columns is not None:  # every record the common event: one pass, no Records
            yield from _column_runs(batch, *columns)
            return
    run: Run | None = None
    objects = _objects(schema)  # every x is text or a tree
    labelled = vector = False  # the kind of ``run`` ...
    partition = -1  # ... and its partition
    add_record = add_row = add_y = add_id = list.append  # bound to ``run``'s lists
    for record in batch:
        fast = None if record.value is not None else _fast_event(record.payload, limits, schema)
        if fast is not None:
            x, y, ident = fast
        else:
            try:
                value = decode_record(record, limits, schema)
            except InvalidEvent as exc:
                if run is not None:
                    yield run
                    run = None
                on_invalid(record, exc)
                continue
            if isinstance(value, Block):
                if run is not None:
                    yield run
                    run = None
                yield from _block_runs(record, value)
                continue
            x, y, ident = value.x, value.y, value.id
            if value.w is not None and value.w != 1 and y is not None:
                _weights_ignored()
        if (
            run is None
            or (y is not None) is not labelled
            or (isinstance(x, list) and not objects) is not vector
            or record.partition != partition
        ):
            if run is not None:
                yield run
            labelled, partition = y is not None, record.partition
            vector = isinstance(x, list) and not objects
            run = Run(labelled, vectors=[] if vector else None, objects=[] if objects else None)
            add_record, add_y, add_id = run.records.append, run.ys.append, run.ids.append
            add_row = (run.objects if objects else run.xs if not vector else run.vectors).append
        add_record(record)
        add_row(x)
        add_y(y)
        add_id(ident)
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


def dicts_frame(xs: list[dict]) -> Any:
    """A DataFrame of feature dicts; fast when they share one key order (the usual case)."""
    import pandas as pd

    keys = tuple(xs[0])
    if all(tuple(x) == keys for x in xs):
        try:
            values = np.array([list(x.values()) for x in xs], dtype=np.float64)
            return pd.DataFrame(values, columns=list(keys))
        except (TypeError, ValueError, OverflowError):
            pass  # e.g. None values, an int beyond any float: let the model judge them
    return pd.DataFrame(xs)
