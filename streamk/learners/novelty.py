"""On-line novelty detection by distance from the centre of mass in feature space.

Shawe-Taylor & Cristianini, §5.1: eq. (5.2) and Algorithm 5.4 / Code Fragment 5.3.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from river import base

from .. import accel
from ..budget import BudgetPolicy, Merge, Projectron
from ..errors import ConfigError
from ..kernels import (
    RBF,
    Constant,
    Kernel,
    Laplacian,
    Normalized,
    Product,
    Scaled,
    SoftMatchingSubsequences,
    Sum,
)
from . import eventpass, fastpass
from .base import KernelLearner

__all__ = ["KernelNovelty"]

_CHUNK = 1024  # rows of K(S, S) formed at once when the Gram matrix is not kept


def _nonnegative(kernel: Kernel) -> bool:
    """Whether ``k(a, b) >= 0`` is known for every input: the RBF and Laplacian kernels,
    ``Constant``, the string and tree kernels (non-negative feature maps; soft matching
    only with a non-negative similarity), and sums, products, scalings and
    normalisations of those."""
    if isinstance(kernel, RBF | Laplacian | Constant):
        return True
    if isinstance(kernel, SoftMatchingSubsequences):
        return min(min(row) for row in kernel.similarity) >= 0.0
    if isinstance(kernel, Normalized | Scaled):
        return _nonnegative(kernel.kernel)
    if isinstance(kernel, Sum | Product):
        return all(_nonnegative(k) for k in kernel.kernels)
    return bool(kernel.takes_objects)  # a string or tree kernel itself


def _smallest_flagging_budget(kernel: Kernel, delta: float) -> int | None:
    """The fewest stored events with which CF 5.3's rule can flag anything, for a kernel
    whose ``k(x, x)`` is at most ``R^2 = kernel.max_abs <= 1`` (``None`` for any other
    kernel: no such floor is known).

    A score is ``||phi(x) - phi_S||^2 <= 2 R^2`` when ``k >= 0`` (``4 R^2`` otherwise),
    and the threshold is at least ``(2 esterr)^2 = 8 (R^2 / n) (sqrt 2 + sqrt ln(1/delta))^2``
    (the largest stored distance adds to it), so nothing is flagged while
    ``n <= 4 (sqrt 2 + sqrt ln(1/delta))^2`` (half that for a kernel that can be negative):
    50 for ``delta = 0.01``, 34 for ``0.1``. ``R^2`` is taken as the bound itself, as
    ``k(x, x)`` is for the RBF and Laplacian kernels and any ``Normalized`` one.
    """
    bound = kernel.max_abs
    if bound is None or not 0.0 < bound <= 1.0:
        return None
    c2 = (math.sqrt(2.0) + math.sqrt(math.log(1.0 / delta))) ** 2
    per_score = 2.0 if _nonnegative(kernel) else 4.0
    return math.floor(8.0 * c2 / per_score) + 1


class KernelNovelty(KernelLearner, base.AnomalyDetector):
    """Squared feature-space distance of an event from the centre of mass of the data.

    The book's simple novelty detector (Shawe-Taylor & Cristianini, §5.1, Alg. 5.4,
    CF 5.3), on-line: every learned event joins the support set with weight 1, and
    :meth:`score_one` is eq. (5.2),
    ``||phi(x) - phi_S||^2 = k(x, x) - 2/W sum_i w_i k(x, x_i) + 1/W^2 sum_ij w_i w_j k(x_i, x_j)``
    with ``W = sum_i w_i``: higher means more anomalous. :meth:`predict_one` applies
    CF 5.3's threshold: novel if the distance exceeds the largest distance of a stored point
    plus twice the estimation error of the centre, ``2 sqrt(2 R^2 / n) (sqrt 2 + sqrt
    ln(1/delta))`` with ``R^2 = max_i k(x_i, x_i)`` (see Notes: with few stored events it
    flags nothing). Scoring costs O(n_support · d). Learning
    costs O(n_support · d) too when a budget policy evicts: the centre's statistics follow
    the removal through the leaving vector's kernel column, computed on the fly (no Gram
    matrix is kept, so memory stays O(n_support · d)); they follow the Projectron's
    projections and removals in O(n_support) (its ``P = K^-1`` gives ``K P k = k``) and
    Merge's merges through three kernel columns, on top of the policy's own cost.

    Parameters
    ----------
    kernel
        A :mod:`streamk.kernels` kernel. ``None`` means ``RBF(gamma="auto")``.
    budget
        ``None`` (every event is kept: the book's detector), an ``int`` (``RemoveOldest``:
        the centre of mass of the last ``budget`` events, a sliding window) or a
        :mod:`streamk.budget` policy (e.g. ``RemoveRandom`` for a reservoir-like sample).
    delta
        Confidence parameter of CF 5.3's threshold (the book uses 0.01): with probability
        ``1 - delta`` over the data, a normal point is flagged with probability
        ``<= 1 / (n + 1)`` (Prop. 5.5).

    Attributes
    ----------
    n_support
        Number of stored events the centre is computed from.
    threshold_
        CF 5.3's threshold on the squared distance for the current set.

    Notes
    -----
    The flags are CF 5.3's rule exactly, and it is very conservative: an event is flagged
    only if it lies farther from the centre than every stored event, by twice the centre's
    estimation error (Prop. 5.5 bounds the false alarms, not the misses). When
    ``k(x, x) <= 1`` (the RBF and Laplacian kernels, any ``Normalized`` one) a score is at
    most 2 (4 for a kernel that can be negative, e.g. ``Cosine``) while the threshold is at
    least ``8 (R^2 / n) (sqrt 2 + sqrt ln(1/delta))^2``, so with ``n <= 50`` stored events
    (``delta = 0.01``; 34 for ``delta = 0.1``; 25 and 17 for a kernel that can be
    negative) nothing can ever be flagged: the constructor warns when the budget keeps
    ``n`` there, naming the smallest budget that can flag. A budget does not make the
    flags sensitive again: the threshold is recomputed from the stored window, and an
    event is still flagged only beyond the farthest stored one. With the default RBF on
    river's Shuttle (5,000 events, 399 anomalies, standardised), no event was flagged
    with a budget of 300, 2,000 or none, while the ROC AUC of :meth:`score_one` was
    0.83-0.84. For alerts, threshold :meth:`score_one` yourself (e.g. at a high quantile of
    recent scores); the class has no parameter to override CF 5.3's threshold.

    The weights are uniform (``w_i = 1``) as in the book; a policy that rescales
    coefficients (e.g. the Forgetron) turns the centre into a weighted one, which the
    formulas above handle through ``W``. Under a budget the centre's statistics follow each
    eviction incrementally; each entry's rounding drift is bounded by its vector's time in
    the set (a new entry is computed afresh), and after ``_EXACT_EVERY`` (65,536) followed
    removals, projections or merges they are recomputed exactly at the next read (the
    Projectron's updates also lean on its ``P`` inverting ``K``; their error is tested to
    stay below 1e-9 relative over long streams). Before anything is learned the
    score is 0. All stored points count (the book's detector has no sparsity); for a
    sparse description use the minimal enclosing hypersphere of §7.1 (a batch solver).

    ``learn_one`` and ``learn_many`` run in compiled code when the core is built and the
    budget is none, remove-oldest, remove-random or the Forgetron
    (:mod:`streamk.learners.fastpass`), keeping the centre's statistics as the NumPy path
    keeps them; that path (``STREAMK_NO_ACCEL=1``, other
    policies) is the reference they are tested against. For the RBF, Laplacian,
    polynomial and linear kernels ``learn_one`` and ``score_one`` take the whole event
    in one compiled call (:mod:`streamk.learners.eventpass`), under those policies and the
    Projectron (and Merge with the RBF kernel), and ``learn_many`` loops that core over
    its rows where no block pass applies.

    Examples
    --------
    Shuttle (shipped with river; ~7% anomalies), scored before learning each event:

    >>> from river import datasets, metrics, preprocessing
    >>> from streamk.learners import KernelNovelty
    >>> model = preprocessing.StandardScaler() | KernelNovelty(budget=300)
    >>> auc = metrics.RollingROCAUC(window_size=10_000)
    >>> for x, y in datasets.Shuttle().take(10_000):
    ...     auc.update(y, model.score_one(x))
    ...     model.learn_one(x)
    >>> auc
    RollingROCAUC: 98.50%

    References
    ----------
    [^1]: Shawe-Taylor, J. & Cristianini, N. (2004). Kernel Methods for Pattern Analysis,
        §5.1, Alg. 5.4. Cambridge University Press.

    """

    _event: Any = None  # the compiled per-event path (eventpass), set by _reset
    #: Removals (the Projectron's projections, Merge's merges) ``r`` follows incrementally
    #: before it is dropped for an exact recomputation at the next read (bounds its
    #: rounding drift; the compiled paths count the same way).
    _EXACT_EVERY = 1 << 16
    _r_updates = 0  # (an instance pickled before the count existed reads 0)

    def __init__(
        self,
        kernel: Kernel | None = None,
        budget: int | BudgetPolicy | None = None,
        delta: float = 0.01,
    ):
        self.kernel = kernel
        self.budget = budget
        self.delta = delta
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
            raise ConfigError(f"delta must be a number in (0, 1), got {delta!r}")
        self._reset()
        self._warn_if_never_flags()

    def _warn_if_never_flags(self) -> None:
        """One ``UserWarning`` when the budget is too small for CF 5.3's rule to flag
        anything with this kernel (:func:`_smallest_flagging_budget`)."""
        cap = self._policy.budget
        kernel = self.kernel if self.kernel is not None else RBF()  # RBF(gamma="auto")
        least = _smallest_flagging_budget(kernel, float(self.delta))
        if cap is None or least is None or cap >= least:
            return
        warnings.warn(
            f"KernelNovelty(budget={cap}, delta={self.delta}) can never flag an event: with "
            f"{kernel!r} (k(x, x) <= {kernel.max_abs:g}) no score exceeds CF 5.3's threshold "
            f"while {cap} or fewer events are stored; the smallest budget that can flag is "
            f"{least}. score_one still ranks events (higher: more novel).",
            UserWarning,
            stacklevel=3,
        )

    def _reset(self, n_outputs: int = 1) -> None:
        super()._reset(n_outputs)
        self._r: np.ndarray | None = None  # K(S, S) @ w, aligned with the slots
        self._cc = 0.0  # w' K(S, S) w
        self._r_updates = 0  # removals r followed since it was last computed exactly
        self._stats_kernel: Kernel | None = None
        self._compiled_one = fastpass.OneRow("novelty")
        self._event = eventpass.event_pass(rule="novelty")  # learn_one/score_one in one call

    @classmethod
    def _unit_test_params(cls):
        yield {"budget": 60}  # 50 or fewer can never flag with the default RBF

    # -- the centre's statistics ------------------------------------------------------------------
    def _stats(self) -> tuple[np.ndarray, float]:
        """``r = K(S, S) @ w`` and ``w' K(S, S) w``, recomputed only when stale."""
        S = self._support
        if self._r is None or self._stats_kernel is not S.kernel:
            w = S.coef[:, 0]
            X = S.X
            r = np.concatenate(
                [S.kernel_block(X[s : s + _CHUNK]) @ w for s in range(0, S.n, _CHUNK)]
                or [np.zeros(0)]
            )
            self._r, self._cc, self._stats_kernel = r, float(w @ r), S.kernel
            self._r_updates = 0
        return self._r, self._cc

    def _insert(self, row: np.ndarray, k_row: np.ndarray) -> None:
        """Add an event with weight 1 through the policy, the statistics kept current when
        the set grew by it, swapped one vector for it (:meth:`_follow_swap`), or the
        Projectron or Merge changed it (:meth:`_follow_projectron`, :meth:`_follow_merge`);
        otherwise (or every :attr:`_EXACT_EVERY` followed changes) they go stale for an
        exact recomputation."""
        S = self._support
        n0 = S.n
        fresh = self._r is not None and self._stats_kernel is S.kernel
        if fresh:
            ids0, w0, next0 = S.ids.copy(), S.coef[:, 0].copy(), S.next_id
            full = self._policy.budget is not None and n0 >= self._policy.budget
            # the rows before the insert, for the columns of the vectors that leave (the
            # Projectron's statistics follow without them)
            keep_rows = full and type(self._policy) is not Projectron
            X0 = (S.X.copy() if isinstance(S.X, np.ndarray) else list(S.X)) if keep_rows else None
        self._policy.insert(S, row, np.ones(1), k_row)
        if not fresh:
            self._r = None
        elif (
            S.n == n0 + 1
            and np.array_equal(S.ids[:n0], ids0)
            and np.array_equal(S.coef[:n0, 0], w0)
        ):
            c, kxx, kw = float(S.coef[n0, 0]), float(S.kdiag[n0]), float(k_row @ w0)
            self._r = np.concatenate([self._r + c * k_row, [kw + c * kxx]])
            self._cc += 2.0 * c * kw + c * c * kxx
        elif self._r_updates >= self._EXACT_EVERY:
            self._r = None
        elif type(self._policy) is Projectron:
            if not self._follow_projectron(ids0, w0, next0, k_row):
                self._r = None
        elif type(self._policy) is Merge:
            if X0 is None or not self._follow_merge(ids0, w0, next0, X0, row, k_row):
                self._r = None
        elif X0 is None or not self._follow_swap(ids0, w0, X0, k_row):
            self._r = None

    def _follow_swap(self, ids0: np.ndarray, w0: np.ndarray, X0: Any, k_row: np.ndarray) -> bool:
        """``r`` and ``cc`` after the policy swapped one vector ``x_q`` (weight ``w_q``) for
        the new one (weight 1), then scaled every weight by ``phi`` (the Forgetron; 1
        otherwise): ``r -= w_q K(S, x_q)`` over the survivors (the column computed on the
        fly), ``r += K(S, x)`` and ``r_new = K(x, S) w + k(x, x)``, ``r *= phi``, then
        ``cc = w' r``. ``False`` (nothing changed) for any other change."""
        S = self._support
        n0, ids1 = ids0.shape[0], S.ids
        new = np.flatnonzero(ids1 == S.next_id - 1)
        if S.n != n0 or new.shape[0] != 1:
            return False
        t = int(new[0])
        surv = np.ones(n0, dtype=bool)
        surv[t] = False
        order = np.argsort(ids0)  # the survivors' old slots, by id
        perm = order[np.searchsorted(ids0, ids1[surv], sorter=order).clip(0, n0 - 1)]
        if not np.array_equal(ids0[perm], ids1[surv]):
            return False
        gone = np.ones(n0, dtype=bool)
        gone[perm] = False
        q = int(np.flatnonzero(gone)[0])
        phi = float(S.coef[t, 0])  # the new vector entered with weight 1
        w1 = S.coef[:, 0]
        if not np.array_equal(w1[surv], w0[perm] * phi if phi != 1.0 else w0[perm]):
            return False
        k_q = S.kernel_block(X0[q : q + 1])[0]  # K(x_q, S) over the new slots
        k_new = k_row[perm]  # K(x, S) over the survivors, in their new slots
        r = np.empty(n0)
        r[surv] = (self._r[perm] - w0[q] * k_q[surv]) + k_new
        r[t] = float(k_new @ w0[perm]) + float(S.kdiag[t])
        if phi != 1.0:
            r *= phi
        self._r, self._cc = r, float(w1 @ r)
        self._r_updates += 1
        return True

    def _follow_projectron(
        self, ids0: np.ndarray, w0: np.ndarray, next0: int, k_row: np.ndarray
    ) -> bool:
        """``r`` and ``cc`` after a Projectron step, in O(n) with no kernel column, for
        ``P = K^-1`` on the span (``k = K(S, x)``, ``d = P k``):

        * projected: ``w += d`` (weight 1), so ``r += K d = K P k = k``;
        * full: slot ``i`` leaves with ``w_i`` projected onto the others, ``w -= w_i
          P[:, i] / P_ii``, so ``r -= w_i K P e_i / P_ii = w_i e_i / P_ii``: every other
          entry is unchanged (``f`` keeps its value on the survivors) and entry ``i``
          leaves with its slot (the last moves in); then ``x`` is appended with weight 1
          (``r += k``, ``r_new = k·w + k(x, x)`` over the new weights).

        ``cc = w' r`` after either. ``False`` (nothing changed) for any other change."""
        S = self._support
        n0 = ids0.shape[0]
        if S.n == n0 and S.next_id == next0 and np.array_equal(S.ids, ids0):  # projected
            r = self._r + k_row
        elif S.n == n0 and S.next_id == next0 + 1 and S.ids[n0 - 1] == next0:  # swapped
            i = np.flatnonzero(~np.isin(ids0, S.ids))
            if i.shape[0] != 1:
                return False
            i, last = int(i[0]), n0 - 1
            keep = np.arange(last)
            if i != last:
                keep[i] = last  # SupportSet.remove: the last slot moves into i
            if not np.array_equal(ids0[keep], S.ids[:last]):
                return False
            w1, k = S.coef[:, 0], k_row[keep]
            r = np.empty(n0)
            r[:last] = self._r[keep] + k
            r[last] = float(k @ w1[:last]) + float(S.kdiag[last])
        else:
            return False
        self._r, self._cc = r, float(S.coef[:, 0] @ r)
        self._r_updates += 1
        return True

    def _follow_merge(
        self,
        ids0: np.ndarray,
        w0: np.ndarray,
        next0: int,
        X0: np.ndarray,
        row: np.ndarray,
        k_row: np.ndarray,
    ) -> bool:
        """``r`` and ``cc`` after Merge appended ``x`` (weight 1) to the full set, then merged
        two vectors ``m`` and ``p`` into ``z`` (``alpha_z``, in ``m``'s slot; ``p``'s slot
        gets the last one), in O(n d): first the growth (``r += k``, ``r_new = k·w +
        k(x, x)``), then ``r_j += alpha_z k(x_j, z) - w_m k(x_j, x_m) - w_p k(x_j, x_p)`` over
        the others with the three kernel columns, ``r_z = K(z, S) w`` afresh and ``cc = w'
        r``. ``False`` (nothing changed) for any other change."""
        S = self._support
        n0 = ids0.shape[0]
        if S.n != n0 or S.next_id != next0 + 1 or not isinstance(S.X, np.ndarray):
            return False
        ids_a = np.append(ids0, next0)  # the set Merge merged in: the old one and x
        w_a = np.append(w0, 1.0)
        r_a = np.append(self._r + k_row, float(k_row @ w0) + float(S.kernel.diag_one(row)))
        width = S.X.shape[1]
        X_a = np.zeros((n0 + 1, width))
        X_a[:n0, : X0.shape[1]] = X0
        X_a[n0, : row.shape[0]] = row
        p = np.flatnonzero(~np.isin(ids_a, S.ids))
        if p.shape[0] != 1:
            return False
        p = int(p[0])
        src = np.arange(n0)  # the merged-in set's slot of each slot now
        if p != n0:
            src[p] = n0
        if not np.array_equal(ids_a[src], S.ids):
            return False
        w1 = S.coef[:, 0]
        moved = np.flatnonzero((S.X != X_a[src]).any(axis=1) | (w1 != w_a[src]))
        if moved.shape[0] != 1:
            return False
        m = int(moved[0])
        cols = S.kernel_block(np.stack([X_a[src[m]], X_a[p], S.X[m]]))  # x_m, x_p, z
        r = r_a[src] - w_a[src[m]] * cols[0] - w_a[p] * cols[1] + w1[m] * cols[2]
        r[m] = float(cols[2] @ w1)
        self._r, self._cc = r, float(w1 @ r)
        self._r_updates += 1
        return True

    # -- learning ---------------------------------------------------------------------------------
    def learn_one(self, x: dict) -> None:
        event = self._event  # one compiled call when it applies (see eventpass)
        if event is not None and event.learn(self, x, None):
            return
        row = self._learn_row(x)
        if self._objects or not self._learn_one_compiled(row):
            self._insert(row, self._kernel_row(row))
            self._n_learned += 1

    def _learn_one_compiled(self, row: np.ndarray) -> bool:
        """``learn_one``'s insertion in one compiled call (:class:`~streamk.learners.
        fastpass.OneRow`), the centre's statistics carried; ``False`` (nothing changed)
        where it does not apply."""
        one = self._compiled_one
        r = self._fresh_r()
        one.stats[0], one.stats[1] = self._r_updates, self._EXACT_EVERY
        one.stats[6], one.stats[7] = self._cc, r is not None
        done = one.learn(self._support, self._policy, row, r=r)
        if done is None:
            return False
        self._cc, self._r_updates = float(one.stats[6]), int(one.stats[0])
        self._r = done[1][: self._support.n] if one.stats[7] else None
        self._n_learned += 1
        return True

    def learn_many(self, X: Any) -> None:
        """Learn the rows in order (the same model as ``learn_one`` on each)."""
        rows = self._block(X, grow=True)
        if self._objects:
            self._learn_rows(rows, [None] * len(rows), self._learn_block_row)
            return
        i = self._warm_runs(rows) if self._warming_up else 0
        warm = not i and self._warming_up
        if warm and not fastpass.block_pass_applies(self._support, self._policy, rows):
            i = self._warm_event_rows(rows, None, self._learn_block_row)  # (0 once warm)
        while i < len(rows):  # one run per kernel: the whole block after the warm-up
            end = self._fold_kernel_run(rows, i)
            i = self._until_full(
                i, end, lambda a, b, policy: self._learn_compiled(rows[a:b], policy)
            )
            if i == end or self._learn_compiled(rows[i:end]):
                i = end
                continue
            if not fastpass.block_pass_applies(self._support, self._policy, rows[i:end]):
                i += self._event_rows(rows[i:end], None, self._learn_block_row)
            if i < end:
                with self._support.track(rows[i:end]) as block:
                    self._learn_tracked(block, rows[i:end])
            i = end

    def learn_predict_many(self, X: Any, y: Any = None) -> list[bool]:
        """Flag then learn each row of a block, in order: whether ``predict_one`` flagged
        the row before it was learned (``y`` is ignored: a detector learns without labels).

        What the engine and ``streamk learn --batch-size`` call for a run of events, so
        the flags do not depend on how the stream is cut into runs. Once ``gamma="auto"``
        is estimated, one loop of the compiled per-event core over the rows, each flag from
        the kernel row the insert uses; otherwise the plain loop.
        """
        return self._learn_predict_block(X, None, self._said)

    def _said(self, row: np.ndarray, k_row: np.ndarray) -> bool:
        """``predict_one`` of a row from its kernel row ``K(row, S)`` (the NumPy path)."""
        if self._support.n == 0:
            return False
        score = float(self._distances(self._one(row), k_row[None, :])[0])
        return score > self.threshold_

    def _fresh_r(self) -> np.ndarray | None:
        """``r`` if current for the kernel in use (the compiled passes carry it forward)."""
        return self._r if self._stats_kernel is self._support.kernel else None

    def _centre(self) -> fastpass.Centre:
        """The centre's statistics as the compiled passes take them."""
        return fastpass.Centre(self._fresh_r(), self._cc, self._r_updates, self._EXACT_EVERY)

    def _warm_runs(self, rows: np.ndarray) -> int:
        """The warm-up's runs of a block in one :func:`streamk.learners.fastpass.novelty_runs`
        (:meth:`_warm_untracked`); the row it got to (0: nothing changed)."""

        def learn(Q: np.ndarray, q_sq: np.ndarray, runs: tuple) -> bool:
            done = fastpass.novelty_runs(self._support, self._policy, Q, q_sq, self._centre(), runs)
            if done is not None:
                self._r, self._cc, self._r_updates = done
                self._n_learned += Q.shape[0]
            return done is not None

        return self._warm_untracked(rows, learn)

    def _learn_compiled(self, rows: np.ndarray, policy: BudgetPolicy | None = None) -> bool:
        """Rows learned under one kernel in one untracked compiled pass
        (:func:`streamk.learners.fastpass.novelty_rows`); ``False`` (nothing changed) when
        it does not apply. ``policy``: the one to plan with, if not the learner's (the
        unbounded stand-in of :meth:`_until_full`)."""
        Q = np.ascontiguousarray(rows, dtype=np.float64)
        q_sq = accel.sqnorms(Q)
        how = fastpass.rows_plan(self._support, policy or self._policy, q_sq)
        if how is None:
            return False
        self._r, self._cc, self._r_updates = fastpass.novelty_rows(
            self._support, Q, q_sq, how, self._centre()
        )
        self._n_learned += Q.shape[0]
        return True

    def _learn_tracked(self, block: Any, rows: np.ndarray) -> None:
        """Rows learned under one kernel on a tracked block: one compiled pass when it
        applies (:func:`streamk.learners.fastpass.novelty_pass`, any vector kernel), else
        row by row."""
        S = self._support
        how = fastpass.plan(S, self._policy, block)
        if how is None:
            for j in range(rows.shape[0]):
                k_row = block.K[j, : S.n].copy()
                block.start = j + 1
                self._learn_block_row(rows[j], k_row, None)
            return
        self._r, self._cc, self._r_updates = fastpass.novelty_pass(S, block, how, self._centre())
        self._n_learned += rows.shape[0]

    def _learn_block_row(self, row: np.ndarray, k_row: np.ndarray, _: Any) -> None:
        self._insert(row, k_row)
        self._n_learned += 1

    # -- scoring ----------------------------------------------------------------------------------
    def _distances(self, Q: np.ndarray, K: np.ndarray | None = None) -> np.ndarray:
        """Eq. (5.2) for each row of ``Q`` (``K = K(Q, S)`` if already known)."""
        S = self._support
        kqq = S.kernel.diag(Q)
        W = float(S.coef[:, 0].sum()) if S.n else 0.0
        if W <= 0.0:
            return np.zeros(len(Q)) if S.n == 0 else kqq
        _, cc = self._stats()
        K = S.kernel_block(Q) if K is None else K
        d2 = kqq - (2.0 / W) * (K @ S.coef[:, 0]) + cc / (W * W)
        return np.maximum(d2, 0.0)

    def score_one(self, x: dict) -> float:
        event = self._event
        if event is not None:
            score = event.predict(self, x)
            if score is not eventpass.NOT_HANDLED:
                return score
        row = self._predict_row(x)
        if self._support.n == 0:
            return 0.0
        return float(self._distances(self._one(row), self._kernel_row(row)[None, :])[0])

    def score_many(self, X: Any) -> np.ndarray:
        """Scores of a block of events."""
        return self._distances(self._block(X, grow=False))

    @property
    def threshold_(self) -> float:
        """CF 5.3: ``(max_i ||phi(x_i) - phi_S|| + 2 * esterr)^2``; ``inf`` before learning."""
        S = self._support
        W = float(S.coef[:, 0].sum()) if S.n else 0.0
        if W <= 0.0:
            return math.inf
        r, cc = self._stats()
        train_d2 = S.kdiag - (2.0 / W) * r + cc / (W * W)
        maxdist = math.sqrt(max(float(train_d2.max()), 0.0))
        esterr = math.sqrt(2.0 * float(S.kdiag.max()) / S.n) * (
            math.sqrt(2.0) + math.sqrt(math.log(1.0 / self.delta))
        )
        return (maxdist + 2.0 * esterr) ** 2

    def predict_one(self, x: dict) -> bool:
        """Whether ``x`` is novel by CF 5.3's rule (``score > threshold_``)."""
        return self.score_one(x) > self.threshold_

    def predict_many(self, X: Any) -> np.ndarray:
        return self.score_many(X) > self.threshold_

    # -- plain data -------------------------------------------------------------------------------
    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._r = None
        self._r_updates = 0
        self._stats_kernel = None
        S = self._support
        if S._G is not None:  # a snapshot from when the learner kept K(S, S): drop it
            S._G, S.keep_gram = None, False
