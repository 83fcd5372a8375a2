"""When a learner is handed to a batch solver and back (design.md §6)."""

from __future__ import annotations

import copy
import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, SnapshotError, StreamkError
from ..kernels import Kernel, kernel_from_spec
from ..kernels.measures import select_kernel
from ..solvers import convergence_notes
from .limits import DEFAULT_WINDOW_LIMITS, WindowLimits
from .solve import Outcome, build, check_solve_options, learner_budget, solve_learner
from .window import TrainingWindow

__all__ = ["Consolidator", "SOLVE_FAILURES"]

log = logging.getLogger("streamk.consolidation")

#: What a failed solve raises (the solvers' ``SolverError``, NumPy's ``LinAlgError`` and other
#: ``ValueError``s, overflow, a Gram too large to allocate, a solution the learner's
#: ``from_state`` refuses): the consolidator keeps the on-line model, logs one WARNING and
#: counts the failure (``n_failed``) instead of raising it out of ``learn_one`` after the
#: event was learned.
SOLVE_FAILURES: tuple[type[BaseException], ...] = (
    StreamkError,
    ValueError,
    ArithmeticError,
    MemoryError,
)

#: The constructor arguments that are plain values (kernels and the detector are encoded apart).
_PARAMS = (
    "every", "seconds", "window_kind", "window_size", "seed", "mode", "C", "solver", "compress",
    "tol", "max_epochs", "drift_input", "fill", "when_full", "nu",
)  # fmt: skip
#: Figures restored with the state (metrics only; they never change the model). Wall-clock
#: ones (``last_duration``) stay out, so that replays write identical states.
_FIGURES = (
    "n_consolidations", "n_skipped", "n_failed", "last_objective", "last_status",
    "support_before", "support_after", "last_n_train", "last_n_solution", "last_replayed",
)  # fmt: skip
#: Figures added after the first snapshots, with the value an older state stands for.
_NEWER_FIGURES = {"n_failed": 0}


def _replace(live: Any, new: Any) -> None:
    """Make ``live`` hold ``new``'s state (identity kept, so callers' references stay valid)."""
    live.__dict__.clear()
    live.__dict__.update(new.__dict__)


