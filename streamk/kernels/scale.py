"""Running per-feature statistics that resolve ``gamma="auto"`` (see :class:`ScaleEstimator`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import accel
from .base import _as_2d, _pad_to

__all__ = ["ScaleEstimator"]


class ScaleEstimator:
    """Running per-feature mean and variance (Welford) of the rows a learner sees first.

    It resolves ``gamma="auto"``. Features that appear later grow the vectors; a feature
    absent from a row reads as 0, as everywhere in streamk.
    """

    def __init__(self) -> None:
        self.n = 0
        self.mean = np.zeros(0)
        self._m2 = np.zeros(0)

    def update(self, rows: np.ndarray) -> None:
        """Add a block of rows (Chan et al.'s parallel update, exact for any block size)."""
        rows = _as_2d(rows)
        d = rows.shape[1]
        if d > self.mean.shape[0]:
            self.mean = _pad_to(self.mean[None, :], d)[0]
            self._m2 = _pad_to(self._m2[None, :], d)[0]
        elif d < self.mean.shape[0]:
            rows = _pad_to(rows, self.mean.shape[0])
        m = rows.shape[0]
        if m == 0:
            return
        if m == 1:  # gamma="auto" warm-up: the same numbers without the two reductions
            bmean, bm2 = rows[0], 0.0
        else:
            bmean = rows.mean(axis=0)
            bm2 = ((rows - bmean) ** 2).sum(axis=0)
        n = self.n + m
        delta = bmean - self.mean
        self.mean = self.mean + delta * (m / n)
        self._m2 = self._m2 + bm2 + delta**2 * (self.n * m / n)
        self.n = n

    def update_each(self, rows: np.ndarray) -> None:
        """Fold ``rows`` one at a time: the same numbers, to the bit, as ``update(row)`` for
        each row in turn (which a learner's warm-up must reproduce), in one compiled call."""
        rows = _as_2d(rows)
        if rows.shape[0] == 0:
            return
        if accel.core is None:
            for row in rows:
                self.update(row[None, :])
            return
        # The first row grows the vectors to the rows' width if needed; update() leaves
        # fresh arrays of its own, which the compiled fold may then change in place.
        self.update(rows[:1])
        rows = np.ascontiguousarray(_pad_to(rows[1:], self.mean.shape[0]), dtype=np.float64)
        self.n = accel.core.welford_each(rows, self.n, self.mean, self._m2)

    @property
    def variance(self) -> np.ndarray:
        """Population variance per feature (zeros before two rows)."""
        if self.n < 2:
            return np.zeros_like(self.mean)
        return self._m2 / self.n

    def copy(self) -> ScaleEstimator:
        """An independent estimator with the same statistics (``from_state(state())`` in
        one copy of each vector)."""
        est = ScaleEstimator()
        est.n = self.n
        est.mean = np.array(self.mean, dtype=np.float64)
        est._m2 = np.array(self._m2, dtype=np.float64)
        return est

    def state(self) -> dict[str, Any]:
        return {"n": self.n, "mean": self.mean.copy(), "m2": self._m2.copy()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ScaleEstimator:
        est = cls()
        est.n = int(state["n"])
        est.mean = np.asarray(state["mean"], dtype=np.float64).copy()
        est._m2 = np.asarray(state["m2"], dtype=np.float64).copy()
        return est
