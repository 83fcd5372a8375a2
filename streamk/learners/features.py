"""FeatureIndex: river feature dicts (or frames) to dense NumPy rows, and back to names.

A learner keeps one index. Features that appear later grow it (new columns at the end);
a feature missing from an event reads as 0. Kernels used by streamk are invariant to a
consistent permutation of the columns, so the order in which features are met does not
change any prediction.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError, InvalidInput
from ..kernels import VALUE_RANGE

__all__ = ["FeatureIndex", "NameLimits", "limited_names"]

#: no bound on a row's squared norm but its being finite
FULL_WINDOW = (0.0, math.inf)


@dataclass(frozen=True)
class NameLimits:
    """What a stream may make a feature index hold (see :func:`limited_names`).

    Parameters
    ----------
    max_names
        Most distinct feature names: every support vector is as wide as the index, so a
        producer that puts a fresh key in each event (an id, a timestamp) would grow every
        row without end, until no snapshot of the model could be written.
    max_name_chars
        Longest feature name (a text name, in characters).
    """

    max_names: int
    max_name_chars: int

    def __post_init__(self) -> None:
        for name in ("max_names", "max_name_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"NameLimits.{name} must be a positive int, got {value!r}")


@contextmanager
def limited_names(limits: NameLimits | None) -> Iterator[None]:
    """Within the block, every feature index refuses (``InvalidInput``, the index unchanged)
    an event that would take it past ``limits``: the engine's ``max_feature_names`` and
    ``max_feature_name_chars``, for every learner, wrapper and restored model it runs. The
    Python API has no limit outside such a block."""
    before = FeatureIndex.limits
    FeatureIndex.limits = limits
    try:
        yield
    finally:
        FeatureIndex.limits = before


class FeatureIndex:
    """Maps feature names to column numbers.

    Parameters
    ----------
    names
        Initial feature names, in column order.

    Notes
    -----
    The per-event path caches the column numbers of the last key order it saw, so a
    stream whose events carry the same keys in the same order costs one tuple comparison
    and one vectorised assignment per event.
    """

    #: what growing may not exceed (``None``: no limit; set by :func:`limited_names`)
    limits: ClassVar[NameLimits | None] = None

    def __init__(self, names: list[Hashable] | None = None):
        self.names: list[Hashable] = []
        self._col: dict[Hashable, int] = {}
        self._cached_keys: tuple | None = None
        self._cached_cols: np.ndarray | None = None  # None: the keys are in column order
        # (keys, values, row) of the last event: keys and values compared apart equal the
        # items compared together, and the value list is also what the row is built from
        self._last: tuple[tuple, list, np.ndarray] | None = None
        # (columns, their names, their numbers, whether those are 0 .. n-1) of the last
        # DataFrame whose names were all known
        self._frame_cols: tuple[Any, list[Hashable], np.ndarray, bool] | None = None
        #: the squared norms a row may have (0 always may): the learner's kernel's
        #: :func:`~streamk.kernels.base.sqnorm_window`, whose rows outside it are refused
        self.sq_window: tuple[float, float] = FULL_WINDOW
        for name in names or []:
            self._add(name)

    def __len__(self) -> int:
        return len(self.names)

    def _cols_of_cache(self) -> np.ndarray:
        """Column numbers of the cached key order (``None`` stands for ``0 .. n-1``)."""
        cols = self._cached_cols
        return np.arange(len(self._cached_keys or ())) if cols is None else cols

    def _admit(self, names: Iterable[Hashable], limits: NameLimits) -> None:
        """Refuse, before any is added, names that would take the index past ``limits``
        (the unknown ones among ``names`` are counted)."""
        new = [k for k in dict.fromkeys(names) if k not in self._col]
        for k in new:
            if isinstance(k, str) and len(k) > limits.max_name_chars:
                raise InvalidInput(
                    f"feature name {k[:40]!r}... has {len(k):,} characters, above "
                    f"max_feature_name_chars={limits.max_name_chars:,}"
                )
        if new and len(self.names) + len(new) > limits.max_names:
            raise InvalidInput(
                f"{len(new)} new feature name(s) ({', '.join(repr(k)[:40] for k in new[:3])}"
                f"{', ...' if len(new) > 3 else ''}) would make {len(self.names) + len(new):,} "
                f"distinct names, above max_feature_names={limits.max_names:,}: every support "
                "vector is as wide as the names ever met; a key that changes with every event "
                "(an id, a timestamp) belongs outside x"
            )

    def _add(self, name: Hashable) -> int:
        col = len(self.names)
        self._col[name] = col
        self.names.append(name)
        return col

    # -- one event ----------------------------------------------------------------------------
    def row(self, x: Mapping[Hashable, Any], grow: bool) -> np.ndarray:
        """Dense row for a feature dict; anything else (a string, a tree) raises
        :class:`~streamk.errors.InvalidInput`.

        With ``grow=True`` unseen features are added to the index. With ``grow=False`` the
        index is left as it is and unseen features are appended after the known columns:
        no stored row has them, so they read as 0 there, but they still count in the
        event's own norm (which an RBF kernel needs).
        """
        try:
            vals = list(x.values())
        except (AttributeError, TypeError):  # a str, a tree, a number: not a feature dict
            raise not_a_map(x) from None
        keys = tuple(x)
        last = self._last
        if (
            last is not None
            and last[0] == keys
            and last[1] == vals
            and len(last[2]) == len(self.names)
        ):
            return last[2]  # the same event again (test-then-train): same row, read-only
        values = _values(x, vals, self.sq_window)
        if keys == self._cached_keys:
            cols = self._cached_cols
            if cols is None and len(values) == len(self.names):
                out = values  # keys in column order: the values are the row
            else:
                out = np.zeros(len(self.names))
                out[self._cols_of_cache()] = values
            out.setflags(write=False)
            self._last = (keys, vals, out)
            return out
        limits = FeatureIndex.limits
        if grow and limits is not None:
            self._admit(keys, limits)
        cols_list = []
        extra = 0
        for k in keys:
            c = self._col.get(k)
            if c is None:
                if grow:
                    c = self._add(k)
                else:
                    c = len(self.names) + extra
                    extra += 1
            cols_list.append(c)
        cols = np.asarray(cols_list, dtype=np.intp)
        if extra == 0:
            in_order = len(cols) == len(self.names) and bool((cols == np.arange(len(cols))).all())
            self._cached_keys, self._cached_cols = keys, None if in_order else cols
        out = np.zeros(len(self.names) + extra)
        out[cols] = values
        out.setflags(write=False)
        self._last = (keys, vals, out) if extra == 0 else None
        return out

    # -- a block ------------------------------------------------------------------------------
    def rows(self, X: Any, grow: bool) -> np.ndarray:
        """Dense rows for a pandas DataFrame, a NumPy array or a list of dicts.

        A DataFrame's NaN cells mean "feature absent" (pandas' missing value) and read as 0;
        infinities are rejected. A NumPy array's column ``j`` is the feature named ``j``,
        as in ``river.stream.iter_array``.
        """
        if isinstance(X, np.ndarray):
            if X.ndim != 2:
                raise InvalidInput(f"expected a 2-D array of rows, got shape {X.shape}")
            names: list[Hashable] = list(range(X.shape[1]))
            values = _finite_block(X)
            if self.sq_window != FULL_WINDOW:
                _rows_in_window(np.einsum("ij,ij->i", values, values), self.sq_window)
        elif hasattr(X, "columns") and hasattr(X, "to_numpy"):
            return self._frame_rows(X, grow)
        else:
            dicts = list(X)
            if not dicts:
                return np.zeros((0, len(self.names)))
            block = [self.row(x, grow) for x in dicts]
            width = max(len(r) for r in block)
            out = np.zeros((len(block), width))
            for i, r in enumerate(block):
                out[i, : len(r)] = r
            return out
        return self._placed(values, *self._columns(names, grow), fresh=False)

    def _frame_rows(self, X: Any, grow: bool) -> np.ndarray:
        """Dense rows of a pandas DataFrame (see :meth:`rows`). A frame with the same
        column names as the last one (the blocks of one frame share its index, frames built
        alike have equal ones) reuses their column numbers; a block with every cell finite
        skips the NaN replacement."""
        try:
            values = X.to_numpy(dtype=np.float64, na_value=np.nan)
        except OverflowError:  # an int beyond any float
            raise InvalidInput("feature values too large: an int beyond any float") from None
        except (TypeError, ValueError) as exc:
            raise InvalidInput(
                f"every feature must be numeric ({exc}); encode categorical features "
                "first, e.g. with river.preprocessing.OneHotEncoder"
            ) from None
        with np.errstate(over="ignore", invalid="ignore"):  # one pass: a NaN, an infinity
            sq = np.einsum("ij,ij->i", values, values)  # or an overflowing norm shows here
        if not np.isfinite(sq).all():  # NaN means absent; the rest is refused
            values = _finite_block(np.where(np.isnan(values), 0.0, values))
            sq = np.einsum("ij,ij->i", values, values)
        if self.sq_window != FULL_WINDOW:
            _rows_in_window(sq, self.sq_window)
        columns = X.columns
        cached = self._frame_cols
        if cached is not None and cached[0] is columns:  # an Index is immutable
            cols, extra, in_order = cached[2], 0, cached[3]
        else:
            names = columns.tolist()
            if cached is not None and cached[1] == names:  # names compare as dict keys do
                cols, extra, in_order = cached[2], 0, cached[3]
            else:
                check_unique_columns(columns)  # (the cached names were)
                cols, extra = self._columns(names, grow)
                in_order = bool((cols == np.arange(cols.shape[0])).all())
            self._frame_cols = (columns, names, cols, in_order) if extra == 0 else None
        return self._placed(values, cols, extra, fresh=values.base is None, in_order=in_order)

    def _placed(
        self,
        values: np.ndarray,
        cols: np.ndarray,
        extra: int,
        fresh: bool,
        in_order: bool | None = None,
    ) -> np.ndarray:
        """A new C-ordered array with ``values``' columns at ``cols`` of a row as wide as
        the index plus ``extra`` unknown features, zeros elsewhere. ``fresh``: ``values``
        is ours alone (no caller's or frame's memory), so it may be returned as it is;
        ``in_order``: whether ``cols`` is ``0 .. len(cols) - 1``, if known."""
        width = len(self.names) + extra
        if width == values.shape[1] and cols.shape[0] == width:
            if in_order is None:
                in_order = bool((cols == np.arange(width)).all())
            if in_order:  # every column in place: no scatter
                if fresh and values.flags.c_contiguous:
                    return values
                return np.array(values, dtype=np.float64, order="C", copy=True)
        out = np.zeros((values.shape[0], width))
        out[:, cols] = values
        return out

    def _columns(self, names: list[Hashable], grow: bool) -> tuple[np.ndarray, int]:
        """Column numbers of ``names`` (unknown ones added with ``grow``, else numbered after
        the index) and how many are unknown."""
        limits = FeatureIndex.limits
        if grow and limits is not None:
            self._admit(names, limits)
        cols = []
        extra = 0
        for name in names:
            c = self._col.get(name)
            if c is None:
                if grow:
                    c = self._add(name)
                else:
                    c = len(self.names) + extra
                    extra += 1
            cols.append(c)
        return np.asarray(cols, dtype=np.intp), extra

    def late_features(self, X: Any, fresh: bool) -> bool:
        """Whether the block ``X`` (a DataFrame, a NumPy array, or dicts) has a feature
        this index does not know, other than (``fresh``: the learner has no support
        vectors yet) those of its first row.

        A block path grows the index by a new feature before the block's first row; one
        event at a time grows it at the first event that has it, and predicts that event
        with the feature outside the index. The kernel values between are then computed at
        another width, which moves their last bits; so a test-then-train that must give
        ``learn_one``'s bits takes such a block one event at a time. A fresh learner's
        first row predicts from nothing, so its features may be grown up front."""
        known = self._col
        if isinstance(X, np.ndarray):  # column j is the feature j, present in every row
            return X.ndim == 2 and not fresh and any(j not in known for j in range(X.shape[1]))
        if hasattr(X, "columns"):
            new = [j for j, name in enumerate(X.columns.tolist()) if name not in known]
            if not new or not fresh:
                return bool(new)
            first = X.iloc[0, new] if len(X) else None
            return first is not None and bool(first.isna().any())
        rows = list(X)
        lead = set(rows[0]) if rows and fresh else set()
        return any(k not in known and k not in lead for x in rows for k in x)

    # -- plain data ---------------------------------------------------------------------------
    def state(self) -> list[Any]:
        """Feature names in column order (plain data: str, int, float or bool names)."""
        return list(self.names)

    @classmethod
    def from_state(cls, names: list[Any]) -> FeatureIndex:
        """Rebuild from :meth:`state`: a list of distinct, hashable names (a list name, a
        tuple that plain data turned into a list, becomes a tuple again).

        Two equal names (``1``, ``1.0`` and ``True`` are one key) would give one feature
        two columns, and a name that is not a list of names at all has no columns.

        Raises
        ------
        StateError
            A :class:`~streamk.errors.SnapshotError` naming ``'features'`` or the entry.
        """
        from .support import StateError

        if not isinstance(names, list):
            raise StateError(
                f"state 'features' must be a list of feature names, got {type(names).__name__}"
            )
        out = [_name(n) for n in names]
        seen: dict[Hashable, int] = {}
        for i, name in enumerate(out):
            try:
                j = seen.setdefault(name, i)
            except TypeError:
                raise StateError(
                    f"state 'features[{i}]' must be a str, number, bool or list of them, "
                    f"got {names[i]!r:.60}"
                ) from None
            if j != i:
                raise StateError(
                    f"state 'features' names {names[i]!r:.60} twice (entries {j} and {i}); "
                    "each feature has one column"
                )
        return cls(out)


def _name(n: Any) -> Any:
    """A feature name from plain data: lists (tuples written out) become tuples again."""
    return tuple(_name(v) for v in n) if isinstance(n, list) else n


def _values(
    x: Mapping[Hashable, Any], vals: list[Any], window: tuple[float, float] = FULL_WINDOW
) -> np.ndarray:
    """``vals`` (the values of ``x``, in order) as float64, checked to be finite and their
    squared norm to lie in ``window`` (or be 0)."""
    try:
        values = np.fromiter(vals, dtype=np.float64, count=len(vals))
    except (TypeError, ValueError):
        raise not_numbers(x) from None
    except OverflowError:  # an int beyond any float
        raise too_large(x) from None
    # One dot: NaN/inf propagate (overflow re-checks). The method, not ``@``: a third of the
    # cost on a short row, and only finiteness is read.
    sq = values.dot(values)
    if not math.isfinite(sq):
        # None means "absent" (read as 0); NaN and infinities are errors.
        check_finite(x)
        values = np.array([0.0 if v is None else float(v) for v in vals])
        with np.errstate(over="ignore"):
            sq = values.dot(values)
            if not math.isfinite(sq):
                raise too_large(x)
    if sq > window[1] or 0.0 < sq < window[0]:
        big = largest(x)
        raise out_of_window(
            f"the event's squared norm is {sq:.3g} (largest: {big!r} = {x[big]!r:.40})", window
        )
    return values


def _finite_block(values: np.ndarray) -> np.ndarray:
    try:
        values = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput("every feature value must be a number") from None
    except OverflowError:  # an int beyond any float
        raise InvalidInput("feature values too large: an int beyond any float") from None
    if not np.isfinite(values).all():
        raise InvalidInput("feature values must be finite (found NaN or infinity)")
    return _norms_finite(values)


def _norms_finite(values: np.ndarray) -> np.ndarray:
    """``values`` (finite rows), refused where a row's squared norm overflows: its kernel
    values would be NaN or 0 against everything, and in the support set it would keep
    the norm expansion off (every later kernel row on the slow exact path) and, during the
    ``gamma="auto"`` warm-up, make the width 0."""
    if values.size:
        with np.errstate(over="ignore"):
            sq = np.einsum("ij,ij->i", values, values)
        if not np.isfinite(sq).all():
            row = int(np.flatnonzero(~np.isfinite(sq))[0])
            raise InvalidInput(
                f"feature values too large: row {row}'s squared norm overflows (largest "
                f"|value| {float(np.abs(values[row]).max()):.3g}); the kernels need it finite"
            )
    return values


def _rows_in_window(sq: np.ndarray, window: tuple[float, float]) -> None:
    """Refuse a block with a row whose squared norm ``sq`` is outside ``window`` (and not 0),
    naming the first."""
    lo, hi = window
    bad = (sq > hi) | ((sq > 0.0) & (sq < lo))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise out_of_window(f"row {row}'s squared norm is {float(sq[row]):.3g}", window)


def out_of_window(what: str, window: tuple[float, float]) -> InvalidInput:
    """The error for a row whose squared norm puts ``k(x, x)`` outside the range the
    learners compute in (:func:`~streamk.kernels.base.sqnorm_window`)."""
    lo, hi = window
    return InvalidInput(
        f"feature values out of this kernel's range: {what}, and the kernel needs it within "
        f"[{lo:.3g}, {hi:.3g}] (or 0), where k(x, x) lies within [{VALUE_RANGE[0]:g}, "
        f"{VALUE_RANGE[1]:g}]; beyond, "
        "kernel values overflow (a model no snapshot could hold). Rescale the features "
        '(scale = "standard" in the engine, river\'s preprocessing.StandardScaler in code)'
    )


def too_large(x: Mapping[Hashable, Any]) -> InvalidInput:
    """The error for an event whose squared norm overflows (:func:`_norms_finite`)."""
    big = largest(x)
    return InvalidInput(
        f"feature values too large: the event's squared norm overflows (largest: {big!r} = "
        f"{x[big]!r:.40}); the kernels need it finite"
    )


def largest(x: Mapping[Hashable, Any]) -> Hashable:
    """The feature of ``x`` with the largest value in size (an int beyond any float the
    largest of all; a value that is not a number the smallest): what a "too large" error
    names."""
    return max(x, key=lambda k: _magnitude(x[k]))


def _magnitude(v: Any) -> float:
    try:
        return abs(float(v))
    except OverflowError:  # an int beyond any float
        return math.inf
    except (TypeError, ValueError):
        return 0.0


def check_finite(x: Mapping[Hashable, Any]) -> None:
    """Refuse an event with NaN or infinite values (``None`` is an absent feature), naming
    them."""
    bad = {k: v for k, v in x.items() if v is not None and not math.isfinite(float(v))}
    if bad:
        raise InvalidInput(f"feature values must be finite, got {bad!r:.200}")


def check_unique_columns(columns: Any) -> None:
    """Refuse a DataFrame whose column names repeat: one feature in two columns, of which
    any reading (a row's dict, a name's column number) would keep one and drop the other
    in silence."""
    if not columns.is_unique:
        repeated = columns[columns.duplicated()].unique().tolist()
        raise InvalidInput(
            f"X has repeated column names {repeated!r:.200}: each feature must be one column"
        )


def frame_records(frame: Any) -> list[dict]:
    """A DataFrame's rows as events, a NaN cell an absent feature (a frame cannot leave a
    key out)."""
    check_unique_columns(frame.columns)
    return [{k: v for k, v in r.items() if v == v} for r in frame.to_dict(orient="records")]


def not_a_map(x: Any) -> InvalidInput:
    """The error for an event that is not a dict of features (a string or tree given to a
    model on vectors)."""
    return InvalidInput(
        f"this model's kernel takes a dict of numeric features, got {type(x).__name__} "
        f"({x!r:.60}); for text or trees use a string or tree kernel (e.g. Spectrum, "
        "AllSubtree)"
    )


def not_numbers(x: Mapping[Hashable, Any]) -> InvalidInput:
    """The error for an event with values that are not numbers, naming them."""
    bad = {k: v for k, v in x.items() if v is not None and not _is_number(v)}
    return InvalidInput(
        f"every feature value must be a number, got {bad!r:.200}; encode categorical "
        "features first, e.g. with river.preprocessing.OneHotEncoder"
    )


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True
