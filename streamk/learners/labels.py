"""Label coding for kernel classifiers: binary ±1 targets, then one-vs-rest columns.

With at most two classes a classifier keeps one coefficient column, as the book's
algorithms do. ``True``/``1`` is the positive class and ``False``/``0``/``-1`` the
negative one; for other labels the first class seen is positive and the second negative.
When a third class appears, the model switches to one-vs-rest over the same support
set: column ``c`` is class ``c`` against the rest (the binary column becomes ``+f`` for
the positive class and ``-f`` for the negative one, a new class starts at zero).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable
from typing import Any

import numpy as np

from ..errors import InvalidInput, SnapshotError
from ..snapshot.codec import decode_state, encode_state
from ..snapshot.limits import DEFAULT_LIMITS

__all__ = [
    "LABEL_LIMITS",
    "LabelCoder",
    "check_snapshottable",
    "label_from_plain",
    "label_values",
]

_POSITIVE = (True,)  # True == 1 == 1.0
_NEGATIVE = (False, -1)  # False == 0 == 0.0


def _known_sign(label: Hashable) -> int:
    try:
        if label in _POSITIVE:
            return 1
        if label in _NEGATIVE:
            return -1
    except (TypeError, ValueError):  # e.g. arrays compared elementwise
        pass
    return 0


def check_label(label: Any) -> None:
    """Refuse what cannot be a class label, before anything is learned: ``None``, an
    unhashable value (a list, a dict), NaN (never equal to itself, so every NaN would
    become one more class: one more coefficient column each), a fractional number, or a
    value a snapshot cannot hold (see :func:`check_snapshottable`)."""
    if label is None:
        raise InvalidInput("learn_one needs a label; got y=None")
    try:
        hash(label)
    except TypeError:
        raise InvalidInput(
            f"a class label must be hashable (a string, number or boolean), got {label!r:.100}"
        ) from None
    if label != label:
        raise InvalidInput(f"a class label must not be NaN, got {label!r}")
    if isinstance(label, float | np.floating) and not float(label).is_integer():
        raise InvalidInput(_REAL_LABEL.format(label=label))
    check_snapshottable(label)


#: The snapshot limits a label is checked against: the reader's, with half the nesting
#: depth (a label sits inside the model's state: at depth 3 in a learner's, deeper in a
#: wrapper's), so a label within them fits wherever the model's state puts it.
LABEL_LIMITS = dataclasses.replace(DEFAULT_LIMITS, max_depth=DEFAULT_LIMITS.max_depth // 2)


def check_snapshottable(label: Any) -> None:
    """Refuse a label that a snapshot of the model could not write or read back equal.

    A class is kept for good, so a label ``snapshot.dumps`` refuses (``2**70``, ``1+2j``,
    a frozenset) would make every later snapshot of the model fail; one its reader refuses
    (a string over ``max_str_len``) would make the snapshots unreadable. The label goes
    through the snapshot layer's own encoder and decoder (``encode_state`` /
    ``decode_state``), so this rule and the format cannot drift apart; what comes back
    (tuples as lists, restored by :func:`label_from_plain`) must equal the label.
    """
    try:
        back = decode_state(encode_state(label, limits=LABEL_LIMITS), limits=LABEL_LIMITS)
    except SnapshotError as exc:
        raise InvalidInput(
            f"a class label must be something a snapshot can hold (a str, bool, 64-bit int, "
            f"whole float, bytes, or a tuple of such), got {label!r:.100}: {exc}"
        ) from None
    if label_from_plain(back) != label:
        raise InvalidInput(
            f"a class label must come back equal from a snapshot, got {label!r:.100} "
            f"(it would come back as {label_from_plain(back)!r:.100}: a NaN inside?)"
        )


def label_from_plain(value: Any) -> Any:
    """A class label as a snapshot gives it back: its lists (tuples written out, at any
    depth) become tuples again. A label is hashable, so a list in a stored class can only
    have been a tuple; left a list, it would make the restored model raise ``TypeError``
    in ``predict_one`` and ``learn_one``."""
    return tuple(label_from_plain(v) for v in value) if isinstance(value, list) else value


#: Why a fractional label is refused: every distinct value would become a class (one more
#: coefficient column each), so a regression stream fed to a classifier learned nonsense,
#: ever slower, and said nothing (a replayed Friedman log: 15 events/s, accuracy 0).
_REAL_LABEL = (
    "a class label must be a class, not a real number: got {label!r} (regression targets? "
    "learn them with OnlineSVR: learner = svr)"
)


def check_labels(labels: list[Any], values: np.ndarray | None = None) -> None:
    """:func:`check_label` of a block's labels; ``values``, the same labels as one array
    (:func:`label_values`), checked in one pass when given."""
    if values is not None:
        if values.dtype.kind == "f" and np.isnan(values).any():
            i = int(np.flatnonzero(np.isnan(values))[0])
            raise InvalidInput(f"a class label must not be NaN (label {i} of the block)")
        if values.dtype.kind == "f" and not np.array_equal(values, np.floor(values)):
            i = int(np.flatnonzero(values != np.floor(values))[0])
            raise InvalidInput(_REAL_LABEL.format(label=float(values[i])) + f" (label {i})")
        return
    try:
        distinct = set(labels)  # hashes each label in C; then only the few distinct ones
    except TypeError:
        distinct = labels  # an unhashable one: check_label finds it and names it
    for label in distinct:
        check_label(label)


def label_values(y: Any) -> np.ndarray | None:
    """A block's labels as a 1-D NumPy array of booleans or numbers, read without making a
    Python object per label (a pandas Series or NumPy array of such); ``None`` otherwise.

    :meth:`LabelCoder.target_matrix` and :meth:`LabelCoder.first_unknown` then compare
    whole columns instead of looking each label up: a fraction of the cost per block.
    """
    if isinstance(y, np.ndarray):
        values = y
    else:
        to_numpy = getattr(y, "to_numpy", None)
        if not callable(to_numpy) or not hasattr(y, "dtype"):
            return None
        values = to_numpy()
    if not isinstance(values, np.ndarray) or values.ndim != 1 or values.dtype not in _EXACT:
        return None
    return values


#: Label dtypes whose ``values == label`` :meth:`LabelCoder.codes` trusts (narrower ones
#: compare a Python number after casting it to their own type).
_EXACT = (np.dtype(np.bool_), np.dtype(np.int64), np.dtype(np.float64))


def _plain_number(label: Hashable, floats: bool) -> bool:
    """Whether NumPy's ``values == label`` is exactly the dict lookup of each value: a
    Python bool, an int that converts to a float exactly, or (``floats``: float64 values)
    a finite float. An int64 value against a float compares as a rounded float, and NaN
    is found by identity in a dict, never by ``==``."""
    kind = type(label)
    if kind is bool:
        return True
    if kind is int:
        return -(2**53) < label < 2**53
    return floats and kind is float and math.isfinite(label)


#: Binary targets of ``False`` (row 0) and ``True`` (row 1) by the positive class.
_BOOL_TARGETS = {True: np.array([[-1.0], [1.0]]), False: np.array([[1.0], [-1.0]])}


class LabelCoder:
    """Classes seen so far and how they map onto coefficient columns."""

    def __init__(self) -> None:
        self.classes: list[Hashable] = []
        self.signs: list[int] = []  # binary mode: the sign of each class
        self._targets: dict[Hashable, np.ndarray] = {}  # label -> targets, until a class is added
        self._positive: dict[Hashable, list[bool]] = {}  # label -> targets > 0, likewise
        self._pair: tuple[Hashable, Hashable] | None = None  # (positive, negative) when binary
        self._known: set[Hashable] = set()  # the classes, for an O(1) membership test

    @property
    def multiclass(self) -> bool:
        return len(self.classes) > 2

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.multiclass else 1

    def add(self, label: Hashable) -> np.ndarray | None:
        """Register ``label``; return the column remap matrix the model must apply, if any.

        The matrix form of :meth:`register`: a new class in one-vs-rest is ``[I | 0]``,
        C x (C + 1), O(C^2) to build, so neither a learner nor the merge
        (:func:`~streamk.merge.align.remap_coef`) uses it any more; the tests compose it as
        the dense oracle of both.
        """
        change = self.register(label)
        if isinstance(change, int):
            c = len(self.classes) - change
            return np.hstack([np.eye(c), np.zeros((c, change))])
        return change

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._known = set(self.classes)  # (a pickle from before the set was kept)

    def knows(self, label: Any) -> bool:
        """Whether ``label`` is a class already (``False`` for an unhashable value)."""
        try:
            return label in self._known
        except TypeError:
            return False

    def register(self, label: Hashable) -> np.ndarray | int | None:
        """Register ``label``; what the model's coefficient columns must do.

        ``None``: nothing (a known class, or the first two classes). A matrix ``M``: replace
        the columns by ``coef @ M`` (a binary sign flip, or binary -> one-vs-rest, with at
        most three columns). An int ``k``: append ``k`` zero columns (a new class in
        one-vs-rest: O(capacity C) where the product with ``[I | 0]`` cost O(capacity C^2),
        87-386 ms per new class at 2,000-3,500 classes).
        """
        if self.knows(label):
            return None
        self._known.add(label)  # first: an unhashable label changes nothing
        self._targets = {}
        self._positive = {}
        if len(self.classes) < 2:
            sign = _known_sign(label)
            other = self.signs[0] if self.signs else 0
            remap = None
            if sign == 0:
                sign = -other if other else 1
            elif sign == other:
                # Both are "known" with the same sign, or a known label arrives after a
                # generic one took its sign: the known label wins, the other flips.
                self.signs[0] = -other
                remap = np.array([[-1.0]])
            self.classes.append(label)
            self.signs.append(sign)
            self._pair = self._binary_pair()
            return remap
        change: np.ndarray | int = 1  # one-vs-rest: the new class's column starts at 0
        if len(self.classes) == 2:
            # binary -> one-vs-rest: column of class c is sign_c * f, new class starts at 0
            change = np.array([[self.signs[0], self.signs[1], 0.0]])
        self.classes.append(label)
        self._pair = None
        return change

    def adds_quietly(self, label: Hashable) -> bool:
        """Whether :meth:`add` of a new ``label`` would return no remap and leave one
        coefficient column: the first class, or a second whose sign is not the first's."""
        if len(self.classes) >= 2:
            return False
        sign = _known_sign(label)
        return sign == 0 or not self.signs or sign != self.signs[0]

    def _binary_pair(self) -> tuple[Hashable, Hashable] | None:
        if len(self.classes) != 2:
            return None
        return self.classes[self.signs.index(1)], self.classes[self.signs.index(-1)]

    def targets(self, label: Hashable) -> np.ndarray:
        """±1 target for each coefficient column (a shared array: do not modify it)."""
        cached = self._targets.get(label)
        if cached is not None:
            return cached
        self._targets[label] = out = self._compute_targets(label)
        return out

    def positive(self, label: Hashable) -> list[bool]:
        """``targets(label) > 0`` as Python bools (a shared list: do not modify it).

        The per-event mistake test of a perceptron, ``sgn(f) != target`` column by column
        with ``sgn(0) = +1``, is ``[v >= 0.0 for v in f.tolist()] != positive(label)``: for a
        handful of columns, Python comparisons cost a fraction of NumPy's ufunc calls on
        arrays that small, and the answer is the same (NaN compares false either way).
        """
        cached = self._positive.get(label)
        if cached is not None:
            return cached
        self._positive[label] = out = (self.targets(label) > 0.0).tolist()
        return out

    def _compute_targets(self, label: Hashable) -> np.ndarray:
        if self.multiclass:
            t = -np.ones(len(self.classes))
            t[self.classes.index(label)] = 1.0
            return t
        return np.array([float(self.signs[self.classes.index(label)])])

    def codes(self, values: np.ndarray | None) -> np.ndarray | None:
        """The index in :attr:`classes` of each of ``values`` (:func:`label_values`), ``-1``
        for a label not seen yet, by one comparison per class; ``None`` when that might not
        be what looking each label up finds (classes other than plain numbers)."""
        classes = self.classes
        if values is None or not classes or len(classes) > 8:
            return None
        floats = values.dtype == np.float64
        if not all(_plain_number(c, floats) for c in classes):
            return None
        if len(classes) <= 2:  # the binary case, in two comparisons
            codes = np.where(values == classes[-1], len(classes) - 1, -1)
            return np.where(values == classes[0], 0, codes) if len(classes) == 2 else codes
        codes = np.full(values.shape[0], -1, dtype=np.intp)
        for i, c in enumerate(classes):
            codes[values == c] = i
        return codes

    def _bool_pair(self, values: np.ndarray | None) -> bool:
        """Whether ``values`` are booleans and the classes are ``True`` and ``False``."""
        pair = self._pair
        return (
            pair is not None
            and values is not None
            and values.dtype == np.bool_
            and type(pair[0]) is bool
            and type(pair[1]) is bool
        )

    def first_unknown(self, labels: list[Hashable], start: int, values=None) -> int:
        """The first row from ``start`` whose label is not a known class (``len(labels)``:
        none); ``values``, the labels as :func:`label_values` gives them, if any."""
        if self._bool_pair(values):  # both booleans are classes: every label is known
            return len(labels)
        codes = self.codes(None if values is None else values[start:])
        if codes is not None:
            unknown = np.flatnonzero(codes < 0)
            return start + int(unknown[0]) if unknown.shape[0] else len(labels)
        known = set(self.classes)
        return next((j for j in range(start, len(labels)) if labels[j] not in known), len(labels))

    def target_matrix(self, labels: list[Hashable], values=None) -> np.ndarray:
        """±1 targets for known labels, one row per label, ``(len(labels), n_outputs)``;
        ``KeyError`` if a label is not a known class. ``values``: the same labels as
        :func:`label_values` gives them, compared as a whole when :meth:`codes` can."""
        if self._bool_pair(values):  # one lookup per row in a two-row table
            return _BOOL_TARGETS[self._pair[0]][values.view(np.uint8)]
        cols = self.codes(values)
        if cols is None:
            index = {c: i for i, c in enumerate(self.classes)}
            cols = np.fromiter(map(index.__getitem__, labels), dtype=np.intp, count=len(labels))
        elif cols.shape[0] and cols.min() < 0:
            raise KeyError(labels[int(np.argmin(cols))])
        if self.multiclass:
            T = -np.ones((len(labels), len(self.classes)))
            T[np.arange(len(labels)), cols] = 1.0
            return T
        return np.asarray(self.signs, dtype=np.float64)[cols][:, None]

    def decide_one(self, f: np.ndarray) -> Any:
        """The label for one row of decision values (``decide``'s per-event path)."""
        if self._pair is not None:
            return self._pair[0] if f[0] >= 0 else self._pair[1]
        return self.decide(f[None, :])[0]

    def decide(self, F: np.ndarray) -> list[Any]:
        """Labels for decision values ``F`` of shape ``(m, n_outputs)``; sgn(0) = +1."""
        m = F.shape[0]
        if not self.classes:
            return [None] * m
        if len(self.classes) == 1:
            return [self.classes[0]] * m
        if not self.multiclass:
            pos = self.classes[self.signs.index(1)]
            neg = self.classes[self.signs.index(-1)]
            if m == 1:
                return [pos if F[0, 0] >= 0 else neg]
            return [pos if f >= 0 else neg for f in F[:, 0].tolist()]
        classes = self.classes
        return [classes[j] for j in F.argmax(axis=1).tolist()]

    def decode(self, codes: list[int], labels: list[Any]) -> list[Any]:
        """Predictions from class codes (see :func:`streamk.learners.fastpass.perceptron_pass`).

        Code ``-1`` means the row's own label; otherwise binary codes are 1 (positive) and
        0 (negative) and one-vs-rest codes index :attr:`classes`.
        """
        if len(self.classes) == 1:
            lookup = [self.classes[0], self.classes[0]]
        elif not self.multiclass:
            lookup = [self.classes[self.signs.index(-1)], self.classes[self.signs.index(1)]]
        else:
            lookup = self.classes
        return [y if c < 0 else lookup[c] for c, y in zip(codes, labels)]

    def probabilities(self, F: np.ndarray) -> np.ndarray:
        """Rows of class probabilities, columns in ``self.classes`` order.

        A monotone map of the margin, not a calibrated probability: the logistic function
        of ``f`` for two classes, the softmax of the one-vs-rest margins for more. The
        largest probability always belongs to the predicted class.
        """
        m = F.shape[0]
        if len(self.classes) <= 1:
            return np.ones((m, len(self.classes)))
        if not self.multiclass:
            p_pos = 0.5 * (1.0 + np.tanh(0.5 * F[:, 0]))  # logistic, overflow-free
            out = np.empty((m, 2))
            pos = self.signs.index(1)
            out[:, pos] = p_pos
            out[:, 1 - pos] = 1.0 - p_pos
            return out
        Z = F - F.max(axis=1, keepdims=True)
        E = np.exp(Z)
        return E / E.sum(axis=1, keepdims=True)

    def probabilities_one(self, f: np.ndarray) -> list[float]:
        """:meth:`probabilities` of one row of margins ``f``, in Python floats: the same
        operations on each value (``math.tanh`` and ``math.exp`` in place of NumPy's, which
        may differ in the last bit), without the NumPy calls that cost a ``predict_proba_one``
        several times its margins."""
        k = len(self.classes)
        if k <= 1:
            return [1.0] * k
        if not self.multiclass:
            p_pos = 0.5 * (1.0 + math.tanh(0.5 * float(f[0])))  # logistic, overflow-free
            out = [1.0 - p_pos, 1.0 - p_pos]
            out[self.signs.index(1)] = p_pos
            return out
        values = f.tolist()
        top = max(values)
        e = [math.exp(v - top) for v in values]
        total = sum(e)
        return [v / total for v in e]

    def state(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "signs": list(self.signs)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> LabelCoder:
        coder = cls()
        coder.classes = [label_from_plain(c) for c in state["classes"]]
        coder._known = set(coder.classes)
        coder.signs = [int(s) for s in state["signs"]]
        coder._targets = {}
        coder._positive = {}
        coder._pair = coder._binary_pair()
        return coder
