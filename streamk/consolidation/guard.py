"""The guard of a consolidated model: an unconsolidated copy learns beside it; the better serves.

A batch solution squeezed into a budget can predict worse than the on-line learner it
replaces, and then every later solution is warm-started from a worse model: on a 50-feature
Hyperplane stream an RBF perceptron with budget 500 scored 0.760 prequential accuracy on-line
and 0.726 consolidated every 1,000 events (an SVC on one window needs 944 of its 1,000 rows,
and the budget keeps 250). A check made once, at the consolidation, cannot undo that: after a
poor solution is adopted the on-line model it replaced is gone, and the next check compares
two poor models. So the guard keeps that model: a *shadow* learner that is never consolidated
learns every event too, both predict each event before learning it, and the one with the
smaller loss over the last ``size`` labelled events (errors; absolute errors for a regressor)
serves the predictions; a tie keeps the one serving. The cost is a second learner: twice the
learning work and twice the model in snapshots. Everything it decides from is in its state,
so a restored or replayed model serves the same lineage at the same events in ``"sync"``
mode. In ``"background"`` mode the solution is adopted when the worker finishes, or earlier
at a snapshot (which joins it), so after a restart the events in between were predicted by
the other lineage and the loss differences, hence the lineage served, can differ.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from river import base

from ..errors import ConfigError, SnapshotError

__all__ = ["Guard", "event_loss", "LINEAGES", "MAX_GUARD"]

#: The two lineages a guard chooses between.
LINEAGES = ("consolidated", "online")
#: The longest comparison a guard (or a snapshot of one) may declare: its losses are an array
#: of that many doubles.
MAX_GUARD = 1 << 20


def event_loss(model: Any, said: Any, y: Any) -> float:
    """The loss a guard counts: absolute error for a regressor, 0/1 error otherwise."""
    if isinstance(model, base.Regressor):
        return abs(float(said) - float(y))
    return float(said != y)


def check_size(size: Any) -> int:
    """``size`` as the guard's event count, or :class:`ConfigError` (0 means no guard)."""
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_GUARD:
        raise ConfigError(f"guard must be an int in [0, {MAX_GUARD}] (events), got {size!r}")
    return size


class Guard:
    """The shadow learner and the last ``size`` loss differences (consolidated - online).

    Parameters
    ----------
    learner
        The learner to shadow, copied as it is now (both lineages start from it).
    size
        Labelled events over which the two lineages are compared.
    """

    def __init__(self, learner: Any, size: int):
        if check_size(size) < 1:
            raise ConfigError("a Guard compares over at least one event")
        self.size = size
        self.shadow = copy.deepcopy(learner)
        self._diffs = np.zeros(size)  # ring of loss differences, consolidated - online
        self._pos = 0
        self.n = 0  # differences held (at most size)
        self.serving = LINEAGES[0]

    def served(self, model: Any) -> Any:
        """The learner whose predictions are served: ``model`` or the shadow."""
        return model if self.serving == LINEAGES[0] else self.shadow

    def learn_one(self, model: Any, x: dict, y: Any, **kwargs: Any) -> tuple[Any, Any]:
        """Both lineages predict ``x`` and learn it, then the guard updates which one serves.

        Returns what ``model`` predicted and what the served lineage predicted (what
        ``predict_one`` said), both before learning ``x``."""
        said = model.predict_one(x), self.shadow.predict_one(x)
        served = said[0] if self.serving == LINEAGES[0] else said[1]
        model.learn_one(x, y, **kwargs)
        self.shadow.learn_one(x, y, **kwargs)
        self._diffs[self._pos] = event_loss(model, said[0], y) - event_loss(model, said[1], y)
        self._pos = (self._pos + 1) % self.size
        self.n = min(self.n + 1, self.size)
        total = float(self._diffs.sum())
        if total > 0.0:
            self.serving = LINEAGES[1]
        elif total < 0.0:
            self.serving = LINEAGES[0]
        return said[0], served

    def loss_difference(self) -> float:
        """Mean loss of the consolidated lineage minus the shadow's, over the events held."""
        return float(self._diffs.sum()) / self.n if self.n else 0.0

    # -- plain data (snapshots) -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The shadow learner, the ring of differences as stored and which lineage serves."""
        from ..snapshot.registry import class_name_of

        return {
            "size": self.size,
            "diffs": self._diffs.copy(),
            "pos": self._pos,
            "n": self.n,
            "serving": self.serving,
            "shadow_class": class_name_of(self.shadow),
            "shadow": self.shadow.state(),
        }

    @classmethod
    def from_state(cls, state: Any, learner_class: type) -> Guard:
        """Rebuild a guard whose shadow is a ``learner_class`` (the consolidated learner's)."""
        from ..snapshot.registry import resolve_class

        if not isinstance(state, dict):
            raise SnapshotError("guard state must be a map")
        size, pos, n = state.get("size"), state.get("pos"), state.get("n")
        try:
            check_size(size)
        except ConfigError as exc:
            raise SnapshotError(f"guard state: {exc}") from None
        if size < 1:
            raise SnapshotError("guard state: size must be >= 1")
        for name, value, high in (("pos", pos, size - 1), ("n", n, size)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                raise SnapshotError(f"guard state: {name} must be an int in [0, {high}]")
        diffs = state.get("diffs")
        if not isinstance(diffs, np.ndarray) or diffs.dtype != np.float64 or diffs.shape != (size,):
            raise SnapshotError(f"guard state: diffs must be a float64 array of shape ({size},)")
        if not np.isfinite(diffs).all():
            raise SnapshotError("guard state: diffs must be finite")
        if state.get("serving") not in LINEAGES:
            raise SnapshotError(f"guard state: serving must be one of {list(LINEAGES)}")
        if resolve_class(state.get("shadow_class")) is not learner_class:
            raise SnapshotError(
                "guard state: the shadow must be of the consolidated learner's class"
            )
        if not isinstance(state.get("shadow"), dict):
            raise SnapshotError("guard state: shadow must be a learner state map")
        guard = cls.__new__(cls)
        guard.size, guard._pos, guard.n = size, pos, n
        guard._diffs = diffs.copy()
        guard.serving = state["serving"]
        guard.shadow = learner_class.from_state(state["shadow"])
        return guard
