"""``Consolidated(model, every=...)``: a river estimator that consolidates the model it wraps."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Sequence
from typing import Any

from river import base

from ..budget import Projectron
from ..errors import ConfigError, InvalidInput, SnapshotError
from ..kernels import Kernel
from ..learners.novelty import KernelNovelty
from .consolidator import Consolidator
from .guard import Guard, check_size
from .limits import DEFAULT_WINDOW_LIMITS

__all__ = ["Consolidated", "ConsolidatedClassifier", "ConsolidatedRegressor", "served_learner"]

log = logging.getLogger("streamk.consolidation")

#: Why a novelty detector is not consolidated (``Consolidated`` and the engine's config).
NOVELTY_NOT_CONSOLIDATED = (
    "the novelty detector (KernelNovelty) is not consolidated: it keeps every stored event "
    "with weight 1 and has no batch problem to re-solve"
)
#: Why a learner with a Projectron budget is not consolidated (``Consolidated`` and the engine).
PROJECTRON_NOT_CONSOLIDATED = (
    "a learner whose budget is a Projectron is not consolidated: the batch solution hands it "
    "up to fill x budget support vectors, often more than the kernel's feature space has "
    "dimensions (2 for a linear kernel on 2 features), and the Projectron's inverse Gram of "
    "such a near-singular set blows the coefficients up (to 1e17, then inf on Bananas), "
    "which also makes snapshots that cannot be loaded. Consolidate a learner with a removal "
    "budget instead (an int, RemoveOldest, RemoveSmallest: the solve keeps its solution "
    "within the budget itself), or keep the Projectron without consolidation "
    "(consolidate_every = 0)"
)
#: Set while :meth:`_Consolidated.from_state` rebuilds a wrapper: a snapshot written before
#: Projectron budgets were refused still loads, so that its learner can be taken out.
_RESTORING: contextvars.ContextVar[bool] = contextvars.ContextVar("restoring", default=False)


class _Consolidated(base.Wrapper):
    """Shared body: the wrapped learner learns every event; a :class:`Consolidator` re-solves it.

    Parameters are those of :class:`Consolidator`, plus ``model`` (a streamk learner) and
    ``guard``: with ``guard=N`` a copy of the learner that is never consolidated learns every
    event beside it, and whichever of the two lost less over the last ``N`` labelled events
    serves the predictions (:mod:`~streamk.consolidation.guard`; twice the learning work and
    the snapshot). Default 500; ``0``: the consolidated learner always serves. ``tol`` and
    ``max_epochs`` bound the batch solve (:class:`Consolidator`); a solve that stops at
    ``max_epochs`` before ``tol`` logs one WARNING on ``streamk.consolidation``.
    Consolidation figures are exposed as attributes (``n_consolidations``, ``last_duration``, ...)
    and by :meth:`metrics`; ``serving`` names the lineage that serves.
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
        guard: int = 500,
        tol: float = 1e-3,
        max_epochs: int = 1000,
    ):
        if not hasattr(model, "support_") or not hasattr(model, "state"):
            raise ConfigError(f"Consolidated wraps a streamk kernel learner, got {model!r}")
        if isinstance(model, KernelNovelty):  # (learn_one(x): a classifier's wrapper broke)
            raise ConfigError(NOVELTY_NOT_CONSOLIDATED)
        if isinstance(getattr(model, "budget", None), Projectron):
            if not _RESTORING.get():
                raise ConfigError(PROJECTRON_NOT_CONSOLIDATED)
            log.warning(
                "restored a consolidated learner with a Projectron budget, written before "
                "they were refused; take its learner out (served_model, or the engine with "
                "consolidate_every = 0): %s",
                PROJECTRON_NOT_CONSOLIDATED,
            )
        if getattr(model, "_objects", False):  # (the window's feature row broke on a str)
            raise ConfigError(
                f"Consolidated re-solves learners on vectors (its window holds feature rows); "
                f"{model.kernel!r} works on strings or trees: use the learner without it"
            )
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
        self.guard = guard
        self.tol = tol
        self.max_epochs = max_epochs
        self.guard_ = Guard(model, guard) if check_size(guard) else None
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
            tol=tol,
            max_epochs=max_epochs,
        )

    @property
    def _wrapped_model(self):
        return self.model

    @property
    def served_model(self) -> Any:
        """The learner whose predictions are served: the consolidated one, or the guard's
        unconsolidated shadow while it has lost less (what a merge or an unwrap keeps)."""
        return self.model if self.guard_ is None else self.guard_.served(self.model)

    @property
    def n_learned(self) -> int:
        """Events learned (every lineage learns each one): how far a refused block got, so
        that the engine's one-at-a-time retry never learns an event twice."""
        return self.model.n_learned

    @property
    def serving(self) -> str:
        """``"consolidated"`` or ``"online"`` (the guard's shadow)."""
        return "consolidated" if self.guard_ is None else self.guard_.serving

    def __getattr__(self, name: str) -> Any:  # consolidation figures, read from the consolidator
        if name in _FIGURES and "consolidator_" in self.__dict__:
            return getattr(self.__dict__["consolidator_"], name)
        raise AttributeError(name)

    def metrics(self) -> dict[str, float]:
        figures = self.consolidator_.metrics()
        if self.guard_ is not None:
            figures["consolidation_serving_online"] = float(self.serving == "online")
            figures["consolidation_guard_loss_difference"] = self.guard_.loss_difference()
        return figures

    def learn_one(self, x: dict, y: Any, **kwargs: Any) -> None:
        self._learn(x, y, False, **kwargs)

    def _learn(self, x: dict, y: Any, want_said: bool, **kwargs: Any) -> Any:
        """Learn one event (both lineages, with a guard); returns what :meth:`predict_one`
        said of it before, when ``want_said`` (or a guard made it known anyway)."""
        said = served = None
        if self.guard_ is not None:
            said, served = self.guard_.learn_one(self.model, x, y, **kwargs)
        else:
            if want_said or self.drift_input == "error":
                said = served = self.model.predict_one(x)
            self.model.learn_one(x, y, **kwargs)
        drift_value = float(said != y) if self.drift_input == "error" else None
        self.consolidator_.observe(self.model, x, y, drift_value)
        return served

    def learn_many(self, X: Any, y: Any, **kwargs: Any) -> None:
        """Row by row between consolidation points, so the model equals ``learn_one``'s."""
        for x, target in _pairs(X, y):
            self.learn_one(x, target, **kwargs)

    def learn_predict_many(self, X: Any, y: Any, **kwargs: Any) -> list[Any]:
        """Test-then-train on a block, row by row: what ``predict_one`` said before each
        row, each row then learned as :meth:`learn_one` learns it (consolidations at the
        same events). What the engine and ``streamk learn --batch-size`` call for a
        labelled block, so their figures are the per-event ones."""
        return [self._learn(x, target, True, **kwargs) for x, target in _pairs(X, y)]

    def join(self) -> None:
        """Wait for a background consolidation and adopt it (before a snapshot, at shutdown)."""
        self.consolidator_.join(self.model)

    def predict_many(self, X: Any, **kwargs: Any):
        return self.served_model.predict_many(X, **kwargs)

    # -- plain data (snapshots) -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The wrapped learner and the consolidation state, as plain data.

        In background mode a solve in flight is joined and adopted first, so a snapshot
        always holds a settled model: every event it covers is in the learner, and the
        window, counters and trigger state are those after the adoption. Sync mode restores
        exactly (the restored wrapper consolidates at the same events, on the same window).
        """
        from ..snapshot.registry import class_name_of

        self.join()
        return {  # the layout of the other wrappers (learners.scaling): model_class + model
            "model_class": class_name_of(self.model),
            "model": self.model.state(),
            "consolidator": self.consolidator_.state(DEFAULT_WINDOW_LIMITS),
            "guard": None if self.guard_ is None else self.guard_.state(),
        }

    @property
    def state_is_plain(self) -> bool:
        """False when :meth:`state` would fail: a drift detector without a plain-data
        ``state()`` (river's detectors). The engine then snapshots the learner alone."""
        detector = self.consolidator_.on_drift
        return detector is None or callable(getattr(detector, "state", None))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> _Consolidated:
        """Rebuild from :meth:`state`: the learner through the snapshot allow-list, the
        consolidator with its window sizes checked before anything is allocated."""
        from ..snapshot.registry import resolve_class

        if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
            raise SnapshotError(f"{cls.__name__} state must be a map with a 'model' map")
        consolidator = Consolidator.from_state(state.get("consolidator"), DEFAULT_WINDOW_LIMITS)
        learner_cls = resolve_class(state.get("model_class"))
        if issubclass(learner_cls, _Consolidated):
            raise SnapshotError("a Consolidated model cannot wrap another Consolidated model")
        learner = learner_cls.from_state(state["model"])
        guard = state.get("guard")  # (absent: written before guards)
        guard = None if guard is None else Guard.from_state(guard, learner_cls)
        c = consolidator
        restoring = _RESTORING.set(True)
        try:
            new = cls(
                learner,
                every=c.every,
                seconds=c.seconds,
                on_drift=c.on_drift,
                window=c.window_kind,
                window_size=c.window_size,
                seed=c.seed,
                mode=c.mode,
                C=c.C,
                solver=c.solver,
                compress=c.compress,
                candidate_kernels=c.candidate_kernels,
                drift_input=c.drift_input,
                fill=c.fill,
                when_full=c.when_full,
                nu=c.nu,
                guard=0 if guard is None else guard.size,
                tol=c.tol,
                max_epochs=c.max_epochs,
            )
        except ConfigError as exc:
            raise SnapshotError(f"{cls.__name__} state rejected: {exc}") from None
        finally:
            _RESTORING.reset(restoring)
        new.consolidator_ = consolidator
        new.guard_ = guard
        return new

    def same_setup(self, other: Any) -> bool:
        """True if ``other`` is a wrapper of the same kind with the same consolidation
        parameters, the guard's aside (so a restored state may continue under ``other``'s
        configuration, after :meth:`set_guard` if the guards differ)."""
        if type(other) is not type(self):
            return False
        a, b = self.consolidator_.state_params(), other.consolidator_.state_params()
        return a == b

    def set_guard(self, size: int) -> None:
        """Go on with the learner that serves now, under a fresh guard of ``size`` events
        (``0``: none); the window, counters and trigger state are kept. What a restart does
        when ``consolidate_guard`` changed, or for a snapshot from before guards."""
        check_size(size)
        self.model = self.served_model
        self.guard = size
        self.guard_ = Guard(self.model, size) if size else None


_FIGURES = {
    "n_consolidations",
    "n_skipped",
    "n_failed",
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
    Accuracy: 86.66%
    """

    @classmethod
    def _unit_test_params(cls):
        from ..learners import KernelPerceptron

        yield {"model": KernelPerceptron(budget=60), "every": 150, "window_size": 200}
        yield {"model": KernelPerceptron(budget=60), "every": 150, "window_size": 200, "guard": 50}

    def predict_one(self, x: dict, **kwargs: Any) -> Any:
        return self.served_model.predict_one(x, **kwargs)

    def predict_proba_one(self, x: dict, **kwargs: Any) -> dict[Any, float]:
        return self.served_model.predict_proba_one(x, **kwargs)

    def predict_proba_many(self, X: Any, **kwargs: Any):
        return self.served_model.predict_proba_many(X, **kwargs)


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
        return self.served_model.predict_one(x, **kwargs)


def Consolidated(model: Any, **params: Any) -> _Consolidated:  # noqa: N802 - reads as a class
    """``ConsolidatedRegressor`` for a regressor, else ``ConsolidatedClassifier``."""
    if isinstance(model, base.Regressor):
        return ConsolidatedRegressor(model, **params)
    return ConsolidatedClassifier(model, **params)


def served_learner(model: Any) -> Any:
    """The learner ``model`` serves from: inside a consolidation wrapper the lineage that
    serves (the guard's shadow while it errs less), inside another wrapper its learner,
    else ``model`` itself (what a merge takes and the engine's support size counts)."""
    return getattr(model, "served_model", getattr(model, "_wrapped_model", model))


def _pairs(X: Any, y: Any) -> list[tuple[dict, Any]]:
    """A block's rows as dicts (a DataFrame's, or one made of ``X``) with their labels, for
    the per-row loop; a label count that does not match is refused, never truncated."""
    import pandas as pd

    X = pd.DataFrame(X) if not isinstance(X, pd.DataFrame) else X
    ys = list(y)
    if len(ys) != len(X):
        raise InvalidInput(f"X has {len(X)} rows but y has {len(ys)} labels")
    return list(zip(X.to_dict(orient="records"), ys))
