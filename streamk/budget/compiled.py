"""The compiled Projectron and Merge work (``streamk/budget/_policies.pyx``), when it applies.

The extension is optional, like :mod:`streamk._core`: without it (no C compiler at install,
or ``STREAMK_NO_ACCEL=1``) the NumPy code in :mod:`.projectron` and :mod:`.merge` runs,
and it stays the reference the compiled loops are tested against. This module checks that a
compiled call applies, sizes the buffers it writes and brings the support set's counters
and the policy's state up to date afterwards (the compiled loops change the set's buffers
in place, as :func:`streamk.learners.fastpass.perceptron_run` does), or, for
:func:`projectron_insert`, makes the support-set changes through its methods.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from .. import accel
from ..kernels import RBF

if TYPE_CHECKING:  # annotations only: learners import the policies
    from ..learners.support import SupportSet
    from .merge import Merge
    from .projectron import Projectron

__all__ = [
    "policies",
    "available",
    "margin_run",
    "projectron_insert",
    "inverse_gram",
    "support_gram",
    "support_gram_kept",
    "compiled_merge_search",
    "merge_apply",
    "merge_run",
]

#: Most coefficient columns the compiled run takes (its scratch is sized for them).
MAX_OUTPUTS = 64


#: The compiled module, or ``None`` when the NumPy paths run.
policies: ModuleType | None = accel.optional_extension(f"{__package__}._policies", needs_core=False)


def available() -> bool:
    """Whether the compiled policy loops are loaded."""
    return policies is not None


def _run_applies(support: SupportSet, rows: np.ndarray, T: np.ndarray) -> bool:
    """What :func:`margin_run` and :func:`merge_run` need: the extension, an RBF float
    support set without a kept Gram matrix or an open tracked block, rows and columns to
    learn, one target column per output (at most :data:`MAX_OUTPUTS`)."""
    if policies is None or type(support.kernel) is not RBF:
        return False
    if support._G is not None or support._trackers or getattr(support, "takes_objects", False):
        return False
    m, w = rows.shape
    p = T.shape[1]
    return bool(m and w) and p == support.n_outputs and p <= MAX_OUTPUTS


def margin_run(
    support: SupportSet,
    policy: object,
    rows: np.ndarray,
    T: np.ndarray,
    codes: np.ndarray,
    margin: float,
    min_rel_delta: float,
) -> int | None:
    """Learn ``rows`` (±1 targets ``T``, one column per output) with the margin-perceptron
    rule and a :class:`Projectron` budget (the caller checks the type) in one compiled call;
    the number of updates, or ``None`` when the call does not apply (then the caller takes
    the NumPy path). ``min_rel_delta``: :data:`streamk.budget.projectron.MIN_REL_DELTA`
    (passed in, so this module does not import the policy that imports it).

    The rule: a row whose decision ``f`` has a wrong sign (sgn(0) = +1) or ``t f < margin``
    in some column is inserted with ``t`` in those columns (``margin = 0``: Alg. 7.52).
    ``codes[j]`` receives the prediction made before row ``j`` was learned (see
    :meth:`~streamk.learners.labels.LabelCoder.decode`). Applies to an RBF kernel, a float
    support set without a kept Gram matrix and no tracked block open.
    """
    if not _run_applies(support, rows, T):
        return None
    m, w = rows.shape
    budget = policy.budget or 0
    # room for the rows this run can add, not the whole budget: a warm-up run of a few rows
    # then grows P by doubling instead of allocating budget² at every kernel change
    most = max(min(budget, support.n + m) if budget else support.n + m, support.n)
    width = max(w, support.width)
    support.reserve(most, width)
    policy.prepare(support, most)
    Q = np.zeros((m, width))
    Q[:, :w] = rows
    n, next_id, updates, sq_max = policies.projectron_run(
        Q,
        support._X,
        support._sq,
        support._coef,
        support._kdiag,
        support._ids,
        policy._P,
        np.ascontiguousarray(T, dtype=np.float64),
        support.n,
        budget,
        support.next_id,
        float(support.kernel.gamma),
        policy.eta,
        min_rel_delta,
        float(margin),
        codes,
    )
    if updates:
        support.after_compiled_changes(n, next_id, w, sq_max)
        policy.adopt(support)
    return int(updates)


def projectron_insert(
    policy: Projectron,
    support: SupportSet,
    row: object,
    coef: np.ndarray,
    kxx: float,
    k_row,
    min_rel_delta: float,
) -> bool:
    """:meth:`Projectron.insert <streamk.budget.Projectron.insert>` with its ``P`` work in one
    compiled call; ``False`` (nothing changed) when the call does not apply.

    The caller has brought ``P`` in sync with ``support``. Any learner and any kernel: the
    projection, the removal's downdate and the block-inverse growth need only ``P``, the
    kernel row ``k_row`` and ``kxx = k(x, x)``; the support set then changes through its
    methods (so tracked blocks and a kept Gram matrix follow), as on the NumPy path.
    """
    n = support.n
    if policies is None or n == 0 or k_row is None:
        return False
    k = np.array(k_row, dtype=np.float64)  # a copy: a removal moves its entries
    if k.shape != (n,) or coef.shape != (support.n_outputs,):
        return False
    policy._grow(n + 1)
    d = np.empty(n)
    col = np.empty(2 * n)
    C = support.coef
    if not C.flags.c_contiguous:
        C = np.ascontiguousarray(C)
    slot, pii = policies.projectron_insert(
        policy._P,
        C,
        k,
        d,
        col,
        n,
        policy._full(support),
        kxx,
        policy.eta,
        min_rel_delta,
    )
    if slot == -2:  # projected onto the span
        support.add_coefs(d[:, None] * coef[None, :])
        return True
    if slot >= 0:  # removed: its coefficient projected onto the others first
        D = -np.outer(col[:n] / pii, support.coef[slot])
        D[slot] = 0.0
        support.add_coefs(D)
        support.remove(slot)
        k = k[: n - 1]
    support.append(row, coef, k)
    policy._remember(support)
    return True


def _gram_applies(support: SupportSet) -> bool:
    """Whether the compiled Gram matrix applies: the extension, an RBF float support set of
    one row or more whose norms keep the expansion exact."""
    kernel = support.kernel
    if policies is None or type(kernel) is not RBF or getattr(support, "takes_objects", False):
        return False
    return bool(kernel.expansion_exact(2.0 * support._sq_max)) and support.n > 0


def support_gram(support: SupportSet) -> np.ndarray | None:
    """``K(S, S)`` of an RBF float support set, compiled and single-threaded
    (:func:`_policies.rbf_gram`); ``None`` for other kernels, rows too large for the norm
    expansion, or without the extension (then ``support.kernel_block`` computes it)."""
    if not _gram_applies(support):
        return None
    return policies.rbf_gram(support._X, support._sq, support.n, float(support.kernel.gamma))


class GramKept:
    """What :func:`support_gram_kept` keeps between calls: the ``m`` rows its last Gram matrix
    was computed from (ids, entries, dots in a lower triangle), a second set of buffers the
    next call writes while it reads these (then the two swap), and the scratch of a
    rebuild (the Gram matrix, then :func:`inverse_gram`'s), reused instead of allocated."""

    __slots__ = ("m", "kept", "spare", "work")

    def __init__(self) -> None:
        self.m = 0
        self.kept: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.spare: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.work = np.zeros(0)

    def _scratch(self, n: int) -> np.ndarray:
        """The scratch for a set of ``n``: ``n²`` entries of Gram matrix, then
        :func:`inverse_gram`'s ``2 n² + 9 n``."""
        need = 3 * n * n + 9 * n
        if self.work.shape[0] < need:
            rows = n + n // 4 + 8
            self.work = np.empty(3 * rows * rows + 9 * rows)
        return self.work

    def gram_out(self, n: int) -> np.ndarray:
        """Where :func:`support_gram_kept` writes the ``n x n`` Gram matrix."""
        return self._scratch(n)[: n * n].reshape(n, n)

    def inverse_work(self, n: int) -> np.ndarray:
        """:func:`inverse_gram`'s scratch for the Gram matrix of :meth:`gram_out` (after it)."""
        return self._scratch(n)[n * n :]


def _kept_buffers(
    bufs: tuple[np.ndarray, np.ndarray, np.ndarray] | None, n: int, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``bufs`` when they hold ``n`` rows ``width`` wide, else new ones with room to grow."""
    if bufs is not None and bufs[0].shape[0] >= n and bufs[1].shape[1] == width:
        return bufs
    rows = n + n // 4 + 8
    return np.empty(rows, dtype=np.int64), np.empty((rows, width)), np.empty((rows, rows))


def support_gram_kept(
    support: SupportSet, kept: GramKept | None, lower: bool = False
) -> tuple[np.ndarray, GramKept] | None:
    """:func:`support_gram` (the same bits) reusing the dots of the rows the last call kept
    (``kept``, or ``None``): a new ``gamma`` then costs the exps and the new rows' dots, not
    ``n² d / 2`` multiply-adds (the warm-up's kernel changes rebuild the Projectron's ``P``
    every ten events). Returns ``(G, kept)``, or ``None`` where :func:`support_gram` is.
    ``lower``: only ``G``'s lower triangle is written (what :func:`inverse_gram` reads)."""
    if not _gram_applies(support):
        return None
    n, gamma = support.n, float(support.kernel.gamma)
    X = support._X
    width = X.shape[1]
    if kept is None:
        kept = GramKept()
    old, m = kept.kept, kept.m
    if old is None or old[1].shape[1] != width:  # rows of another width: none comparable
        old, m = _kept_buffers(None, 0, width), 0
    out = _kept_buffers(kept.spare, n, width)
    G = kept.gram_out(n)
    policies.rbf_gram_kept(X, support._sq, support._ids, n, gamma, *old, m, *out, G, not lower)
    kept.kept, kept.spare, kept.m = out, old, n
    return G, kept


def inverse_gram(
    G: np.ndarray,
    P: np.ndarray,
    min_rel_delta: float,
    work: np.ndarray | None = None,
    lower: bool = False,
) -> bool:
    """``P[:n, :n] = G^-1`` compiled (:func:`_policies.inverse_by_cholesky`, with ``work`` as its
    scratch when given; ``lower``: its lower triangle only); ``False`` when the extension is
    not loaded or ``G`` is too close to singular (then ``P[:n, :n]`` must be overwritten by
    the caller)."""
    if policies is None or G.shape[0] == 0:
        return False
    G = np.ascontiguousarray(G, dtype=np.float64)
    return bool(policies.inverse_by_cholesky(G, P, min_rel_delta, work, not lower))


def compiled_merge_search(support: SupportSet, gamma: float) -> tuple[int, int, float] | None:
    """:func:`streamk.budget.merge.merge_search` compiled: ``(m, n, h)``, or ``None`` when the
    extension is not loaded."""
    if policies is None or support.n < 2:
        return None
    m, n, h = policies.merge_search(
        support._X, support._coef, support._sq, support._kdiag, support._ids, support.n, gamma
    )
    return int(m), int(n), float(h)


#: The empty Gram matrix :func:`merge_apply` receives when the set keeps none.
_NO_GRAM = np.zeros((0, 0))


def merge_apply(support: SupportSet, gamma: float) -> bool:
    """:func:`streamk.budget.merge.merge_smallest` in one compiled call
    (:func:`_policies.merge_apply`: the search, the merged row with its norm and kept Gram
    row, and the partner's removal); ``False`` (nothing changed) when it does not apply.

    It applies to a float RBF set of two rows or more with no tracked block open: a tracked
    block follows the set only through :class:`~streamk.learners.support.SupportSet`'s methods.
    """
    if policies is None or support.n < 2 or support._trackers:
        return False
    if type(support.kernel) is not RBF or getattr(support, "takes_objects", False):
        return False
    G = _NO_GRAM if support._G is None else support._G
    if not (support._X.flags.c_contiguous and support._coef.flags.c_contiguous):
        return False  # the buffers are written in place: no copies
    n = support.n
    _m, _partner, _h, sq_z = policies.merge_apply(
        support._X, support._coef, support._sq, support._kdiag, support._ids, G, n, gamma
    )
    support.after_compiled_changes(n - 1, support.next_id, support.width, float(sq_z))
    return True


def merge_run(
    support: SupportSet,
    policy: Merge,
    rows: np.ndarray,
    T: np.ndarray,
    codes: np.ndarray,
    margin: float,
) -> tuple[int, int] | None:
    """Learn ``rows`` (±1 targets ``T``) with the margin-perceptron rule and a
    :class:`~streamk.budget.Merge` budget (the caller checks the type) in one compiled call
    (:func:`_policies.merge_run`); ``(updates, merges)``, or ``None`` when the call does not
    apply (then the caller takes the NumPy path, nothing changed).

    The rule and ``codes`` are :func:`margin_run`'s; each update is ``Merge.insert``: the
    row is appended, then, when the set was full, the smallest vector merged with its
    partner. Applies to an RBF kernel (``Merge`` takes no other), a float support set
    without a kept Gram matrix and no tracked block open.
    """
    if not _run_applies(support, rows, T):
        return None
    m, w = rows.shape
    n = support.n
    most = min(max(n, policy.budget) + 1, n + m)  # the append comes before the merge
    width = max(w, support.width)
    support.reserve(most, width)
    Q = np.zeros((m, width))
    Q[:, :w] = rows
    n, next_id, updates, merges, sq_max = policies.merge_run(
        Q,
        support._X,
        support._sq,
        support._coef,
        support._kdiag,
        support._ids,
        np.ascontiguousarray(T, dtype=np.float64),
        n,
        policy.budget,
        support.next_id,
        float(support.kernel.gamma),
        float(margin),
        codes,
    )
    if updates:
        support.after_compiled_changes(n, next_id, w, sq_max)
    return int(updates), int(merges)
