"""``Consolidated(model, every=...)``: a river estimator that consolidates the model it wraps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from river import base

from ..errors import ConfigError
from ..kernels import Kernel
from .consolidator import Consolidator

__all__ = ["Consolidated", "ConsolidatedClassifier", "ConsolidatedRegressor"]


class _Consolidated(base.Wrapper):
    """Shared body: the wrapped learner learns every event; a :class:`Consolidator` re-solves it.

    Parameters are those of :class:`Consolidator`, plus ``model`` (a streamk learner).
    Consolidation figures are exposed as attributes (``n_consolidations``, ``last_duration``, ...)
    and by :meth:`metrics`.
    """

    def __init__(
        self,
        model: Any,
        every: int | None = 1000,
        seconds: float | None = None,
        on_drift: Any = None,
        window: str = "sliding",
        window_size: int = 1000,
        seed: int | None = 0,
        mode: str = "sync",
        C: float = 1.0,
        solver: str = "adatron",
        compress: str = "auto",
        candidate_kernels: Sequence[Kernel] | None = None,
        drift_input: str = "x",
        fill: float = 0.5,
        when_full: bool = True,
        nu: float = 0.3,
    ):
        if not hasattr(model, "support_") or not hasattr(model, "state"):
            raise ConfigError(f"Consolidated wraps a streamk kernel learner, got {model!r}")
        self.model = model
        self.every = every
        self.seconds = seconds
        self.on_drift = on_drift
        self.window = window
        self.window_size = window_size
        self.seed = seed
        self.mode = mode
        self.C = C
        self.solver = solver
        self.compress = compress
        self.candidate_kernels = candidate_kernels
        self.drift_input = drift_input
        self.fill = fill
        self.when_full = when_full
        self.nu = nu
        self.consolidator_ = Consolidator(
            every=every,
            seconds=seconds,
            on_drift=on_drift,
            window=window,
            window_size=window_size,
            seed=seed,
            mode=mode,
            C=C,
            solver=solver,
            compress=compress,
            candidate_kernels=candidate_kernels,
            drift_input=drift_input,
            fill=fill,
            when_full=when_full,
            nu=nu,
        )

    @property
    def _wrapped_model(self):
        return self.model

    def __getattr__(self, name: str) -> Any:  # consolidation figures, read from the consolidator
        if name in _FIGURES and "consolidator_" in self.__dict__:
            return getattr(self.__dict__["consolidator_"], name)
        raise AttributeError(name)

    def metrics(self) -> dict[str, float]:
        return self.consolidator_.metrics()

    def learn_one(self, x: dict, y: Any, **kwargs: Any) -> None:
        drift_value = None
        if self.drift_input == "error":
            drift_value = float(self.model.predict_one(x) != y)
        self.model.learn_one(x, y, **kwargs)
        self.consolidator_.observe(self.model, x, y, drift_value)

    def learn_many(self, X: Any, y: Any, **kwargs: Any) -> None:
        """Row by row between consolidation points, so the model equals ``learn_one``'s."""
        import pandas as pd

        X = pd.DataFrame(X) if not isinstance(X, pd.DataFrame) else X
        ys = list(y)
        for i, x in enumerate(X.to_dict(orient="records")):
            self.learn_one(x, ys[i], **kwargs)

    def join(self) -> None:
        """Wait for a background consolidation and adopt it (before a snapshot, at shutdown)."""
        self.consolidator_.join(self.model)

    def predict_many(self, X: Any, **kwargs: Any):
        return self.model.predict_many(X, **kwargs)


_FIGURES = {
    "n_consolidations",
    "n_skipped",
    "last_duration",
    "seconds_total",
    "last_objective",
    "last_status",
    "support_before",
    "support_after",
    "last_n_train",
    "last_n_solution",
    "last_replayed",
    "last_kernel",
}


class ConsolidatedClassifier(_Consolidated, base.MiniBatchClassifier):
    """A streamk classifier with periodic consolidation (see :class:`Consolidator`).

    Examples
    --------
    >>> from river import datasets, evaluate, metrics
    >>> from streamk import KernelPerceptron
    >>> from streamk.consolidation import Consolidated
    >>> model = Consolidated(KernelPerceptron(budget=200), every=1000, window_size=1000)
    >>> evaluate.progressive_val_score(datasets.Bananas(), model, metrics.Accuracy())
    Accuracy: 86.49%
    """

    @classmethod
    def _unit_test_params(cls):
        from ..learners import KernelPerceptron

        yield {"model": KernelPerceptron(budget=60), "every": 150, "window_size": 200}

    def predict_one(self, x: dict, **kwargs: Any) -> Any:
        return self.model.predict_one(x, **kwargs)

    def predict_proba_one(self, x: dict, **kwargs: Any) -> dict[Any, float]:
        return self.model.predict_proba_one(x, **kwargs)

    def predict_proba_many(self, X: Any, **kwargs: Any):
        return self.model.predict_proba_many(X, **kwargs)


class ConsolidatedRegressor(_Consolidated, base.MiniBatchRegressor):
    """A streamk regressor (``OnlineSVR``) with periodic consolidation."""

    @classmethod
    def _unit_test_params(cls):
        from ..kernels import Laplacian
        from ..learners import OnlineSVR

        yield {
            "model": OnlineSVR(kernel=Laplacian(), C=1.0, budget=50),
            "every": 150,
            "window_size": 200,
        }

    def predict_one(self, x: dict, **kwargs: Any) -> float:
        return self.model.predict_one(x, **kwargs)


def Consolidated(model: Any, **params: Any) -> _Consolidated:  # noqa: N802 - reads as a class
    """``ConsolidatedRegressor`` for a regressor, else ``ConsolidatedClassifier``."""
    if isinstance(model, base.Regressor):
        return ConsolidatedRegressor(model, **params)
    return ConsolidatedClassifier(model, **params)
