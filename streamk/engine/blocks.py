"""Decoding of the block event form: many rows in one message (design §7).

``X`` is raw little-endian ``<f4``/``<f8`` bytes with ``shape`` ``[n, d]``; ``y`` a
list (per-row labels, ``None`` for unlabelled rows) or raw bytes with ``y_dtype``;
``ids`` an optional list. The header is checked against the bytes present *before*
any array is made; ``X`` is then a zero-copy read-only view of the payload.
Called by :func:`streamk.engine.events.decode`; the same rules as single events apply,
so a block decodes to the same rows as its events would one by one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .schema import (
    _ID_TYPES,
    BLOCK_KEYS,
    X_DTYPES,
    Y_DTYPES,
    Block,
    Limits,
    Schema,
    _check_label,
    _fail,
    _kind,
    _short,
    _unknown_keys,
)

__all__ = ["decode_block"]


def _finite_sum(a: np.ndarray) -> bool:
    """Whether ``a``'s sum is finite: one pass and no temporary, the quick test before a
    search for the bad entry. Large finite values may overflow the sum (then the search
    finds none), so the overflow is expected and not warned about."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(a.sum()))


def decode_block(obj: dict[Any, Any], limits: Limits, schema: Schema) -> Block:
    """Validate a block's header against its bytes *before* making any array."""
    if not BLOCK_KEYS.issuperset(obj) and schema.unknown_keys == "reject":
        _unknown_keys(obj, BLOCK_KEYS)
    data, shape, dtype = obj["X"], obj.get("shape"), obj.get("dtype")
    if type(data) is not bytes:
        _fail("bad_block", f"block 'X' must be raw bytes (msgpack bin), got {_kind(data)}")
    if type(dtype) is not str or dtype not in X_DTYPES:
        _fail("bad_block", f"block 'dtype' must be '<f4' or '<f8', got {_short(dtype)}")
    if type(shape) is not list or len(shape) != 2 or not all(type(v) is int for v in shape):
        _fail("bad_block", f"block 'shape' must be [n, d] (two integers), got {_short(shape)}")
    n, d = shape
    if n < 1 or d < 1:
        _fail("bad_block", f"block shape [{n}, {d}] is empty; n and d must be at least 1")
    if n > limits.max_block_rows:
        _fail("too_large", f"block has {n} rows, above max_block_rows={limits.max_block_rows}")
    if d > limits.max_features:
        _fail(
            "too_many_features",
            f"block has d={d} columns, above max_features={limits.max_features}",
        )
    if schema.dim is not None and d != schema.dim:
        _fail("dimension", f"block has d={d} columns but the schema fixes dim={schema.dim}")
    expected = n * d * X_DTYPES[dtype].itemsize
    if expected != len(data):
        _fail(
            "bad_block", f"'X' has {len(data)} bytes; shape [{n}, {d}] of {dtype} needs {expected}"
        )
    X = np.frombuffer(data, dtype=X_DTYPES[dtype]).reshape(n, d)
    if not _finite_sum(X):  # no temporary; an overflowing finite sum falls through
        bad = np.argwhere(~np.isfinite(X))
        if len(bad):
            i, j = bad[0]
            _fail("non_finite", f"block X[{i}, {j}] is {X[i, j].item()!r}; numbers must be finite")
    y = _block_labels(obj.get("y"), obj.get("y_dtype"), n, schema)
    ids = obj.get("ids")
    if ids is not None:
        if type(ids) is not list or len(ids) != n:
            _fail("bad_block", f"block 'ids' must be a list of {n} items, got {_kind(ids)}")
        if not _ID_TYPES.issuperset(map(type, ids)):
            i = next(i for i, v in enumerate(ids) if type(v) not in _ID_TYPES)
            _fail(
                "bad_field", f"block ids[{i}] must be a string or an integer, got {_kind(ids[i])}"
            )
    return Block(X, y, ids)


def _block_labels(y: Any, y_dtype: Any, n: int, schema: Schema) -> list[Any] | np.ndarray | None:
    if y is None:
        if y_dtype is not None:
            _fail("bad_block", "block has 'y_dtype' but no 'y'")
        return None
    if type(y) is list:
        if y_dtype is not None:
            _fail("bad_block", "'y_dtype' applies only to raw-bytes 'y', but 'y' is a list")
        if len(y) != n:
            _fail("bad_block", f"block 'y' has {len(y)} labels for {n} rows")
        types = set(map(type, y))
        if types <= {int, str, bool, type(None)} and schema.label_kind == "any":
            if schema.labels is not None and not schema.labels.issuperset(y):
                for i, label in enumerate(y):  # find and name the first unknown label
                    if label is not None:
                        _check_label(label, f"y[{i}]", schema)
            return y
        for i, label in enumerate(y):  # mixed or float labels: the per-event rules, per row
            if label is not None:
                _check_label(label, f"y[{i}]", schema)
        return y
    if type(y) is not bytes:
        _fail("bad_block", f"block 'y' must be a list or raw bytes, got {_kind(y)}")
    if type(y_dtype) is not str or y_dtype not in Y_DTYPES:
        _fail("bad_block", f"raw 'y' needs 'y_dtype' in {sorted(Y_DTYPES)}, got {_short(y_dtype)}")
    dt = Y_DTYPES[y_dtype]
    if len(y) != n * dt.itemsize:
        _fail(
            "bad_block",
            f"raw 'y' has {len(y)} bytes; {n} labels of {y_dtype} need {n * dt.itemsize}",
        )
    if dt.kind == "b":
        if y and max(y) > 1:
            _fail("bad_label", "raw 'y' of dtype |b1 holds a byte other than 0 or 1")
        if schema.label_kind == "number":
            _fail("bad_label", "block labels are bools but the schema expects numeric labels")
    labels = np.frombuffer(y, dtype=dt)
    if dt.kind == "f":
        if not _finite_sum(labels):
            bad = np.flatnonzero(~np.isfinite(labels))
            if len(bad):
                value = labels[bad[0]].item()
                _fail("non_finite", f"block y[{bad[0]}] is {value!r}; labels must be finite")
        if schema.label_kind == "class":
            _fail("bad_label", "block labels are floats but the schema expects class labels")
    if schema.labels is not None:
        unknown = set(np.unique(labels).tolist()) - schema.labels
        if unknown:
            _fail("unknown_label", f"block label {_short(min(unknown))} is not in the label set")
    return labels
