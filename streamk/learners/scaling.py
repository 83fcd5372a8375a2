"""On-line feature standardisation in front of a streamk learner, kept in its snapshots.

``gamma="auto"`` gives every feature one width, so a feature in large units (Agrawal's salary,
a date as a day number) decides every kernel value: ``streamk learn Agrawal`` scored 0.56
unscaled and 0.83 standardised. river's ``StandardScaler | learner`` fixes that in a
pipeline, but a pipeline is not a streamk snapshot; :func:`standard_scaled` wraps a learner
so that the scaler's running statistics travel in the same snapshot as the support set.
The engine wires it in one line (``scale = "standard"``).
"""

from __future__ import annotations

from typing import Any

from river import base

from ..errors import ConfigError, InvalidInput
from .base import as_list, row_index
from .features import check_finite, frame_records
from .standardizer import FeatureStandardizer, StandardBlock, block_values

__all__ = [
    "StandardScaledClassifier",
    "StandardScaledRegressor",
    "standard_scaled",
    "FeatureStandardizer",
]


def _records(X: Any) -> list[dict]:
    import pandas as pd

    return frame_records(X if isinstance(X, pd.DataFrame) else pd.DataFrame(X))


def _events(X: Any, y: Any) -> tuple[list[dict], list[Any]]:
    """A block's events (:func:`_records`) and labels; a label count that does not match
    the rows is refused, never truncated."""
    records, ys = _records(X), y.tolist() if hasattr(y, "tolist") else list(y)
    if len(ys) != len(records):
        raise InvalidInput(f"X has {len(records)} rows but y has {len(ys)} labels")
    return records, ys


