"""Event schema, msgpack codec, validation and dead-letter records (design §7).

One **event** is a msgpack map: ``x`` (map feature → number, list of numbers, or
a text string), and optionally ``y`` (bool/int/float/str label), ``id`` (str or
int), ``t`` (timestamp), ``w`` (positive weight) and ``group`` (ranking query
id). A **block** carries many rows at once: ``X`` raw little-endian
``<f4``/``<f8`` bytes with ``shape`` ``[n, d]`` and ``dtype``; ``y`` a list or
raw bytes with ``y_dtype``; optional ``ids`` list (decoded in :mod:`streamk.blocks`).
Dead-letter records live in :mod:`streamk.deadletter` and are re-exported here.

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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import msgpack
import numpy as np

from .errors import ConfigError, InvalidEvent, InvalidInput

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

EVENT_KEYS = frozenset({"x", "y", "id", "t", "w", "group"})
BLOCK_KEYS = frozenset({"X", "shape", "dtype", "y", "y_dtype", "ids"})
X_DTYPES: dict[str, np.dtype[Any]] = {"<f4": np.dtype("<f4"), "<f8": np.dtype("<f8")}
Y_DTYPES: dict[str, np.dtype[Any]] = {k: np.dtype(k) for k in ("<f4", "<f8", "<i4", "<i8", "|b1")}
_KEY_TYPES = frozenset({str, int})
_LABEL_TYPES = frozenset({bool, int, float, str})
_PLAIN_LABELS = frozenset({bool, int, str})  # need no further check without a schema
_unpackb = msgpack.unpackb
_ID_TYPES = frozenset({str, int})
_LIMIT_RE = re.compile(r"(\d+) exceeds max_(str|bin|array|map|ext)_len\((\d+)\)")


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits enforced while decoding (protect memory and CPU from bad producers).

    Parameters
    ----------
    max_payload_bytes
        Largest accepted message (Apache Kafka's default message limit is 1 MB).
    max_features
        Most entries in ``x`` (map or list), and most columns ``d`` in a block.
    max_string_bytes
        Longest string anywhere (text ``x``, labels, ids, feature names).
    max_block_rows
        Most rows ``n`` in a block (and so most items in its ``y``/``ids`` lists).
    """

    max_payload_bytes: int = 1 << 20
    max_features: int = 10_000
    max_string_bytes: int = 1 << 20
    max_block_rows: int = 65_536
    # Derived msgpack caps, computed once (decode is the per-event hot path).
    _array_cap: int = field(init=False, repr=False, compare=False)
    _map_cap: int = field(init=False, repr=False, compare=False)
    _floor: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("max_payload_bytes", "max_features", "max_string_bytes", "max_block_rows"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"Limits.{name} must be a positive integer, got {value!r}.")
        array_cap = max(self.max_features, self.max_block_rows)
        map_cap = max(self.max_features, 16)
        floor = min(self.max_payload_bytes, self.max_string_bytes, array_cap, map_cap)
        object.__setattr__(self, "_array_cap", array_cap)
        object.__setattr__(self, "_map_cap", map_cap)
        object.__setattr__(self, "_floor", floor)


@dataclass(frozen=True, slots=True)
class Schema:
    """What a stream's events must look like beyond the generic format.

    Parameters
    ----------
    dim
        Fixed feature dimension: list ``x`` must have exactly ``dim`` values,
        map ``x`` at most ``dim`` entries (integer names in ``[0, dim)``),
        blocks ``d == dim``; text ``x`` is rejected.
    labels
        Fixed label set; any other label is rejected.
    label_kind
        ``"any"``; ``"class"`` (bool, int or str); ``"number"`` (int or float).
    unknown_keys
        ``"reject"`` (default) or ``"ignore"`` unknown top-level keys.
    """

    dim: int | None = None
    labels: frozenset[Any] | None = None
    label_kind: Literal["any", "class", "number"] = "any"
    unknown_keys: Literal["reject", "ignore"] = "reject"

    def __post_init__(self) -> None:
        if self.dim is not None and (type(self.dim) is not int or self.dim < 1):
            raise ConfigError(f"Schema.dim must be a positive integer or None, got {self.dim!r}.")
        if self.labels is not None:
            object.__setattr__(self, "labels", frozenset(self.labels))
        if self.label_kind not in ("any", "class", "number"):
            raise ConfigError(
                f"Schema.label_kind must be any|class|number, not {self.label_kind!r}."
            )
        if self.unknown_keys not in ("reject", "ignore"):
            raise ConfigError(
                f"Schema.unknown_keys must be reject|ignore, not {self.unknown_keys!r}."
            )


DEFAULT_LIMITS = Limits()
_ANY_SCHEMA = Schema()


@dataclass(slots=True)
class Event:
    """One decoded, validated event; ``x`` is the map, list or text as sent."""

    x: dict[str | int, float] | list[float] | str
    y: bool | int | float | str | None = None
    id: str | int | None = None
    t: float | None = None
    w: float | None = None
    group: str | int | None = None


