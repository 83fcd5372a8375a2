"""Support strings and trees in a snapshot: a flat, bounded encoding and its checked decoding.

A learner on a string or tree kernel keeps an object support set whose ``state()`` is
``{"objects": True, "X": [obj, ...], ...}`` (see :mod:`streamk.learners.objects`). A
nested tree would make the snapshot's msgpack nesting as deep as the tree, and a
reader could not tell a hostile list from a tree before walking it. So the writer
replaces ``X`` by a flat, schema-checked form::

    {"__objects__": 1, "items": [item, ...]}

where an item is a ``str`` (a string) or a flat list ``[label, arity, label, arity, ...]``
(a tree ``[label, child, ...]`` in pre-order, ``arity`` = number of children; a label is
a ``str`` or an ``int``). The reader checks every item against :class:`~.limits.Limits`
(``max_text_len`` characters, ``max_tree_nodes`` nodes, ``max_tree_depth`` levels) and
rebuilds trees iteratively, so nothing is allocated beyond the bytes already bounded
by the decoder and no recursion depends on the input. UTF-8 validity is the msgpack
decoder's (``raw=False``): invalid bytes fail before this module runs.
"""

from __future__ import annotations

from typing import Any

from ..errors import SnapshotError
from ..kernels.trees import LABEL_INT_RANGE
from .limits import CorruptSnapshot, Limits, SnapshotOverLimit

__all__ = ["OBJECTS_KEY", "encode_objects", "decode_objects", "is_object_support"]

OBJECTS_KEY = "__objects__"
_SCHEMA = 1
_INT_MIN, _INT_MAX = LABEL_INT_RANGE


def is_object_support(state: Any) -> bool:
    """True for an object support set's state (``objects`` true, with ``X`` and ``coef``)."""
    return (
        isinstance(state, dict) and state.get("objects") is True and {"X", "coef"} <= state.keys()
    )


# -- writing ---------------------------------------------------------------------------------


def encode_objects(state: Any, limits: Limits, path: str = "state") -> Any:
    """A copy of ``state`` with every object support set's ``X`` in the flat form.

    Raises
    ------
    SnapshotError
        If a support object is neither a str nor a tree ``[label, child, ...]``, or is
        over ``limits`` (a reader would refuse the snapshot).
    """
    if isinstance(state, dict):
        out = {k: encode_objects(v, limits, f"{path}.{k}") for k, v in state.items() if k != "X"}
        if "X" in state:
            X = state["X"]
            if is_object_support(state):
                if not isinstance(X, list):
                    raise SnapshotError(f"{path}.X: an object support set's X must be a list")
                X = {
                    OBJECTS_KEY: _SCHEMA,
                    "items": [_encode_item(o, limits, f"{path}.X[{i}]") for i, o in enumerate(X)],
                }
            else:
                X = encode_objects(X, limits, f"{path}.X")
            out["X"] = X
        return {k: out[k] for k in state}  # keep the key order
    if isinstance(state, list | tuple):
        return [encode_objects(v, limits, f"{path}[{i}]") for i, v in enumerate(state)]
    return state


def _encode_item(obj: Any, limits: Limits, path: str) -> Any:
    if isinstance(obj, str):
        _check_text(obj, limits, path, SnapshotError)
        return obj
    if not isinstance(obj, list | tuple):
        raise SnapshotError(
            f"{path}: a support object must be a str or a tree [label, child, ...], "
            f"got {type(obj).__name__}"
        )
    flat: list[Any] = []
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, list | tuple) or not node:
            raise SnapshotError(f"{path}: a tree node must be a non-empty list [label, child, ...]")
        if depth > limits.max_tree_depth:
            raise SnapshotError(f"{path}: tree deeper than max_tree_depth={limits.max_tree_depth}")
        label = node[0]
        _check_label(label, limits, path, SnapshotError)
        flat += [label, len(node) - 1]
        if len(flat) > 2 * limits.max_tree_nodes:
            raise SnapshotError(
                f"{path}: tree has more than max_tree_nodes={limits.max_tree_nodes} nodes"
            )
        stack.extend((child, depth + 1) for child in reversed(node[1:]))
    return flat


# -- reading ---------------------------------------------------------------------------------