class _StandardScaled:
    """``model`` behind a :class:`FeatureStandardizer`: river's ``StandardScaler() | model``.

    Each learned event first updates the statistics, then the model learns it standardised;
    a prediction uses the statistics as they are (river's pipeline order). ``learn_many``
    standardises each row with the statistics as ``learn_one`` would have them and hands the
    block to the model's own ``learn_many``, so it learns the same model as ``learn_one``.
    ``state()`` holds the statistics, the model's class name and the model's state.

    Not a river ``Wrapper`` on purpose: the engine snapshots a wrapper's ``_wrapped_model``
    (e.g. the learner inside ``Consolidated``), and here the scaler must be in the snapshot.
    """

    def __init__(self, model: Any):
        if not hasattr(model, "state") or not hasattr(model, "support_"):
            raise ConfigError(f"scaling wraps a streamk kernel learner, got {model!r}")
        self.model = model
        self.scaler_ = FeatureStandardizer()

    @classmethod
    def _unit_test_params(cls):
        yield {"model": cls._default_model()}

    @property
    def _multiclass(self) -> bool:
        return bool(getattr(self.model, "_multiclass", False))

    def _unit_test_skips(self) -> set[str]:
        return set(self.model._unit_test_skips())

    def __getattr__(self, name: str) -> Any:  # the learner's read-only figures
        if name in _FORWARDED and "model" in self.__dict__:
            return getattr(self.__dict__["model"], name)
        raise AttributeError(name)

    # -- learning --------------------------------------------------------------------------------
    def learn_one(self, x: dict, y: Any) -> None:
        """The statistics learn ``x``, then the learner learns it standardised; the
        statistics keep ``x`` only if the learner accepts the event."""
        updates, z = self.scaler_.learned(x)
        try:
            self.model.learn_one(z, y)
        except InvalidInput:
            check_finite(x)  # named by the event's own values, not their standardised NaN
            raise
        self.scaler_.commit(updates)

    def learn_many(self, X: Any, y: Any) -> None:
        """Each row standardised with the statistics ``learn_one`` would have; a block the
        learner refuses leaves the statistics as they were."""
        import pandas as pd

        block, ys = self._block(X, y)
        if block is not None:
            order = block.frame_order()  # the columns of a frame of the standardised dicts
            frame = pd.DataFrame(block.learned[:, order], columns=[block.names[j] for j in order])
            self.model.learn_many(frame, pd.Series(ys, dtype=object))
            self.scaler_.commit_block(block)
            return
        records, ys = _events(X, y)
        before = self.scaler_.state()
        rows = []
        try:
            for x in records:
                updates, z = self.scaler_.learned(x)
                self.scaler_.commit(updates)
                rows.append(z)
            self.model.learn_many(pd.DataFrame(rows), pd.Series(ys, dtype=object))
        except BaseException:
            self.scaler_ = FeatureStandardizer.from_state(before)
            raise

    def learn_predict_many(self, X: Any, y: Any) -> list[Any]:
        """Test-then-train on each row in order (the engine's exact per-event path): what
        ``predict_one`` said of each row before ``learn_one`` learned it. A block the
        learner refuses as a whole (a bad label) goes one event at a time, so the events
        before the bad one are learned, as they would be one at a time."""
        import pandas as pd

        block, ys = self._block(X, y)
        apart = getattr(self.model, "_learn_predict_apart", None)
        if block is not None and apart is not None:  # the learner's block loop, rows apart
            order = sorted(block.frame_order())  # the present columns, as the events have them
            names = [block.names[j] for j in order]
            learned = pd.DataFrame(block.learned[:, order], columns=names)
            said = pd.DataFrame(block.said[:, order], columns=names)
            before = self.model.n_learned
            try:
                out = apart(learned, ys, said)
            except BaseException as exc:
                done = self.model.n_learned - before
                if done or not isinstance(exc, Exception):
                    self.scaler_.commit_block(block, done)  # (what it learned stays learned)
                    raise
                # refused whole: one at a time below, which stops at the bad row
            else:
                self.scaler_.commit_block(block)
                return out
        records, ys = _events(X, y)
        out = []
        for x, target in zip(records, ys):
            out.append(self.predict_one(x))
            self.learn_one(x, target)
        return out

    def _block(self, X: Any, y: Any) -> tuple[StandardBlock | None, list[Any]]:
        """The block standardised in one compiled pass (``None``: the per-event path takes
        it) and its labels, their count checked."""
        values = block_values(X)
        if values is None:
            return None, []
        ys = as_list(y)
        if len(ys) != len(values[1]):
            raise InvalidInput(f"X has {len(values[1])} rows but y has {len(ys)} labels")
        return self.scaler_.block(*values, learn=True), ys

    # -- prediction ------------------------------------------------------------------------------
    def predict_one(self, x: dict) -> Any:
        return self.model.predict_one(self.scaler_.transform_one(x))

    def _scaled_frame(self, X: Any):
        import pandas as pd

        index = row_index(X)
        values = block_values(X)
        block = None if values is None else self.scaler_.block(*values, learn=False)
        if block is not None:
            order = block.frame_order()
            names = [block.names[j] for j in order]
            return pd.DataFrame(block.said[:, order], columns=names, index=index)
        return pd.DataFrame([self.scaler_.transform_one(x) for x in _records(X)], index=index)

    def predict_many(self, X: Any):
        return self.model.predict_many(self._scaled_frame(X))

    # -- plain data ------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        from ..snapshot.registry import class_name_of

        return {
            "scaler": self.scaler_.state(),
            "model_class": class_name_of(self.model),
            "model": self.model.state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]):
        from ..snapshot.registry import resolve_class

        model = resolve_class(state["model_class"]).from_state(state["model"])
        out = cls(model)
        out.scaler_ = FeatureStandardizer.from_state(state["scaler"])
        return out


# not support_: consolidation must refuse a scaled learner (its window holds raw rows)
_FORWARDED = {"n_support", "n_learned", "kernel_", "n_updates", "classes_"}


class StandardScaledClassifier(_StandardScaled, base.MiniBatchClassifier):
    """A streamk classifier behind on-line feature standardisation (see :func:`standard_scaled`)."""

    @staticmethod
    def _default_model():
        from .perceptron import KernelPerceptron

        return KernelPerceptron(budget=50)

    def predict_proba_one(self, x: dict) -> dict:
        return self.model.predict_proba_one(self.scaler_.transform_one(x))

    def predict_proba_many(self, X: Any):
        return self.model.predict_proba_many(self._scaled_frame(X))


class StandardScaledRegressor(_StandardScaled, base.MiniBatchRegressor):
    """A streamk regressor behind on-line feature standardisation (see :func:`standard_scaled`)."""

    @staticmethod
    def _default_model():
        from .svr import OnlineSVR

        return OnlineSVR(budget=50)


def standard_scaled(model: Any) -> _StandardScaled:
    """``model`` behind on-line feature standardisation, as one snapshot-able estimator."""
    if isinstance(model, base.Regressor):
        return StandardScaledRegressor(model)
    if isinstance(model, base.Classifier):
        return StandardScaledClassifier(model)
    raise ConfigError(
        f"scale = 'standard' needs a classifier or a regressor, got {type(model).__name__}"
    )
