"""Decode a polled batch of per-event messages in one pass into the block the engine needs.

A source that hands the engine a :class:`~streamk.sources.base.RecordColumns` (the
confluent transport) gets its payloads decoded here, all at once, into ``(X, ys, ids)``:
``X`` one float64 array, ready for ``learn_predict_many`` / ``predict_many``. Two ways,
both accepting exactly what the per-record decoder accepts for the common event (a map
with ``x`` a list of numbers, and ``y`` / ``id``), and nothing else:

* :func:`_template_columns` — every payload has the same length and the same bytes
  wherever the layout is fixed (map header, ``"x"``, array header, one float64 marker
  per value); the values are then one strided view of the joined bytes, and only the
  distinct tails (the ``y`` / ``id`` entries) are unpacked, once each.
* :func:`_maps_columns` — any mix of lengths and number encodings: each payload
  unpacked as a map, the checks run over the batch at once.

Anything else (a malformed message, another shape, a block, JSON) returns ``None`` and
the batch goes record by record (:func:`streamk.engine.runs.split_runs`), where a bad
message becomes a dead letter with its reason and offset.
"""

from __future__ import annotations

from math import isfinite
from operator import itemgetter, methodcaller
from typing import Any

import msgpack
import numpy as np

from ..errors import InvalidEvent
from .schema import _ID_TYPES, _PLAIN_LABELS, Limits, Schema, _check_label

__all__ = ["decode_columns"]

_unpackb = msgpack.unpackb
_X_OF = itemgetter("x")
_Y_OF = methodcaller("get", "y")
_ID_OF = methodcaller("get", "id")
_NONE = type(None)
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


def decode_columns(
    payloads: list[bytes], limits: Limits, schema: Schema | None
) -> tuple[np.ndarray, list[Any], list[Any]] | None:
    """``(X, ys, ids)`` of a whole batch of per-event payloads, or ``None`` when any payload
    is not the common event (the batch then goes record by record)."""
    if not payloads or max(map(len, payloads)) > limits._floor:
        return None
    out = _template_columns(payloads, limits, schema)
    if out is None:
        out = _maps_columns(payloads, limits, schema)
    return out


def _labels_ok(ys: list[Any], schema: Schema | None) -> bool:
    """Every label is one ``runs._fast_event`` accepts (``None``: unlabelled)."""
    if schema is not None:
        try:
            for y in ys:
                if y is not None:
                    _check_label(y, "'y'", schema)
        except InvalidEvent:
            return False
        return True
    kinds = set(map(type, ys)) - _PLAIN_LABELS - {_NONE}
    return not kinds or (kinds == {float} and all([isfinite(y) for y in ys if type(y) is float]))


def _array_header(raw: bytes) -> tuple[int, int] | None:
    """``(d, start of the values)`` of a map ``{"x": [d float64s], ...}`` (up to 15 keys),
    from its first bytes, or None."""
    if len(raw) < 4 or not 0x81 <= raw[0] <= 0x8F or raw[1:3] != b"\xa1x":
        return None
    h = raw[3]
    if 0x90 <= h <= 0x9F:
        return h - 0x90, 4
    if h == 0xDC and len(raw) >= 6:
        return int.from_bytes(raw[4:6], "big"), 6
    return None


def _template_columns(
    payloads: list[bytes], limits: Limits, schema: Schema | None
) -> tuple[np.ndarray, list[Any], list[Any]] | None:
    """The strided decode (see the module docstring), or None when it does not apply."""
    first = payloads[0]
    size = len(first)
    if set(map(len, payloads)) != {size}:
        return None
    head = _array_header(first)
    if head is None:
        return None
    d, v0 = head
    end = v0 + 9 * d  # after the last value
    if d > limits.max_features or end > size:
        return None
    if schema is not None and schema.dim is not None and d != schema.dim:
        return None
    n = len(payloads)
    M = np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(n, size)
    # every fixed byte as in the first message, and a float64 marker before each value
    if not (M[:, :v0] == M[0, :v0]).all() or not (M[:, v0:end:9] == 0xCB).all():
        return None
    values = M[:, v0:end].reshape(n, d, 9)[:, :, 1:]
    X = np.ascontiguousarray(values).view(">f8").reshape(n, d).astype(np.float64)
    if d and not np.isfinite(X).all():
        return None
    if end == size:  # "x" alone: unlabelled, no ids
        return (X, [None] * n, [None] * n) if first[0] == 0x81 else None
    # the rest of each map: its other entries, unpacked once per distinct tail
    tails = [p[end:] for p in payloads]
    distinct = dict.fromkeys(tails)  # few labels: few tails; unique ids: one each (small)
    rest = bytes([first[0] - 1])  # the same map without its "x" entry
    for tail in distinct:
        try:
            m = _unpackb(rest + tail)
        except Exception:  # noqa: BLE001 - not msgpack: record by record
            return None
        if type(m) is not dict:
            return None
        y, ident = m.get("y"), m.get("id")
        if len(m) != (y is not None) + (ident is not None):
            return None
        if ident is not None and type(ident) not in _ID_TYPES:
            return None
        distinct[tail] = (y, ident)
    if not _labels_ok([y for y, _ in distinct.values()], schema):
        return None
    pairs = list(map(distinct.__getitem__, tails))
    return X, list(map(_FIRST, pairs)), list(map(_SECOND, pairs))


def _maps_columns(
    payloads: list[bytes], limits: Limits, schema: Schema | None
) -> tuple[np.ndarray, list[Any], list[Any]] | None:
    """``(X, ys, ids)`` of a batch unpacked map by map, with the checks run over the batch
    at once, when every payload is the common event that ``runs._fast_event`` accepts
    (``x`` a list of numbers, all of one length; ``y``, ``id``), else None.

    Accepts exactly what :func:`_fast_event` accepts for each payload, with the checks
    run over the batch at once (one array conversion, one finiteness test).
    """
    n = len(payloads)
    try:  # C-level loops over the batch; strict map keys: an odd key goes record by record
        objs = list(map(_unpackb, payloads))
        xs = list(map(_X_OF, objs))
        ys = list(map(_Y_OF, objs))
        ids = list(map(_ID_OF, objs))
    except Exception:  # noqa: BLE001 - not msgpack, not a map, no 'x': record by record
        return None
    # Each map has 'x' plus 'y' / 'id' when not nil and nothing else: len(o) is at least
    # that count for every map, so the sums are equal only if each one is.
    if sum(map(len, objs)) != 3 * n - ys.count(None) - ids.count(None):
        return None
    if set(map(type, xs)) != {list}:
        return None
    widths = set(map(len, xs))
    if len(widths) != 1:
        return None
    d = widths.pop()
    if d > limits.max_features:
        return None
    if ids.count(None) != n and not set(map(type, ids)) - {type(None)} <= _ID_TYPES:
        return None
    try:
        X = np.array(xs)  # no dtype: a string or a nested value shows in the result's kind
    except (ValueError, TypeError, OverflowError):
        return None
    if X.ndim != 2 or X.shape[0] != n or X.dtype.kind not in "biuf":
        return None
    X = X.astype(np.float64, copy=False)
    if d and not np.isfinite(X).all():
        return None
    if schema is not None and schema.dim is not None and d != schema.dim:
        return None
    if not _labels_ok(ys, schema):
        return None
    return X, ys, ids
