"""On-line kernel ranking (Shawe-Taylor & Cristianini, Alg. 8.14 / Code Fragment 8.2)."""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from typing import Any

import numpy as np
from river import base

from .. import accel
from ..budget import BudgetPolicy
from ..errors import ConfigError, InvalidInput, OutsideConfiguration
from ..kernels import Kernel
from . import eventpass, fastpass
from .base import KernelLearner, as_list, row_index

#: The smallest support set whose block takes the float32 hint pass: below it the ranker,
#: which updates on most rows, pays more for the hints' columns of every update than for
#: the float64 rows the hints save. Since the pass computes hints 64 rows at a time (an
#: update moves at most 64 rows' hints), a full set of 200 pays (learn_many, same run, the
#: grid's timing: RemoveOldest(200) Synth50-reg 3.79x river from 300 on, 4.72x from 200;
#: Friedman 2.98x, 3.75x; unbounded Synth50-reg 2.41x, 2.40x, and 2.01x from 0).
HINTS_FROM = 200

__all__ = ["OnlineRanker"]


class OnlineRanker(KernelLearner, base.MiniBatchClassifier):
    """Kernel ranking perceptron: ordinal labels from one score and ordered thresholds.

    The book's on-line ranking algorithm exactly (Shawe-Taylor & Cristianini, Alg. 8.14,
    CF 8.2; Crammer and Singer's PRank, kernelised): a score
    ``f(x) = sum_i alpha_i k(x_i, x)`` and integer thresholds ``b_1 <= ... <= b_{|Y|-1}``
    (``b_{|Y|} = +inf``); the predicted rank is the lowest rank ``y`` with ``f(x) < b_y``.
    On a wrong rank the event joins the support set with ``alpha = y - yhat`` (in rank
    units) and each threshold between the two ranks moves by one towards the event, so it
    is conservative and every quantity stays an integer. A step costs O(n_support · d).

    Parameters
    ----------
    kernel
        A :mod:`streamk.kernels` kernel. ``None`` means ``RBF(gamma="auto")``.
    ranks
        The label values, lowest rank first. Any hashable values (numbers, strings, ...);
        a label outside ``ranks`` is an error. ``None`` (the default): the ranks are the
        labels seen so far, in their natural order (``1 < 2 < 3``, ``False < True``,
        ``"a" < "b"``); labels that cannot be ordered together are an error. Pass the ranks
        when their natural order is not the ranking (e.g. ``("low", "mid", "high")``) or
        to follow the book exactly.
    budget
        ``None`` (unbounded, as in the book), an ``int`` (``RemoveOldest``) or a
        :mod:`streamk.budget` policy.

    Attributes
    ----------
    thresholds_
        ``b_1 .. b_{|Y|-1}`` (``b_{|Y|} = +inf`` is implied), an array.
    n_support
        Number of support vectors held.
    n_mistakes
        Number of wrong ranks (updates), bounded by ``((|Y|-1) R^2 + 1) / gamma^2`` on
        rankable data (book, Cor. 8.16).

    Notes
    -----
    **Why a classifier.** river has no base class for ordinal regression (its ``Ranker``
    is for recommendation). A ranker maps features to one of a finite, known set of labels,
    so it is a ``river.base.MiniBatchClassifier`` over ``ranks``: river's evaluation and
    classification metrics apply, ``predict_one`` returns a label from ``ranks`` (before any
    learning, the top rank, as the book's initial state assigns), and ``learn_many`` /
    ``predict_many`` follow river's mini-batch API. The ranker makes hard decisions, so
    ``predict_proba_one`` puts all the mass on the predicted rank. :meth:`score_one` gives the
    raw ``f(x)``, which also orders points within a rank (Remark 8.6).

    **Discovered ranks** (``ranks=None``). A new label joins the ordered set with an empty
    interval where it can: between two known ranks its threshold copies its lower
    neighbour's, so no prediction changes; above (below) every known rank its threshold
    is the top (bottom) one plus (minus) one; the second label ever seen gets the book's
    initial threshold, 0. Before any label is seen ``predict_one`` returns ``None`` and
    ``predict_proba_one`` an empty dict, as river's classifiers do.

    **Invariants** (tested on every step): the thresholds stay ordered and integral, every
    ``alpha`` is an integer, and, with fixed ``ranks``, ``sum(alpha) + sum(b) = 0``.
    **Budgets:** when a policy evicts a support vector its ``alpha`` leaves ``f`` but the
    thresholds stay where they are (they are the ranker's learned state, not a function of
    the support set), so ``sum(alpha) + sum(b) = 0`` holds only without a budget (or until
    the first eviction). Ordering always holds; integrality holds for removal policies, not
    for ones that scale or merge coefficients.

    ``learn_many`` gives the same model as ``learn_one`` on the rows in order: one kernel
    block per call, kept current through every support-set change.

    Examples
    --------
    Ranks 1-5 from the Friedman regression stream's target (bands of width 6):

    >>> from river import compose, evaluate, metrics, preprocessing
    >>> from river.datasets import synth
    >>> from streamk.learners import OnlineRanker
    >>> stream = ((x, 1 + min(4, int(y // 6))) for x, y in synth.Friedman(seed=42).take(2000))
    >>> ranker = OnlineRanker(ranks=(1, 2, 3, 4, 5))
    >>> model = compose.Pipeline(preprocessing.StandardScaler(), ranker)
    >>> evaluate.progressive_val_score(stream, model, metrics.Accuracy())
    Accuracy: 56.20%
    >>> model["OnlineRanker"].thresholds_.tolist()
    [-2.0, -1.0, 2.0, 4.0]

    References
    ----------
    [^1]: Shawe-Taylor, J. & Cristianini, N. (2004). Kernel Methods for Pattern Analysis,
        §8.1.2, Alg. 8.14. Cambridge University Press.
    [^2]: Crammer, K. & Singer, Y. (2001). Pranking with ranking. NIPS 14.

    """

    #: The compiled per-event path (:mod:`streamk.learners.eventpass`), when it is built.
    _event: Any = None

    def __init__(
        self,
        kernel: Kernel | None = None,
        ranks: tuple | None = None,
        budget: int | BudgetPolicy | None = None,
    ):
        self.kernel = kernel
        self.ranks = ranks
        self.budget = budget
        if ranks is not None:
            try:
                index = {r: i for i, r in enumerate(ranks)}
            except TypeError:
                raise ConfigError(
                    f"ranks must be a sequence of hashable labels, lowest first, got {ranks!r}"
                ) from None
            if len(index) != len(ranks) or len(ranks) < 2:
                raise ConfigError(
                    f"ranks must hold at least two distinct labels, lowest first, got {ranks!r}"
                )
        self._reset()

    def _reset(self, n_outputs: int = 1) -> None:
        super()._reset(n_outputs)
        self._labels: list[Hashable] = [] if self.ranks is None else list(self.ranks)
        self._index = {r: i for i, r in enumerate(self._labels)}
        self._b = np.zeros(max(len(self._labels) - 1, 0))
        self.n_mistakes = 0
        self._event = eventpass.event_pass(ranker=True)

    @classmethod
    def _unit_test_params(cls):
        yield {}  # ranks discovered from the stream
        # river's classification checks feed Phishing, whose labels are False / True
        yield {"ranks": (False, True), "budget": 100}

    @property
    def _multiclass(self) -> bool:
        # discovered ranks may grow to any number
        return self.ranks is None or len(self.ranks) > 2

    @property
    def ranks_(self) -> list[Hashable]:
        """The ranks known now, lowest first: ``ranks``, or the labels seen so far."""
        return list(self._labels)

    @property
    def thresholds_(self) -> np.ndarray:
        return self._b.copy()

    # -- the rule ---------------------------------------------------------------------------------
    def _rank_index(self, y: Hashable) -> int:
        """The index of a known rank; a label outside fixed ``ranks`` is an error."""
        try:
            return self._index[y]
        except (KeyError, TypeError):
            pass
        if self.ranks is None:
            if y is None or y != y:  # NaN compares with nothing: every one a new rank
                raise InvalidInput(f"a rank must be a value that orders, got {y!r}")
            self._check_orderable([y])
            return -1  # a new rank: _admit adds it when its event is learned
        raise OutsideConfiguration(
            f"label {y!r:.100} is not one of ranks={self.ranks!r:.200}; create the ranker "
            "with every rank, lowest first (e.g. OnlineRanker(ranks=(1, 2, 3))), or with "
            "ranks=None to take the ranks from the labels seen"
        ) from None

    def _check_orderable(self, labels: list[Hashable]) -> None:
        """Reject labels that cannot be hashed or ordered with the ranks seen so far."""
        try:
            sorted(set(labels).union(self._labels))
        except TypeError:
            shown = ", ".join(repr(v) for v in labels[:5])
            raise InvalidInput(
                f"labels ({shown:.200}) cannot be ordered together with the ranks seen so "
                f"far {self._labels!r:.200}; use labels of one ordered type, or create the "
                "ranker with ranks=(lowest, ..., highest)"
            ) from None

    def _admit(self, y: Hashable) -> int:
        """The index of ``y``, first adding it to discovered ranks if it is new."""
        k = self._rank_index(y)
        if k >= 0:
            return k
        b, m = self._b, len(self._labels)
        k = bisect.bisect_left(self._labels, y)
        if m >= 1:
            if m == 1:
                value = 0.0  # the book's initial threshold
            elif k == 0:
                value = b[0] - 1.0
            elif k == m:
                value = b[-1] + 1.0
            else:
                value = b[k - 1]  # an empty interval between its neighbours
            self._b = np.insert(b, min(k, m - 1), value)
        self._labels.insert(k, y)
        self._index = {r: i for i, r in enumerate(self._labels)}
        return k

    def _predict_index(self, f: np.ndarray) -> np.ndarray:
        """``min{y : f < b_y}`` with ``b_{|Y|} = +inf``: the number of thresholds ``<= f``."""
        return np.searchsorted(self._b, f, side="right")

    def _update(self, row: np.ndarray, f: float, k_row: np.ndarray, y: Hashable) -> None:
        """CF 8.2: on a wrong rank, alpha_i = y - yhat and the thresholds between move by one."""
        k = self._admit(y)
        p = int(self._predict_index(np.array([f]))[0])
        if p != k:
            self._policy.insert(self._support, row, np.array([float(k - p)]), k_row)
            if p < k:
                self._b[p:k] -= 1.0
            else:
                self._b[k:p] += 1.0
            self.n_mistakes += 1
        self._n_learned += 1

    # -- learning ---------------------------------------------------------------------------------
    def learn_one(self, x: dict, y: Hashable) -> None:
        event = self._event  # one compiled call when it applies (see eventpass)
        if event is not None and event.learn(self, x, y):
            return
        self._rank_index(y)  # reject a bad label before touching any state
        row = self._learn_row(x)
        k_row = self._kernel_row(row)
        self._update(row, float(k_row @ self._support.coef[:, 0]), k_row, y)

    def learn_many(self, X: Any, y: Any) -> None:
        rows = self._block(X, grow=True)
        labels = as_list(y)
        if len(labels) != len(rows):
            raise InvalidInput(f"X has {len(rows)} rows but y has {len(labels)} labels")
        for label in labels:
            self._rank_index(label)
        if self.ranks is None:
            self._check_orderable(labels)
        if self._objects or any(self._index.get(label, -1) < 0 for label in labels):
            self._learn_rows(rows, labels, self._learn_block_row)  # new ranks: row by row
            return
        ranks = np.array([self._index[label] for label in labels], dtype=np.int64)
        i = self._warm_runs(rows, ranks) if self._warming_up else 0
        warm = not i and self._warming_up
        if warm and not fastpass.block_pass_applies(self._support, self._policy, rows):
            i = self._warm_event_rows(rows, labels, self._learn_block_row)  # (0 once warm)
        while i < len(labels):  # one run per kernel: the whole block after the warm-up
            end = self._fold_kernel_run(rows, i)
            i = self._until_full(
                i, end, lambda a, b, policy: self._learn_untracked(rows[a:b], ranks[a:b], policy)
            )
            if i == end or self._learn_untracked(rows[i:end], ranks[i:end]):
                i = end
                continue
            if not fastpass.block_pass_applies(self._support, self._policy, rows[i:end]):
                i += self._event_rows(rows[i:end], labels[i:end], self._learn_block_row)
            if i < end:
                self._learn_tracked(rows[i:end], labels[i:end], ranks[i:end])
            i = end

    def learn_predict_many(self, X: Any, y: Any) -> list[Hashable]:
        """Test-then-train on a block: what ``predict_one`` said before each row, each row
        then learned as ``learn_one`` would (the same predictions and model).

        What ``streamk learn --batch-size`` and the engine call for a labelled block, so
        their figures are the per-event ones. Every label is checked first, as
        :meth:`learn_many` does. Once ``gamma="auto"`` is estimated, one loop of the
        compiled per-event core over the rows; otherwise the plain loop.
        """
        return self._learn_predict_apart(X, y, None)

    def _learn_predict_apart(self, X: Any, y: Any, said_X: Any) -> list[Any]:
        """:meth:`learn_predict_many`, each prediction made of ``said_X``'s row (where
        given) before ``X``'s row is learned: on-line standardisation's block
        (:mod:`streamk.learners.scaling`) predicts from an event standardised before it
        moves the statistics and learns it standardised after."""
        labels = as_list(y)
        for label in labels:
            self._rank_index(label)
        if self.ranks is None:
            self._check_orderable(labels)
        return self._learn_predict_block(X, labels, self._said, said_X=said_X)

    def _said(self, row: np.ndarray, k_row: np.ndarray) -> Hashable:
        """``predict_one`` of a row from its kernel row ``K(row, S)`` (the NumPy path)."""
        if not self._labels:
            return None
        f = float(k_row @ self._support.coef[:, 0]) if self._support.n else 0.0
        return self._labels[int(self._predict_index(np.array([f]))[0])]

    def _warm_runs(self, rows: np.ndarray, ranks: np.ndarray) -> int:
        """The warm-up's runs of a block in one :func:`streamk.learners.fastpass.ranker_runs`
        (:meth:`_warm_untracked`); the row it got to (0: nothing changed)."""

        def learn(Q: np.ndarray, q_sq: np.ndarray, runs: tuple) -> bool:
            self._b = np.ascontiguousarray(self._b, dtype=np.float64)
            m = Q.shape[0]
            mistakes = fastpass.ranker_runs(
                self._support, self._policy, Q, q_sq, ranks[:m], self._b, runs
            )
            if mistakes is not None:
                self.n_mistakes += mistakes
                self._n_learned += m
            return mistakes is not None

        return self._warm_untracked(rows, learn)

    def _learn_tracked(self, rows: np.ndarray, labels: list[Any], ranks: np.ndarray) -> None:
        """Rows learned under one kernel on a tracked block: one compiled pass when it
        applies (:func:`streamk.learners.fastpass.ranker_pass`), else row by row."""
        with self._support.track(rows) as block:
            how = fastpass.plan(self._support, self._policy, block)
            if how is not None:  # the same rule, compiled (streamk/_core.pyx)
                self._b = np.ascontiguousarray(self._b, dtype=np.float64)
                self.n_mistakes += fastpass.ranker_pass(self._support, block, ranks, self._b, how)
                self._n_learned += len(ranks)
                return
            for j in range(len(ranks)):
                k_row = block.K[j, : self._support.n].copy()
                block.start = j + 1
                self._learn_block_row(rows[j], k_row, labels[j])

    def _learn_untracked(
        self, rows: np.ndarray, ranks: np.ndarray, policy: BudgetPolicy | None = None
    ) -> bool:
        """Rows learned under one kernel in one untracked compiled pass (each row's kernel
        values against the set computed afresh in C: see
        :func:`streamk.learners.fastpass.ranker_rows`), cheaper than a tracked block when a
        good share of the rows update; ``False`` (nothing changed) when it does not apply.
        ``policy``: the one to plan with, if not the learner's (the unbounded stand-in of
        :meth:`_until_full`)."""
        if accel.core is None or rows.shape[1] == 0:
            return False
        Q = np.ascontiguousarray(rows, dtype=np.float64)
        q_sq = accel.sqnorms(Q)
        self._b = np.ascontiguousarray(self._b, dtype=np.float64)
        policy = policy or self._policy
        mistakes = self._hint_run(Q, q_sq, ranks, policy)
        if mistakes is None:
            how = fastpass.rows_plan(self._support, policy, q_sq)
            if how is None:
                return False
            mistakes = fastpass.ranker_rows(self._support, Q, q_sq, ranks, self._b, how)
        self.n_mistakes += mistakes
        self._n_learned += len(ranks)
        return True

    def _hint_run(
        self, Q: np.ndarray, q_sq: np.ndarray, ranks: np.ndarray, policy: BudgetPolicy
    ) -> int | None:
        """The rows in the float32 hint pass (RBF; :func:`streamk.learners.fastpass.
        perceptron_run` with the ranks and thresholds): a row whose rank the hint makes
        certain needs no float64 kernel row, whether or not it updates. The mistakes, or
        ``None`` (nothing changed) where the pass does not apply or would not pay (a set
        below :data:`HINTS_FROM`)."""
        if self._support.n < HINTS_FROM:
            return None
        T = np.zeros((Q.shape[0], 1))
        codes = np.empty(Q.shape[0], dtype=np.int64)
        ranks = np.ascontiguousarray(ranks, dtype=np.int64)
        done = fastpass.perceptron_run(
            self._support, policy, Q, T, codes, 0.0, q_sq, ranks=ranks, thresholds=self._b
        )
        return None if done is None else done[0]

    def _learn_block_row(self, row: np.ndarray, k_row: np.ndarray, label: Any) -> None:
        self._update(row, float(k_row @ self._support.coef[:, 0]), k_row, label)

    # -- prediction -------------------------------------------------------------------------------
    def score_one(self, x: dict) -> float:
        """The raw score ``f(x)``."""
        if self._support.n == 0:
            return 0.0
        event = self._event  # one compiled call when it applies (see eventpass)
        if event is not None:
            f = event.margins(self, x)
            if f is not eventpass.NOT_HANDLED:
                return float(f[0])
        return float(self._kernel_row(self._predict_row(x)) @ self._support.coef[:, 0])

    def predict_one(self, x: dict) -> Hashable:
        event = self._event  # one compiled call when it applies (see eventpass)
        if event is not None:
            label = event.predict(self, x)
            if label is not eventpass.NOT_HANDLED:
                return label
        if not self._labels:
            return None
        return self._labels[int(self._predict_index(np.array([self.score_one(x)]))[0])]

    def predict_proba_one(self, x: dict) -> dict[Hashable, float]:
        top = self.predict_one(x)
        return {r: float(r == top) for r in self._labels}

    def score_many(self, X: Any) -> np.ndarray:
        """Raw scores ``f(x)`` of a block."""
        return self._support.decision(self._block(X, grow=False))[:, 0]

    def predict_many(self, X: Any):
        import pandas as pd

        idx = self._predict_index(self.score_many(X))
        labels = [self._labels[i] for i in idx] if self._labels else [None] * len(idx)
        return pd.Series(labels, index=row_index(X), dtype=object)

    def predict_proba_many(self, X: Any):
        import pandas as pd

        idx = self._predict_index(self.score_many(X))
        P = np.zeros((len(idx), len(self._labels)))
        if self._labels:
            P[np.arange(len(idx)), idx] = 1.0
        return pd.DataFrame(P, columns=list(self._labels), index=row_index(X))

    # -- plain data -------------------------------------------------------------------------------
    def _extra_state(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"thresholds": self._b.tolist(), "n_mistakes": self.n_mistakes}
        if self.ranks is None:
            extra["ranks_seen"] = list(self._labels)
        return extra

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        if self.ranks is None:
            self._labels = list(state.get("ranks_seen", []))
            self._index = {r: i for i, r in enumerate(self._labels)}
        self._b = np.asarray(state["thresholds"], dtype=np.float64)
        if len(self._b) != max(len(self._labels) - 1, 0):
            raise ValueError(
                f"{len(self._b)} thresholds for {len(self._labels)} ranks: corrupt ranker state"
            )
        self.n_mistakes = int(state["n_mistakes"])
