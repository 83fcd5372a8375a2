"""Training windows for consolidation: the recent labelled events as dense rows and labels."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError, SnapshotError
from ..randomness import generator_from_state, generator_state
from .limits import DEFAULT_WINDOW_LIMITS, WindowLimits

__all__ = ["TrainingWindow"]

_LABEL_TYPES = (bool, int, float, str)


class TrainingWindow:
    """A bounded buffer of labelled rows: ``"sliding"`` (the last ``size``) or ``"reservoir"``.

    The reservoir is Vitter's Algorithm R (a uniform sample of everything seen), seeded by
    ``seed`` so that replays keep the same sample. Rows live in one capacity-``size`` array
    whose width grows with the feature index (absent features read as 0): memory O(size d).
    """

    def __init__(self, size: int = 1000, kind: str = "sliding", seed: int | None = 0):
        self._check_params(size, kind, seed)
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

    @staticmethod
    def _check_params(size: Any, kind: Any, seed: Any) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"window_size must be a positive int, got {size!r}")
        if kind not in ("sliding", "reservoir"):
            raise ConfigError(f"window must be 'sliding' or 'reservoir', got {kind!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ConfigError(f"window seed must be a non-negative int or None, got {seed!r}")

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

    # -- plain data (snapshots) -----------------------------------------------------------------
    def state(self, limits: WindowLimits = DEFAULT_WINDOW_LIMITS) -> dict[str, Any]:
        """The window as plain data: held rows in their slots, labels, arrival order, RNG.

        Rows keep the buffer's width (zero columns included) so that a restored window hands
        the solver bit-identical arrays. Raises :class:`SnapshotError` if a reader with
        ``limits`` would refuse the result (never write a snapshot that cannot be loaded).
        """
        width = int(self._X.shape[1])
        self._check_size(self.size, width, limits)
        return {
            "size": self.size,
            "kind": self.kind,
            "seed": self.seed,
            "n": self.n,
            "seen": self.seen,
            "width": width,
            "X": self._X[: self.n].copy(),
            "y": [_plain_label(v) for v in self._y[: self.n]],
            "t": self._t[: self.n].copy(),
            "rng": generator_state(self._rng),
        }

    @classmethod
    def from_state(
        cls, state: dict[str, Any], limits: WindowLimits = DEFAULT_WINDOW_LIMITS
    ) -> TrainingWindow:
        """Rebuild a window from :meth:`state`; every declared size is checked first."""
        if not isinstance(state, dict):
            raise SnapshotError("window state must be a map")
        size, kind, seed = state.get("size"), state.get("kind"), state.get("seed")
        n, seen, width = state.get("n"), state.get("seen"), state.get("width")
        try:
            cls._check_params(size, kind, seed)
        except ConfigError as exc:
            raise SnapshotError(f"window state: {exc}") from None
        for name, value in (("n", n), ("seen", seen), ("width", width)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SnapshotError(f"window state: {name} must be a non-negative int")
        cls._check_size(size, width, limits)
        if seen >= 1 << 63 or n != min(seen, size):
            raise SnapshotError(
                f"window state: holds {n} rows of {size} after {seen} offered (must be min)"
            )
        X, y, t = state.get("X"), state.get("y"), state.get("t")
        if not isinstance(X, np.ndarray) or X.dtype != np.float64 or X.shape != (n, width):
            raise SnapshotError(f"window state: X must be a float64 array of shape ({n}, {width})")
        if not isinstance(t, np.ndarray) or t.dtype != np.int64 or t.shape != (n,):
            raise SnapshotError(f"window state: t must be an int64 array of shape ({n},)")
        if n and (t.min() < 0 or t.max() >= seen):
            raise SnapshotError("window state: arrival indices outside [0, seen)")
        if not isinstance(y, list) or len(y) != n:
            raise SnapshotError(f"window state: y must be a list of {n} labels")
        if not all(isinstance(v, _LABEL_TYPES) for v in y):
            raise SnapshotError("window state: labels must be bool, int, float or str")
        window = cls(size, kind, seed)  # allocates size labels and indices: bounded above
        window._rng = generator_from_state(state.get("rng"), "window state: rng")
        window._X = np.zeros((size, width))
        window._X[:n] = X
        window._y[:n] = y
        window._t[:n] = t
        window.n, window.seen = n, seen
        return window

    @staticmethod
    def _check_size(size: int, width: int, limits: WindowLimits) -> None:
        if size > limits.max_rows or width > limits.max_width:
            raise SnapshotError(
                f"window of {size} rows x {width} features exceeds the load limits "
                f"(max_rows={limits.max_rows}, max_width={limits.max_width}); use a smaller "
                "consolidate_window"
            )
        need = limits.window_bytes(size, width)
        if need > limits.max_bytes:
            raise SnapshotError(
                f"window of {size} rows x {width} features needs {need} bytes, above "
                f"max_bytes={limits.max_bytes}; use a smaller consolidate_window"
            )


def _plain_label(v: Any) -> Any:
    """A label as a Python scalar (NumPy scalars from array-backed events included)."""
    return v.item() if isinstance(v, np.generic) else v
