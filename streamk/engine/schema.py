"""What an event may hold, and the checks every decoder applies (design §7).

The rules live here once, so that :mod:`~streamk.engine.events` (one event) and
:mod:`~streamk.engine.blocks` (a block of rows) decode to the same rows: the keys an event
or a block may carry, the :class:`Limits` on sizes, the :class:`Schema` a deployment
fixes (label set, dimensions, unknown keys), the decoded :class:`Event` and
:class:`Block`, and the checks that raise :class:`~streamk.errors.InvalidEvent` with a
stable ``code`` and a readable ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import numpy as np

from ..errors import ConfigError, InvalidEvent

__all__ = [
    "Event",
    "Block",
    "Limits",
    "Schema",
    "DEFAULT_LIMITS",
    "EVENT_KEYS",
    "BLOCK_KEYS",
    "X_KINDS",
    "input_schema",
]


EVENT_KEYS = frozenset({"x", "y", "id", "t", "w", "group"})
BLOCK_KEYS = frozenset({"X", "shape", "dtype", "y", "y_dtype", "ids"})
X_DTYPES: dict[str, np.dtype[Any]] = {"<f4": np.dtype("<f4"), "<f8": np.dtype("<f8")}
Y_DTYPES: dict[str, np.dtype[Any]] = {k: np.dtype(k) for k in ("<f4", "<f8", "<i4", "<i8", "|b1")}
_KEY_TYPES = frozenset({str, int})
_LABEL_TYPES = frozenset({bool, int, float, str})
_PLAIN_LABELS = frozenset({bool, int, str})  # need no further check without a schema
_ID_TYPES = frozenset({str, int})
#: what ``x`` may be: numbers or text (``any``), numbers only, text only, a tree only
X_KINDS = ("any", "vector", "text", "tree")


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
    max_text_chars
        Longest text ``x``, in characters (default 10,000: the string kernels' limit).
    max_tree_depth
        Deepest tree ``x`` (root at depth 1; default 64, the tree kernels' limit).
    max_tree_nodes
        Most nodes in a tree ``x`` (default 5,000, the tree kernels' limit).
    """

    max_payload_bytes: int = 1 << 20
    max_features: int = 10_000
    max_string_bytes: int = 1 << 20
    max_block_rows: int = 65_536
    max_text_chars: int = 10_000
    max_tree_depth: int = 64
    max_tree_nodes: int = 5_000
    # Derived msgpack caps, computed once (decode is the per-event hot path).
    _array_cap: int = field(init=False, repr=False, compare=False)
    _map_cap: int = field(init=False, repr=False, compare=False)
    _floor: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in (
            "max_payload_bytes",
            "max_features",
            "max_string_bytes",
            "max_block_rows",
            "max_text_chars",
            "max_tree_depth",
            "max_tree_nodes",
        ):
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
    x_kind
        What ``x`` is: ``"any"`` (default: a map or list of numbers, or text),
        ``"vector"`` (numbers only), ``"text"`` (a string; msgpack bin must be UTF-8),
        ``"tree"`` (a nested list ``[label, child, ...]``, a leaf ``[label]``, labels
        str or int). Text and trees are checked against :class:`Limits`
        (``max_text_chars``, ``max_tree_depth``, ``max_tree_nodes``).
    """

    dim: int | None = None
    labels: frozenset[Any] | None = None
    label_kind: Literal["any", "class", "number"] = "any"
    unknown_keys: Literal["reject", "ignore"] = "reject"
    x_kind: Literal["any", "vector", "text", "tree"] = "any"

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
        if self.x_kind not in X_KINDS:
            raise ConfigError(
                f"Schema.x_kind must be one of {'|'.join(X_KINDS)}, not {self.x_kind!r}."
            )
        if self.dim is not None and self.x_kind in ("text", "tree"):
            raise ConfigError(
                f"Schema.dim fixes a vector size; it cannot go with x_kind={self.x_kind!r}."
            )

    @property
    def objects(self) -> bool:
        """True when ``x`` is text or a tree, learned as an object (string/tree kernels)."""
        return self.x_kind in ("text", "tree")


DEFAULT_LIMITS = Limits()
_ANY_SCHEMA = Schema()


@dataclass(slots=True)
class Event:
    """One decoded, validated event; ``x`` is the map, list, text or tree as sent."""

    x: dict[str | int, float] | list[float] | str | list[Any]
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


def check_text(x: Any, limits: Limits, where: str = "'x'") -> str:
    """``x`` as text (msgpack bin decoded as UTF-8), within ``max_text_chars``."""
    if type(x) is bytes:
        try:
            x = x.decode("utf-8")
        except UnicodeDecodeError as exc:
            _fail("bad_text", f"{where} is not valid UTF-8 ({exc.reason} at byte {exc.start})")
    if type(x) is not str:
        _fail("bad_x", f"{where} must be text (a string), got {_kind(x)}")
    if len(x) > limits.max_text_chars:
        _fail(
            "too_long",
            f"{where} has {len(x):,} characters, above max_text_chars={limits.max_text_chars:,}",
        )
    return x


def check_tree(x: Any, limits: Limits, where: str = "'x'") -> list[Any]:
    """``x`` checked as a tree ``[label, child, ...]`` without recursion on the input."""
    if type(x) is not list:
        _fail("bad_tree", f"{where} must be a tree [label, child, ...], got {_kind(x)}")
    stack: list[tuple[Any, int]] = [(x, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        if type(node) is not list or not node:
            _fail(
                "bad_tree",
                f"a tree node must be a non-empty list [label, child, ...], got {_short(node)}",
            )
        if depth > limits.max_tree_depth:
            _fail("tree_too_deep", f"{where} is deeper than max_tree_depth={limits.max_tree_depth}")
        nodes += 1
        if nodes > limits.max_tree_nodes:
            _fail(
                "tree_too_large",
                f"{where} has more than max_tree_nodes={limits.max_tree_nodes:,} nodes",
            )
        label = node[0]
        if type(label) is str:
            if len(label) > limits.max_text_chars:
                _fail("too_long", f"a tree label of {len(label):,} characters is too long")
        elif type(label) is not int:
            _fail("bad_tree", f"a tree label must be a string or an integer, got {_kind(label)}")
        stack.extend((child, depth + 1) for child in node[1:])
    return x


def input_schema(model: Any) -> Schema | None:
    """The :class:`Schema` a model's inputs need: text or tree for a string/tree kernel.

    Unwraps scaling and consolidation wrappers to the learner and looks at its kernel;
    ``None`` (the generic schema) for a model on numbers.
    """
    learner, seen = model, 0
    while seen < 8:  # wrappers nest a few levels at most
        inner = getattr(learner, "_wrapped_model", None)
        if inner is None and hasattr(getattr(learner, "model", None), "learn_one"):
            inner = learner.model
        if inner is None or inner is learner:
            break
        learner, seen = inner, seen + 1
    kernel = getattr(learner, "kernel_", None) or getattr(learner, "kernel", None)
    if not getattr(kernel, "takes_objects", False):
        return None
    stack: list[Any] = [kernel.to_spec()]  # plain data: walk it for a tree kernel's name
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("name") in _TREE_KERNELS:
                return _TREE_SCHEMA
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return _TEXT_SCHEMA


_TREE_KERNELS = frozenset({"AllSubtree", "CoRootedSubtree"})


_TEXT_SCHEMA = Schema(x_kind="text")
_TREE_SCHEMA = Schema(x_kind="tree")