@dataclass(slots=True)
class Block:
    """A decoded block: ``X`` is a read-only ``(n, d)`` view of the payload bytes."""

    X: np.ndarray
    y: list[Any] | np.ndarray | None = None
    ids: list[str | int] | None = None

    def __len__(self) -> int:
        return int(self.X.shape[0])

    def rows(self) -> Iterator[Event]:
        """The block's rows as events (``x`` a list of floats), in order."""
        ys = self.y.tolist() if isinstance(self.y, np.ndarray) else self.y
        for i, row in enumerate(self.X.tolist()):
            yield Event(
                row, None if ys is None else ys[i], None if self.ids is None else self.ids[i]
            )


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
def _fail(code: str, reason: str) -> NoReturn:
    exc = InvalidEvent(f"invalid event [{code}]: {reason}")
    exc.code = code  # type: ignore[attr-defined]
    exc.reason = reason  # type: ignore[attr-defined]
    raise exc


_KINDS = {
    dict: "a map",
    list: "a list",
    str: "a string",
    bytes: "bytes",
    int: "an integer",
    float: "a float",
    bool: "a bool",
    type(None): "nil",
}


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), f"a {type(value).__name__}")


def _short(value: Any, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


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
        from .blocks import decode_block  # the block form lives in its own module

        return decode_block(obj, limits, schema)
    if not EVENT_KEYS.issuperset(obj) and schema.unknown_keys == "reject":
        _unknown_keys(obj, EVENT_KEYS)
    x: Any = obj.get("x")
    tx = type(x)
    if tx is list:
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


def _unpack_failure(exc: Exception, n: int, limits: Limits) -> NoReturn:
    """Turn a msgpack error into a precise reason."""
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


def _unknown_keys(obj: dict[Any, Any], allowed: frozenset[str]) -> NoReturn:
    if "x" in obj and "X" in obj:
        _fail("unknown_key", "the map has both 'x' (one event) and 'X' (a block); send one")
    extra = sorted(_short(k, 30) for k in obj.keys() - allowed)
    _fail(
        "unknown_key",
        f"unknown key(s) {', '.join(extra[:5])}; allowed: {', '.join(sorted(allowed))}",
    )


def _scan_numbers(items: Iterable[tuple[Any, Any]], where: str, code: str) -> None:
    """Slow path after a fast check failed: find the first bad value and say which."""
    for key, value in items:
        tv = type(value)
        if tv is float:
            if not math.isfinite(value):
                _fail("non_finite", f"{where}[{_short(key)}] is {value!r}; numbers must be finite")
        elif tv is not int and tv is not bool:
            _fail(code, f"{where}[{_short(key)}] is {_kind(value)}, expected a number")


def _check_vector_size(x: list[Any], limits: Limits, schema: Schema) -> None:
    if len(x) > limits.max_features:
        _fail(
            "too_many_features",
            f"'x' has {len(x)} values, above max_features={limits.max_features}",
        )
    if schema.dim is not None and len(x) != schema.dim:
        _fail("dimension", f"'x' has {len(x)} values but the schema fixes dim={schema.dim}")


def _check_map(x: dict[Any, Any], limits: Limits, schema: Schema) -> None:
    if len(x) > limits.max_features:
        _fail(
            "too_many_features",
            f"'x' has {len(x)} features, above max_features={limits.max_features}",
        )
    if not _KEY_TYPES.issuperset(map(type, x)):
        bad = next(k for k in x if type(k) not in _KEY_TYPES)
        _fail(
            "bad_x",
            f"feature name {_short(bad)} is {_kind(bad)}; names must be strings or integers",
        )
    if schema.dim is not None:
        if len(x) > schema.dim:
            _fail("dimension", f"'x' has {len(x)} features but the schema fixes dim={schema.dim}")
        for k in x:
            if type(k) is int and not 0 <= k < schema.dim:
                _fail("dimension", f"feature index {k} is outside [0, {schema.dim})")
    try:
        total = sum(x.values())
    except TypeError:
        total = math.nan
    if not math.isfinite(total):
        _scan_numbers(x.items(), "'x'", "bad_x")


def _check_number(value: Any, where: str) -> None:
    tv = type(value)
    if tv is float:
        if not math.isfinite(value):
            _fail("non_finite", f"{where} is {value!r}; numbers must be finite")
    elif tv is not int:
        _fail("bad_field", f"{where} must be a number, got {_kind(value)}")


def _check_label(y: Any, where: str, schema: Schema) -> None:
    ty = type(y)
    if ty is float:
        if not math.isfinite(y):
            _fail("non_finite", f"label {where} is {y!r}; labels must be finite")
    elif ty not in _LABEL_TYPES:
        _fail("bad_label", f"label {where} must be a bool, int, float or string, got {_kind(y)}")
    if schema.label_kind == "class" and ty is float:
        _fail("bad_label", f"label {where} is a float ({y!r}) but the schema expects class labels")
    if schema.label_kind == "number" and (ty is str or ty is bool):
        _fail("bad_label", f"label {where} is {_kind(y)} but the schema expects numeric labels")
    if schema.labels is not None and y not in schema.labels:
        known = ", ".join(sorted(map(_short, schema.labels))[:10])
        _fail("unknown_label", f"label {where} = {_short(y)} is not in the label set {{{known}}}")


from .deadletter import DeadLetter, DeadLetterFile, read_dead_letters  # noqa: E402
