"""The river classifier surface shared by kernel classifiers with one-vs-rest columns.

A learner that keeps its classes in a :class:`~streamk.learners.labels.LabelCoder`
(``self._labels``) and one coefficient column per output gets prediction, probabilities
and label registration from here; it implements only its learning rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidInput
from ..snapshot.limits import DEFAULT_LIMITS
from . import eventpass
from .base import KernelLearner, row_index
from .labels import LabelCoder, check_label, check_labels

#: The most classes a classifier takes: a snapshot reader refuses a model with more
#: coefficient columns (``max_outputs``), so the next class is refused, not written.
MAX_CLASSES = DEFAULT_LIMITS.max_outputs

__all__ = ["KernelClassifier"]


class KernelClassifier(KernelLearner):
    """Mixin: labels, margins, ``predict_*`` for binary and one-vs-rest kernel classifiers."""

    _labels: LabelCoder
    #: The compiled per-event path (:mod:`streamk.learners.eventpass`), where a learner has one.
    _event: Any = None

    @property
    def _multiclass(self) -> bool:
        return True

    @property
    def classes_(self) -> list[Any]:
        """Labels seen, in order of first appearance."""
        return list(self._labels.classes)

    def _add_label(self, y: Any) -> None:
        """Register ``y``; a new class remaps the coefficient columns (binary -> one-vs-rest)."""
        if self._labels.knows(y):  # checked when it became a class
            return
        self._check_new_class(y)  # before the coder records anything: a bad label changes nothing
        self._register(y)

    def _labelled_row(self, x: dict, y: Any) -> np.ndarray:
        """The row of a labelled event, its label a class: a new label is checked before the
        row is built and becomes a class after it, so a bad label or a bad ``x`` (which
        :meth:`_learn_row` refuses) changes nothing, not even the classes."""
        new = not self._labels.knows(y)
        if new:
            self._check_new_class(y)
        row = self._learn_row(x)
        if new:
            self._register(y)
        return row

    def _check_new_class(self, y: Any) -> None:
        """Refuse ``y`` as a new class: not a label (:func:`check_label`) or one too many."""
        check_label(y)
        if len(self._labels.classes) >= MAX_CLASSES:
            raise InvalidInput(
                f"label {y!r:.60} would be class {len(self._labels.classes) + 1:,}, above the "
                f"{MAX_CLASSES:,} a snapshot can hold (one coefficient column each)"
            )

    def _register(self, y: Any) -> None:
        """Make the checked ``y`` a class, changing the coefficient columns as it says."""
        change = self._labels.register(y)
        if isinstance(change, int):  # a new one-vs-rest class: one zero column, O(capacity C)
            self._support.add_outputs(change)
        elif change is not None:
            self._support.remap_outputs(change)

    def decision_function_one(self, x: dict) -> np.ndarray:
        """Margins ``f(x)``: one value (binary) or one per class (one-vs-rest)."""
        if self._support.n == 0:
            return np.zeros(self._support.n_outputs)
        event = self._event  # one compiled call when it applies (see eventpass)
        if event is not None:
            f = event.margins(self, x)
            if f is not eventpass.NOT_HANDLED:
                return f
        return self._margins(self._predict_row(x))[1].copy()

    def predict_one(self, x: dict) -> Any:
        event = self._event  # one compiled call when it applies (see eventpass)
        if event is not None:
            label = event.predict(self, x)
            if label is not eventpass.NOT_HANDLED:
                return label
        if self._objects:  # a bad string or tree is refused even before the first label
            x = self._object(x)
        if not self._labels.classes:
            return None
        if self._support.n == 0:
            return self._labels.decide_one(np.zeros(self._support.n_outputs))
        return self._labels.decide_one(self._margins(self._predict_row(x))[1])

    def _predict_event_row(self, row: np.ndarray, k_row: np.ndarray) -> Any:
        """``predict_one`` of a row whose ``K(row, S)`` is ``k_row``, on the NumPy path
        (where the compiled per-event core stopped in a block: see ``_event_rows``)."""
        if not self._labels.classes:
            return None
        return self._labels.decide_one(k_row @ self._support.coef)

    def _learn_block_row(self, row: np.ndarray, k_row: np.ndarray, label: Any) -> None:
        """``learn_one`` of a row already folded into ``gamma="auto"``, whose ``K(row, S)``
        is ``k_row``, on the NumPy path (where the compiled per-event core stopped in a
        block: see ``_event_rows``)."""
        self._add_label(label)
        self._update(row, k_row @ self._support.coef, k_row, label)

    def predict_proba_one(self, x: dict) -> dict[Any, float]:
        if not self._labels.classes:
            return {}
        return dict(
            zip(self._labels.classes, self._labels.probabilities_one(self.decision_function_one(x)))
        )

    def learn_predict_many(self, X: Any, y: Any) -> list[Any]:
        """Test-then-train on a block: ``predict_one`` then ``learn_one`` for each row, in order.

        Returns the predictions made before each row was learned (prequential). Learners
        with a block algorithm override this with a faster exact version.
        """
        labels = list(y)
        check_labels(labels)  # a bad label refuses the block, nothing learned
        return self._learn_predict_each(X, labels)

    def predict_many(self, X: Any):
        import pandas as pd

        F = self._support.decision(self._block(X, grow=False))
        return pd.Series(self._labels.decide(F), index=row_index(X), dtype=object)

    def predict_proba_many(self, X: Any):
        import pandas as pd

        P = self._labels.probabilities(self._support.decision(self._block(X, grow=False)))
        return pd.DataFrame(P, columns=self._labels.classes, index=row_index(X))
