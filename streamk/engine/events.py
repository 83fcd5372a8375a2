"""Event schema, msgpack codec, validation and dead-letter records (design §7).

One **event** is a msgpack map: ``x`` (map feature → number, list of numbers, a
text string, or a tree ``[label, child, ...]`` under ``Schema(x_kind="tree")``), and
optionally ``y`` (bool/int/float/str label), ``id`` (str or int), ``t`` (timestamp),
``w`` (positive weight) and ``group`` (ranking query id). A **block** carries many
rows at once: ``X`` raw little-endian ``<f4``/``<f8`` bytes with ``shape`` ``[n, d]``
and ``dtype``; ``y`` a list or raw bytes with ``y_dtype``; optional ``ids`` list
(decoded in :mod:`streamk.engine.blocks`).
The rules both forms share are in :mod:`streamk.engine.schema`.
Dead-letter records live in :mod:`streamk.engine.deadletter` and are re-exported here.

Decisions (documented once, here):

- Unknown top-level keys are **rejected** by default (a typo such as ``"label"``
  would otherwise silently make every event unlabelled); ``Schema(unknown_keys=
  "ignore")`` accepts them for forward compatibility. ``nil`` counts as absent.
- Booleans in ``x`` are numbers (0/1), as in river and NumPy. A bool is a valid
  label, but not a valid ``id``, ``group``, ``t`` or ``w``.
- Feature names are strings or integers (integers index a sparse vector).
- Labels are compared with a fixed label set by Python equality (``True == 1``).

:func:`decode` raises only :class:`~streamk.errors.InvalidEvent`, whose
``code`` (stable identifier) and ``reason`` (human-readable text) say what was
wrong. It never runs code, and never allocates by a claimed size before
checking it against the bytes present: msgpack's container limits are capped
by the payload length, and a block's ``shape`` is checked against ``len(X)``
before any array is made (``np.frombuffer`` then views the payload, no copy).
The one remaining amplification is msgpack's own: a hostile payload of nested
array headers makes it pre-allocate at most ``1024 · 8 · min(len, cap)``
bytes (untouched ``calloc`` memory) before failing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, NoReturn

import msgpack
import numpy as np

from ..errors import InvalidEvent, InvalidInput
from .blocks import decode_block
from .schema import (
    _ANY_SCHEMA,
    _ID_TYPES,
    _PLAIN_LABELS,
    DEFAULT_LIMITS,
    EVENT_KEYS,
    Block,
    Event,
    Limits,
    Schema,
    _check_label,
    _check_map,
    _check_number,
    _check_vector_size,
    _fail,
    _kind,
    _scan_numbers,
    _short,
    _unknown_keys,
    check_text,
    check_tree,
)

__all__ = [
    "Event",
    "Block",
    "Limits",
    "Schema",
    "DEFAULT_LIMITS",
    "encode_event",
    "encode_block",
    "decode",
    "DeadLetter",
    "DeadLetterFile",
    "read_dead_letters",
]

_unpackb = msgpack.unpackb
_LIMIT_RE = re.compile(r"(\d+) exceeds max_(str|bin|array|map|ext)_len\((\d+)\)")


# -- encoding -----------------------------------------------------------------------
def _to_builtin(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot encode {type(obj).__name__} in an event")


def encode_event(
    x: Any, y: Any = None, id: Any = None, t: Any = None, w: Any = None, group: Any = None
) -> bytes:
    """Pack one event; ``None`` fields are left out. Validation happens in :func:`decode`."""
    event: dict[str, Any] = {"x": x.tolist() if isinstance(x, np.ndarray) else x}
    for key, value in (("y", y), ("id", id), ("t", t), ("w", w), ("group", group)):
        if value is not None:
            event[key] = value
    return msgpack.packb(event, default=_to_builtin)


def encode_block(X: Any, y: Any = None, ids: Iterable[Any] | None = None) -> bytes:
    """Pack rows ``X`` (float32 stays float32, anything else becomes float64) as one block.

    A NumPy ``y`` goes as raw bytes with ``y_dtype`` (floats, ints as ``<i8``, bools);
    a list ``y`` (strings, mixed, ``None`` for unlabelled rows) goes as a list.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise InvalidInput(f"encode_block needs a 2-D array, got shape {X.shape}.")
    dtype = np.dtype("<f4") if X.dtype == np.float32 else np.dtype("<f8")
    block: dict[str, Any] = {
        "X": np.ascontiguousarray(X, dtype=dtype).tobytes(),
        "shape": [int(X.shape[0]), int(X.shape[1])],
        "dtype": dtype.str,
    }
    if isinstance(y, np.ndarray) and y.dtype.kind in "fiub":
        ydt: np.dtype[Any] = {"f": np.dtype("<f8"), "i": np.dtype("<i8"), "u": np.dtype("<i8")}.get(
            y.dtype.kind, np.dtype("|b1")
        )
        if y.dtype == np.float32:
            ydt = np.dtype("<f4")
        block["y"] = np.ascontiguousarray(y, dtype=ydt).tobytes()
        block["y_dtype"] = ydt.str
    elif y is not None:
        block["y"] = y.tolist() if isinstance(y, np.ndarray) else list(y)
    if ids is not None:
        block["ids"] = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    return msgpack.packb(block, default=_to_builtin)


