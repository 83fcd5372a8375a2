"""On-line support vector regression (Shawe-Taylor & Cristianini, Alg. 7.61 / CF 7.14),
with ε, ``C`` and an offset that follow the target's running mean and spread by default."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from river import base

from .. import accel
from ..budget import BudgetPolicy
from ..errors import ConfigError, InvalidInput
from ..kernels import Kernel
from ..solvers.coordinate import svr_dual_no_bias
from . import eventpass, fastpass
from ._slotdata import SlotData
from .base import AUTO_WINDOW, KernelLearner, row_index
from .standardizer import VALUE_LIMIT

__all__ = ["OnlineSVR"]


#: ``epsilon="auto"``: this fraction of the target's running standard deviation.
AUTO_EPSILON = 0.1
#: ``C="auto"``: this multiple of the target's running standard deviation.
AUTO_C = 1.0


def _check_number(name: str, value: Any, low: float, allow_inf: bool) -> None:
    if value == "auto" and name in ("epsilon", "C"):
        return
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    ok = ok and not math.isnan(value) and (allow_inf or math.isfinite(value)) and value >= low
    if not ok:
        raise ConfigError(f"{name} must be a number >= {low}, got {value!r}")


class OnlineSVR(KernelLearner, base.MiniBatchRegressor):
    """On-line ε-insensitive support vector regression, with scale-aware defaults.

    The book's adatron-style rule for the ε-insensitive SVR with fixed offset 0
    (Shawe-Taylor & Cristianini, Alg. 7.61, CF 7.14): ``f(x) = sum_i alpha_i k(x_i, x)``;
    a coordinate step ``alpha_i <- alpha_i + (r_i - eps * sgn(alpha_i)) / k(x_i, x_i)`` on
    the residual ``r_i = y_i - f(x_i)``, stopped at 0 when it would cross zero, then clipped
    to ``[-C, C]``. At ``alpha_i = 0`` the book's reading of ``sgn`` makes the step a
    soft-threshold, ``sign(r) * max(|r| - eps, 0)``: an event inside the ε-tube changes
    nothing, which is where the sparsity comes from. On-line, each event gets one step from
    ``alpha = 0`` (it joins the support set only if the step is non-zero), then
    ``resweeps`` passes over the support set. :meth:`fit` runs the cyclic algorithm on a
    fixed set until the coefficients stop changing. A step costs O(n_support · d), plus
    O(resweeps · n_support²) for the resweeps.

    Parameters
    ----------
    kernel
        A :mod:`streamk.kernels` kernel. ``None`` means ``RBF(gamma="auto")`` (γ estimated
        from the features, as for the classifiers).
    epsilon
        Half-width of the insensitive tube, in the target's units. ``"auto"`` (the default):
        ``0.1 × s``, with ``s`` the running standard deviation of the targets learned so far.
    C
        Box ``|alpha_i| <= C``. ``inf`` is the book's version (no box). ``"auto"`` (the
        default): ``1.0 × s``. Together with ``epsilon="auto"`` these are ``epsilon=0.1,
        C=1`` on a standardised target, without standardising it.
    resweeps
        Passes over the support set after each event. ``0`` (the default) moves only the
        new example: with a finite ``C`` this is the kernelised passive-aggressive
        regression PA-I, with ``C = inf`` its PA variant.
    budget
        ``None`` (unbounded), an ``int`` (``RemoveOldest``) or a :mod:`streamk.budget` policy.
    offset
        A constant added to the kernel expansion: ``f(x) = offset + sum_i alpha_i k(x_i, x)``.
        ``"mean"`` (the default) is the running mean of the targets, so the model starts as
        the running mean and learns the residual; ``0.0`` is the book's model (no bias).

    Without these defaults an RBF expansion falls back to 0 away from its support vectors
    and an ε or box in the wrong units makes every event a support vector: on river's
    TrumpApproval (targets near 40) ``epsilon=0.1, C=inf`` without offset gave MAE 2.28
    against the running mean's 1.57; the defaults give 0.28. Each learned event first
    updates the running mean and spread (Welford), then takes its step with the values
    they give; ``state()`` keeps the running statistics, so a snapshot resumes with the
    same ε, ``C`` and offset (``epsilon_``, ``C_``, ``offset_``). A target above
    :data:`TARGET_LIMIT` (1e150) in size is refused (``InvalidInput``): its square would
    make the running variance infinite, and ε, ``C`` and the offset with it, for good.

    Attributes
    ----------
    n_support
        Number of support vectors held.
    n_updates
        Number of events that entered the support set.
    epsilon_, C_, offset_
        The values in use, with ``"auto"`` and ``"mean"`` resolved.

    Notes
    -----
    The fixed point of the cyclic algorithm maximises
    ``sum(y alpha) - eps sum|alpha| - 1/2 alpha' K alpha`` subject to ``|alpha_i| <= C``: the
    ε-SVR without bias. A support vector whose coefficient returns to 0 during a resweep
    leaves the set (it no longer changes ``f``) and cannot come back, so the on-line model
    approximates the batch optimum over the stream; :meth:`fit` gives the exact one on a
    window. Without ``C`` the only regulariser is the tube, which can overfit (book, §7.4).
    ``learn_many`` replays the rows in order, so it gives the same model as ``learn_one``
    (to rounding). With ``resweeps=0`` both run in compiled code when the core is built
    (:mod:`streamk.learners.fastpass`: kernels computed in C, or a tracked block's Gram
    matrix for sums, products and normalised kernels; no budget, remove-oldest,
    remove-random or the Forgetron); otherwise, and with ``STREAMK_NO_ACCEL=1``, the NumPy
    path runs on one tracked kernel block. ``learn_one`` and ``predict_one`` then take
    the whole event (dict to row, step, support-set write) in one compiled call
    (:mod:`streamk.learners.eventpass`) for the RBF, Laplacian, polynomial and linear
    kernels, under those policies and the Projectron (and Merge with the RBF kernel);
    ``learn_many`` takes that core row by row in C where no block pass applies.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics
    >>> from streamk.learners import OnlineSVR
    >>> evaluate.progressive_val_score(datasets.TrumpApproval(), OnlineSVR(), metrics.MAE())
    MAE: 0.28137

    References
    ----------
    [^1]: Shawe-Taylor, J. & Cristianini, N. (2004). Kernel Methods for Pattern Analysis,
        §7.4, Alg. 7.61. Cambridge University Press.
    [^2]: Crammer, K., Dekel, O., Keshet, J., Shalev-Shwartz, S. & Singer, Y. (2006). Online
        passive-aggressive algorithms. JMLR 7.

    """

    _event: Any = None  # the compiled per-event path (eventpass), set by _reset

    def __init__(
        self,
        kernel: Kernel | None = None,
        epsilon: float | str = "auto",
        C: float | str = "auto",
        resweeps: int = 0,
        budget: int | BudgetPolicy | None = None,
        offset: float | str = "mean",
    ):
        self.kernel = kernel
        self.epsilon = epsilon
        self.C = C
        self.resweeps = resweeps
        self.budget = budget
        self.offset = offset
        _check_number("epsilon", epsilon, 0.0, allow_inf=False)
        _check_number("C", C, 0.0, allow_inf=True)
        if C == 0:
            raise ConfigError("C must be > 0 (inf for no box)")
        if offset != "mean":
            try:
                _check_number("offset", offset, -math.inf, allow_inf=False)
            except ConfigError:
                raise ConfigError(
                    f'offset must be "mean" or a finite number, got {offset!r}'
                ) from None
        if isinstance(resweeps, bool) or not isinstance(resweeps, int) or resweeps < 0:
            raise ConfigError(f"resweeps must be an int >= 0, got {resweeps!r}")
        self._reset()

    @property
    def _keep_gram(self) -> bool:  # K(S, S) is needed only to resweep
        return self.resweeps > 0

    def _reset(self, n_outputs: int = 1) -> None:
        super()._reset(n_outputs)
        self._targets = SlotData(1)  # y of each support vector
        self._compiled_one = fastpass.OneRow("svr")
        self._event = eventpass.event_pass(rule="svr")  # the whole learn_one in one call
        self.n_updates = 0
        # running count, mean and sum of squared deviations of the targets (Welford)
        self._y_n, self._y_mean, self._y_m2 = 0, 0.0, 0.0

    @classmethod
    def _unit_test_params(cls):
        # river checks regression on raw TrumpApproval (ordinal_date ~ 7e5). There, RBF's
        # ||a||^2 + ||b||^2 - 2ab loses ~1e-4 of d^2 to cancellation, and while
        # gamma="auto" is still large such rounding moves tiny predictions by more than the
        # checks' 1e-6 relative tolerance; a Laplacian (cdist) or a small fixed gamma is exact.
        from ..kernels import RBF, Laplacian

        yield {"kernel": Laplacian(), "C": 1.0, "budget": 50}
        yield {"kernel": RBF(gamma=1e-3), "C": 5.0, "epsilon": 0.5, "resweeps": 1, "budget": 30}

    def _record_targets(self, ids: np.ndarray, ys: np.ndarray) -> None:
        """Record the targets of new support vectors, then drop those of evicted ones once
        they outnumber the live rows: with ``resweeps=0`` nothing else aligns the store, and
        without this it grew by one entry per update however small the budget."""
        self._targets.extend(ids, ys)
        self._targets.prune(self._support.ids)

    # -- the rule -------------------------------------------------------------------------------
    def _new_alpha(self, r: float, kxx: float) -> float:
        """Step from alpha = 0: the soft-threshold (inside the tube nothing happens)."""
        if kxx <= 0.0:
            return 0.0
        C = self.C_
        g = math.copysign(max(abs(r) - self.epsilon_, 0.0), r)
        return min(max(g / kxx, -C), C)

    # -- the target's scale ------------------------------------------------------------------------
    def _observe_target(self, y: float) -> None:
        """Fold ``y`` into the running mean and spread (Welford's update)."""
        self._y_n += 1
        delta = y - self._y_mean
        self._y_mean += delta / self._y_n
        self._y_m2 += delta * (y - self._y_mean)

    @property
    def target_spread_(self) -> float:
        """Running standard deviation of the targets learned so far (0 before two)."""
        return math.sqrt(self._y_m2 / self._y_n) if self._y_n else 0.0

    @property
    def epsilon_(self) -> float:
        """The tube half-width in use (``"auto"`` resolved from the running spread)."""
        if self.epsilon == "auto":
            return AUTO_EPSILON * self.target_spread_
        return float(self.epsilon)

    @property
    def C_(self) -> float:
        """The box in use (``"auto"`` resolved from the running spread)."""
        if self.C == "auto":
            return AUTO_C * self.target_spread_
        return float(self.C)

    @property
    def offset_(self) -> float:
        """The constant added to the kernel expansion (the running mean for ``"mean"``)."""
        return self._y_mean if self.offset == "mean" else float(self.offset)

    # -- on-line learning -------------------------------------------------------------------------
    def learn_one(self, x: dict, y: float) -> None:
        if type(y) is not float:  # the compiled path declines a non-finite float itself
            y = _target(y)
        event = self._event  # resweeps=0: one compiled call when it applies (see eventpass)
        if event is not None and not self.resweeps and event.learn(self, x, y):
            return  # it settles self._targets where it records a target
        y = _target(y)  # a non-finite float raises here, before anything changed
        row = self._learn_row(x)
        if not (self.resweeps or self._objects) and self._learn_one_compiled(row, y):
            return
        k_row = self._kernel_row(row)
        self._update(row, float(k_row @ self._support.coef[:, 0]), k_row, y)

    def _learn_one_compiled(self, row: np.ndarray, y: float) -> bool:
        """``learn_one``'s step in one compiled call (:class:`~streamk.learners.fastpass.
        OneRow`); ``False`` (nothing changed) where it does not apply."""
        one = self._compiled_one
        done = one.learn(self._support, self._policy, row, y, head=self._stats_head)
        if done is None:
            return False
        stats = one.stats
        self._y_n, self._y_mean, self._y_m2 = int(stats[0]), float(stats[1]), float(stats[2])
        if done[0]:  # folded into the store when next read (one concatenation for many)
            self._targets.add(self._support.next_id - 1, y)
            self._targets.settle(self._support)
            self.n_updates += 1
        self._n_learned += 1
        return True

    def learn_many(self, X: Any, y: Any) -> None:
        rows = self._block(X, grow=True)
        targets = _targets(y)
        if len(targets) != len(rows):
            raise InvalidInput(f"X has {len(rows)} rows but y has {len(targets)} targets")
        if self._objects or self.resweeps:
            self._learn_rows(rows, targets, self._learn_block_row)
            return
        i = self._warm_runs(rows, targets) if self._warming_up else 0
        warm = not i and self._warming_up
        if warm and not fastpass.block_pass_applies(self._support, self._policy, rows):
            i = self._warm_event_rows(rows, targets, self._learn_block_row)  # (0 once warm)
            self._targets.settle(self._support)
        while i < len(targets):  # one run per kernel: the whole block after the warm-up
            end = self._fold_kernel_run(rows, i)
            i = self._until_full(
                i, end, lambda a, b, policy: self._learn_compiled(rows[a:b], targets[a:b], policy)
            )
            if i == end or self._learn_compiled(rows[i:end], targets[i:end]):
                i = end
                continue
            if not fastpass.block_pass_applies(self._support, self._policy, rows[i:end]):
                i += self._event_rows(rows[i:end], targets[i:end], self._learn_block_row)
                self._targets.settle(self._support)
            if i < end:
                with self._support.track(rows[i:end]) as block:
                    self._learn_tracked(block, rows[i:end], targets[i:end])
            i = end

    def learn_predict_many(self, X: Any, y: Any) -> list[float]:
        """Test-then-train on a block: what ``predict_one`` said before each row, each row
        then learned as ``learn_one`` would (the same predictions and model).

        What ``streamk learn --batch-size`` and the engine call for a labelled block, so
        their error figures are the per-event ones. With ``resweeps=0`` and once
        ``gamma="auto"`` is estimated, one loop of the compiled per-event core over the
        rows, each prediction from the kernel row the step uses; otherwise the plain loop.
        """
        return self._learn_predict_apart(X, y, None)

    def _learn_predict_apart(self, X: Any, y: Any, said_X: Any) -> list[float]:
        """:meth:`learn_predict_many`, each prediction made of ``said_X``'s row (where
        given) before ``X``'s row is learned: on-line standardisation's block
        (:mod:`streamk.learners.scaling`) predicts from an event standardised before it
        moves the statistics and learns it standardised after."""
        targets = _targets(y)  # a bad target refuses the block before anything is learned
        preds = self._learn_predict_block(
            X, targets, self._said, plain=bool(self.resweeps), said_X=said_X
        )
        self._targets.settle(self._support)
        return preds

    def _said(self, row: np.ndarray, k_row: np.ndarray) -> float:
        """``predict_one`` of a row from its kernel row ``K(row, S)`` (the NumPy path)."""
        if self._support.n == 0:
            return self.offset_
        return self.offset_ + float(k_row @ self._support.coef[:, 0])

    def _warm_runs(self, rows: np.ndarray, targets: list[float]) -> int:
        """The warm-up's runs of a block in one :func:`streamk.learners.fastpass.svr_runs`
        (:meth:`_warm_untracked`); the row it got to (0: nothing changed)."""

        def learn(Q: np.ndarray, q_sq: np.ndarray, runs: tuple) -> bool:
            stats, ys = self._stats(), targets[: Q.shape[0]]
            joined = fastpass.svr_runs(self._support, self._policy, Q, q_sq, ys, stats, runs)
            if joined is not None:
                self._after_compiled(stats, joined, ys)
            return joined is not None

        return self._warm_untracked(rows, learn)

    def _learn_compiled(
        self, rows: np.ndarray, targets: list[float], policy: BudgetPolicy | None = None
    ) -> bool:
        """Rows learned under one kernel in one untracked compiled pass (each row's kernel
        values against the set computed afresh in C: see
        :func:`streamk.learners.fastpass.svr_rows`); ``False`` (nothing changed) when it
        does not apply. ``policy``: the one to plan with, if not the learner's (the
        unbounded stand-in of :meth:`_until_full`)."""
        Q = np.ascontiguousarray(rows, dtype=np.float64)
        q_sq = accel.sqnorms(Q)
        how = fastpass.rows_plan(self._support, policy or self._policy, q_sq)
        if how is None:
            return False
        stats = self._stats()
        joined = fastpass.svr_rows(self._support, Q, q_sq, targets, how, stats)
        self._after_compiled(stats, joined, targets)
        return True

    def _learn_tracked(self, block: Any, rows: np.ndarray, targets: list[float]) -> None:
        """Rows learned under one kernel on a tracked block: one compiled pass when it
        applies (:func:`streamk.learners.fastpass.svr_pass`, any vector kernel), else row
        by row."""
        how = fastpass.plan(self._support, self._policy, block)
        if how is None:
            for j, target in enumerate(targets):
                k_row = block.K[j, : self._support.n].copy()
                block.start = j + 1
                self._learn_block_row(rows[j], k_row, target)
            return
        stats = self._stats()
        joined = fastpass.svr_pass(self._support, block, targets, how, stats)
        self._after_compiled(stats, joined, targets)

    def _rule(self) -> tuple[float, float, float]:
        """``(eps, C, offset)`` for the compiled passes: -1 for ``"auto"``, NaN for
        ``"mean"``."""
        eps = -1.0 if self.epsilon == "auto" else float(self.epsilon)
        C = -1.0 if self.C == "auto" else float(self.C)
        offset = math.nan if self.offset == "mean" else float(self.offset)
        return eps, C, offset

    def _stats_head(self) -> tuple[float, ...]:
        """The first six ``stats`` (see :meth:`_stats`) as a tuple."""
        return (self._y_n, self._y_mean, self._y_m2, *self._rule())

    def _stats(self) -> np.ndarray:
        """The compiled passes' ``stats``: the targets' running statistics and the rule."""
        return fastpass.svr_stats(self._y_n, self._y_mean, self._y_m2, self._rule())

    def _after_compiled(self, stats: np.ndarray, joined: np.ndarray, targets: list[float]) -> None:
        """The running statistics, counters and per-vector targets after a compiled pass."""
        self._y_n, self._y_mean, self._y_m2 = int(stats[0]), float(stats[1]), float(stats[2])
        count = int(joined.sum())
        if count:  # their ids are consecutive, in row order: SlotData.add for each
            first = self._support.next_id - count
            Y = np.asarray(targets, dtype=np.float64)[joined]
            self._record_targets(np.arange(first, first + count, dtype=np.int64), Y)
        self.n_updates += count
        self._n_learned += len(targets)

    def _learn_block_row(self, row: np.ndarray, k_row: np.ndarray, target: float) -> None:
        self._update(row, float(k_row @ self._support.coef[:, 0]), k_row, target)

    def _update(self, row: np.ndarray, f: float, k_row: np.ndarray, y: float) -> None:
        self._observe_target(y)
        kxx = float(self._support.kernel.diag(self._one(row))[0])
        alpha = self._new_alpha(y - self.offset_ - f, kxx)
        if alpha != 0.0:
            new_id = self._support.next_id
            self._policy.insert(self._support, row, np.array([alpha]), k_row)
            if self._support.next_id > new_id:  # added (a Projectron may project it instead)
                self._record_targets(np.array([new_id], dtype=np.int64), np.array([y]))
            self.n_updates += 1
        self._n_learned += 1
        if self.resweeps:
            self._resweep(self.resweeps)

    def _resweep(self, passes: int) -> None:
        """``passes`` cyclic steps of CF 7.14 over the support set, oldest first.

        Compiled where :mod:`~streamk.learners.dualpass` applies, else the Python loop below
        (the reference); then vectors whose coefficient returned to 0 leave the set.
        """
        from . import dualpass  # here: the rest of this module is another change's

        S = self._support
        if S.n == 0:
            return
        ys = self._targets.align(S.ids)[:, 0] - self.offset_
        known = ~np.isnan(ys)
        by_age = np.argsort(S.ids, kind="stable")
        order = by_age[(known & (S.kdiag > 0))[by_age]]
        eps, C = self.epsilon_, self.C_
        coef = S.coef[:, 0]  # a live view: add_coef writes through it
        if not dualpass.svr_resweep(S, ys, order, eps, C, passes):
            G = S.gram_matrix
            y_, kd_, order_ = ys.tolist(), S.kdiag.tolist(), order.tolist()
            for _ in range(passes):
                f = G @ coef
                for i in order_:
                    a = float(coef[i])
                    r = y_[i] - float(f[i])
                    if a > 0.0:
                        g = r - eps
                    elif a < 0.0:
                        g = r + eps
                    else:
                        g = math.copysign(max(abs(r) - eps, 0.0), r)
                    a_new = a + g / kd_[i]
                    if a * a_new < 0.0:  # crossing zero: stop at 0
                        a_new = 0.0
                    a_new = min(max(a_new, -C), C)
                    if a_new != a:
                        delta = a_new - a
                        S.add_coef(i, delta)
                        f += G[i] * delta  # G is symmetric: row i is column i
        dead = np.flatnonzero(known & (coef == 0.0))
        for slot in dead[::-1]:  # descending, so swap-remove never moves a row still to drop
            S.remove(int(slot))

    # -- batch ----------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, max_epochs: int = 1000, tol: float = 1e-6) -> OnlineSVR:
        """Train from scratch on a fixed set with the cyclic algorithm (CF 7.14) to convergence.

        Solved by :func:`streamk.solvers.coordinate.svr_dual_no_bias` (the same fixed point)
        until the largest KKT violation is below ``tol`` (a ``ConvergenceWarning`` after
        ``max_epochs`` sweeps). ``gamma="auto"`` is estimated from the first 200 rows.
        Examples with a non-zero coefficient become the support set (through the budget policy,
        in row order); the model then predicts and continues on-line as usual.
        """
        self._reset()
        rows = self._block(X, grow=True)
        targets = np.array(_targets(y), dtype=np.float64)
        if len(targets) != len(rows):
            raise InvalidInput(f"X has {len(rows)} rows but y has {len(targets)} targets")
        if not len(targets):
            return self
        for value in targets.tolist():
            self._observe_target(value)
        if self._scale is not None:
            self._scale.update(rows[:AUTO_WINDOW])
            self._support.set_kernel(self._auto_kernel.resolve(self._scale))
        K = self._support.kernel.gram(rows, rows)
        beta = svr_dual_no_bias(
            K, targets - self.offset_, self.epsilon_, self.C_, tol=tol, max_epochs=max_epochs
        ).alpha
        for i in np.flatnonzero(beta):
            new_id = self._support.next_id
            k_row = self._support.kernel_block(self._one(rows[i]))[0]
            self._policy.insert(self._support, rows[i], beta[i : i + 1], k_row)
            if self._support.next_id > new_id:  # added (a Projectron may project it instead)
                self._targets.add(new_id, targets[i])
            self.n_updates += 1
        self._n_learned = len(targets)
        return self

    # -- prediction -------------------------------------------------------------------------------
    def predict_one(self, x: dict) -> float:
        event = self._event
        if event is not None:
            f = event.predict(self, x)
            if f is not eventpass.NOT_HANDLED:
                return f
        if self._support.n == 0:
            return self.offset_
        f = float(self._kernel_row(self._predict_row(x)) @ self._support.coef[:, 0])
        return self.offset_ + f

    def predict_many(self, X: Any):
        import pandas as pd

        F = self._support.decision(self._block(X, grow=False))[:, 0] + self.offset_
        return pd.Series(F, index=row_index(X), dtype=np.float64)

    # -- plain data -------------------------------------------------------------------------------
    def _extra_state(self) -> dict[str, Any]:
        self._targets.align(self._support.ids)
        return {
            "sv_target": self._targets.state(),
            "n_updates": self.n_updates,
            "target_stats": [self._y_n, self._y_mean, self._y_m2],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> OnlineSVR:
        """Rebuild from :meth:`state`; snapshots written before ``offset`` existed used none."""
        params = state.get("params") if isinstance(state, dict) else None
        if isinstance(params, dict) and "offset" not in params:  # else base from_state says
            state = {**state, "params": {**state["params"], "offset": 0.0}}
        return super().from_state(state)

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._targets = SlotData.from_state(self._support.ids, state["sv_target"])
        self.n_updates = int(state["n_updates"])
        n, mean, m2 = state.get("target_stats", (0, 0.0, 0.0))
        self._y_n, self._y_mean, self._y_m2 = int(n), float(mean), float(m2)


#: The largest target size taken: the running mean and variance of the targets (the offset
#: ``"mean"``, ``epsilon`` and ``C`` ``"auto"``) stay finite below it; one target whose
#: square overflowed made them infinite, and every later prediction with them. The
#: standardiser's bound on feature values, for the same running statistics.
TARGET_LIMIT = VALUE_LIMIT


def _target(y: Any) -> float:
    if isinstance(y, str | bytes):  # float("3") would take it: a parsing slip upstream
        raise InvalidInput(f"the target must be a number, got the text {y!r:.100}")
    try:
        value = float(y)
    except (TypeError, ValueError):
        raise InvalidInput(f"the target must be a number, got {y!r:.100}") from None
    except OverflowError:  # an int beyond any float
        raise InvalidInput(f"the target is too large, got {y!r:.40}") from None
    if not math.isfinite(value):
        raise InvalidInput(f"the target must be finite, got {y!r}")
    if abs(value) > TARGET_LIMIT:
        raise InvalidInput(
            f"the target is too large: {value!r} (at most {TARGET_LIMIT:g} in size; the "
            "targets' running variance would overflow)"
        )
    return value


def _targets(y: Any) -> list[float]:
    """``[_target(v) for v in y]``: one conversion for a numeric array or Series whose
    values are all finite (about a tenth of the time a row), element by element
    otherwise, which says what is wrong."""
    if getattr(getattr(y, "dtype", None), "kind", None) in ("f", "i", "u", "b"):
        try:
            values = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):  # e.g. a nullable column holding NA
            values = None
        if values is not None and values.ndim == 1 and np.isfinite(values).all():
            if not (np.abs(values) > TARGET_LIMIT).any():
                return values.tolist()
    return [_target(v) for v in y]
