"""Training windows for consolidation: the recent labelled events as dense rows and labels."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["TrainingWindow"]


class TrainingWindow:
    """A bounded buffer of labelled rows: ``"sliding"`` (the last ``size``) or ``"reservoir"``.

    The reservoir is Vitter's Algorithm R (a uniform sample of everything seen), seeded by
    ``seed`` so that replays keep the same sample. Rows live in one capacity-``size`` array
    whose width grows with the feature index (absent features read as 0): memory O(size d).
    """

    def __init__(self, size: int = 1000, kind: str = "sliding", seed: int | None = 0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"window_size must be a positive int, got {size!r}")
        if kind not in ("sliding", "reservoir"):
            raise ConfigError(f"window must be 'sliding' or 'reservoir', got {kind!r}")
        self.size = size
        self.kind = kind
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._X = np.zeros((size, 0))
        self._y = np.empty(size, dtype=object)
        self._t = np.zeros(size, dtype=np.int64)  # arrival index, to return rows in order
        self.n = 0  # rows held
        self.seen = 0  # rows offered

    def _slot(self) -> int | None:
        if self.n < self.size:
            self.n += 1
            return self.n - 1
        if self.kind == "sliding":
            return int(self.seen % self.size)
        j = int(self._rng.integers(self.seen + 1))
        return j if j < self.size else None

    def add(self, row: np.ndarray, y: Any) -> None:
        """Offer one labelled row."""
        slot = self._slot()
        if slot is not None:
            w = row.shape[0]
            if w > self._X.shape[1]:
                grown = np.zeros((self.size, max(w, 2 * self._X.shape[1])))
                grown[:, : self._X.shape[1]] = self._X
                self._X = grown
            self._X[slot, :w] = row
            self._X[slot, w:] = 0.0
            self._y[slot] = y
            self._t[slot] = self.seen
        self.seen += 1

    def add_many(self, rows: np.ndarray, ys: list[Any]) -> None:
        for row, y in zip(rows, ys):
            self.add(row, y)

    def data(self) -> tuple[np.ndarray, list[Any]]:
        """Copies of the rows ``(n, width)`` and labels, oldest first."""
        order = np.argsort(self._t[: self.n], kind="stable")
        return self._X[order].copy(), list(self._y[order])