# -- decoding -----------------------------------------------------------------------


def decode(
    payload: bytes, limits: Limits = DEFAULT_LIMITS, schema: Schema | None = None
) -> Event | Block:
    """Decode and validate one message into an :class:`Event` or a :class:`Block`.

    Raises
    ------
    InvalidEvent
        With ``code`` and ``reason``; nothing else escapes.
    """
    try:
        return _decode(payload, limits, _ANY_SCHEMA if schema is None else schema)
    except InvalidEvent:
        raise
    except Exception as exc:  # safety net: validation bugs must still dead-letter, not crash
        _fail("internal", f"unexpected {type(exc).__name__} while validating: {_short(exc, 200)}")


def _decode(payload: Any, limits: Limits, schema: Schema) -> Event | Block:
    if type(payload) is not bytes:
        if not isinstance(payload, bytes | bytearray | memoryview):
            _fail("undecodable", f"payload must be bytes, got {type(payload).__name__}")
        payload = bytes(payload)
    n = len(payload)
    try:
        if n <= limits._floor:  # typical small event: every cap is the payload length
            obj = _unpackb(
                payload,
                raw=False,
                strict_map_key=False,
                max_str_len=n,
                max_bin_len=n,
                max_ext_len=n,
                max_array_len=n,
                max_map_len=n,
            )
        else:
            if n > limits.max_payload_bytes:
                _fail(
                    "oversize",
                    f"payload is {n} bytes, above max_payload_bytes={limits.max_payload_bytes}",
                )
            obj = _unpackb(
                payload,
                raw=False,
                strict_map_key=False,
                max_str_len=min(limits.max_string_bytes, n),
                max_bin_len=n,
                max_ext_len=n,
                max_array_len=min(limits._array_cap, n),
                max_map_len=min(limits._map_cap, n),
            )
    except InvalidEvent:
        raise
    except Exception as exc:
        _unpack_failure(exc, n, limits)
    if type(obj) is not dict:
        _fail("not_a_map", f"an event must be a msgpack map, got {_kind(obj)}")
    if "X" in obj:
        return decode_block(obj, limits, schema)
    if not EVENT_KEYS.issuperset(obj) and schema.unknown_keys == "reject":
        _unknown_keys(obj, EVENT_KEYS)
    x: Any = obj.get("x")
    tx = type(x)
    if schema.x_kind != "any" and x is not None:
        x = _check_x_kind(x, limits, schema)
    elif tx is list:
        if len(x) > limits.max_features or schema.dim is not None:
            _check_vector_size(x, limits, schema)
        total: float
        try:
            total = sum(x)  # one C loop: TypeError for non-numbers, nan/inf survive in the total
        except TypeError:
            total = math.nan
        if not math.isfinite(total):
            _scan_numbers(enumerate(x), "'x'", "bad_x")  # (or finite values overflowed: accept)
    elif tx is dict:
        _check_map(x, limits, schema)
    elif tx is str:
        if schema.dim is not None:
            _fail("dimension", f"'x' is text but the schema fixes dim={schema.dim}")
        check_text(x, limits)
    elif x is None:
        _fail("missing_x", "the event has no 'x' (features)")
    else:
        _fail("bad_x", f"'x' must be a map, a list of numbers or a text string, got {_kind(x)}")
    y = obj.get("y")
    if y is not None and (type(y) not in _PLAIN_LABELS or schema is not _ANY_SCHEMA):
        _check_label(y, "'y'", schema)
    if len(obj) <= 1 + (y is not None):  # only x (and y): nothing else to check
        return Event(x, y)
    ident, t, w, group = obj.get("id"), obj.get("t"), obj.get("w"), obj.get("group")
    if ident is not None and type(ident) not in _ID_TYPES:
        _fail("bad_field", f"'id' must be a string or an integer, got {_kind(ident)}")
    if group is not None and type(group) not in _ID_TYPES:
        _fail("bad_field", f"'group' must be a string or an integer, got {_kind(group)}")
    if t is not None and (type(t) is not float or not math.isfinite(t)):
        _check_number(t, "'t'")
    if w is not None:
        _check_number(w, "'w'")
        if w <= 0:
            _fail("bad_field", f"weight 'w' must be positive, got {w!r}")
    return Event(x, y, ident, t, w, group)


