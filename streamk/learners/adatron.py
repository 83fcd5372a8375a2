"""Kernel adatron (Shawe-Taylor & Cristianini, Alg. 7.59 / CF 7.13), on-line and batch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from river import base

from ..budget import BudgetPolicy
from ..errors import ConfigError, InvalidInput
from ..kernels import Kernel
from ..solvers.coordinate import adatron_dual
from . import dualpass, eventpass
from ._slotdata import SlotData
from .base import AUTO_WINDOW, as_list
from .classifier import KernelClassifier
from .labels import LabelCoder, check_labels

__all__ = ["KernelAdatron"]


class KernelAdatron(KernelClassifier, base.MiniBatchClassifier):
    """Kernel adatron: coordinate ascent on the no-bias SVM dual, one example at a time.

    The book's "on-line update rule that models the hard margin SVM with fixed threshold
    0" (Shawe-Taylor & Cristianini, Alg. 7.59, CF 7.13) with the exact coordinate step
    ``alpha_i <- clip(alpha_i + (1 - y_i f(x_i)) / k(x_i, x_i), 0, C)`` (the book's step 1
    diverges when ``k(x, x) > 2``), ``f(x) = sum_i alpha_i y_i k(x_i, x)``. On-line, each
    event gets one step from ``alpha = 0`` (it joins the support set only if its
    ``alpha`` becomes positive), then ``resweeps`` passes of the same step over the support
    set move the earlier coefficients towards the optimum. :meth:`fit` runs the book's
    cyclic algorithm on a fixed set until the coefficients stop changing. A step costs
    O(n_support · d) kernel work plus O(resweeps · n_support²) for the resweeps: per pass
    one product ``G @ coef`` and one Gram-matrix row per coefficient that moved, in
    compiled code where it is built (inside the per-event core's call, or
    :mod:`streamk.learners.dualpass`), else a Python loop.

    Parameters
    ----------
    kernel
        A :mod:`streamk.kernels` kernel. ``None`` means ``RBF(gamma="auto")``. There is no
        bias: use ``Sum(RBF(...), Constant(1.0))`` to get one.
    C
        Soft-margin constant. ``inf`` (the default) is the book's hard margin.
    norm
        ``1``: 1-norm soft margin, ``0 <= alpha <= C`` (the box). ``2``: 2-norm soft margin,
        ``1/C`` added to the kernel's diagonal during training only (no box).
    resweeps
        Passes over the support set after each event. ``0`` (the default): only the new
        example moves, one compiled call per event; the batch solver of a consolidation
        (:mod:`streamk.consolidation`) moves the earlier coefficients to the optimum.
        ``1`` or more: the on-line passes do it too, at O(resweeps · n_support²) per event.
    budget
        ``None`` (unbounded), an ``int`` (``RemoveOldest``) or a :mod:`streamk.budget` policy.

    Attributes
    ----------
    n_support
        Number of support vectors held.
    n_updates
        Number of events that entered the support set.
    classes_
        Labels seen, in order of first appearance.

    Notes
    -----
    The fixed point of the cyclic algorithm is the maximiser of
    ``sum(alpha) - 1/2 alpha' H alpha`` subject to ``0 <= alpha <= C`` with
    ``H_ij = y_i y_j k(x_i, x_j)`` (plus ``delta_ij / C`` for the 2-norm): the C-SVM
    without bias. On-line, a support vector whose coefficient returns to 0 in every column
    during a resweep **leaves the set**: it no longer changes ``f``, leaving keeps the set
    sparse, and it frees budget. The price is that it cannot come back later, so the on-line
    model approximates the batch optimum over the stream seen so far (call :meth:`fit` on a
    window for the exact one). Labels and multiclass work as in
    :class:`~streamk.learners.perceptron.KernelPerceptron`: one-vs-rest columns over one
    shared support set, each column its own adatron. ``learn_many`` replays the rows in
    order as ``learn_one`` would, so it gives the same model. ``learn_one`` and
    ``predict_one`` take the whole event in one compiled call
    (:mod:`streamk.learners.eventpass`) for the RBF, Laplacian, polynomial and linear
    kernels and their sums, products, scalings and normalisations, under no budget,
    remove-oldest, remove-random, remove-smallest, the Forgetron or the Projectron (and
    Merge with the RBF kernel); ``learn_many`` and ``learn_predict_many`` loop the same
    core over their rows in C (``EventPass.learn_rows``). With ``resweeps >= 1`` that call
    also keeps the Gram matrix, runs the passes and removes the vectors they emptied
    (every policy above but the Projectron, which takes the NumPy path with the passes in
    :mod:`streamk.learners.dualpass`); it takes each step's ``G[i] @ coef`` itself, so its
    coefficients are the NumPy path's to rounding (``tests/test_event_resweeps.py``: the
    same predictions and support ids, coefficients within 1e-9 relative). With
    ``resweeps=0``, on rows of 4 features or more, from 256 support vectors on (1,024 on a
    machine without AVX-512), it takes four rows' dot products against the set in one pass
    over it (the same bits as one row at a time; not under the Projectron, nor
    under a full Forgetron without AVX-512).

    Examples
    --------
    >>> from river import datasets, evaluate, metrics
    >>> from streamk.learners import KernelAdatron
    >>> model = KernelAdatron(C=1.0, budget=200)
    >>> evaluate.progressive_val_score(datasets.Bananas().take(2000), model, metrics.Accuracy())
    Accuracy: 86.14%

    References
    ----------
    [^1]: Shawe-Taylor, J. & Cristianini, N. (2004). Kernel Methods for Pattern Analysis,
        §7.4, Alg. 7.59. Cambridge University Press.
    [^2]: Friess, T., Cristianini, N. & Campbell, C. (1998). The kernel-adatron algorithm: a
        fast and simple learning procedure for support vector machines. ICML.

    """

    def __init__(
        self,
        kernel: Kernel | None = None,
        C: float = math.inf,
        norm: int = 1,
        resweeps: int = 0,
        budget: int | BudgetPolicy | None = None,
    ):
        self.kernel = kernel
        self.C = C
        self.norm = norm
        self.resweeps = resweeps
        self.budget = budget
        if isinstance(C, bool) or not isinstance(C, (int, float)) or not C > 0:
            raise ConfigError(f"C must be a number > 0 (inf for the hard margin), got {C!r}")
        if norm not in (1, 2) or isinstance(norm, bool):
            raise ConfigError(f"norm must be 1 (box C) or 2 (1/C on the diagonal), got {norm!r}")
        if isinstance(resweeps, bool) or not isinstance(resweeps, int) or resweeps < 0:
            raise ConfigError(f"resweeps must be an int >= 0, got {resweeps!r}")
        self._reset()

    @property
    def _keep_gram(self) -> bool:  # K(S, S) is needed only to resweep
        return self.resweeps > 0

    def _reset(self, n_outputs: int = 1) -> None:
        super()._reset(n_outputs)
        self._labels = LabelCoder()
        self._cls = SlotData(1)  # class index of each support vector
        self.n_updates = 0
        self._event = eventpass.event_pass(rule="adatron")  # one compiled call an event
        # (support set, its rows_version, class per slot, slots oldest first, its ids then)
        self._slots_cache: tuple[Any, int, np.ndarray, np.ndarray, np.ndarray] | None = None

    @classmethod
    def _unit_test_params(cls):
        yield {"C": 1.0, "budget": 30}

    # -- the problem's constants ------------------------------------------------------------------
    @property
    def _mu(self) -> float:
        """Diagonal shift of the 2-norm soft margin (0 for the 1-norm)."""
        return 1.0 / self.C if self.norm == 2 else 0.0

    @property
    def _upper(self) -> float:
        return float(self.C) if self.norm == 1 else math.inf

    def _targets(self, cls_idx: np.ndarray) -> np.ndarray:
        """±1 targets ``(n, n_outputs)`` of support vectors with class indices ``cls_idx``."""
        idx = cls_idx.astype(np.intp)
        if self._labels.multiclass:
            T = -np.ones((idx.shape[0], self._labels.n_outputs))
            T[np.arange(idx.shape[0]), idx] = 1.0
            return T
        return np.asarray(self._labels.signs, dtype=np.float64)[idx][:, None]

    # -- on-line learning -------------------------------------------------------------------------
    def learn_one(self, x: dict, y: Any) -> None:
        event = self._event  # the whole event in one call (see eventpass)
        if event is not None and event.learn(self, x, y):
            return  # it settles self._cls where it records a class
        row = self._labelled_row(x, y)
        k_row = self._kernel_row(row)
        self._update(row, k_row @ self._support.coef, k_row, y)
        self._cls.settle(self._support)  # bounded: evicted rows' classes are dropped

    def learn_many(self, X: Any, y: Any) -> None:
        """Learn the rows in order, each exactly as :meth:`learn_one` would: through the
        compiled per-event core in C where it applies (``EventPass.learn_rows``), the rows
        it declines on the NumPy path in place.

        No tracked kernel block: every resweep moves coefficients all over the set, and a
        block's decision values would cost O(block · n_support) per event to keep current,
        more than the event's own kernel row.
        """
        rows = self._block(X, grow=True)
        labels = as_list(y)
        if len(labels) != len(rows):
            raise InvalidInput(f"X has {len(rows)} rows but y has {len(labels)} labels")
        check_labels(labels)  # a bad label refuses the block, nothing learned
        if self._objects:
            self._learn_rows(rows, labels, self._learn_block_row)
        elif self._event is not None:
            self._learn_runs(rows, labels)
        else:
            S = self._support
            for row, label in zip(rows, labels):
                self._add_label(label)
                if self._warming_up:
                    self._refine_gamma(row)
                k_row = S.kernel_row(row)
                self._update(row, k_row @ S.coef, k_row, label)
        self._cls.settle(self._support)

    def learn_predict_many(self, X: Any, y: Any) -> list[Any]:
        """Test-then-train on a block: what ``predict_one`` said before each row, each row
        then learned as ``learn_one`` would (the same predictions and model).

        Once ``gamma="auto"`` is estimated, one loop of the compiled per-event core over
        the block's rows (``EventPass.learn_rows``, its predictions from the kernel row it
        learns from), where the generic loop made a dict of each row and two calls; the
        rows the core declines take the NumPy path in place.
        """
        return self._learn_predict_apart(X, y, None)

    def _learn_predict_apart(self, X: Any, y: Any, said_X: Any) -> list[Any]:
        """:meth:`learn_predict_many`, each prediction made of ``said_X``'s row (where
        given) before ``X``'s row is learned: on-line standardisation's block
        (:mod:`streamk.learners.scaling`) predicts from an event standardised before it
        moves the statistics and learns it standardised after."""
        labels = as_list(y)
        check_labels(labels)  # a bad label refuses the block, nothing learned
        preds = self._learn_predict_block(X, labels, self._predict_event_row, said_X=said_X)
        self._cls.settle(self._support)
        return preds

    def _learn_runs(self, rows: np.ndarray, labels: list[Any]) -> None:
        """``resweeps=0``: each run under one kernel through the compiled per-event core
        (``EventPass.learn_rows``), the rows it does not take row by row on the NumPy
        path."""
        i = self._warm_event_rows(rows, labels, self._learn_block_row)  # (0 once warm)
        while i < len(labels):  # one run per kernel: the whole block after the warm-up
            end = self._fold_kernel_run(rows, i)
            i += self._event_rows(rows[i:end], labels[i:end], self._learn_block_row)
            for row, label in zip(rows[i:end], labels[i:end]):
                self._learn_block_row(row, self._kernel_row(row), label)
            i = end

    def _update(self, row: np.ndarray, f: np.ndarray, k_row: np.ndarray, y: Any) -> None:
        """One coordinate step on the new example from alpha = 0, then the resweeps."""
        S = self._support
        denom = S.kernel.diag_one(row) + self._mu
        if denom > 0.0:  # phi(x) = 0 (and no 2-norm shift) can never change f
            coef = self._first_step(self._labels.targets(y), f, denom)
            if coef is not None:
                new_id = S.next_id
                self._policy.insert(S, row, coef, k_row)
                if S.next_id != new_id:  # not when the Projectron projected instead
                    self._cls.add(new_id, float(self._labels.classes.index(y)))
                self.n_updates += 1
        self._n_learned += 1
        if self.resweeps:
            self._resweep(self.resweeps)

    def _first_step(self, t: np.ndarray, f: np.ndarray, denom: float) -> np.ndarray | None:
        """The new example's coefficients ``alpha t`` after its step from ``alpha = 0``, or
        ``None`` if every ``alpha`` stays 0 (it does not join the set).

        ``alpha = clip((1 - t f) / denom, 0, upper)``; one column is done on Python floats
        (the same IEEE operations as NumPy's, without four array calls).
        """
        if t.shape[0] == 1:
            t0 = float(t[0])
            a = min(max((1.0 - t0 * float(f[0])) / denom, 0.0), self._upper)
            return np.array([a * t0]) if a > 0.0 else None
        alpha = np.clip((1.0 - t * f) / denom, 0.0, self._upper)
        return alpha * t if (alpha > 0.0).any() else None

    def _resweep(self, passes: int) -> None:
        """``passes`` cyclic coordinate steps over the support set, oldest first (CF 7.13).

        The passes run compiled where :mod:`~streamk.learners.dualpass` applies, else in
        :meth:`_numpy_resweep` (the reference); then vectors whose coefficients all returned
        to 0 leave the set.
        """
        S = self._support
        if S.n == 0:
            return
        cls, by_age = self._slots()
        labels = self._labels
        signs = None if labels.multiclass else np.asarray(labels.signs, dtype=np.float64)
        mu, upper = self._mu, self._upper
        if not dualpass.adatron_resweep(S, cls, signs, by_age, mu, upper, passes):
            self._numpy_resweep(passes, *self._sweep_plan(cls, by_age))
        for slot in dualpass.dead_slots(S, cls):  # descending: swap-remove moves none of them
            S.remove(slot)

    def _slots(self) -> tuple[np.ndarray, np.ndarray]:
        """Each slot's class index (NaN: unknown) and the slots oldest first.

        Both depend only on which rows the set holds where, so they are kept until
        ``rows_version`` moves: after an event that neither inserted nor removed a vector
        (most events, once the model fits) the resweep reuses them.
        """
        S = self._support
        cached = self._slots_cache
        if cached is not None and cached[0] is S:
            if cached[1] == S.rows_version:
                return cached[2], cached[3]
            appended = self._appended_slot(*cached[2:])
            if appended is not None:
                return appended
        cls = np.ascontiguousarray(self._cls.align(S.ids)[:, 0])
        by_age = np.argsort(S.ids, kind="stable")
        self._slots_cache = (S, S.rows_version, cls, by_age, S.ids.copy())
        return cls, by_age

    def _appended_slot(
        self, cls: np.ndarray, by_age: np.ndarray, ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`_slots` after the set only appended the vector this event inserted (an
        unbounded or not yet full set, the resweep removing none): the cached arrays with its
        slot last (its id is the newest) and its class from the entry :meth:`_update` has
        just recorded; ``None`` for any other change.

        Aligning the classes afresh by id (a dozen array calls) and sorting the ids cost
        10-15 µs an event at a few hundred vectors; this takes four array calls, about half
        of that (a resweeping adatron on Synth50, no budget: 3-5% faster an event).
        """
        S = self._support
        m, pending = ids.shape[0], self._cls.pending
        if S.n != m + 1 or not pending or pending[-1] != S._ids[m]:
            return None
        if not (S._ids[:m] == ids).all():
            return None
        cls = np.concatenate((cls, (float(self._cls.pending_values[-1]),)))
        by_age = np.concatenate((by_age, (m,)))
        self._slots_cache = (S, S.rows_version, cls, by_age, S.ids.copy())
        return cls, by_age

    def _sweep_plan(
        self, cls: np.ndarray, by_age: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, list]:
        """``(T, eta, order)`` for the NumPy passes: the ±1 targets (0 for a vector of unknown
        class, e.g. one a policy merged), the steps ``1 / (k(x_i, x_i) + mu)`` (0 where that
        is not positive) and the slots a pass visits (known class, positive step, oldest
        first)."""
        S = self._support
        known = ~np.isnan(cls)
        T = np.zeros((S.n, S.n_outputs))
        T[known] = self._targets(cls[known])
        denom = S.kdiag + self._mu
        eta = np.divide(1.0, denom, out=np.zeros_like(denom), where=denom > 0.0)
        return T, eta, by_age[(known & (eta > 0.0))[by_age]].tolist()

    def _numpy_resweep(self, passes: int, T: np.ndarray, eta: np.ndarray, order: list) -> None:
        """The passes as a Python loop with NumPy: the reference for the compiled pass."""
        S = self._support
        G = S.gram_matrix
        mu, upper = self._mu, self._upper
        coef = S.coef  # a live view: add_coef writes through it
        for _ in range(passes):
            F = G @ coef
            if S.n_outputs == 1:  # binary: the same step on Python floats (fewer NumPy calls)
                c, f, t_, e_ = coef[:, 0], F[:, 0], T[:, 0].tolist(), eta.tolist()
                for i in order:
                    t, a = t_[i], float(c[i]) * t_[i]
                    # the 2-norm shift acts on alpha = a >= 0, not on the signed coefficient
                    a_new = min(max(a + e_[i] * (1.0 - t * float(f[i]) - mu * a), 0.0), upper)
                    if a_new != a:
                        delta = (a_new - a) * t
                        S.add_coef(i, delta)
                        f += G[i] * delta  # G is symmetric: row i is column i
                continue
            for i in order:
                t = T[i]
                a = coef[i] * t
                a_new = np.clip(a + eta[i] * (1.0 - t * F[i] - mu * a), 0.0, upper)
                delta = (a_new - a) * t
                if delta.any():
                    S.add_coef(i, delta)
                    F += G[i, :, None] * delta

    # -- batch ------------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, max_epochs: int = 1000, tol: float = 1e-6) -> KernelAdatron:
        """Train from scratch on a fixed set with the cyclic algorithm (CF 7.13) to convergence.

        Each coefficient column is solved by :func:`streamk.solvers.coordinate.adatron_dual`
        until the largest KKT violation is below ``tol`` (a ``ConvergenceWarning`` after
        ``max_epochs`` sweeps). ``gamma="auto"`` is estimated from the first 200 rows.
        Examples with a positive coefficient become the support set (through the budget policy,
        in row order); the model then predicts and continues on-line as usual.
        """
        self._reset()
        rows = self._block(X, grow=True)
        labels = as_list(y)
        if len(labels) != len(rows):
            raise InvalidInput(f"X has {len(rows)} rows but y has {len(labels)} labels")
        for label in labels:
            self._add_label(label)
        if self._scale is not None and len(labels):
            self._scale.update(rows[:AUTO_WINDOW])
            self._support.set_kernel(self._auto_kernel.resolve(self._scale))
        if not labels:
            return self
        K = self._support.kernel.gram(rows, rows)
        T = np.stack([self._labels.targets(label) for label in labels])
        A = np.column_stack(
            [
                adatron_dual(K, T[:, c], self.C, self.norm, tol=tol, max_epochs=max_epochs).alpha
                for c in range(T.shape[1])
            ]
        )
        for i in np.flatnonzero(A.any(axis=1)):
            new_id = self._support.next_id
            k_row = self._support.kernel_block(self._one(rows[i]))[0]
            self._policy.insert(self._support, rows[i], A[i] * T[i], k_row)
            self._cls.add(new_id, float(self._labels.classes.index(labels[i])))
            self.n_updates += 1
        self._n_learned = len(labels)
        return self

    # -- plain data ---------------------------------------------------------------------------
    def _extra_state(self) -> dict[str, Any]:
        self._cls.align(self._support.ids)
        return {
            "labels": self._labels.state(),
            "sv_class": self._cls.state(),
            "n_updates": self.n_updates,
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._labels = LabelCoder.from_state(state["labels"])
        self._cls = SlotData.from_state(self._support.ids, state["sv_class"])
        self._slots_cache = None
        self.n_updates = int(state["n_updates"])
