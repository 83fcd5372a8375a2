"""Running per-feature mean and variance, and events standardised with them.

:class:`FeatureStandardizer` is river's ``preprocessing.StandardScaler`` as plain data (its
updates, to the bit), event by event. A block (a NumPy array or a numeric DataFrame, as the
engine and ``streamk learn --batch-size`` hand over) is standardised in one compiled pass
(:func:`streamk._core.standardize_rows`) with the same operations in the same order, so
the same bits; the per-event code is the fallback without the compiled core and the
oracle it is tested against (``tests/test_standard_block.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import accel
from ..errors import InvalidInput
from .features import check_finite, largest, not_numbers

__all__ = ["FeatureStandardizer", "StandardBlock", "block_values"]


#: The largest feature value the running statistics take (in size). A first value of 1e200
#: was learned (mean 1e200, variance 0), and the next ordinary value's squared distance
#: from it overflowed: every later event carrying the feature was refused. Up to 1e150 the
#: squares stay finite (the on-line SVR's targets are held to it too: ``TARGET_LIMIT``).
VALUE_LIMIT = 1e150


class FeatureStandardizer:
    """Running mean and variance per feature; ``(x - mean) / std`` (0 where the variance is 0).

    The same updates as river's ``preprocessing.StandardScaler`` (so a wrapped learner
    learns exactly what ``StandardScaler() | learner`` learns), as plain data.
    """

    def __init__(self) -> None:
        self.counts: dict[Any, int] = {}
        self.means: dict[Any, float] = {}
        self.vars: dict[Any, float] = {}

    def learn_one(self, x: dict) -> None:
        self.commit(self.learned(x)[0])

    def learned(self, x: dict) -> tuple[list[tuple[Any, int, float, float]], dict]:
        """What :meth:`learn_one` would store for ``x``'s features, not stored yet, and
        ``x`` transformed with it (what ``transform_one`` would say after ``learn_one``, to
        the bit). :meth:`commit` stores it: a learner that refuses the event leaves the
        statistics as they were (one NaN learned would make every later event NaN)."""
        counts, means, vars_ = self.counts, self.means, self.vars
        updates, out = [], {}
        isfinite = math.isfinite
        try:
            for i, xi in x.items():
                if xi is None:  # absent, as the learners read it: not learned, not passed on
                    continue
                if not -VALUE_LIMIT <= xi <= VALUE_LIMIT:  # (NaN too)
                    check_finite(x)  # (NaN or an infinity: named as the learners name it)
                    raise _unlearnable(x, i)
                n = counts.get(i, 0) + 1
                old = means.get(i, 0.0)
                mean = old + (xi - old) / n
                v = vars_.get(i, 0.0)
                v = v + ((xi - old) * (xi - mean) - v) / n
                if not isfinite(mean + v):  # NaN, an infinity, or a square that overflows
                    check_finite(x)  # (NaN or an infinity: named as the learners name it)
                    raise _unlearnable(x, i)
                updates.append((i, n, mean, v))
                out[i] = (xi - mean) / v**0.5 if v else 0.0
        except TypeError:
            raise not_numbers(x) from None
        except OverflowError:  # an int beyond any float
            raise _unlearnable(x, largest(x)) from None
        return updates, out

    def commit(self, updates: list[tuple[Any, int, float, float]]) -> None:
        """Store what :meth:`learned` computed."""
        counts, means, vars_ = self.counts, self.means, self.vars
        for i, n, mean, v in updates:
            counts[i], means[i], vars_[i] = n, mean, v

    def transform_one(self, x: dict) -> dict:
        means, vars_ = self.means, self.vars
        out = {}
        try:
            for i, xi in x.items():
                if xi is None:  # absent (see learned)
                    continue
                v = vars_.get(i, 0.0)
                out[i] = (xi - means.get(i, 0.0)) / v**0.5 if v else 0.0
        except TypeError:
            raise not_numbers(x) from None
        except OverflowError:  # an int beyond any float
            raise _unlearnable(x, largest(x)) from None
        return out

    # -- a block --------------------------------------------------------------------------------
    def block(self, names: list[Any], values: np.ndarray, learn: bool) -> StandardBlock | None:
        """``values`` (rows of the features ``names``; NaN: absent) standardised row by row
        in one compiled pass: each row as ``transform_one`` says it before the row and, with
        ``learn``, as ``learned`` says it, the statistics moving row by row. Nothing is
        stored (:meth:`commit_block`). ``None`` without the compiled core, or where a value
        overflows (the per-event path then says what is wrong)."""
        core = accel.core
        if core is None or not hasattr(core, "standardize_rows"):
            return None
        counts = np.array([self.counts.get(k, 0) for k in names], dtype=np.int64)
        if learn and values.size and not np.nanmax(np.abs(values), initial=0.0) <= VALUE_LIMIT:
            return None  # (a value beyond VALUE_LIMIT: see _unlearnable)
        means = np.array([self.means.get(k, 0.0) for k in names], dtype=np.float64)
        vars_ = np.array([self.vars.get(k, 0.0) for k in names], dtype=np.float64)
        said = np.empty_like(values)
        learned = np.empty_like(values) if learn else None
        core.standardize_rows(values, counts, means, vars_, said, learned)
        if not (np.isfinite(means).all() and np.isfinite(vars_).all()):
            return None  # (a value the statistics cannot take: see _unlearnable)
        absent = np.isnan(values)
        for z in (said, learned):
            if z is not None and not (np.isfinite(z) | absent).all():
                return None
        return StandardBlock(names, values, absent, said, learned, (counts, means, vars_))

    def commit_block(self, block: StandardBlock, rows: int | None = None) -> None:
        """Store the statistics after the block's first ``rows`` rows (all of them: the
        statistics :meth:`block` left), as ``learned`` then ``commit`` row by row would."""
        names = block.names
        if rows is None:
            stats = block.stats
        else:  # the same pass over the first rows: the same bits as each row's commit
            part = self.block(names, np.ascontiguousarray(block.values[:rows]), True)
            assert part is not None  # (the rows' full block passed this pass)
            stats = part.stats
        counts, means, vars_ = stats
        for j in _first_seen(block.absent[:rows]):  # new features in the order met
            k = names[j]
            self.counts[k] = int(counts[j])
            self.means[k] = float(means[j])
            self.vars[k] = float(vars_[j])

    # -- plain data -----------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        keys = list(self.counts)
        return {
            "keys": keys,
            "counts": [self.counts[k] for k in keys],
            "means": [self.means[k] for k in keys],
            "vars": [self.vars[k] for k in keys],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FeatureStandardizer:
        out = cls()
        for k, n, m, v in zip(state["keys"], state["counts"], state["means"], state["vars"]):
            out.counts[k], out.means[k], out.vars[k] = int(n), float(m), float(v)
        return out


def _unlearnable(x: dict, name: Any) -> InvalidInput:
    """The error for a value the statistics cannot take: learned, it would make its
    feature's running mean or variance NaN or infinite, and every later value of the
    feature NaN (every later event refused) or 0 (the feature lost); or a value beyond
    :data:`VALUE_LIMIT`, after which the next ordinary value would."""
    return InvalidInput(
        f"feature {name!r} = {x[name]!r:.40} cannot be standardised: its running mean or "
        "variance would not be finite (NaN, an infinity, or a value whose square overflows; "
        f"values are refused beyond {VALUE_LIMIT:g} in size)"
    )


class StandardBlock:
    """A block standardised by :meth:`FeatureStandardizer.block`: the features' ``names``,
    the raw ``values`` and where they are ``absent`` (NaN), ``said`` (each row before it
    is learned), ``learned`` (after; ``None`` when not learned) and the statistics after
    the block (``stats``: counts, means, variances, one entry per name)."""

    __slots__ = ("names", "values", "absent", "said", "learned", "stats")

    def __init__(self, names, values, absent, said, learned, stats):
        self.names, self.values, self.absent = names, values, absent
        self.said, self.learned, self.stats = said, learned, stats

    def frame_order(self) -> list[int]:
        """The columns in the order a DataFrame built from the block's events (as dicts,
        an absent feature left out) has them, so a learner's feature index grows as from
        those dicts (:func:`_first_seen`)."""
        return _first_seen(self.absent)


def _first_seen(absent: np.ndarray) -> list[int]:
    """The columns of a block (``absent``: where its cells are NaN) in the order events
    made of its rows meet them (by the first row where each is present, then by column;
    never-present ones left out): the order a dict, or a DataFrame of dicts, first has
    them in."""
    present = ~absent
    cols = np.flatnonzero(present.any(axis=0))
    first = present[:, cols].argmax(axis=0)
    return cols[np.lexsort((cols, first))].tolist()


def block_values(X: Any) -> tuple[list[Any], np.ndarray] | None:
    """A block's feature names and float64 values (a NaN cell: absent), or ``None`` where
    the per-event path must judge it: not a NumPy array or a DataFrame, values that are not
    numbers or not finite, repeated column names. A NumPy array's column ``j`` is the
    feature ``j`` (as ``pandas.DataFrame(X)`` names it)."""
    try:
        if isinstance(X, np.ndarray):
            if X.ndim != 2 or X.dtype.kind not in "biuf":
                return None
            names: list[Any] = list(range(X.shape[1]))
            values = np.array(X, dtype=np.float64, order="C")
        elif hasattr(X, "columns") and hasattr(X, "to_numpy"):
            if not X.columns.is_unique:
                return None
            names = X.columns.tolist()
            values = np.ascontiguousarray(X.to_numpy(dtype=np.float64, na_value=np.nan))
        else:
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    if np.isinf(values).any():
        return None
    return names, values