def _check_x_kind(x: Any, limits: Limits, schema: Schema) -> Any:
    """``x`` under a schema that fixes its kind (text, tree or numbers only)."""
    if schema.x_kind == "text":
        return check_text(x, limits)
    if schema.x_kind == "tree":
        return check_tree(x, limits)
    tx = type(x)  # "vector"
    if tx is list:
        _check_vector_size(x, limits, schema)
        _scan_numbers(enumerate(x), "'x'", "bad_x")
    elif tx is dict:
        _check_map(x, limits, schema)
    else:
        _fail("bad_x", f"'x' must be a map or a list of numbers, got {_kind(x)}")
    return x


def _unpack_failure(exc: Exception, n: int, limits: Limits) -> NoReturn:
    """Turn a msgpack error into a precise reason."""
    if n == 0:  # (only an error path pays for the check)
        _fail(
            "undecodable",
            "an empty payload (a null value: a Kafka tombstone, or an empty message) holds no "
            "event",
        )
    match = _LIMIT_RE.search(str(exc))
    if match is None:
        detail = str(exc) or type(exc).__name__
        if isinstance(exc, UnicodeDecodeError):
            detail = f"a string is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        elif isinstance(exc, msgpack.exceptions.StackError):
            detail = "containers are nested too deeply"
        elif isinstance(exc, TypeError):
            detail = f"a map key is itself a container ({exc})"
        _fail("undecodable", f"payload is not a single valid msgpack value: {detail}")
    claimed, kind = int(match[1]), match[2]
    if claimed > n:
        _fail("undecodable", f"a msgpack {kind} claims {claimed} items/bytes; payload has {n}")
    if kind == "str":
        _fail(
            "too_long",
            f"a string of {claimed} bytes exceeds max_string_bytes={limits.max_string_bytes}",
        )
    if kind == "map":
        _fail(
            "too_many_features",
            f"a map of {claimed} entries exceeds max_features={limits.max_features}",
        )
    _fail("too_large", f"an array of {claimed} items exceeds max_features/max_block_rows")


from .deadletter import DeadLetter, DeadLetterFile, read_dead_letters  # noqa: E402
