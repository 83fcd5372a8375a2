"""Tree kernels (Shawe-Taylor & Cristianini, §11.7.1) on ordered, labelled trees.

A tree is a nested list ``[label, child, child, ...]``; a leaf is ``[label]``. Labels are
``str`` or ``int``. Trees are validated (shape, label types, at most
:data:`MAX_TREE_DEPTH` levels and :data:`MAX_TREE_NODES` nodes); a bad tree raises
:class:`~streamk.errors.InvalidInput`. What a learner stores is :func:`freeze_tree`'s copy
(nested tuples), never the caller's lists, which the caller may reuse.

* :class:`CoRootedSubtree` counts the common co-rooted subtrees (Alg. 11.62): subtrees
  that keep the root and, for each node they include, all its children or none.
* :class:`AllSubtree` sums that over every pair of nodes (Alg. 11.65, eq. 11.7). As in
  the book's recursion (and unlike the 0/1 wording of Def. 11.64) it counts occurrences:
  a 3-node chain has all-subtree self-kernel 5.

With ``labelled=True`` (the default) every node a common subtree includes must carry the
same label in both trees (Remarks 11.63/11.66); ``labelled=False`` compares shapes only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError, InvalidInput
from .base import Kernel, _as_objects, check_utf8

__all__ = [
    "MAX_TREE_DEPTH",
    "MAX_TREE_NODES",
    "CoRootedSubtree",
    "AllSubtree",
    "flatten_tree",
    "freeze_tree",
]

#: Deepest tree accepted (root at depth 1).
MAX_TREE_DEPTH = 64
#: Largest tree accepted (nodes).
MAX_TREE_NODES = 5_000
#: The integer labels a tree may carry: msgpack's signed 64-bit range, what a snapshot holds.
LABEL_INT_RANGE = (-(1 << 63), (1 << 63) - 1)


class Flat:
    """A validated tree in post-order: ``labels[v]`` and ``children[v]`` (node indices;
    children come before their parent, the root is last)."""

    __slots__ = ("labels", "children")

    def __init__(self, labels: list[Any], children: list[tuple[int, ...]]):
        self.labels = labels
        self.children = children

    @property
    def root(self) -> int:
        return len(self.labels) - 1


def flatten_tree(tree: Any) -> Flat:
    """Validate ``tree`` and return it in post-order, without recursion on the input."""
    if isinstance(tree, Flat):
        return tree
    labels: list[Any] = []
    children: list[tuple[int, ...]] = []
    # explicit stack of (node, depth, index of next child, child indices so far)
    stack: list[tuple[Any, int, int, list[int]]] = [(_check_node(tree, 1), 1, 1, [])]
    seen = 1
    while stack:
        node, depth, nxt, kids = stack[-1]
        if nxt < len(node):
            stack[-1] = (node, depth, nxt + 1, kids)
            child = _check_node(node[nxt], depth + 1)
            seen += 1
            if seen > MAX_TREE_NODES:
                raise InvalidInput(
                    f"tree has more than {MAX_TREE_NODES} nodes; prune it before learning"
                )
            stack.append((child, depth + 1, 1, []))
            continue
        stack.pop()
        labels.append(node[0])
        children.append(tuple(kids))
        if stack:
            stack[-1][3].append(len(labels) - 1)
    return Flat(labels, children)


def freeze_tree(tree: Any) -> tuple:
    """A validated, immutable copy of ``tree``: nested tuples ``(label, child, ...)`` with
    plain ``str``/``int`` labels, built without recursion.

    Why: a support set keeps its trees for as long as they are in it; holding the
    caller's own lists, a caller that reuses or edits a list after ``learn_one`` (a
    parser's output buffer) would silently change the model, and the snapshot with it.
    """
    flat = flatten_tree(tree)
    nodes: list[tuple] = []
    for label, kids in zip(flat.labels, flat.children):  # post-order: children first
        if type(label) is not str and type(label) is not int:  # a subclass: its plain value
            label = str.__str__(label) if isinstance(label, str) else int.__index__(label)
        nodes.append((label, *(nodes[c] for c in kids)))
    return nodes[-1]


def _check_node(node: Any, depth: int) -> Any:
    if depth > MAX_TREE_DEPTH:
        raise InvalidInput(f"tree is deeper than {MAX_TREE_DEPTH} levels; prune it")
    if not isinstance(node, (list, tuple)) or not node:
        raise InvalidInput(
            "a tree node is a non-empty list [label, child, ...] (a leaf is [label]), "
            f"got {node!r:.60}"
        )
    label = node[0]
    if isinstance(label, str):
        check_utf8(label, "a tree label")
    elif isinstance(label, bool) or not isinstance(label, int):
        raise InvalidInput(
            f"a tree label is a str or int, got {type(label).__name__} {label!r:.40}"
        )
    elif not LABEL_INT_RANGE[0] <= label <= LABEL_INT_RANGE[1]:
        raise InvalidInput(f"a tree label int must fit in 64 bits (signed), got {label:.3g}")
    return node


class _TreeKernel(Kernel):
    """Shared parts: object inputs, validation, spec."""

    takes_objects = True
    object_kind = "trees"
    _param_names = ("labelled",)

    def __init__(self, labelled: bool = True):
        if not isinstance(labelled, bool):
            raise ConfigError(f"labelled must be True or False, got {labelled!r}")
        self.labelled = labelled

    def check_object(self, tree: Any) -> tuple:
        """``tree`` validated, as the frozen copy a support set keeps (:func:`freeze_tree`)."""
        return freeze_tree(tree)

    def _pair(self, a: Flat, b: Flat) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _gram(self, A, B, a_sq, b_sq):
        FA = [flatten_tree(t) for t in A]
        FB = [flatten_tree(t) for t in B]
        K = np.empty((len(FA), len(FB)))
        for i, a in enumerate(FA):
            for j, b in enumerate(FB):
                K[i, j] = self._pair(a, b)
        return K

    def diag(self, A):
        return np.array([self._pair(f, f) for f in map(flatten_tree, _as_objects(A))], dtype=float)


def _corooted(a: Flat, i: int, b: Flat, j: int, labelled: bool, memo: dict | None) -> float:
    """``kappa_r`` of the subtrees rooted at ``i`` and ``j`` (Alg. 11.62)."""
    if memo is not None:
        hit = memo.get((i, j))
        if hit is not None:
            return hit
    ca, cb = a.children[i], b.children[j]
    if len(ca) != len(cb) or not ca or (labelled and a.labels[i] != b.labels[j]):
        value = 0.0
    else:
        value = 1.0
        for x, y in zip(ca, cb):
            if labelled and a.labels[x] != b.labels[y]:
                value = 0.0  # that child is in every common subtree: no match
                break
            value *= 1.0 + _corooted(a, x, b, y, labelled, memo)
    if memo is not None:
        memo[(i, j)] = value
    return value


class CoRootedSubtree(_TreeKernel):
    """Co-rooted subtree kernel (Shawe-Taylor & Cristianini, Def. 11.61, Alg. 11.62):
    ``k = 0`` unless the roots have the same out-degree ``d > 0`` (and label), else
    ``prod_i (k(child_i, child'_i) + 1)``. O(min(|T1|, |T2|))."""

    def _pair(self, a, b):
        return _corooted(a, a.root, b, b.root, self.labelled, None)


class AllSubtree(_TreeKernel):
    """All-subtree kernel (Shawe-Taylor & Cristianini, Def. 11.64, Alg. 11.65):
    ``k(T1, T2) = sum over node pairs (v1, v2) of kappa_r(tau(v1), tau(v2))``, each pair's
    co-rooted value computed once from its children's (post-order table).
    O(|T1| |T2| d_max): small trees only."""

    def _pair(self, a, b):
        memo: dict[tuple[int, int], float] = {}
        total = 0.0
        for i in range(len(a.labels)):  # post-order: children's entries exist already
            for j in range(len(b.labels)):
                total += _corooted(a, i, b, j, self.labelled, memo)
        return total