class Consolidator:
    """Periodically re-solve a learner's batch problem on its support set plus recent events.

    Parameters
    ----------
    every
        Consolidate after every ``every`` labelled events (deterministic).
    seconds
        ... or when ``seconds`` have passed since the last one (wall clock: not replayable).
    on_drift
        ... or when this drift detector (e.g. :class:`streamk.kernels.measures.MMDDrift`, any river
        ``DriftDetector``) flags a drift. It is fed ``x`` (``drift_input="x"``) or the 0/1
        prequential error (``"error"``; the caller passes it).
    window, window_size, seed
        The training window: ``"sliding"`` (last events) or ``"reservoir"`` (seeded uniform sample).
    mode
        ``"sync"``: solve in the caller's thread at the trigger (replays give identical models).
        ``"background"``: solve a copy in a worker thread; events that arrive meanwhile are
        learned by the live model and buffered, then re-applied with ``learn_one`` to the
        solution, which replaces the live model's state. The result equals ``"sync"`` on the same
        stream: a trigger that comes while a job runs waits for it (``when_full`` is the exception:
        it looks at the live model, which is not the one the replay produces).
    C, solver, compress, tol, max_epochs, fill, nu
        Passed to :func:`~streamk.consolidation.solve.solve_learner` (the box of the
        perceptrons' problem, and of the adatron's or the SVR's when their own ``C`` is
        infinite, the adatron's default: such a hard margin's dual is unbounded on noisy
        data; ``"adatron"`` (no bias, default) or ``"svc"``; budget compression ``"auto"``,
        ``"project"``, ``"resolve"`` or ``"largest"``; the fraction ``fill`` of the budget
        the solution may use; ``nu`` for the ranker).
    when_full
        ... or when the learner's support set reaches its budget (deterministic): the on-line
        learner's next mistake would evict a support vector of the adopted solution. Needs
        ``fill < 1``; the room ``(1 - fill) budget`` then sets the pace. After a solve that
        is skipped (the window lacks a class or a rank) or fails, the learner stays full, so
        this trigger then waits until a tenth of the window is new instead of solving again
        at every event.
    candidate_kernels
        If given, the kernel with the smallest FSM on the training rows (classifiers) is used
        for the solve and adopted by the learner.

    Attributes
    ----------
    n_consolidations, n_skipped, last_duration, last_objective, last_status,
    support_before, support_after, last_n_train, last_n_solution, last_replayed, last_kernel.
    n_failed
        Solves that raised one of :data:`SOLVE_FAILURES` (a solver that failed, a Gram with
        non-finite entries or too large to allocate, a solution the learner refused): the
        on-line model was kept and one WARNING logged on ``streamk.consolidation`` per
        failed attempt.
    """

    def __init__(
        self,
        every: int | None = None,
        seconds: float | None = None,
        on_drift: Any = None,
        window: str = "sliding",
        window_size: int = 1000,
        seed: int | None = 0,
        mode: str = "sync",
        C: float = 1.0,
        solver: str = "adatron",
        compress: str = "auto",
        tol: float = 1e-3,
        max_epochs: int = 1000,
        candidate_kernels: Sequence[Kernel] | None = None,
        drift_input: str = "x",
        fill: float = 0.5,
        when_full: bool = True,
        nu: float = 0.3,
    ):
        if not 0.0 < fill <= 1.0:
            raise ConfigError(f"fill must be in (0, 1], got {fill!r}")
        if when_full and fill >= 1.0:
            raise ConfigError("when_full=True needs fill < 1 (else every event would trigger)")
        self.fill, self.when_full, self.nu = fill, when_full, nu
        if every is None and seconds is None and on_drift is None and not when_full:
            raise ConfigError(
                "give at least one trigger: every=N, seconds=T, on_drift=detector or when_full"
            )
        if every is not None and (
            isinstance(every, bool) or not isinstance(every, int) or every < 1
        ):
            raise ConfigError(f"every must be a positive int, got {every!r}")
        if seconds is not None and not seconds > 0:
            raise ConfigError(f"seconds must be > 0, got {seconds!r}")
        if mode not in ("sync", "background"):
            raise ConfigError(f"mode must be 'sync' or 'background', got {mode!r}")
        if drift_input not in ("x", "error"):
            raise ConfigError(f"drift_input must be 'x' or 'error', got {drift_input!r}")
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 < tol < math.inf:
            raise ConfigError(f"tol must be a finite number > 0, got {tol!r}")
        if isinstance(max_epochs, bool) or not isinstance(max_epochs, int) or max_epochs < 1:
            raise ConfigError(f"max_epochs must be a positive int, got {max_epochs!r}")
        check_solve_options(solver, compress)  # (here: a failed solve is logged, not raised)
        self.every, self.seconds, self.on_drift = every, seconds, on_drift
        self.mode, self.C, self.solver, self.compress = mode, C, solver, compress
        self.tol, self.max_epochs, self.drift_input = tol, max_epochs, drift_input
        self.candidate_kernels = list(candidate_kernels) if candidate_kernels else None
        self.window_kind, self.window_size, self.seed = window, window_size, seed
        self.window = TrainingWindow(window_size, window, seed)
        self.n_seen = 0
        self._since = 0
        self._full_rest = 0  # events when_full waits after a skipped solve
        self._t_last = time.monotonic()
        self.n_consolidations = 0
        self.n_skipped = 0
        self.n_failed = 0
        self.last_duration = 0.0
        self.seconds_total = 0.0
        self.last_objective = float("nan")
        self.last_status = 0
        self.support_before = 0
        self.support_after = 0
        self.last_n_train = 0
        self.last_n_solution = 0
        self.last_replayed = 0
        self.last_kernel: Kernel | None = None
        self._init_worker()

    def _init_worker(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._result: tuple[Any, Outcome, float] | None = None
        self._failure: tuple[BaseException, float] | None = None
        self._error: BaseException | None = None
        self._buffer: list[tuple[Any, Any]] = []

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the worker: an in-flight job is dropped (the live model already
        learned the buffered events, so only that consolidation is lost)."""
        state = self.__dict__.copy()
        for k in ("_lock", "_thread", "_result", "_failure", "_error", "_buffer"):
            state.pop(k)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_worker()

    # -- plain data (snapshots) -----------------------------------------------------------------
    def state(self, limits: WindowLimits = DEFAULT_WINDOW_LIMITS) -> dict[str, Any]:
        """Trigger state, counters, the window and the detector as plain data.

        A snapshot does not hold a solve in flight: in background mode call :meth:`join`
        first (the :class:`~streamk.consolidation.Consolidated` wrappers do), else this
        raises :class:`SnapshotError`. Sync mode restores exactly: the restored consolidator
        fires at the same event counts, on the same window rows, with the same reservoir RNG.
        The ``seconds`` trigger keeps the time elapsed since the last consolidation (wall
        clock, so not replayable in any case); without it the state holds no wall-clock
        value, so identical replays write identical states.
        """
        if self._thread is not None:
            raise SnapshotError(
                "a background consolidation is in flight; join() it before taking the state"
            )
        return {
            "params": self.state_params(),
            "n_seen": self.n_seen,
            "since": self._since,
            "full_rest": self._full_rest,
            "seconds_since_last": (
                None if self.seconds is None else max(time.monotonic() - self._t_last, 0.0)
            ),
            "figures": {name: _nan_as_none(getattr(self, name)) for name in _FIGURES},
            "last_kernel": None if self.last_kernel is None else self.last_kernel.to_spec(),
            "window": self.window.state(limits),
            "on_drift": _detector_state(self.on_drift),
        }

    def state_params(self) -> dict[str, Any]:
        """The parameters as plain data (kernels as specs; the detector is kept apart)."""
        params: dict[str, Any] = {name: getattr(self, name) for name in _PARAMS}
        kernels = self.candidate_kernels
        params["candidate_kernels"] = None if kernels is None else [k.to_spec() for k in kernels]
        return params

    @classmethod
    def from_state(
        cls, state: dict[str, Any], limits: WindowLimits = DEFAULT_WINDOW_LIMITS
    ) -> Consolidator:
        """Rebuild a consolidator from :meth:`state` (sizes checked before allocating)."""
        if not isinstance(state, dict) or not isinstance(state.get("params"), dict):
            raise SnapshotError("consolidator state must be a map with a 'params' map")
        params = dict(state["params"])
        if set(params) != {*_PARAMS, "candidate_kernels"}:
            raise SnapshotError(f"consolidator params must be exactly {sorted(_PARAMS)}")
        specs = params.pop("candidate_kernels")
        if specs is not None and not isinstance(specs, list):
            raise SnapshotError("consolidator candidate_kernels must be a list of kernel specs")
        window = TrainingWindow.from_state(state.get("window"), limits)  # checks sizes first
        if (window.size, window.kind, window.seed) != (
            params["window_size"],
            params["window_kind"],
            params["seed"],
        ):
            raise SnapshotError("consolidator window does not match its window parameters")
        params["window"] = params.pop("window_kind")
        try:
            kernels = None if specs is None else [kernel_from_spec(s) for s in specs]
            new = cls(**params, candidate_kernels=kernels, on_drift=_detector_from_state(state))
        except (ConfigError, TypeError, ValueError) as exc:
            raise SnapshotError(f"consolidator state rejected: {exc}") from None
        new.window = window
        counts = {"full_rest": 0, **state}  # (full_rest: absent from older states)
        for name in ("n_seen", "since", "full_rest"):
            value = counts.get(name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SnapshotError(f"consolidator {name} must be a non-negative int")
        new.n_seen, new._since = counts["n_seen"], counts["since"]
        new._full_rest = counts["full_rest"]
        elapsed = state.get("seconds_since_last")
        if elapsed is not None:  # recorded only with a ``seconds`` trigger
            if isinstance(elapsed, bool) or not isinstance(elapsed, int | float):
                raise SnapshotError("consolidator seconds_since_last must be a number or None")
            if not elapsed >= 0:
                raise SnapshotError("consolidator seconds_since_last must be >= 0")
            new._t_last = time.monotonic() - min(float(elapsed), 1e9)
        figures = state.get("figures")
        if isinstance(figures, dict):  # (a figure added later: absent from older states)
            figures = {**_NEWER_FIGURES, **figures}
        if not isinstance(figures, dict) or set(figures) != set(_FIGURES):
            raise SnapshotError(f"consolidator figures must be exactly {list(_FIGURES)}")
        for name, value in figures.items():
            if value is None:  # NaN (no value yet) is written as None: states compare equal
                value = float("nan")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SnapshotError(f"consolidator figure {name} must be a number or None")
            setattr(new, name, value)
        last = state.get("last_kernel")
        try:
            new.last_kernel = None if last is None else kernel_from_spec(last)
        except (ConfigError, TypeError, ValueError, KeyError) as exc:
            raise SnapshotError(f"consolidator last_kernel rejected: {exc}") from None
        return new

    # -- the per-event hook ---------------------------------------------------------------------
    def observe(self, learner: Any, x: dict, y: Any, drift_value: Any = None) -> bool:
        """Call after ``learner.learn_one(x, y)``. Returns True if a solution was adopted."""
        if self._thread is not None:  # the live model learned it: the solution must too
            self._buffer.append((x, y))
        adopted = self._collect(learner)
        self.window.add(learner._features.row(x, grow=False), y)
        self.n_seen += 1
        self._since += 1
        if self._due(learner, x if drift_value is None else drift_value):
            adopted |= self.trigger(learner)
        return adopted

    def _due(self, learner: Any, drift_value: Any) -> bool:
        due = self.every is not None and self._since >= self.every
        if self.when_full and self._thread is None and self._since >= self._full_rest:
            budget = learner_budget(learner)
            due |= budget is not None and learner.n_support >= budget
        if self.seconds is not None and time.monotonic() - self._t_last >= self.seconds:
            due = True
        if self.on_drift is not None:
            self.on_drift.update(drift_value)
            due |= bool(self.on_drift.drift_detected)
        return due

    def trigger(self, learner: Any) -> bool:
        """Consolidate now (sync) or start a job (background). True if adopted now."""
        self._since = 0
        self._t_last = time.monotonic()
        if self.mode == "sync":
            t0 = time.perf_counter()
            try:
                new, outcome = self._solve(learner, *self.window.data())
            except SOLVE_FAILURES as exc:
                self._failed(exc, time.perf_counter() - t0)
                return False
            return self._adopt(learner, new, outcome, time.perf_counter() - t0)
        adopted = self.join(learner)  # one job at a time: keeps the result equal to sync
        job = (copy.deepcopy(learner), *self.window.data())  # the window as of the trigger
        self._buffer = []
        self._thread = threading.Thread(target=self._work, args=job, daemon=True)
        self._thread.start()
        return adopted

    def _solve(self, learner: Any, Xw: np.ndarray, yw: list[Any]) -> tuple[Any, Outcome]:
        kernel = None
        if self.candidate_kernels and hasattr(learner, "classes_") and len(set(yw)) >= 2:
            S = learner.support_
            width = max(S.X.shape[1], Xw.shape[1])
            X = np.zeros((Xw.shape[0], width))
            X[:, : Xw.shape[1]] = Xw
            kernel = select_kernel(X, np.asarray([str(v) for v in yw]), self.candidate_kernels)
        with convergence_notes() as notes:  # (per thread: safe in the background worker)
            outcome = solve_learner(
                learner,
                Xw,
                yw,
                C=self.C,
                solver=self.solver,
                compress=self.compress,
                tol=self.tol,
                max_epochs=self.max_epochs,
                kernel=kernel,
                fill=self.fill,
                nu=self.nu,
            )
        if notes:
            self._not_converged(notes)
        new = None if outcome.state is None else build(learner, outcome.state)
        return new, outcome

    def _not_converged(self, notes: list[str]) -> None:
        """One WARNING for a solve that stopped at its limit, with what a user can change."""
        knobs = (
            "raise max_epochs or loosen tol" if "max_epochs" in " ".join(notes) else "loosen tol"
        )
        log.warning(
            "a consolidation's batch solver stopped before converging (%s). The adopted "
            "solution is feasible but not optimal and may predict worse than the on-line "
            "learner it replaces; with a guard (Consolidated's guard, the engine's "
            "consolidate_guard) the on-line learner serves while it errs less. To solve "
            "further, %s: Consolidated(..., tol=%g, max_epochs=%d) or the Consolidator's "
            "parameters of the same names (the engine's config has no such keys)",
            "; ".join(dict.fromkeys(notes)),
            knobs,
            self.tol,
            self.max_epochs,
        )

    def _work(self, snapshot: Any, Xw: np.ndarray, yw: list[Any]) -> None:
        t0 = time.perf_counter()
        try:
            new, outcome = self._solve(snapshot, Xw, yw)
        except SOLVE_FAILURES as exc:  # logged and counted in the caller's thread
            with self._lock:
                self._failure = (exc, time.perf_counter() - t0)
            return
        except BaseException as exc:  # re-raised in the caller's thread
            with self._lock:
                self._error = exc
            return
        with self._lock:
            self._result = (new, outcome, time.perf_counter() - t0)

    def _collect(self, learner: Any) -> bool:
        """Adopt a finished background job, if any."""
        if self._thread is None:
            return False
        with self._lock:
            result, failure, error = self._result, self._failure, self._error
            self._result = self._failure = self._error = None
        if error is not None:
            self._thread = None
            raise error
        if result is None and failure is None:
            return False
        self._thread.join()
        self._thread = None
        buffered, self._buffer = self._buffer, []
        if failure is not None:  # the live model learned the buffered events already
            self._failed(*failure)
            return False
        new, outcome, seconds = result
        if new is not None:
            for x, y in buffered:
                new.learn_one(x, y)
        self.last_replayed = len(buffered)
        return self._adopt(learner, new, outcome, seconds)

    def join(self, learner: Any) -> bool:
        """Wait for a running background job and adopt its result (no-op in sync mode)."""
        if self._thread is None:
            return False
        self._thread.join()
        return self._collect(learner)

    def _failed(self, exc: BaseException, seconds: float) -> None:
        """A solve that raised: keep the on-line model, count it, log it once."""
        self._spent(seconds)
        self.n_failed += 1
        self._rest()  # as after a skip: not at every event
        log.warning(
            "consolidation failed after %d events and was not adopted: %s: %s; the on-line "
            "model is kept and keeps learning (%d failed consolidations so far)",
            self.n_seen,
            type(exc).__name__,
            exc,
            self.n_failed,
        )

    def _spent(self, seconds: float) -> None:
        """Count a solve's time, adopted, skipped or failed."""
        self.last_duration = seconds
        self.seconds_total += seconds

    def _rest(self) -> None:
        """After a solve that changed nothing (skipped or failed) the learner stays full:
        ``when_full`` waits until a tenth of the window is new."""
        self._full_rest = max(1, self.window_size // 10)

    def _adopt(self, learner: Any, new: Any, outcome: Outcome, seconds: float) -> bool:
        self._spent(seconds)  # skipped solves cost time too
        self.last_n_train = outcome.n_train
        if new is None:
            self.n_skipped += 1
            self._rest()
            return False
        self._full_rest = 0
        self.support_before = learner.n_support
        _replace(learner, new)
        self.support_after = learner.n_support
        self.n_consolidations += 1
        self.last_objective = outcome.objective
        self.last_status = outcome.status
        self.last_n_solution = outcome.n_solution
        self.last_kernel = outcome.kernel
        return True

    def metrics(self) -> dict[str, float]:
        """Counters and gauges for the engine's exporter."""
        return {
            "consolidations": self.n_consolidations,
            "consolidations_skipped": self.n_skipped,
            "consolidations_failed": self.n_failed,
            "consolidation_last_seconds": self.last_duration,
            "consolidation_seconds_total": self.seconds_total,
            "consolidation_last_objective": self.last_objective,
            "consolidation_support_before": self.support_before,
            "consolidation_support_after": self.support_after,
            "consolidation_window_rows": self.window.n,
        }


def _nan_as_none(value: Any) -> Any:
    return None if isinstance(value, float) and value != value else value


def _detector_state(detector: Any) -> dict[str, Any] | None:
    """A drift detector as ``{"class", "state"}`` (allow-listed classes with ``state()``)."""
    if detector is None:
        return None
    from ..snapshot.registry import class_name_of

    if not callable(getattr(detector, "state", None)):
        raise SnapshotError(
            f"the drift detector {type(detector).__name__} has no plain-data state(), so a "
            "snapshot could not restore it; give it state()/from_state() and register it "
            "with streamk.snapshot.register_class, or consolidate on a count instead"
        )
    return {"class": class_name_of(detector), "state": detector.state()}


def _detector_from_state(state: dict[str, Any]) -> Any:
    entry = state.get("on_drift")
    if entry is None:
        return None
    from ..snapshot.registry import resolve_class

    if not isinstance(entry, dict) or not isinstance(entry.get("class"), str):
        raise SnapshotError("consolidator on_drift must be a map with a str 'class'")
    return resolve_class(entry["class"]).from_state(entry.get("state"))
