"""SupportSet: the dual representation ``f(x) = sum_i coef[i] k(x_i, x)`` in growable NumPy buffers.

Rows, coefficients (one column per output: a binary margin, one column per class, ...),
cached ``k(x_i, x_i)`` and squared norms, and insertion ids live in contiguous buffers
whose capacity doubles, so appending is amortised O(d) and a kernel row against the whole
set is one vectorised ``gram`` call.

Every change to the set goes through a method here (``append``, ``remove``, ``replace``,
``add_coef``, ``scale_coef``). That single seam lets a :class:`BlockTracker` keep the
kernel block of a micro-batch up to date as the set changes, which is how ``learn_many``
reproduces ``learn_one`` exactly while computing ``K(block, support)`` once. It also lets
the set keep its own Gram matrix current (``keep_gram=True``) for learners and budget
policies that need ``K(S, S)``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import accel
from ..errors import ConfigError, SnapshotError
from ..kernels import RBF, Kernel, kernel_from_spec
from .eventpass import SUPPORT_COUNTERS
from .tracking import BlockTracker, pad_cols, rbf_rows

#: The counters :data:`~streamk.learners.eventpass.SUPPORT_COUNTERS` holds (outside
#: ``__dict__`` when it is the compiled base)
COUNTERS = ("n", "width", "next_id", "rows_version", "version", "_sq_max")

__all__ = ["SupportSet", "BlockTracker"]


def _sqnorm(A: np.ndarray) -> np.ndarray:
    return accel.sqnorms(A)


def _row_sqnorm(row: np.ndarray) -> float:
    """``||row||^2`` of a stored row: one formula, so a restored set is bit-identical.

    A contiguous float64 row (every row :meth:`SupportSet.append` sees from a learner)
    goes to the compiled sum directly, without :func:`~streamk.accel.row_sqnorm`'s copy
    check; the sum is the same one.
    """
    core = accel.core
    if core is not None and row.flags.c_contiguous and row.dtype == np.float64:
        return float(core.sqnorms(row[None, :])[0])
    return accel.row_sqnorm(row)


def _as_vector(a: np.ndarray | Any) -> np.ndarray:
    """``a`` as a contiguous 1-D float64 array; such an array is returned as it is.

    The per-mistake path receives exactly such arrays (a learner's row and targets), so
    the common case costs four attribute checks instead of ``asarray`` and ``ravel``.
    Anything else is converted as before (``ravel`` copies a strided row: kernels'
    ``diag`` may round differently on strided data).
    """
    if type(a) is np.ndarray and a.ndim == 1 and a.dtype == np.float64 and a.flags.c_contiguous:
        return a
    return np.asarray(a, dtype=np.float64).ravel()


class SupportSet(SUPPORT_COUNTERS):
    """Support vectors with their coefficients.

    Parameters
    ----------
    kernel
        A resolved :class:`~streamk.kernels.Kernel`.
    n_outputs
        Number of coefficient columns.
    keep_gram
        Maintain ``K(S, S)`` incrementally (O(n d) per change) for callers that need it.
    capacity
        Initial number of row slots; doubles when full.
    """

    def __init__(
        self, kernel: Kernel, n_outputs: int = 1, keep_gram: bool = False, capacity: int = 16
    ):
        capacity = max(int(capacity), 1)
        self._kernel = kernel
        self.keep_gram = keep_gram
        self.n = 0
        self.width = 0
        self.next_id = 0
        self.rows_version = 0  # changes whenever a stored row or the kernel changes
        self.version = 0  # changes whenever f changes (rows, kernel or coefficients) or a
        # buffer is replaced (the compiled per-event path checks its views by this alone)
        self._sq_max = 0.0  # largest squared norm ever stored (never lowered: a safe bound)
        self._X = np.zeros((capacity, 0))
        self._coef = np.zeros((capacity, n_outputs))
        self._kdiag = np.zeros(capacity)
        self._sq = np.zeros(capacity)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._G = np.zeros((capacity, capacity)) if keep_gram else None
        self._trackers: list[BlockTracker] = []

    # -- views --------------------------------------------------------------------------------
    @property
    def kernel(self) -> Kernel:
        return self._kernel

    @property
    def X(self) -> np.ndarray:
        """Support rows, ``(n, width)`` (a view)."""
        return self._X[: self.n, : self.width]

    @property
    def coef(self) -> np.ndarray:
        """Coefficients, ``(n, n_outputs)`` (a view)."""
        return self._coef[: self.n]

    @property
    def kdiag(self) -> np.ndarray:
        """``k(x_i, x_i)`` for each support row (a view)."""
        return self._kdiag[: self.n]

    @property
    def sqnorm(self) -> np.ndarray:
        """``||x_i||^2`` for each support row (a view)."""
        return self._sq[: self.n]

    @property
    def ids(self) -> np.ndarray:
        """Insertion ids (increasing with insertion time) of each support row (a view)."""
        return self._ids[: self.n]

    @property
    def gram_matrix(self) -> np.ndarray:
        """``K(S, S)``, ``(n, n)`` (a view); needs ``keep_gram=True``."""
        if self._G is None:
            raise RuntimeError("this SupportSet was built with keep_gram=False")
        return self._G[: self.n, : self.n]

    @property
    def n_outputs(self) -> int:
        return self._coef.shape[1]

    @property
    def capacity(self) -> int:
        return self._X.shape[0]

    def __len__(self) -> int:
        return self.n

    def oldest(self) -> int:
        """Slot of the support row inserted first."""
        return int(self._ids[: self.n].argmin())  # the method: no dispatch through np.argmin

    # -- kernel evaluation ----------------------------------------------------------------------
    def kernel_block(self, Q: np.ndarray, q_sqnorm: np.ndarray | None = None) -> np.ndarray:
        """``K(Q, S)`` in one call, ``(len(Q), n)``."""
        Q = np.atleast_2d(Q)
        w = max(Q.shape[1], self.width)
        if w <= self._X.shape[1]:
            S = self._X[: self.n, :w]
        else:
            S = pad_cols(self._X[: self.n], w)
        return self._kernel.gram(Q, S, a_sqnorm=q_sqnorm, b_sqnorm=self._sq[: self.n])

    def kernel_row(self, row: np.ndarray) -> np.ndarray:
        """``K(row, S)`` for one row: the per-event hot path.

        For an RBF kernel it is one matrix-vector product over the cached squared norms
        (no block allocation); other kernels, and rows too large for the expansion to be
        exact to 1e-10 (see :class:`~streamk.kernels.RBF`), take :meth:`kernel_block`.
        """
        n = self.n
        if n and type(self._kernel) is RBF and row.shape[0] <= self._X.shape[1]:
            if accel.core is not None and row.flags.c_contiguous and row.dtype == np.float64:
                k = accel.core.rbf_row(self._X, self._sq, n, row, self._sq_max, self._kernel.gamma)
                if k is not None:
                    return k
            X = self._X[:n, : row.shape[0]]
            k = rbf_rows(self._kernel, X, self._sq[:n], self._sq_max, row, float(row @ row))
            if k is not None:
                return k
        return self.kernel_block(row[None, :])[0]

    def decision(self, Q: np.ndarray) -> np.ndarray:
        """``K(Q, S) @ coef``, ``(len(Q), n_outputs)``."""
        Q = np.atleast_2d(Q)
        if self.n == 0:
            return np.zeros((Q.shape[0], self.n_outputs))
        return self.kernel_block(Q) @ self._coef[: self.n]

    def set_kernel(self, kernel: Kernel) -> None:
        """Swap the kernel (e.g. while ``gamma="auto"`` is still being estimated)."""
        if self._trackers:
            raise RuntimeError("cannot change the kernel while a block is being tracked")
        self._kernel = kernel
        self.rows_version += 1
        self.version += 1
        if self.n:
            X = self.X
            self._kdiag[: self.n] = kernel.diag(X)
            if self._G is not None:
                self._G[: self.n, : self.n] = self._own_gram()

    def _own_gram(self) -> np.ndarray:
        """``K(S, S)`` afresh: compiled and single-threaded for an RBF float set (a kept Gram
        is rebuilt on every ``gamma="auto"`` step, where BLAS threads only contend), else
        one ``gram`` call."""
        from ..budget.compiled import support_gram  # the policies import this module

        G = support_gram(self)
        if G is None:
            X = self.X
            G = self._kernel.gram(X, X, a_sqnorm=self.sqnorm, b_sqnorm=self.sqnorm)
        return G

    # -- growth -------------------------------------------------------------------------------
    #: The most rows the set's budget policy ever holds at once (its budget, plus the row
    #: an insertion appends before its removal or merge); ``None``: no budget. Growth
    #: doubles the buffers up to it, and goes straight to it once half of it is needed,
    #: never past it unless a caller needs more: a fresh ``Merge(200)`` model reserving 200
    #: rows, then 201, took 200 and then 400 (two allocations, the second past the C
    #: library's mmap threshold for 50 features); it now takes 201 once.
    rows_limit: int | None = None

    def _grow_rows(self, needed: int) -> None:
        cap = self.capacity
        if needed <= cap:
            return
        limit = self.rows_limit
        if limit is None:
            new = max(needed, 2 * cap)
        else:
            new = max(needed, limit if 2 * needed > limit else min(2 * cap, limit))
        self.version += 1  # new buffers: a compiled path's views of the old ones are stale
        self._X = _grow(self._X, new)
        self._coef = _grow(self._coef, new)
        self._kdiag = _grow(self._kdiag, new)
        self._sq = _grow(self._sq, new)
        self._ids = _grow(self._ids, new)
        if self._G is not None:
            G = np.zeros((new, new))
            G[:cap, :cap] = self._G
            self._G = G
        for t in self._trackers:
            t.grow(new)

    def reserve(self, rows: int, width: int) -> None:
        """Room for ``rows`` support rows of ``width`` features (contents unchanged)."""
        self._grow_rows(rows)
        self._grow_cols(width)

    def _grow_cols(self, width: int) -> None:
        if width > self._X.shape[1]:
            self.version += 1  # as in _grow_rows
            self._X = pad_cols(self._X, max(width, 2 * self._X.shape[1]))

    def _grow_width(self, width: int) -> None:
        self._grow_cols(width)
        self.width = max(self.width, width)

    def add_outputs(self, count: int = 1) -> None:
        """Append ``count`` coefficient columns, all zero: ``coef @ [I | 0]`` in one copy.

        The kept columns are copied as ``coef + 0.0``, so a ``-0.0`` becomes ``+0.0`` as in
        that product (a new class's snapshot has the same bytes either way), in O(capacity
        C) where the product costs O(capacity C^2).
        """
        p = self._coef.shape[1]
        coef = np.zeros((self.capacity, p + count))
        np.add(self._coef, 0.0, out=coef[:, :p])
        self._coef = coef
        self.version += 1
        for t in self._trackers:
            t.add_outputs(count)

    def remap_outputs(self, M: np.ndarray) -> None:
        """Replace the coefficient columns by ``coef @ M`` (e.g. binary to one-vs-rest)."""
        M = np.asarray(M, dtype=np.float64)
        if M.ndim != 2 or M.shape[0] != self.n_outputs:
            raise ValueError(f"remap matrix must have {self.n_outputs} rows, got shape {M.shape}")
        self._coef = self._coef @ M
        self.version += 1
        for t in self._trackers:
            t.remap(M)

    # -- changes (the only way the set changes) -----------------------------------------------
    def append(self, row: np.ndarray, coef: np.ndarray, k_row: np.ndarray | None = None) -> int:
        """Add a support row with its coefficients; returns its slot.

        ``k_row`` is ``K(row, S)`` before the insertion, if the caller already has it
        (used only to keep the Gram matrix current).
        """
        row = _as_vector(row)
        coef = _as_vector(coef)
        slot = self.n
        if self._G is not None and k_row is None and slot:
            k_row = self.kernel_row(row)
        if slot >= self._X.shape[0]:
            self._grow_rows(slot + 1)
        self._put(slot, row, coef)
        self._ids[slot] = self.next_id
        self.next_id += 1
        self.rows_version += 1
        self.version += 1
        if self._G is not None:
            if slot:
                self._G[slot, :slot] = k_row
                self._G[:slot, slot] = k_row
            self._G[slot, slot] = self._kdiag[slot]
        self.n += 1
        for t in self._trackers:
            t.add_column(self._kernel, slot, row, self._sq[slot], coef)
        return slot

    def remove(self, slot: int) -> None:
        """Remove the row in ``slot``; the last row moves into its place."""
        last = self.n - 1
        if not 0 <= slot <= last:
            raise IndexError(f"slot {slot} out of range for {self.n} support rows")
        for t in self._trackers:
            t.drop(slot, self._coef[slot])
            t.move(last, slot)
        if slot != last:
            self._X[slot] = self._X[last]
            self._coef[slot] = self._coef[last]
            self._kdiag[slot] = self._kdiag[last]
            self._sq[slot] = self._sq[last]
            self._ids[slot] = self._ids[last]
            if self._G is not None:
                self._move_gram(last, slot)
        self._X[last] = 0.0
        self._coef[last] = 0.0
        self.n -= 1
        self.rows_version += 1
        self.version += 1

    def _move_gram(self, last: int, slot: int) -> None:
        """Kept Gram row and column ``last`` into ``slot``, over the live ``last + 1`` rows only.

        ``K(S, S)`` is kept exactly symmetric (every write puts the same row in both places),
        so the column is written from the contiguous row instead of read with a stride.
        """
        G = self._G
        n = last + 1
        G[slot, :n] = G[last, :n]
        G[slot, slot] = G[last, last]
        G[:n, slot] = G[slot, :n]

    def replace(
        self,
        slot: int,
        row: np.ndarray,
        coef: np.ndarray,
        new_id: bool = False,
        k_row: np.ndarray | None = None,
    ) -> None:
        """Put a new row and coefficients into ``slot`` (e.g. two rows merged into one).

        With ``new_id`` the row counts as newly inserted (it gets the next insertion id):
        removing the oldest row and appending costs one slot write instead of moving the
        last row and its tracked kernel column. ``k_row`` is ``K(row, S)`` before the write,
        if the caller already has it (used only to keep the Gram matrix current; its entry
        for ``slot`` is replaced by ``k(row, row)``).
        """
        row = _as_vector(row)
        coef = _as_vector(coef)
        for t in self._trackers:
            t.drop(slot, self._coef[slot])
        self._put(slot, row, coef)
        if new_id:
            self._ids[slot] = self.next_id
            self.next_id += 1
        self.rows_version += 1
        self.version += 1
        if self._G is not None:
            if k_row is None or len(k_row) != self.n:
                k = self.kernel_row(row)  # the row is in place: its own entry is k(row, row)
            else:
                k = np.array(k_row, dtype=np.float64)
                k[slot] = self._kdiag[slot]
            self._G[slot, : self.n] = k
            self._G[: self.n, slot] = k
        for t in self._trackers:
            t.add_column(self._kernel, slot, row, self._sq[slot], coef)

    def _put(self, slot: int, row: np.ndarray, coef: np.ndarray) -> None:
        """Write ``row`` (1-D float64) and ``coef`` into ``slot`` with its cached norm and
        ``k(row, row)``: the part :meth:`append` and :meth:`replace` share (counters, ids,
        Gram and trackers are theirs)."""
        w = row.shape[0]
        if w > self.width:
            self._grow_width(w)
        X = self._X
        X[slot, :w] = row
        if w < X.shape[1]:  # absent trailing features read as 0
            X[slot, w:] = 0.0
        self._coef[slot] = coef
        sq = _row_sqnorm(row)
        self._sq[slot] = sq
        if sq > self._sq_max:
            self._sq_max = sq
        self._kdiag[slot] = self._kernel.diag_one(row)

    def after_compiled_changes(self, n: int, next_id: int, width: int, sq_max: float) -> None:
        """Counters after :func:`streamk.learners.fastpass.perceptron_pass` changed the buffers
        in place (rows appended or replaced): the one change that does not go through the methods
        above, because it runs in compiled code."""
        self.n = n
        self.next_id = next_id
        self.width = max(self.width, width)
        self._sq_max = max(self._sq_max, sq_max)
        self.rows_version += 1
        self.version += 1

    def add_coef(self, slot: int, delta: np.ndarray | float) -> None:
        """``coef[slot] += delta``."""
        delta = np.asarray(delta, dtype=np.float64)
        self._coef[slot] += delta
        self.version += 1
        for t in self._trackers:
            t.add_coef(slot, delta)

    def add_coefs(self, D: np.ndarray) -> None:
        """``coef[:n] += D`` for every row at once (e.g. a projection onto the set)."""
        D = np.asarray(D, dtype=np.float64).reshape(self.n, self.n_outputs)
        self._coef[: self.n] += D
        self.version += 1
        for t in self._trackers:
            t.add_coefs(D)

    def scale_coef(self, factor: float) -> None:
        """Multiply every coefficient by ``factor`` (e.g. the Forgetron's shrink)."""
        self._coef[: self.n] *= factor
        self.version += 1
        for t in self._trackers:
            t.scale(factor)

    # -- micro-batches ------------------------------------------------------------------------
    @contextlib.contextmanager
    def track(self, Q: np.ndarray) -> Iterator[BlockTracker]:
        """Track a block: ``K(Q, S)`` computed once, then kept current through every change."""
        Q = np.atleast_2d(np.asarray(Q, dtype=np.float64))
        sq = _sqnorm(Q)
        K = np.zeros((Q.shape[0], self.capacity))
        if self.n:
            K[:, : self.n] = self.kernel_block(Q, sq)
        F = K[:, : self.n] @ self._coef[: self.n]
        tracker = BlockTracker(Q, sq, K, F, self._kernel.max_abs, self._coef[: self.n])
        self._trackers.append(tracker)
        try:
            yield tracker
        finally:
            self._trackers.remove(tracker)

    # -- plain data ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Plain data: kernel spec, rows, coefficients, ids, and the buffers' geometry.

        ``buffers`` (row and column capacity, the largest squared norm ever stored) is not
        part of ``f``, but the compiled paths decide on it (an append into a full buffer,
        an expansion that may not be exact, falls back to the NumPy path, which rounds
        differently): restored with it, a set continues bit for bit as the original.
        """
        return {
            "kernel": self._kernel.to_spec(),
            "X": self.X.copy(),
            "coef": self.coef.copy(),
            "ids": self.ids.copy(),
            "next_id": self.next_id,
            "keep_gram": self.keep_gram,
            "buffers": {
                "rows": self.capacity,
                "cols": int(self._X.shape[1]),
                "sq_max": float(self._sq_max),
            },
            "cache": kernel_cache(self),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SupportSet:
        """Rebuild from :meth:`state`; shapes are checked before anything is allocated.

        Snapshot loading has already bounded what these shapes imply
        (``streamk.snapshot.implied``); the checks here keep direct callers from
        building a set whose buffers disagree.
        """
        coef, ids, next_id = check_support_state(state)
        X = _float_matrix(state["X"], "support.X", rows=coef.shape[0])
        n = X.shape[0]
        rows, cols, sq_max = _buffers(state.get("buffers"), n, X.shape[1])
        try:
            kernel = kernel_from_spec(state["kernel"])
        except (ConfigError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise StateError(f"state 'support.kernel' is not a kernel spec: {exc}") from exc
        s = cls(kernel, coef.shape[1], state["keep_gram"], rows)
        s._grow_cols(cols)
        s._grow_width(X.shape[1])
        s._X[:n, : X.shape[1]] = X
        s._coef[:n] = coef
        s._sq[:n] = [_row_sqnorm(r) for r in s._X[:n]]
        s._sq_max = max(sq_max, float(s._sq[:n].max(initial=0.0)))  # never below the rows
        kdiag, gram = cached_kernel_values(state.get("cache"), ids, s._G is not None)
        s._kdiag[:n] = kdiag if kdiag is not None else (s._kernel.diag(X) if n else 0.0)
        s._ids[:n] = ids
        s.n = n
        s.next_id = next_id
        if s._G is not None and n:
            s._G[:n, :n] = gram if gram is not None else s._kernel.gram(X, X)
        return s

    def __getstate__(self) -> dict[str, Any]:
        if self._trackers:
            raise RuntimeError("cannot pickle a SupportSet while a block is being tracked")
        state = self.__dict__.copy()
        state.update((name, getattr(self, name)) for name in COUNTERS)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():  # (setattr: the C base's counters are no dict keys)
            setattr(self, name, value)


class StateError(SnapshotError, ValueError):
    """A learner state no learner writes: a key missing, of the wrong type or out of range.

    A :class:`~streamk.errors.SnapshotError` (what ``from_state`` raises for a state it
    rejects, named by the key's path, e.g. ``'support.next_id'``) and, as before these
    checks had a class of their own, a ``ValueError``.
    """


#: Ids and ``next_id`` are int64 in a support set's buffers.
ID_LIMIT = 2**63
_SUPPORT_KEYS = ("kernel", "X", "coef", "ids", "next_id", "keep_gram")


def check_support_state(state: Any, path: str = "support") -> tuple[np.ndarray, np.ndarray, int]:
    """``(coef, ids, next_id)`` of a support-set state (vectors or objects), checked.

    What every support set writes: a map with ``kernel, X, coef, ids, next_id, keep_gram``;
    ``coef`` a finite 2-D float array (a non-finite coefficient makes every prediction
    NaN or infinite), one row per id and at least one column when there are rows; ``ids``
    distinct integers in ``[0, next_id)`` (each support vector gets ``next_id`` and the
    counter moves on: age-based policies and model merging rely on it); ``next_id`` an int
    in ``[0, 2**63)``; ``keep_gram`` a bool.

    Raises
    ------
    StateError
        Naming the key (``'support.next_id'``) and what it must be.
    """
    if not isinstance(state, dict):
        raise StateError(f"state {path!r} must be a map, got {type(state).__name__}")
    for key in _SUPPORT_KEYS:
        if key not in state:
            raise StateError(f"state {path!r} is missing {key!r}")
    coef = _float_matrix(state["coef"], f"{path}.coef")
    raw = state["ids"]
    try:
        ids = np.asarray(raw)
    except (TypeError, ValueError, OverflowError):
        ids = np.asarray([None])
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise StateError(f"state '{path}.ids' must be a list of integers, got {_brief(raw)}")
    ids = ids.astype(np.int64) if ids.size == 0 or ids.max() < ID_LIMIT else None
    if ids is None or (ids.size and ids.min() < 0):
        raise StateError(f"state '{path}.ids' must be integers in [0, 2**63)")
    if ids.shape[0] != coef.shape[0] or (ids.size and coef.shape[1] < 1):
        raise StateError(
            f"state {path!r} has {coef.shape[0]} coefficient rows of width "
            f"{coef.shape[1]} for {ids.shape[0]} ids; it needs one row, of at least one "
            "column, per id"
        )
    if np.unique(ids).size != ids.size:
        raise StateError(f"state '{path}.ids' holds an id twice; every support vector has its own")
    next_id = state["next_id"]
    if isinstance(next_id, bool) or not isinstance(next_id, (int, np.integer)):
        raise StateError(f"state '{path}.next_id' must be an int, got {_brief(next_id)}")
    floor = int(ids.max()) + 1 if ids.size else 0
    if not floor <= next_id < ID_LIMIT:
        raise StateError(
            f"state '{path}.next_id' must be above every id ({floor} or more) and below "
            f"2**63, got {next_id}"
        )
    if not isinstance(state["keep_gram"], bool):
        raise StateError(
            f"state '{path}.keep_gram' must be a bool, got {_brief(state['keep_gram'])}"
        )
    return coef, ids, int(next_id)


def _float_matrix(value: Any, path: str, rows: int | None = None) -> np.ndarray:
    """``value`` as a finite 2-D float64 array (of ``rows`` rows if given, checked before
    its values are), else a :class:`StateError` naming ``path``."""
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise StateError(
            f"state {path!r} must be a 2-D array of numbers, got {_brief(value)}"
        ) from None
    if a.ndim != 2:
        raise StateError(f"state {path!r} must be a 2-D array of numbers, got shape {a.shape}")
    if rows is not None and a.shape[0] != rows:
        raise StateError(
            f"state {path!r} has {a.shape[0]} rows for {rows} coefficient rows and ids; "
            "a support set has one of each per support vector"
        )
    if not np.isfinite(a).all():
        raise StateError(f"state {path!r} must be finite (it holds NaN or infinity)")
    return a


def _brief(value: Any) -> str:
    """A short description of a value for a message: its type, and itself if short."""
    text = repr(value)
    return type(value).__name__ + (f" {text}" if len(text) <= 40 else "")


def kernel_cache(support: Any) -> dict[str, Any]:
    """The kernel values a support set (of vectors or objects) keeps, with the ids of the
    rows they belong to: its state's ``cache``.

    ``k(x_i, x_i)`` and the kept ``K(S, S)`` were computed as the rows arrived, by whichever
    path took each event (and, for a pair, from whichever row came second); ``from_state``
    computing them afresh rounds some differently in the last bit, and a resweep or a
    threshold then moves.
    """
    cache: dict[str, Any] = {"ids": support.ids.copy(), "kdiag": support.kdiag.copy()}
    if support._G is not None:  # kept (keep_gram, unless a learner dropped it: novelty)
        cache["gram"] = support.gram_matrix.copy()
    return cache


def _buffers(spec: Any, n: int, width: int) -> tuple[int, int, float]:
    """``(rows, cols, sq_max)`` for :meth:`SupportSet.from_state` from the state's optional
    ``buffers`` map (none in snapshots written before it existed: the tightest buffers, as
    then), checked; capacities never below what the rows need.

    Snapshot loading has already bounded the capacities (``streamk.snapshot.implied``).
    """
    if spec is None:
        return n, width, 0.0
    if not isinstance(spec, dict) or set(spec) != {"rows", "cols", "sq_max"}:
        raise StateError("support-set buffers must be a map of rows, cols and sq_max")
    rows, cols, sq_max = spec["rows"], spec["cols"], spec["sq_max"]
    for name, value in (("rows", rows), ("cols", cols)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise StateError(f"support-set buffers.{name} must be an int >= 0, got {value!r}")
    if isinstance(sq_max, bool) or not isinstance(sq_max, (int, float)):
        raise StateError(f"support-set buffers.sq_max must be a number, got {sq_max!r}")
    if not (math.isfinite(sq_max) and sq_max >= 0.0):
        raise StateError(f"support-set buffers.sq_max must be finite and >= 0, got {sq_max!r}")
    return max(rows, n), max(cols, width), float(sq_max)


def cached_kernel_values(
    spec: Any, ids: np.ndarray, keep_gram: bool
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(kdiag, gram)`` for :meth:`SupportSet.from_state` from the state's optional
    ``cache`` map, or ``None`` for what must be computed afresh: snapshots written before
    the map existed, and states whose rows were edited since (consolidation, merging and
    adoption rebuild a set from other rows: the cached ids no longer match)."""
    if spec is None:
        return None, None
    if not isinstance(spec, dict) or not {"ids", "kdiag"} <= spec.keys():
        raise StateError("support-set cache must be a map with ids and kdiag")
    n = len(ids)
    cached = np.asarray(spec["ids"])
    if cached.shape != (n,) or not np.array_equal(cached, ids):
        return None, None
    kdiag = _finite(spec["kdiag"], (n,), "kdiag")
    gram = spec.get("gram")
    if not keep_gram:
        return kdiag, None
    return kdiag, None if gram is None else _finite(gram, (n, n), "gram")


def _finite(value: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    """``value`` as a float64 array of ``shape`` with finite entries (else ``ValueError``)."""
    a = np.asarray(value)
    if a.shape != shape or a.dtype != np.float64 or not np.isfinite(a).all():
        raise StateError(f"support-set cache.{name} must be finite float64 of shape {shape}")
    return a


def _grow(a: np.ndarray, rows: int) -> np.ndarray:
    out = np.zeros((rows, *a.shape[1:]), dtype=a.dtype)
    out[: a.shape[0]] = a
    return out
