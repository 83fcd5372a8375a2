"""Projectron: project a new support vector onto the span of the set when it is close to it.

Orabona, Keshet & Caputo, "Bounded kernel-based online learning", JMLR 10 (2009),
Fig. 1 (Projectron); DOGMA's ``k_projectron`` is the reference implementation. The policy
keeps the inverse Gram matrix ``P = K(S, S)^-1`` of the set in slot order, updated
incrementally: O(n²) per added vector (block inverse) and per removal (rank-one
downdate), never O(n³) except to rebuild after a change it did not make.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from . import compiled
from .base import BudgetPolicy, register_policy, without_slot

if TYPE_CHECKING:  # annotations only: learners import the policies
    from ..learners.support import SupportSet

__all__ = ["Projectron"]

#: A vector whose squared projection error is below this fraction of ``k(x, x)`` is
#: always projected, whatever ``eta``: adding it would make ``K`` numerically singular.
MIN_REL_DELTA = 1e-8

#: The fewest rows whose rebuild keeps their dots and scratch for the next one (below it
#: the compiled Gram matrix from scratch is cheaper than the bookkeeping).
KEEP_FROM = 32

#: The most rows whose rebuild keeps them (about 5 n² doubles: 1.6 MB at 200): the rebuilds
#: that come in a row are the ``gamma="auto"`` warm-up's, on its first 200 events, so no
#: larger set needs them, and a set of B = 1,000 would hold 40 MB for nothing.
KEEP_UP_TO = 256


def _capacity(rows: int) -> int:
    """The side of a ``P`` buffer with room for ``rows`` rows: whole cache lines of doubles
    per row, and never a multiple of 64 doubles. Rows a multiple of 512 bytes apart fall on
    the same few cache sets and their loads alias the stores of the rows above (4K
    aliasing): the per-event pass over ``P`` (read and rank-two write, row after row) took
    about twice as long at a leading dimension of 1,024 as at 1,000 or 1,032 for n = 1,000,
    and at 512 as at 520 for n = 500 (a C benchmark of ``sk_pjl_project_pending``). Only the
    stride changes: the steps read ``P[:n, :n]``, whatever is beyond."""
    cap = -(-max(rows, 0) // 8) * 8
    return cap + 8 if cap % 64 == 0 else cap


def _row(support: SupportSet, row):
    """A float row as ``SupportSet`` stores it; a string or tree as it is."""
    if getattr(support, "takes_objects", False):
        return row
    return np.asarray(row, dtype=np.float64).ravel()


def add_coef_rows(support: SupportSet, D: np.ndarray) -> None:
    """``support.coef += D`` in one vectorised change (tracked blocks updated by one product)."""
    support.add_coefs(D)


@register_policy
class Projectron(BudgetPolicy):
    """Projectron budget: add a vector only if it is far from the span of the set.

    For a new vector ``x`` with coefficient ``c`` and ``k = K(S, x)``, let ``d = P k``
    (``P = K(S, S)^-1``) and the squared projection error
    ``delta² = k(x, x) - kᵀ d``. If ``delta² <= eta`` the update is projected onto the
    set instead: ``coef_S += d cᵀ`` (the exact projection of ``c k(x, ·)`` onto the
    span); otherwise ``x`` joins the set and ``P`` grows by the block-inverse formula.
    ``eta`` thresholds the *squared* error, as in DOGMA (the paper writes
    ``||delta|| <= eta``); ``eta = 0`` projects only vectors already in the span.

    With ``budget=None`` the set size is bounded by ``eta`` and the kernel (Thm. 3 of the
    paper); with an ``int`` budget, a full set first drops the vector whose removal,
    with its coefficient projected onto the others, changes ``f`` least:
    ``argmin_i ||coef_i||² / P_ii`` (the squared RKHS error of that projection), and
    the others receive ``-coef_i P_{:,i} / P_ii`` (rank-one downdate of ``P``).

    The policy applies one rule to every insertion, so combined with a learner that also
    inserts on margin errors (:class:`~streamk.learners.budgeted.MarginPerceptron`) it
    gives a Projectron++-like learner (Fig. 2 of the paper, with the mistake rule also
    used for margin errors instead of Projectron++'s step ``tau``).

    ``P``, the slot ids it was built for and the kernel are the state. If the set changed
    behind the policy's back (another policy, a learner pruning zero coefficients, or a
    kernel change during ``gamma="auto"`` warm-up), ``P`` is rebuilt in O(n³); compiled,
    from the rows' dots the last rebuild kept (a new ``gamma`` costs the exps), with
    reused scratch, and only ``P``'s lower triangle written (mirrored when NumPy reads it).
    The per-event core (streamk/learners/_event.pyx) makes the warm-up's rebuilds of a set
    it would compute afresh (below ``KEEP_FROM`` or above ``KEEP_UP_TO`` vectors, a plain
    RBF) itself, with the same steps, and records them as :meth:`_rebuild` does.

    Parameters
    ----------
    budget
        ``None`` or a maximum number of support vectors.
    eta
        Threshold on the squared projection error (``>= 0``; DOGMA's default 0.1).
    """

    #: (a class default too: a policy pickled before the flag existed has a full ``P``)
    _lower = False
    #: rows of the update of ``P`` a compiled step left pending (-1: none;
    #: class defaults too, for a policy pickled before they existed), see :meth:`_settle`
    _pend_m = -1
    _pend: np.ndarray | None = None
    #: the rows' dots :meth:`_gram` keeps between rebuilds (a cache: never pickled or copied)
    _gram_kept: compiled.GramKept | None = None

    def __init__(self, budget: int | None = None, eta: float = 0.1):
        super().__init__(budget)
        if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not eta >= 0.0:
            raise ConfigError(f"eta must be a number >= 0, got {eta!r}")
        self.eta = float(eta)
        self._P = np.zeros((0, 0))
        self._ids = np.zeros(0, dtype=np.int64)
        self._kernel = None
        self._kspec: dict[str, Any] | None = None
        #: ``P``'s upper triangle is stale: the compiled steps keep only its lower triangle
        #: (``P`` is symmetric; half the memory to read and write), :meth:`_mirror` mirrors it.
        self._lower = False
        self._pend_m = -1
        self._pend = None

    def __getstate__(self) -> dict[str, Any]:
        """The attributes but :meth:`_gram`'s cache (pickles and deep copies leave it)."""
        state = self.__dict__.copy()
        state.pop("_gram_kept", None)
        return state

    def _extra_params(self) -> dict[str, Any]:
        return {"eta": self.eta}

    # -- the inverse Gram matrix ------------------------------------------------------------
    @property
    def inverse_gram(self) -> np.ndarray:
        """``K(S, S)^-1`` in slot order as last synchronised (a copy)."""
        self._mirror()
        n = self._ids.shape[0]
        return self._P[:n, :n].copy()

    def _settle(self) -> None:
        """Apply the update of ``P``'s lower triangle (a removal's rank-two one, or a growth's
        rank-one one in that form) that the per-event core (streamk/learners/_event.pyx)
        left for its next ``d = P k`` to fuse into its pass over ``P`` (one pass instead of
        two), before anything else reads ``P``.

        ``_pend`` holds its four vectors of ``m = _pend_m`` entries, ``na``, ``row``, ``d``,
        ``g``; row ``a < m`` takes ``(P_ab + na_a row_b) + d_a g_b`` for ``b <= a``: the
        compiled pass's roundings (``sk_pjl_rank2_rows`` in streamk/_dense.h, which
        ``_policies.projectron_settle`` runs when the extension is there), so the bits do not
        depend on what applies it."""
        m = self._pend_m
        if m < 0:
            return
        self._pend_m = -1
        settle = getattr(compiled.policies, "projectron_settle", None)
        if settle is not None:  # the same update in one compiled pass
            settle(self._P, self._pend, m)
            return
        na, row, d, g = self._pend[: 4 * m].reshape(4, m)
        P = self._P[:m, :m]
        low = np.tril_indices(m)
        P[low] = ((P + np.outer(na, row)) + np.outer(d, g))[low]

    def _mirror(self) -> None:
        """Mirror ``P``'s lower triangle into its upper one where a compiled step left only the
        lower triangle current (before NumPy reads the whole of ``P``)."""
        self._settle()
        if self._lower:
            n = self._ids.shape[0]
            P = self._P[:n, :n]
            upper = np.triu_indices(n, 1)
            P[upper] = P.T[upper]
            self._lower = False

    def _in_sync(self, support: SupportSet) -> bool:
        if support.kernel is not self._kernel:
            if self._kspec is None or support.kernel.to_spec() != self._kspec:
                return False
            self._kernel = support.kernel
        return self._ids.shape[0] == support.n and np.array_equal(self._ids, support.ids)

    def _rebuild(self, support: SupportSet, rows: int = 0) -> None:
        """``P`` inverted afresh for ``support``, with room for ``rows`` vectors (the room
        :meth:`_grow` would make next, in one allocation instead of two)."""
        n = support.n
        G, lower = self._gram(support), True
        if G is None:
            G, lower = (support.kernel_block(support.X) if n else np.zeros((0, 0))), False
        cap = max(n, 1)
        if self._P.shape[0] < max(cap, rows):  # else the buffer serves: P[:n, :n] is written
            if rows > cap:  # whole below, and no step reads beyond n unwritten
                cap = max(rows, 2 * cap)
            cap = _capacity(cap)
            self._P = np.zeros((cap, cap))
        self._pend_m = -1  # (an update pending for the old P has no meaning for the new one)
        kept = self._gram_kept
        work = None if kept is None else kept.inverse_work(n)
        # compiled (no BLAS threads), the lower triangle only: :meth:`_mirror` mirrors it
        self._lower = compiled.inverse_gram(G, self._P, MIN_REL_DELTA, work, lower=True)
        if not self._lower:
            if lower:  # (the compiled Gram matrix came as its lower triangle: mirrored)
                upper = np.triu_indices(n, 1)
                G[upper] = G.T[upper]
            try:
                P = np.linalg.inv(G)
            except np.linalg.LinAlgError:
                P = np.linalg.pinv(G, hermitian=True)
            self._P[:n, :n] = P
        self._remember(support)

    def _gram(self, support: SupportSet) -> np.ndarray | None:
        """``K(S, S)`` compiled (no BLAS threads) from the dots of the rows the last rebuild
        kept (a kernel change during ``gamma="auto"``'s warm-up then costs exps, not dots);
        ``None`` where :func:`compiled.support_gram` is. A set below :data:`KEEP_FROM` rows
        is computed afresh (fewer dots than the kept path's set-up costs), and so is one
        above :data:`KEEP_UP_TO` (its memory kept for nothing: no rebuild follows soon).
        Only the lower triangle is sure to be current (all the compiled inverse reads)."""
        if not KEEP_FROM <= support.n <= KEEP_UP_TO:
            self._gram_kept = None
            return compiled.support_gram(support)
        got = compiled.support_gram_kept(support, self._gram_kept, lower=True)
        if got is None:
            self._gram_kept = None
            return None
        G, self._gram_kept = got
        return G

    def _remember(self, support: SupportSet) -> None:
        """Take ``support``'s ids and kernel as the set ``P`` inverts. The kernel's spec is
        recomputed only for another kernel object (kernels are not changed in place: a new
        ``gamma`` makes a new kernel), which saves a ``to_spec`` per insert."""
        self._ids = support.ids.copy()
        kernel = support.kernel
        if kernel is not self._kernel or self._kspec is None:
            self._kspec = kernel.to_spec()
        self._kernel = kernel

    def _grow(self, n: int) -> None:
        cap = self._P.shape[0]
        if n > cap:
            side = _capacity(max(n, 2 * cap))
            P = np.zeros((side, side))
            P[:cap, :cap] = self._P
            self._P = P

    def prepare(self, support: SupportSet, rows: int) -> None:
        """``P`` in sync with ``support`` and room for ``rows`` support vectors (before a
        compiled pass, :func:`streamk.budget.compiled.margin_run`, changes it in place)."""
        self._settle()
        if not self._in_sync(support):
            self._rebuild(support, rows)
        self._grow(rows)

    def adopt(self, support: SupportSet) -> None:
        """Take ``support`` as the set ``P`` now inverts (after a compiled pass changed both,
        ``P`` in its lower triangle)."""
        self._remember(support)
        self._lower = True

    # -- insertion ------------------------------------------------------------------------------
    def insert(self, support, row, coef, k_row):
        self._settle()
        if not self._in_sync(support):
            self._rebuild(support, support.n + 1)  # room for the vector it may append
        coef = np.asarray(coef, dtype=np.float64).ravel()
        kxx = float(support.kernel.diag_one(_row(support, row)))
        if compiled.projectron_insert(self, support, row, coef, kxx, k_row, MIN_REL_DELTA):
            self._lower = True  # the same steps, compiled (streamk/budget/_policies.pyx)
            return
        self._mirror()
        n = support.n
        k = np.asarray(k_row, dtype=np.float64)
        d = self._P[:n, :n] @ k
        delta = kxx - float(k @ d)
        if n and (delta <= self.eta or delta <= MIN_REL_DELTA * kxx):
            add_coef_rows(support, d[:, None] * coef[None, :])
            return
        if self._full(support):
            slot = self._remove_one(support)
            k = without_slot(k, slot)
            n -= 1
            d = self._P[:n, :n] @ k
            delta = kxx - float(k @ d)
        self._append(support, row, coef, k, d, delta)

    def _append(self, support, row, coef, k, d, delta) -> None:
        n = support.n
        self._grow(n + 1)
        P = self._P
        P[:n, :n] += np.outer(d, d) / delta
        P[:n, n] = -d / delta
        P[n, :n] = -d / delta
        P[n, n] = 1.0 / delta
        support.append(row, coef, k)
        self._remember(support)

    def _remove_one(self, support: SupportSet) -> int:
        """Drop ``argmin ||coef_i||² / P_ii``, projecting its coefficient onto the others."""
        n = support.n
        P = self._P
        pdiag = np.diag(P[:n, :n])
        cost = np.einsum("ij,ij->i", support.coef, support.coef) / pdiag
        i = int(np.argmin(cost))
        D = -np.outer(P[:n, i] / P[i, i], support.coef[i])
        D[i] = 0.0
        add_coef_rows(support, D)
        last = n - 1
        P[:n, :n] -= np.outer(P[:n, i], P[i, :n]) / P[i, i]
        P[i, :n] = P[last, :n]
        P[:n, i] = P[:n, last]
        P[last, :n] = 0.0
        P[:n, last] = 0.0
        support.remove(i)
        self._remember(support)
        return i

    # -- plain data -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"P": self.inverse_gram, "ids": self._ids.copy(), "kernel": self._kspec}

    def load_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        P = np.asarray(state["P"], dtype=np.float64)
        n = P.shape[0] if P.ndim == 2 else -1
        if n < 0 or P.shape[1] != n or len(state["ids"]) != n:  # checked before allocating
            raise ValueError(f"inverse Gram must be n x n with n ids, got {P.shape}")
        self._P = np.zeros((max(n, 1), max(n, 1)))
        self._P[:n, :n] = P
        self._ids = np.asarray(state["ids"], dtype=np.int64).copy()
        self._kspec = state["kernel"]
        self._kernel = None
        self._lower = False
        self._pend_m = -1