def decode_objects(state: Any, limits: Limits, path: str = "state") -> Any:
    """Rebuild every object support set's ``X`` from the flat form, in place; returns ``state``.

    Raises
    ------
    CorruptSnapshot
        If an object support set's ``X`` is not the flat form, an item has a wrong type
        or a malformed tree, or an item is over a limit (then :class:`SnapshotOverLimit`).
    """
    if isinstance(state, dict):
        for key, value in state.items():
            if key == "X" and is_object_support(state):
                state[key] = _decode_X(value, limits, f"{path}.X")
            else:
                decode_objects(value, limits, f"{path}.{key}")
    elif isinstance(state, list):
        for i, value in enumerate(state):
            decode_objects(value, limits, f"{path}[{i}]")
    return state


def _decode_X(X: Any, limits: Limits, path: str) -> list[Any]:
    if not (isinstance(X, dict) and set(X) == {OBJECTS_KEY, "items"}):
        raise CorruptSnapshot(
            f"{path}: an object support set's X must be the map "
            f"{{{OBJECTS_KEY!r}: {_SCHEMA}, 'items': [...]}}"
        )
    if X[OBJECTS_KEY] != _SCHEMA or isinstance(X[OBJECTS_KEY], bool):
        raise CorruptSnapshot(f"{path}: unknown support-object schema {X[OBJECTS_KEY]!r}")
    items = X["items"]
    if not isinstance(items, list):
        raise CorruptSnapshot(f"{path}.items must be a list")
    if len(items) > limits.max_support:
        raise SnapshotOverLimit(
            f"{path}: {len(items):,} support objects exceed max_support={limits.max_support:,}"
        )
    return [_decode_item(item, limits, f"{path}[{i}]") for i, item in enumerate(items)]


def _decode_item(item: Any, limits: Limits, path: str) -> Any:
    if isinstance(item, str):
        _check_text(item, limits, path, SnapshotOverLimit)
        return item
    if not isinstance(item, list) or not item:
        raise CorruptSnapshot(
            f"{path}: a support object must be a str or a flat tree [label, arity, ...], "
            f"got {type(item).__name__}"
        )
    if len(item) % 2:
        raise CorruptSnapshot(f"{path}: a flat tree needs (label, arity) pairs")
    if len(item) > 2 * limits.max_tree_nodes:
        raise SnapshotOverLimit(
            f"{path}: tree of {len(item) // 2:,} nodes exceeds "
            f"max_tree_nodes={limits.max_tree_nodes:,}"
        )
    root: list[Any] = []
    # each open node: [node, children still expected, its depth (root 1)]
    open_nodes: list[list[Any]] = []
    for j in range(0, len(item), 2):
        label, arity = item[j], item[j + 1]
        _check_label(label, limits, path, CorruptSnapshot)
        if isinstance(arity, bool) or not isinstance(arity, int) or arity < 0:
            raise CorruptSnapshot(f"{path}: tree arity {arity!r} is not a non-negative int")
        if arity >= limits.max_tree_nodes:
            raise SnapshotOverLimit(
                f"{path}: a node declares {arity:,} children, over "
                f"max_tree_nodes={limits.max_tree_nodes:,}"
            )
        node = [label]
        if j == 0:
            root, depth = node, 1
        elif not open_nodes:
            raise CorruptSnapshot(f"{path}: flat tree has nodes after its root is complete")
        else:
            parent = open_nodes[-1]
            parent[0].append(node)
            depth = parent[2] + 1
            parent[1] -= 1
            if parent[1] == 0:
                open_nodes.pop()
        if depth > limits.max_tree_depth:
            raise SnapshotOverLimit(
                f"{path}: tree deeper than max_tree_depth={limits.max_tree_depth}"
            )
        if arity:
            open_nodes.append([node, arity, depth])
    if open_nodes:
        raise CorruptSnapshot(f"{path}: flat tree ends before its nodes' children")
    return root


def _check_text(s: str, limits: Limits, path: str, error: type[Exception]) -> None:
    if len(s) > limits.max_text_len:
        raise error(
            f"{path}: string of {len(s):,} chars exceeds max_text_len={limits.max_text_len:,}"
        )


def _check_label(label: Any, limits: Limits, path: str, error: type[Exception]) -> None:
    if isinstance(label, str):
        _check_text(label, limits, path, error)
    elif isinstance(label, bool) or not isinstance(label, int) or not _INT_MIN <= label <= _INT_MAX:
        raise error(f"{path}: a tree label must be a str or a 64-bit int, got {label!r}")
