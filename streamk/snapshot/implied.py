"""What rebuilding a learner from a decoded state would allocate, checked before it does.

The codec bounds the bytes present in a snapshot; this module bounds what those
bytes *imply*. A support set of 8,000 empty rows with ``keep_gram`` is a few
kilobytes on disk and a gigabyte of Gram matrix in ``from_state``; a row width
of 2**28 declared by an empty array is nothing on disk and 2 GiB on the first
``learn_one``. Every such quantity (support size, feature count, output count,
Gram and inverse-Gram sizes, total bytes) is checked against :class:`Limits`
from the shapes alone, so a hostile snapshot fails with ``SnapshotOverLimit``
before any allocation.

The structures recognised are the ones documented in docs/snapshot-format.md:
a support set (``kernel, X, coef, ids, next_id, keep_gram``, optional ``buffers``;
with ``objects`` true, ``X`` is a list of strings or trees, see :mod:`.objects`), a
policy's inverse Gram (``P, ids``), the feature names (``features``), the label coder
(``labels.classes``) and the scaler (``scale.mean``, ``scale.m2``). Any other
array counts its own bytes, since ``from_state`` may copy it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .limits import CorruptSnapshot, Limits, SnapshotOverLimit

__all__ = ["check_implied", "implied_bytes"]

_F8 = 8
_SUPPORT_KEYS = frozenset(["kernel", "X", "coef", "ids", "keep_gram"])
_INVERSE_KEYS = frozenset(["P", "ids"])


def check_implied(state: Any, limits: Limits, path: str = "state") -> int:
    """Raise ``SnapshotOverLimit`` if rebuilding `state` would exceed `limits`.

    Shapes that disagree within one structure raise ``CorruptSnapshot``.

    Returns
    -------
    int
        The estimated bytes ``from_state`` allocates (for reporting).
    """
    total = implied_bytes(state, limits, path)
    if total > limits.max_implied_bytes:
        raise SnapshotOverLimit(
            f"{path}: rebuilding this learner would allocate about {total:,} bytes, over "
            f"max_implied_bytes={limits.max_implied_bytes:,}; raise Limits.max_implied_bytes "
            "if this snapshot is trusted"
        )
    return total


def implied_bytes(state: Any, limits: Limits, path: str = "state") -> int:
    """Bytes ``from_state`` would allocate for `state`; checks each count on the way.

    Raises
    ------
    SnapshotOverLimit
        If a declared count (support, features, outputs) is over its limit.
    CorruptSnapshot
        If the shapes of one structure disagree.
    """
    if isinstance(state, dict):
        if path == "state" or "support" in state:  # a learner's state, maybe nested
            _check_top(state, limits, path)
        total = 0
        if _SUPPORT_KEYS <= state.keys():
            total += _support_bytes(state, limits, path)
        elif _INVERSE_KEYS <= state.keys():
            total += _inverse_bytes(state, limits, path)
        for key, value in state.items():
            total += implied_bytes(value, limits, f"{path}.{key}")
        return total
    if isinstance(state, list):
        return sum(implied_bytes(v, limits, f"{path}[{i}]") for i, v in enumerate(state))
    if isinstance(state, np.ndarray):
        return int(state.nbytes)  # from_state may copy it
    return 0


def _check_top(state: dict[str, Any], limits: Limits, path: str) -> None:
    features = state.get("features")
    if isinstance(features, list) and len(features) > limits.max_features:
        raise SnapshotOverLimit(
            f"{path}.features: {len(features):,} feature names exceed "
            f"max_features={limits.max_features:,}"
        )
    labels = state.get("labels")
    classes = labels.get("classes") if isinstance(labels, dict) else None
    if isinstance(classes, list) and len(classes) > limits.max_outputs:
        raise SnapshotOverLimit(
            f"{path}.labels: {len(classes):,} classes exceed max_outputs={limits.max_outputs:,}"
        )
    scale = state.get("scale")
    if isinstance(scale, dict):
        for key in ("mean", "m2"):
            arr = scale.get(key)
            if isinstance(arr, np.ndarray) and arr.size > limits.max_features:
                raise SnapshotOverLimit(
                    f"{path}.scale.{key}: {arr.size:,} features exceed "
                    f"max_features={limits.max_features:,}"
                )


def _length(value: Any) -> int | None:
    if isinstance(value, list):
        return len(value)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return int(value.shape[0])
    return None


def _check_counts(n: int, outputs: int, kind: str, limits: Limits, path: str) -> None:
    """Support size and coefficient columns against ``limits`` (``kind``: vectors/objects)."""
    if n > limits.max_support:
        raise SnapshotOverLimit(
            f"{path}: {n:,} support {kind} exceed max_support={limits.max_support:,}"
        )
    if outputs > limits.max_outputs:
        raise SnapshotOverLimit(
            f"{path}: {outputs:,} coefficient columns exceed max_outputs={limits.max_outputs:,}"
        )


def _support_bytes(s: dict[str, Any], limits: Limits, path: str) -> int:
    if s.get("objects") is True:
        return _object_support_bytes(s, limits, path)
    X, coef, ids = s["X"], s["coef"], s["ids"]
    if not (isinstance(X, np.ndarray) and X.ndim == 2):
        raise CorruptSnapshot(f"{path}.X: a support set's rows must be a 2-D array")
    if not (isinstance(coef, np.ndarray) and coef.ndim == 2):
        raise CorruptSnapshot(f"{path}.coef: a support set's coefficients must be a 2-D array")
    n, width = X.shape
    outputs = coef.shape[1]
    if coef.shape[0] != n or _length(ids) != n:
        raise CorruptSnapshot(
            f"{path}: support set shapes disagree: X {X.shape}, coef {coef.shape}, "
            f"{_length(ids)} ids"
        )
    _check_counts(n, outputs, "vectors", limits, path)
    if width > limits.max_features:
        raise SnapshotOverLimit(
            f"{path}: rows of {width:,} features exceed max_features={limits.max_features:,}"
        )
    if n and outputs < 1:
        raise CorruptSnapshot(f"{path}: {n:,} support vectors with no coefficient column")
    rows, cols = _buffer_counts(s.get("buffers"), limits, path)
    cap, width = max(n, rows, 1), max(width, cols)
    total = cap * (width + outputs + 4) * _F8  # rows, coef, kdiag, sqnorm, ids, temporaries
    if bool(s["keep_gram"]):
        total += 2 * cap * cap * _F8  # the kept Gram matrix and the block that fills it
    return total


def _buffer_counts(buffers: Any, limits: Limits, path: str) -> tuple[int, int]:
    """The row and column capacity a support set's optional ``buffers`` map declares
    (``from_state`` allocates them), against ``max_support`` and ``max_features``."""
    if buffers is None:
        return 0, 0
    if not isinstance(buffers, dict):
        raise CorruptSnapshot(f"{path}.buffers: must be a map")
    counts = []
    for key, limit, name in (
        ("rows", limits.max_support, "max_support"),
        ("cols", limits.max_features, "max_features"),
    ):
        value = buffers.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CorruptSnapshot(f"{path}.buffers.{key}: must be an int >= 0, got {value!r:.40}")
        if value > limit:
            raise SnapshotOverLimit(
                f"{path}.buffers.{key}: {value:,} buffer {key} exceed {name}={limit:,}"
            )
        counts.append(value)
    return counts[0], counts[1]


def _object_support_bytes(s: dict[str, Any], limits: Limits, path: str) -> int:
    """An object support set (strings or trees, already checked by :mod:`.objects`).

    Each support object costs its feature map: about ``_LEAF_BYTES`` per trie leaf in
    the primal weight map and the padded leaf rows (a string of ``L`` characters has at
    most ``L`` leaves per mismatch neighbour, a tree one entry per node).
    """
    X, coef, ids = s["X"], s["coef"], s["ids"]
    if not isinstance(X, list):
        raise CorruptSnapshot(f"{path}.X: an object support set's X must be a list")
    if not (isinstance(coef, np.ndarray) and coef.ndim == 2):
        raise CorruptSnapshot(f"{path}.coef: a support set's coefficients must be a 2-D array")
    n, outputs = len(X), coef.shape[1]
    if coef.shape[0] != n or _length(ids) != n:
        raise CorruptSnapshot(
            f"{path}: support set shapes disagree: {n} objects, coef {coef.shape}, "
            f"{_length(ids)} ids"
        )
    _check_counts(n, outputs, "objects", limits, path)
    fan = _leaves_per_unit(s["kernel"])
    units = [len(x) if isinstance(x, str) else _tree_nodes(x) for x in X]
    widest = max(units, default=0) * fan
    total = sum(units) * fan * (_LEAF_BYTES + outputs * _F8)  # primal map
    total += max(n, 1) * (widest * 2 * _F8 + (outputs + 4) * _F8)  # leaf rows, coef, kdiag
    if bool(s["keep_gram"]):
        total += 2 * max(n, 1) ** 2 * _F8
    return total


_LEAF_BYTES = 256  # a leaf's key str, its dict entry and index slot


def _leaves_per_unit(spec: Any) -> int:
    """Trie leaves one position of a string reaches: the (k, m) mismatch neighbourhood, else 1."""
    stack, fan = [spec], 1
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("name") == "Mismatch":
                k, m, alphabet = node.get("k"), node.get("m"), node.get("alphabet")
                if isinstance(k, int) and isinstance(m, int) and isinstance(alphabet, str):
                    a = max(len(alphabet) - 1, 1)
                    hood = sum(math.comb(k, j) * a**j for j in range(0, min(m, k) + 1))
                    fan = max(fan, hood)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return fan


def _tree_nodes(tree: Any) -> int:
    count, stack = 0, [tree]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, list):
            stack.extend(node[1:])
    return count


def _inverse_bytes(s: dict[str, Any], limits: Limits, path: str) -> int:
    P = s["P"]
    if not isinstance(P, np.ndarray):
        return 0
    n = P.shape[0] if P.ndim else 0
    if P.ndim != 2 or P.shape[1] != n or _length(s["ids"]) != n:
        raise CorruptSnapshot(
            f"{path}.P: an inverse Gram must be n x n with n ids, got {P.shape} and "
            f"{_length(s['ids'])} ids"
        )
    if n > limits.max_support:
        raise SnapshotOverLimit(
            f"{path}.P: {n:,} support vectors exceed max_support={limits.max_support:,}"
        )
    return max(n, 1) ** 2 * _F8
