"""Kernel perceptron (Shawe-Taylor & Cristianini, Alg. 7.52 / Code Fragment 7.12)."""

from __future__ import annotations

from typing import Any

import numpy as np
from river import base

from .. import accel
from ..budget import BudgetPolicy
from ..budget.compiled import margin_run, merge_run
from ..budget.merge import Merge
from ..budget.projectron import MIN_REL_DELTA as PROJECTRON_MIN_REL_DELTA
from ..budget.projectron import Projectron
from ..errors import InvalidInput
from ..kernels import RBF, Kernel, Scaled
from . import eventpass, fastpass
from .base import Offset, as_list
from .classifier import KernelClassifier
from .labels import LabelCoder, check_labels, label_values

__all__ = ["KernelPerceptron"]


_UNSET = object()  # a prediction not made yet (None is a real one: before any label)


class KernelPerceptron(KernelClassifier, base.MiniBatchClassifier):
    """Kernel perceptron on a (optionally budgeted) support set.

    The book's on-line algorithm exactly (Shawe-Taylor & Cristianini, Alg. 7.52): predict
    ``sgn(f(x))`` with ``f(x) = sum_i alpha_i y_i k(x_i, x)`` and ``sgn(0) = +1``; on a
    mistake, the event joins the support set with ``alpha = 1``. There is no bias term:
    use ``Sum(RBF(...), Constant(1.0))`` as the kernel to get one. A step costs
    O(n_support · d); memory is O(budget · d) whatever the stream length.

    Parameters
    ----------
    kernel
        A :mod:`streamk.kernels` kernel. ``None`` means ``RBF(gamma="auto")``: the width is
        estimated from the first 200 learned events, then frozen.
    budget
        ``None`` (unbounded, as in the book), an ``int`` (the most recent ``budget``
        mistakes are kept: ``RemoveOldest``) or a :mod:`streamk.budget` policy object.

    Attributes
    ----------
    n_support
        Number of support vectors held.
    n_mistakes
        Number of updates made (mistakes, per the book's mistake bound, Thm. 7.53).
    classes_
        Labels seen, in order of first appearance.

    Notes
    -----
    Labels: with two classes, ``True``/``1`` is the positive class (``False``/``0``/``-1``
    negative); for other labels the first class seen is positive. When a third class
    appears the model becomes one-vs-rest over one shared support set: one coefficient
    column per class, so one kernel row serves every class, and each column follows the
    perceptron rule for "this class vs the rest".

    ``predict_proba_one`` maps the margin through the logistic function (two classes) or
    the softmax of the one-vs-rest margins: monotone in the margin, summing to 1, not
    calibrated.

    ``learn_many`` gives the same model as ``learn_one`` on the rows in order (to
    floating-point rounding): it computes ``K(block, support)`` once and keeps it current
    through every support-set change, including budget evictions.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics
    >>> from streamk import KernelPerceptron
    >>> model = KernelPerceptron(budget=500)
    >>> evaluate.progressive_val_score(datasets.Bananas(), model, metrics.Accuracy())
    Accuracy: 85.75%
    >>> model.n_support
    500

    """

    def __init__(self, kernel: Kernel | None = None, budget: int | BudgetPolicy | None = None):
        self.kernel = kernel
        self.budget = budget
        self._reset()

    def _reset(self, n_outputs: int = 1) -> None:
        super()._reset(n_outputs)
        self._labels = LabelCoder()
        self.n_mistakes = 0
        self._event = eventpass.event_pass(self._event_margin())

    def _event_margin(self) -> float | None:
        """The update rule of the compiled per-event path: ``None`` for a mistake only."""
        return None

    @classmethod
    def _unit_test_params(cls):
        yield {"budget": 100}

    #: The functional margin below which a correct row still updates (0: the perceptron).
    _margin = 0.0

    # -- learning -----------------------------------------------------------------------------
    def learn_one(self, x: dict, y: Any) -> None:
        event = self._event  # one compiled call when it applies (see eventpass)
        if event is not None and event.learn(self, x, y):
            return
        row = self._labelled_row(x, y)
        k_row, f = self._margins(row)  # what predict_one(x) just computed, if it did
        self._update(row, f, k_row, y)

    def learn_many(self, X: Any, y: Any) -> None:
        self._learn_block(X, y, None)

    def learn_predict_many(self, X: Any, y: Any) -> list[Any]:
        """Test-then-train on a block: learn it, return what ``predict_one`` said before each row.

        The predictions are exactly those of ``predict_one(x); learn_one(x, y)`` row by
        row (prequential evaluation), at ``learn_many`` speed: no second kernel block.
        """
        if not self._objects and self._late_features(X):  # (rare: a feature new mid-stream)
            labels = as_list(y)
            check_labels(labels)  # a bad label refuses the block, nothing learned
            return self._learn_predict_each(X, labels)
        preds: list[Any] = [_UNSET] * len(y)
        self._learn_block(X, y, preds)
        return preds

    def _learn_predict_apart(self, X: Any, y: Any, said_X: Any) -> list[Any]:
        """:meth:`learn_predict_many`, each prediction made of ``said_X``'s row (where
        given) before ``X``'s row is learned: on-line standardisation's block
        (:mod:`streamk.learners.scaling`) predicts from an event standardised before it
        moves the statistics and learns it standardised after."""
        if said_X is None:
            return self.learn_predict_many(X, y)
        values = label_values(y)
        labels = as_list(y if values is None else values)
        check_labels(labels, values)  # a bad label refuses the block, nothing learned
        return self._learn_predict_block(X, labels, self._predict_event_row, said_X=said_X)

    def _learn_block(self, X: Any, y: Any, preds: list[Any] | None) -> None:
        if self._objects:  # strings or trees: learn_one per item (same model by definition)
            labels = as_list(y)
            check_labels(labels)  # a bad label refuses the block, nothing learned
            return self._learn_objects(self._block(X, grow=True), labels, preds)
        rows = self._block(X, grow=True)
        values = label_values(y)  # the labels as one array, when they are booleans or numbers
        labels = as_list(y if values is None else values)  # the same Python values
        if len(labels) != len(rows):
            raise InvalidInput(f"X has {len(rows)} rows but y has {len(labels)} labels")
        check_labels(labels, values)  # a bad label refuses the block, nothing learned
        pre, tried, base = None, -1, 0
        i, warm = 0, preds is None and self._warming_up
        while i < len(labels):  # one run per kernel: the whole block after the warm-up
            if warm and self._warming_up:  # the warm-up's runs at once, up to a new label
                start = i
                i, warm = self._warm_runs(
                    rows, labels, i, None if pre is None else (pre, base), values
                )
                if not warm and not fastpass.block_pass_applies(
                    self._support, self._policy, rows[i:]
                ):  # no warm pass (Merge on a full set, the Projectron, a combined kernel):
                    # the rest of the warm-up through the per-event core, each row folded there
                    i += self._warm_event_rows(rows[i:], labels[i:], self._learn_block_row)
                if i > start:
                    continue
            first = _UNSET
            if preds is not None and self._warming_up:  # scored before its row moves gamma
                first = self._labels.decide(self._support.decision(rows[i]))[0]
            end = self._fold_kernel_run(rows, i)
            out = None if preds is None else Offset(preds, i)
            if pre is None and tried != len(self._labels.classes):  # once per set of classes
                tried, base = len(self._labels.classes), i
                pre = self._block_inputs(
                    rows[i:], labels[i:], None if values is None else values[i:]
                )
            if pre is None:
                self._learn_run(rows[i:end], labels[i:end], out)
            else:
                T, q_sq, codes = pre
                a, b = i - base, end - base
                self._learn_run(rows[i:end], labels[i:end], out, (T[a:b], q_sq[a:b], codes[a:b]))
            if first is not _UNSET:
                preds[i] = first
            i = end

    def _warm_runs(
        self,
        rows: np.ndarray,
        labels: list[Any],
        start: int,
        pre: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int] | None,
        values: np.ndarray | None = None,
    ) -> tuple[int, bool]:
        """The ``gamma="auto"`` warm-up's runs from row ``start`` in one
        :func:`streamk.learners.fastpass.perceptron_run` (no Python between the runs), up
        to the block's end or the run of the next new label; the row it got to (``start``:
        nothing changed) and whether to try again after the next run (``False``: the pass
        does not take this model). ``pre``: :meth:`_block_inputs` of rows ``base:``, and
        ``base``. ``values``: the block's labels as :func:`~streamk.learners.labels.label_values`
        gives them, if it does.

        The kernels come ahead from a copy of the estimator, which does not depend on
        learning: the same numbers, to the bit, as folding the rows one run at a time.
        """
        core = accel.core  # an extension built before the warm pass existed: not taken
        if type(self)._learn_run is not KernelPerceptron._learn_run or core is None:
            return start, False
        if not hasattr(core, "perceptron_warm_pass"):
            return start, False
        if pre is None:
            stop = self._adopt_labels(labels, start, values)
            if stop == start:  # a new label: its run on the general path
                return start, True
        else:
            stop = len(labels)
        room = self._room_until_full()
        if room is not None:  # up to where the set could fill
            if room <= 0:  # full: the rest of the warm-up through the per-event core
                return start, False
            stop = min(stop, start + room)
        scale, bounds, kernels = self._runs_ahead(rows, start, stop)
        if len(bounds) == 1:  # the next run reaches a new label
            return start, True
        end = bounds[-1]
        if pre is None:
            T = self._labels.target_matrix(
                labels[start:end], None if values is None else values[start:end]
            )
            q_sq = accel.sqnorms(np.ascontiguousarray(rows[start:end], dtype=np.float64))
            codes = np.empty(end - start, dtype=np.int64)
        else:
            (T, q_sq, codes), base = pre
            T, q_sq, codes = T[start - base :], q_sq[start - base :], codes[start - base :]
        done = fastpass.perceptron_run(
            self._support,
            self._policy_while(end - start),
            rows[start:end],
            T[: end - start],
            codes[: end - start],
            self._margin,
            q_sq[: end - start],
            ([b - start for b in bounds], kernels),
        )
        if done is None:
            return start, False
        mistakes, runs = done
        self._take_runs(scale, rows, bounds, kernels, runs)  # (stopped early: as its row finds it)
        self.n_mistakes += mistakes
        self._n_learned += bounds[runs] - start
        return bounds[runs], runs == len(kernels)

    def _adopt_labels(self, labels: list[Any], start: int, values: np.ndarray | None) -> int:
        """Register the block's new labels from row ``start`` ahead of their rows while
        that changes nothing the rows before them learn: the first class, then a second
        that leaves the first one's sign (no remap, still one coefficient column). The
        rows' targets and updates are then those of the rows one at a time; returns the
        first row whose label is still new (``len(labels)``: none)."""
        coder = self._labels
        stop = coder.first_unknown(labels, start, values)
        while stop < len(labels) and labels[stop] is not None and coder.adds_quietly(labels[stop]):
            self._add_label(labels[stop])
            stop = coder.first_unknown(labels, stop, values)
        return stop

    def _block_inputs(
        self, rows: np.ndarray, labels: list[Any], values: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """What every run of the rest of a block shares, computed once: targets, squared
        norms and room for the predicted codes; ``None`` when a label is new (the classes may
        still change), without the compiled core, or for a subclass with its own run learner.

        The norms are per row (:func:`streamk.accel.sqnorms`) and the targets per label,
        so a run's slices equal what it would compute for itself, to the bit. ``values``:
        the labels as :func:`~streamk.learners.labels.label_values` gives them, if it does.
        """
        if accel.core is None or type(self)._learn_run is not KernelPerceptron._learn_run:
            return None
        try:
            T = self._labels.target_matrix(labels, values)
        except KeyError:
            return None
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        return T, accel.sqnorms(rows), np.empty(len(labels), dtype=np.int64)

    def _learn_objects(self, items: list[Any], labels: list[Any], preds: list[Any] | None) -> None:
        if len(labels) != len(items):
            raise InvalidInput(f"X has {len(items)} items but y has {len(labels)} labels")
        for i, (obj, label) in enumerate(zip(items, labels)):
            if preds is not None:
                preds[i] = self.predict_one(obj)
            self.learn_one(obj, label)

    def _learn_run(
        self,
        rows: np.ndarray,
        labels: list[Any],
        out: Offset | None,
        pre: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Rows learned under one kernel: one compiled pass when it applies, else one tracked
        block with the rows of new classes one at a time. ``pre``: the run's slices of
        :meth:`_block_inputs` (targets, squared norms, codes), when the block has them."""
        q_sq = None
        if pre is not None:
            T, q_sq, codes = pre
        else:
            try:
                T = self._labels.target_matrix(labels)
            except KeyError:  # a class not seen before: the tracked path below adds it
                T = None
            codes = np.empty(len(labels), dtype=np.int64)
        if T is not None:
            # (under Merge the hint pass appends and merges itself, filling or full alike)
            done = fastpass.perceptron_run(
                self._support, self._policy, rows, T, codes, self._margin, q_sq
            )
            if done is None:  # the Projectron's own run (margin 0: this perceptron)
                done = self._projectron_run(rows, T, codes)
            if done is None:  # Merge's
                done = self._merge_run(rows, T, codes)
            if done is None:
                done = self._untracked_run(rows, T, codes, q_sq)
            if done is not None:
                self.n_mistakes += done[0]
                self._n_learned += len(labels)
                if out is not None:
                    out.put(0, self._labels.decode(codes.tolist(), labels))
                return
        if T is None and len(labels) == 1 and out is None and self._support.n == 0:
            return self._learn_first(rows[0], labels[0])  # a new class into an empty set
        if not fastpass.block_pass_applies(self._support, self._policy, rows):
            done_rows = self._event_rows(
                rows, labels, self._learn_block_row, out, self._predict_event_row
            )
            if done_rows == len(labels):
                return
            if done_rows:  # the rest on the tracked path below, from the row it stopped at
                rows, labels = rows[done_rows:], labels[done_rows:]
                out = None if out is None else Offset(out.items, out.start + done_rows)
        seen = set(self._labels.classes)
        with self._support.track(rows) as block:
            j = 0
            while j < len(labels):
                if labels[j] not in seen:  # a new class changes the columns: its row alone
                    if out is not None:
                        out[j] = self._labels.decide_one(block.exact(j, self._support.coef))
                    seen.add(labels[j])
                    self._add_label(labels[j])
                    self._learn_tracked(block, j, rows[j], labels[j])
                    j += 1
                    continue
                end = j
                while end < len(labels) and labels[end] in seen:
                    end += 1
                self._learn_segment(block, rows, labels, j, end, out)
                j = end

    def _learn_first(self, row: np.ndarray, label: Any) -> None:
        """A row of a new class into an empty set: what the tracked path below does
        (``K(row, S)`` is empty, so ``f`` is 0 on every path), without taking a block."""
        self._add_label(label)
        k_row = np.zeros(0)
        self._update(row, k_row @ self._support.coef, k_row, label)

    def _projectron_run(
        self, rows: np.ndarray, T: np.ndarray, codes: np.ndarray
    ) -> tuple[int, int] | None:
        """:func:`streamk.budget.compiled.margin_run` with this learner's margin: a whole
        run under a Projectron budget (RBF) in one call; ``(updates, rows)`` or ``None``."""
        if type(self._policy) is not Projectron:
            return None
        done = margin_run(
            self._support, self._policy, rows, T, codes, self._margin, PROJECTRON_MIN_REL_DELTA
        )
        if done is None:
            return None
        fastpass.COUNTS["compiled"] += rows.shape[0]
        return done, rows.shape[0]

    def _merge_run(
        self, rows: np.ndarray, T: np.ndarray, codes: np.ndarray
    ) -> tuple[int, int] | None:
        """:func:`streamk.budget.compiled.merge_run` with this learner's margin: a whole run
        under a Merge budget (RBF) in one call; ``(updates, rows)`` or ``None``. Only where
        the per-event core does not take the model: its rows (``EventPass.learn_rows``, the
        kernel row from the dots) cost less than the run's (from the distances), on every
        stream of the grid."""
        if type(self._policy) is not Merge:
            return None
        if self._event is not None and self._event.applies(self):
            return None
        done = merge_run(self._support, self._policy, rows, T, codes, self._margin)
        if done is None:
            return None
        fastpass.COUNTS["compiled"] += rows.shape[0]
        return done[0], rows.shape[0]

    def _untracked_run(
        self, rows: np.ndarray, T: np.ndarray, codes: np.ndarray, q_sq: np.ndarray | None
    ) -> tuple[int, int] | None:
        """A whole run in one untracked compiled pass (:func:`streamk.learners.fastpass.
        perceptron_rows`: each row's kernel values against the set computed in C), for a
        Laplacian, polynomial or linear kernel, possibly scaled (the RBF kernel has its
        hint pass; Gram-matrix kernels keep the tracked block); ``(updates, rows)`` or
        ``None`` (nothing changed)."""
        if accel.core is None or rows.shape[1] == 0:
            return None
        kernel = self._support.kernel
        if type(kernel) is RBF or (type(kernel) is Scaled and type(kernel.kernel) is RBF):
            return None
        Q = np.ascontiguousarray(rows, dtype=np.float64)
        if q_sq is None:
            q_sq = accel.sqnorms(Q)
        how = fastpass.rows_plan(self._support, self._policy, q_sq)
        if how is None:
            return None
        updates = fastpass.perceptron_rows(self._support, Q, q_sq, T, how, codes, self._margin)
        return updates, rows.shape[0]

    def _learn_segment(self, block, rows, labels, start: int, end: int, out=None) -> None:
        """Rows ``start:end`` (labels all known): jump from mistake to mistake.

        ``block.F`` says which rows the current model gets right; those need no work. A row
        it flags (a mistake, or a margin too close to 0 to trust the hint) is decided with
        the fresh dot, exactly as ``learn_one`` would.
        """
        T = self._labels.target_matrix(labels[start:end])
        how = fastpass.plan(self._support, self._policy, block)
        if how is not None:  # the same loop, compiled (streamk/_core.pyx)
            codes = np.empty(block.K.shape[0], dtype=np.int64)
            self.n_mistakes += fastpass.perceptron_pass(
                self._support, block, T, start, end, how, codes, self._margin
            )
            self._n_learned += end - start
            if out is not None:
                out.put(start, self._labels.decode(codes[start:end].tolist(), labels[start:end]))
            return
        pos = start
        while pos < end:
            # Flagged: F t <= margin + tol, i.e. a wrong sign (sgn(0) = +1), a margin error,
            # or too close to either to trust.
            below = block.F[pos:end] * T[pos - start :] <= self._margin + block.tolerance()
            flagged = below[:, 0] if below.shape[1] == 1 else below.any(axis=1)
            r = int(flagged.argmax())
            if not flagged[r]:
                r = end - pos
            if out is not None:  # every column had the right sign: predicted = the label
                out.put(pos, labels[pos : pos + r])
            self._n_learned += r  # rows pos .. pos+r-1 were right: nothing to update
            pos += r
            if pos == end:
                return
            self._learn_tracked(block, pos, rows[pos], labels[pos], T[pos - start], out)
            pos += 1

    def _learn_tracked(
        self, block, j: int, row: np.ndarray, label: Any, targets=None, out=None
    ) -> None:
        k_row = block.K[j, : self._support.n].copy()
        block.start = j + 1
        f = k_row @ self._support.coef
        if out is not None and out[j] is _UNSET:
            out[j] = self._labels.decide_one(f)
        self._update(row, f, k_row, label, targets)

    def _update(
        self, row: np.ndarray, f: np.ndarray, k_row: np.ndarray, y: Any, targets=None
    ) -> None:
        """Alg. 7.52: on a mistake (sgn(f) != y, sgn(0) = +1) add the event with alpha = 1."""
        if targets is None:
            targets = self._labels.targets(y)
            positive = self._labels.positive(y)
        else:
            positive = (targets > 0.0).tolist()
        # Python comparisons on a few columns: a fraction of the ufuncs' cost, same answer
        if [v >= 0.0 for v in f.tolist()] != positive:  # sgn(f) != y somewhere, sgn(0) = +1
            if f.shape[0] == 1:
                coef = targets.copy()
            else:
                coef = np.where((f >= 0.0) != (targets > 0.0), targets, 0.0)
            if k_row is None and self._policy.needs_k_row:  # predicted from a weight map
                k_row = self._support.kernel_row(row)
            self._policy.insert(self._support, row, coef, k_row)
            self.n_mistakes += 1
        self._n_learned += 1

    # -- plain data ---------------------------------------------------------------------------
    def _extra_state(self) -> dict[str, Any]:
        return {"labels": self._labels.state(), "n_mistakes": self.n_mistakes}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._labels = LabelCoder.from_state(state["labels"])
        self.n_mistakes = int(state["n_mistakes"])
