"""A support set of strings or trees, for kernels that take objects (``kernel.takes_objects``).

:class:`ObjectSupportSet` has the interface of :class:`~streamk.learners.support.SupportSet` that
learners and budget policies use (``append``, ``remove``, ``replace``, ``add_coef``,
``add_coefs``, ``scale_coef``, ``kernel_row``, ``kernel_block``, ``decision``, ``X``,
``coef``, ``kdiag``, ``ids``, ``state``), with the support "rows" held in a Python list
instead of a float buffer. Learners pick it when their kernel takes objects, so every
algorithm and every budget policy that needs only kernel values works unchanged; the
policies that need a vector space (``Merge``) are refused.

For trie kernels (:class:`~streamk.kernels.strings.Spectrum`, ``Mismatch``,
``RestrictedGapWeighted``, also under ``Normalized``) the set keeps the primal weight map
of Shawe-Taylor & Cristianini, Remark 11.55: ``W = sum_i coef_i phi(s_i)`` over the
trie leaves, updated on every change, so ``f(s) = <phi(s), W>`` costs O(|s|) dictionary
look-ups whatever the support size.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from itertools import repeat
from typing import Any

import numpy as np

from ..errors import InvalidInput
from ..kernels import Kernel, Normalized, kernel_from_spec
from .support import StateError, cached_kernel_values, check_support_state, kernel_cache

__all__ = ["ObjectSupportSet", "PrimalMap", "validate_object"]


def validate_object(kernel: Kernel, obj: Any) -> Any:
    """``obj`` checked (and normalised, e.g. UTF-8 bytes to ``str``, a tree to the frozen
    nested tuples a support set may keep) by every kernel on objects inside ``kernel``;
    raises :class:`~streamk.errors.InvalidInput`.

    Every part of a ``Sum`` or ``Product`` checks it, not only the first: a part's own
    rule (``Mismatch``'s alphabet, say) would otherwise first run inside the support set,
    after the event was half stored. Each check gets what the previous one returned.
    """
    stack = [kernel]
    checked = False
    while stack:
        k = stack.pop(0)
        check = getattr(k, "check_object", None)
        if check is not None:
            obj = check(obj)
            checked = True
            continue
        stack.extend(k._children())
    if not checked:  # pragma: no cover - learners build object sets for object kernels only
        raise InvalidInput(f"{kernel!r} does not take strings or trees")
    return obj


def _trie_parts(kernel: Kernel) -> tuple[Any, bool] | None:
    """``(trie kernel, normalised)`` when ``kernel`` has a finite leaf map, else ``None``."""
    normalised = isinstance(kernel, Normalized)
    base = kernel.kernel if normalised else kernel
    if callable(getattr(base, "feature_map", None)):
        return base, normalised
    return None


class PrimalMap:
    """``W[u] = sum_i coef_i phi_u(s_i)`` (Remark 11.55), one row per trie leaf ``u``.

    Leaves live in a growable matrix with a free list; each leaf counts the support
    strings that reach it and is dropped (its row zeroed exactly) when the count falls
    to 0, so memory stays O(budget · leaves per string) and removals leave no rounding
    residue behind. ``scale_coef`` multiplies a single scalar, not the whole map.
    """

    def __init__(self, kernel: Any, normalised: bool, n_outputs: int):
        self.kernel = kernel
        self.normalised = normalised
        self.index: dict[str, int] = {}
        self.W = np.zeros((64, n_outputs))
        self.refs = np.zeros(64, dtype=np.int64)
        self.free: list[int] = []
        self.scale = 1.0
        self.dirty = False  # W is stale (coefficients changed in place): rebuild before use

    def leaves(self, obj: Any) -> tuple[list[str], np.ndarray]:
        """The leaf keys and values of ``phi(obj)`` (normalised if the kernel is); raises
        :class:`~streamk.errors.InvalidInput` for an input the kernel refuses, changing
        nothing."""
        fmap = self.kernel.feature_map(obj)
        vals = np.fromiter(fmap.values(), dtype=np.float64, count=len(fmap))
        if self.normalised and len(vals):
            vals = vals / math.sqrt(float(vals @ vals))
        return list(fmap), vals

    def _slots(self, keys: list[str]) -> np.ndarray:
        """Rows of ``keys``, new leaves given free rows (one C-level lookup pass first)."""
        index = self.index
        out = np.fromiter(map(index.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
        for j in np.flatnonzero(out < 0).tolist():  # keys are distinct (a feature map's)
            if not self.free:
                self._grow()
            out[j] = index[keys[j]] = self.free.pop()
        return out

    def _held(self, keys: list[str], vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows and values of the leaves among ``keys`` that the map holds."""
        idx = np.fromiter(map(self.index.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
        mask = idx >= 0
        return idx[mask], vals[mask]

    def _grow(self) -> None:
        cap = self.W.shape[0]
        self.W = np.vstack([self.W, np.zeros((cap, self.W.shape[1]))])
        self.refs = np.concatenate([self.refs, np.zeros(cap, dtype=np.int64)])
        self.free.extend(range(2 * cap - 1, cap - 1, -1))

    def add(
        self,
        obj: Any,
        coef: np.ndarray,
        count: int,
        leaves: tuple[list[str], np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``W += coef phi(obj)``; ``count`` = +1 (joins), -1 (leaves) or 0 (coef change).
        ``leaves``: :meth:`leaves` of ``obj`` if already computed.

        Returns the leaf rows and values of ``phi(obj)`` (as they were before a removal).
        """
        keys, vals = self.leaves(obj) if leaves is None else leaves
        if not keys:
            return np.zeros(0, dtype=np.int64), vals
        if count >= 0:
            idx = self._slots(keys)
        else:
            idx = np.fromiter(map(self.index.__getitem__, keys), dtype=np.int64, count=len(keys))
        if not self.dirty:
            c = np.asarray(coef, dtype=np.float64) / self.scale
            self.W[idx] += vals[:, None] * c[None, :]
        if count:
            self.refs[idx] += count
            if count < 0:
                for u, i in zip(keys, idx.tolist()):
                    if self.refs[i] == 0:
                        del self.index[u]
                        self.W[i] = 0.0
                        self.free.append(i)
        return idx, vals

    def rebuild(self, ids: np.ndarray, vals: np.ndarray, coef: np.ndarray) -> None:
        """``W = sum_i coef_i phi(s_i)`` afresh from the support's leaf rows (``-1``: padding)."""
        self.W[:] = 0.0
        self.scale = 1.0
        mask = ids >= 0
        rows = np.broadcast_to(np.arange(ids.shape[0])[:, None], ids.shape)[mask]
        np.add.at(self.W, ids[mask], vals[mask][:, None] * coef[rows])
        self.dirty = False

    def multiply(self, factor: float) -> None:
        if factor == 0.0:
            self.W[:] = 0.0
            self.scale = 1.0
            return
        self.scale *= factor
        if not 1e-150 < abs(self.scale) < 1e150:
            self.W *= self.scale
            self.scale = 1.0

    def remap(self, M: np.ndarray) -> None:
        self.W = self.W @ M

    def decision(self, obj: Any) -> np.ndarray:
        """``f(obj) = <phi(obj), W>`` (normalised: ``phi(obj) / ||phi(obj)||``)."""
        idx, v = self._held(*self.leaves(obj))
        if not len(idx):
            return np.zeros(self.W.shape[1])
        return self.scale * (v @ self.W[idx])

    def state(self) -> dict[str, Any] | None:
        """The weights as they stand (``None`` while stale: the next use rebuilds them from
        the support, on a restored set as here). ``W`` holds every add and subtraction the
        support's history made, in its order; rebuilt from the support alone it rounds
        differently in the last bit, so a restored set keeps these values."""
        if self.dirty:
            return None
        keys = sorted(self.index)  # not the leaves' arrival order: the same bytes for the same map
        rows = np.fromiter(map(self.index.__getitem__, keys), dtype=np.int64, count=len(keys))
        return {"keys": keys, "W": self.W[rows], "scale": self.scale}

    def load_state(self, state: Any) -> None:
        """Take the weights :meth:`state` gave, over the ones rebuilt from the same support
        (their leaves must match; any other map is ignored: the rebuilt weights stay)."""
        if state is None:  # stale when saved, or an older snapshot: rebuild before use
            self.dirty = True
            return
        if not isinstance(state, dict) or set(state) != {"keys", "W", "scale"}:
            raise ValueError("weight map state must be a map of keys, W and scale")
        keys, W, scale = state["keys"], np.asarray(state["W"]), state["scale"]
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ValueError("weight map keys must be a list of strings")
        if W.dtype != np.float64 or W.shape != (len(keys), self.W.shape[1]):
            raise ValueError(f"weight map W must be float64 of shape ({len(keys)}, outputs)")
        if isinstance(scale, bool) or not isinstance(scale, float) or not scale:
            raise ValueError(f"weight map scale must be a non-zero float, got {scale!r}")
        if not (np.isfinite(W).all() and math.isfinite(scale)):
            raise ValueError("weight map values must be finite")
        if len(keys) != len(self.index) or set(keys) != self.index.keys():
            return  # the support was edited since (e.g. a merge): keep the rebuilt weights
        rows = np.fromiter(map(self.index.__getitem__, keys), dtype=np.int64, count=len(keys))
        self.W[rows] = W
        self.scale = scale

    def query(self, obj: Any) -> tuple[np.ndarray, np.ndarray]:
        """Leaf rows and values of ``phi(obj)`` restricted to leaves the map holds."""
        return self._held(*self.leaves(obj))

    @property
    def n_leaves(self) -> int:
        return len(self.index)


class LeafRows:
    """Each support string's leaves as a padded row of (leaf row, value) pairs, so
    ``K(s, S)`` is one gather over ``n x max_leaves`` entries: the query's values are
    scattered into a scratch vector over the map's leaf rows, then read back at every
    support string's leaves. Padding points at a slot of the scratch that stays 0.

    Each kernel value sums its row's own ``lens[i]`` products only, never the padding:
    the padded width is history (a live set's is the widest row it ever held, a restored
    one's the widest it holds), and a sum over the padded row groups its terms by that
    width, so the two would differ in the last bit and drift apart as they learn on."""

    def __init__(self, capacity: int):
        self.ids = np.full((capacity, 8), -1, dtype=np.int64)
        self.vals = np.zeros((capacity, 8))
        self.lens = np.zeros(capacity, dtype=np.int64)
        self.width = 0  # widest row in use
        self.scratch = np.zeros(65)

    def grow_rows(self, capacity: int) -> None:
        old = self.ids.shape[0]
        if capacity > old:
            ids = np.full((capacity, self.ids.shape[1]), -1, dtype=np.int64)
            vals = np.zeros((capacity, self.ids.shape[1]))
            ids[:old], vals[:old] = self.ids, self.vals
            self.ids, self.vals = ids, vals
            self.lens = np.concatenate([self.lens, np.zeros(capacity - old, dtype=np.int64)])

    def put(self, slot: int, idx: np.ndarray, vals: np.ndarray) -> None:
        m = len(idx)
        if m > self.ids.shape[1]:
            cap, new = self.ids.shape
            ids = np.full((cap, max(m, 2 * new)), -1, dtype=np.int64)
            v = np.zeros((cap, max(m, 2 * new)))
            ids[:, :new], v[:, :new] = self.ids, self.vals
            self.ids, self.vals = ids, v
        self.ids[slot, :m] = idx
        self.ids[slot, m:] = -1
        self.vals[slot, :m] = vals
        self.vals[slot, m:] = 0.0
        self.lens[slot] = m
        self.width = max(self.width, m)

    def move(self, src: int, dst: int) -> None:
        self.ids[dst], self.vals[dst], self.lens[dst] = (
            self.ids[src],
            self.vals[src],
            self.lens[src],
        )
        self.ids[src], self.vals[src], self.lens[src] = -1, 0.0, 0

    def row(self, n: int, idx: np.ndarray, vals: np.ndarray, n_leaf_rows: int) -> np.ndarray:
        """``K(s, S)`` from the query's leaf rows ``idx`` and values ``vals``: row ``i`` is
        the sum of its own ``lens[i]`` products (see the class docstring), so it does not
        depend on the padded width."""
        if self.scratch.shape[0] < n_leaf_rows + 1:  # the last entry is the padding's 0
            self.scratch = np.zeros(2 * n_leaf_rows + 1)
        if not n or not self.width:
            return np.zeros(n)
        q = self.scratch
        q[idx] = vals
        products = q[self.ids[:n, : self.width]]
        products *= self.vals[:n, : self.width]
        q[idx] = 0.0
        q[-1] = 0.0
        w = products.shape[1]
        # segments [i w, i w + lens[i]) (row i's own products) between the gaps before
        # each next row; an empty row's segment reads one padding product, which is 0
        bounds = np.empty(2 * n, dtype=np.intp)
        bounds[0::2] = np.arange(0, n * w, w)
        bounds[1::2] = bounds[0::2] + self.lens[:n]
        if bounds[-1] == n * w:  # a full last row: its segment runs to the end anyway
            bounds = bounds[:-1]
        # (a contiguous row: BLAS may round a product with a strided vector differently)
        return np.ascontiguousarray(np.add.reduceat(products.ravel(), bounds)[0::2])


class ObjectSupportSet:
    """Support strings or trees with their coefficients (see the module docstring).

    Parameters
    ----------
    kernel
        A kernel with ``takes_objects`` (string or tree kernel, possibly combined).
    n_outputs
        Number of coefficient columns.
    keep_gram
        Maintain ``K(S, S)`` incrementally for callers that need it.
    capacity
        Initial number of slots; doubles when full.
    primal
        Keep the Remark 11.55 weight map when the kernel allows it (``decision`` then
        uses it).
    """

    takes_objects = True

    def __init__(
        self,
        kernel: Kernel,
        n_outputs: int = 1,
        keep_gram: bool = False,
        capacity: int = 16,
        primal: bool = True,
    ):
        capacity = max(int(capacity), 1)
        self._kernel = kernel
        self.keep_gram = keep_gram
        self.n = 0
        self.width = 0
        self.next_id = 0
        self.rows_version = 0
        self.version = 0
        self._sq_max = 0.0
        self._items: list[Any] = []
        self._coef = np.zeros((capacity, n_outputs))
        self._kdiag = np.zeros(capacity)
        self._sq = np.zeros(capacity)  # no norms for objects; kept for the shared interface
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._G = np.zeros((capacity, capacity)) if keep_gram else None
        self.primal = primal
        self._primal = self._new_primal(n_outputs)
        self._leaves = LeafRows(capacity) if self._primal is not None else None

    def _new_primal(self, n_outputs: int) -> PrimalMap | None:
        parts = _trie_parts(self._kernel) if self.primal else None
        return None if parts is None else PrimalMap(*parts, n_outputs)

    # -- views --------------------------------------------------------------------------------
    @property
    def kernel(self) -> Kernel:
        return self._kernel

    @property
    def X(self) -> list[Any]:
        """Support objects in slot order (the set's own list: do not modify). Trees are the
        frozen copies :func:`validate_object` makes (nested tuples), not the caller's lists."""
        return self._items

    @property
    def coef(self) -> np.ndarray:
        return self._coef[: self.n]

    @property
    def kdiag(self) -> np.ndarray:
        return self._kdiag[: self.n]

    @property
    def sqnorm(self) -> np.ndarray:
        return self._sq[: self.n]

    @property
    def ids(self) -> np.ndarray:
        return self._ids[: self.n]

    @property
    def gram_matrix(self) -> np.ndarray:
        if self._G is None:
            raise RuntimeError("this ObjectSupportSet was built with keep_gram=False")
        return self._G[: self.n, : self.n]

    @property
    def n_outputs(self) -> int:
        return self._coef.shape[1]

    @property
    def capacity(self) -> int:
        return self._coef.shape[0]

    @property
    def has_primal(self) -> bool:
        """Whether ``decision`` uses the Remark 11.55 weight map."""
        return self._primal is not None

    def __len__(self) -> int:
        return self.n

    def oldest(self) -> int:
        return int(self._ids[: self.n].argmin())

    # -- kernel evaluation ----------------------------------------------------------------------
    def kernel_block(self, Q: list[Any], q_sqnorm: np.ndarray | None = None) -> np.ndarray:
        """``K(Q, S)``, ``(len(Q), n)``."""
        if not self.n:
            return np.zeros((len(Q), 0))
        if self._leaves is not None and len(Q) <= 16:  # a few rows: gathers, not a join
            return np.array([self.kernel_row(q) for q in Q]).reshape(len(Q), self.n)
        return self._kernel.gram(list(Q), self._items)

    def kernel_row(self, obj: Any) -> np.ndarray:
        """``K(obj, S)``; for trie kernels one gather over the support's leaf rows."""
        if self._leaves is not None and self.n:
            idx, vals = self._primal.query(obj)
            return self._leaves.row(self.n, idx, vals, self._primal.W.shape[0])
        if not self.n:
            return np.zeros(0)
        return self._kernel.gram([obj], self._items)[0]

    def _weights(self) -> PrimalMap:
        """The weight map, rebuilt first if coefficients changed in place since."""
        p = self._primal
        if p.dirty:
            n, w = self.n, self._leaves.width
            p.rebuild(self._leaves.ids[:n, :w], self._leaves.vals[:n, :w], self._coef[:n])
        return p

    def decision_one(self, obj: Any) -> np.ndarray:
        """``f(obj)``: from the weight map when there is one, else ``K(obj, S) @ coef``."""
        if self._primal is not None:
            return self._weights().decision(obj)
        if not self.n:
            return np.zeros(self.n_outputs)
        return self.kernel_row(obj) @ self._coef[: self.n]

    def dual_decision(self, Q: list[Any]) -> np.ndarray:
        """``K(Q, S) @ coef`` with ``K`` from ``kernel.gram``: neither the weight map nor
        the stored leaf rows (an independent check of both)."""
        if not self.n:
            return np.zeros((len(Q), self.n_outputs))
        return self._kernel.gram(list(Q), self._items) @ self._coef[: self.n]

    def decision(self, Q: list[Any]) -> np.ndarray:
        if self._primal is not None:
            out = np.zeros((len(Q), self.n_outputs))
            weights = self._weights()
            for i, obj in enumerate(Q):
                out[i] = weights.decision(obj)
            return out
        return self.dual_decision(Q)

    def set_kernel(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.rows_version += 1
        self.version += 1
        self._kdiag[: self.n] = kernel.diag(self._items) if self.n else 0.0
        if self._G is not None and self.n:
            self._G[: self.n, : self.n] = kernel.gram(self._items, self._items)
        self._primal = self._new_primal(self.n_outputs)
        self._leaves = LeafRows(self.capacity) if self._primal is not None else None
        if self._primal is not None:
            for slot, (obj, c) in enumerate(zip(self._items, self._coef[: self.n])):
                self._leaves.put(slot, *self._primal.add(obj, c, +1))

    # -- growth ---------------------------------------------------------------------------------
    def _grow_rows(self, needed: int) -> None:
        cap = self.capacity
        if needed <= cap:
            return
        new = max(needed, 2 * cap)
        self._coef = _grow(self._coef, new)
        self._kdiag = _grow(self._kdiag, new)
        self._sq = _grow(self._sq, new)
        self._ids = _grow(self._ids, new)
        if self._leaves is not None:
            self._leaves.grow_rows(new)
        if self._G is not None:
            G = np.zeros((new, new))
            G[:cap, :cap] = self._G
            self._G = G

    def reserve(self, rows: int, width: int = 0) -> None:
        self._grow_rows(rows)

    def add_outputs(self, count: int = 1) -> None:
        self._coef = np.hstack([self._coef, np.zeros((self.capacity, count))])
        if self._primal is not None:
            p = self._primal
            p.W = np.hstack([p.W, np.zeros((p.W.shape[0], count))])
        self.version += 1

    def remap_outputs(self, M: np.ndarray) -> None:
        M = np.asarray(M, dtype=np.float64)
        if M.ndim != 2 or M.shape[0] != self.n_outputs:
            raise ValueError(f"remap matrix must have {self.n_outputs} rows, got shape {M.shape}")
        self._coef = self._coef @ M
        if self._primal is not None:
            self._primal.remap(M)
        self.version += 1

    # -- changes --------------------------------------------------------------------------------
    def append(self, row: Any, coef: Any, k_row: np.ndarray | None = None) -> int:
        """Add ``row`` with ``coef`` in a new slot; returns the slot.

        Atomic: everything that can refuse ``row`` (its self-kernel value, its trie leaves,
        its kernel row) is computed before the set changes, so an
        :class:`~streamk.errors.InvalidInput` leaves the set as it was."""
        coef = np.asarray(coef, dtype=np.float64).ravel()
        slot = self.n
        if self._G is not None and k_row is None and slot:
            k_row = self.kernel_row(row)
        ready = self._prepare(row)
        self._grow_rows(slot + 1)
        self._items.append(row)
        self._put(slot, row, coef, ready)
        self._ids[slot] = self.next_id
        self.next_id += 1
        if self._G is not None:
            if slot:
                self._G[slot, :slot] = k_row
                self._G[:slot, slot] = k_row
            self._G[slot, slot] = self._kdiag[slot]
        self.n += 1
        self.rows_version += 1
        self.version += 1
        return slot

    def _prepare(self, row: Any) -> tuple[float, tuple[list[str], np.ndarray] | None]:
        """``k(row, row)`` and ``row``'s trie leaves (``None`` without a weight map): the
        parts of storing ``row`` that can raise, done before anything changes."""
        kdiag = self._kernel.diag_one(row)
        return kdiag, None if self._primal is None else self._primal.leaves(row)

    def _put(
        self,
        slot: int,
        row: Any,
        coef: np.ndarray,
        ready: tuple[float, tuple[list[str], np.ndarray] | None],
    ) -> None:
        kdiag, leaves = ready
        self._coef[slot] = coef
        self._kdiag[slot] = kdiag
        if self._primal is not None:
            self._leaves.put(slot, *self._primal.add(row, coef, +1, leaves))

    def _take_out(self, slot: int) -> None:
        if self._primal is not None:
            self._primal.add(self._items[slot], -self._coef[slot], -1)

    def remove(self, slot: int) -> None:
        last = self.n - 1
        if not 0 <= slot <= last:
            raise IndexError(f"slot {slot} out of range for {self.n} support rows")
        self._take_out(slot)
        if slot != last:
            self._items[slot] = self._items[last]
            self._coef[slot] = self._coef[last]
            self._kdiag[slot] = self._kdiag[last]
            self._ids[slot] = self._ids[last]
            if self._leaves is not None:
                self._leaves.move(last, slot)
            if self._G is not None:
                self._G[slot, :] = self._G[last, :]
                self._G[:, slot] = self._G[:, last]
        self._items.pop()
        self._coef[last] = 0.0
        self.n -= 1
        self.rows_version += 1
        self.version += 1

    def replace(self, slot: int, row: Any, coef: Any, new_id: bool = False) -> None:
        """Put ``row`` with ``coef`` in ``slot`` (atomic, as :meth:`append`)."""
        coef = np.asarray(coef, dtype=np.float64).ravel()
        ready = self._prepare(row)
        self._take_out(slot)
        self._items[slot] = row
        self._put(slot, row, coef, ready)
        if new_id:
            self._ids[slot] = self.next_id
            self.next_id += 1
        self.rows_version += 1
        self.version += 1
        if self._G is not None:
            k = self.kernel_row(row)
            self._G[slot, : self.n] = k
            self._G[: self.n, slot] = k

    def add_coef(self, slot: int, delta: Any) -> None:
        delta = np.asarray(delta, dtype=np.float64)
        self._coef[slot] += delta
        if self._primal is not None:  # many in a row (adatron's resweeps): rebuild once, later
            self._primal.dirty = True
        self.version += 1

    def add_coefs(self, D: np.ndarray) -> None:
        D = np.asarray(D, dtype=np.float64).reshape(self.n, self.n_outputs)
        self._coef[: self.n] += D
        if self._primal is not None:
            self._primal.dirty = True
        self.version += 1

    def scale_coef(self, factor: float) -> None:
        self._coef[: self.n] *= factor
        if self._primal is not None:
            self._primal.multiply(float(factor))
        self.version += 1

    @contextlib.contextmanager
    def track(self, Q: Any) -> Iterator[Any]:
        raise TypeError("block tracking works on float rows; learners loop over objects")
        yield  # pragma: no cover

    # -- plain data -----------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Plain data: kernel spec, the support objects (strings / nested tuples), coefficients."""
        return {
            "objects": True,
            "kernel": self._kernel.to_spec(),
            "X": list(self._items),
            "coef": self.coef.copy(),
            "ids": self.ids.copy(),
            "next_id": self.next_id,
            "keep_gram": self.keep_gram,
            "primal": self.primal,
            "weights": None if self._primal is None else self._primal.state(),
            "cache": kernel_cache(self),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ObjectSupportSet:
        """Rebuild the set; the state is checked as a vector set's is
        (:func:`~streamk.learners.support.check_support_state`), and every support object
        is validated again by the kernel."""
        coef, ids, next_id = check_support_state(state)
        kernel = kernel_from_spec(state["kernel"])
        items = [validate_object(kernel, obj) for obj in state["X"]]
        n = len(items)
        if coef.shape[0] != n:
            raise StateError(f"state 'support' has {n} objects for {coef.shape[0]} ids")
        s = cls(kernel, coef.shape[1], state["keep_gram"], n, bool(state.get("primal", True)))
        for obj, c in zip(items, coef):
            s.append(obj, c)
        s._ids[:n] = ids
        s.next_id = next_id
        kdiag, gram = cached_kernel_values(state.get("cache"), ids, s._G is not None)
        if kdiag is not None:
            s._kdiag[:n] = kdiag
        if gram is not None:
            s._G[:n, :n] = gram
        if s._primal is not None:
            s._primal.load_state(state.get("weights"))
        return s


def _grow(a: np.ndarray, rows: int) -> np.ndarray:
    out = np.zeros((rows, *a.shape[1:]), dtype=a.dtype)
    out[: a.shape[0]] = a
    return out
