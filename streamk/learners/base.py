"""What every streamk kernel learner shares: features, kernel resolution, support set, state.

A learner mixes :class:`KernelLearner` into a river base class. The mixin owns the
plumbing so that each learner module holds only its algorithm:

* feature dicts / frames to dense rows (:class:`~streamk.learners.features.FeatureIndex`);
* ``gamma="auto"``: the kernel's width is re-estimated from the learned rows after each
  of the first ten, then after every tenth up to :attr:`AUTO_WINDOW`, then frozen (the
  resolved value is in ``state()``; see :func:`regamma_at`);
* the :class:`~streamk.learners.support.SupportSet` and the budget policy;
* ``state()`` / ``from_state()``: plain data for snapshots.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import accel
from ..budget import BudgetPolicy, Merge, Unbounded, make_policy, policy_from_spec
from ..errors import ConfigError, InvalidInput
from ..kernels import RBF, Kernel, ScaleEstimator, kernel_from_spec, sqnorm_window
from . import fastpass
from .features import FeatureIndex, frame_records
from .objects import ObjectSupportSet, validate_object
from .support import ID_LIMIT, StateError, SupportSet

__all__ = ["KernelLearner", "AUTO_WINDOW", "regamma_at", "as_list"]

#: Number of learned rows over which ``gamma="auto"`` is estimated before it is frozen.
AUTO_WINDOW = 200

#: Rows in a row the compiled per-event core may decline in ``learn_many`` (new classes
#: at a stream's start, buffers growing) before the rest of a run goes to the NumPy path.
_EVENT_STALLS = 8

#: The fewest rows :meth:`KernelLearner._until_full` hands to the unbounded set's passes at
#: once (unless the run has fewer): below it a chunk's Python costs more than the per-event
#: core's rows.
UNTIL_FULL_ROWS = 32


def as_list(y: Any) -> list[Any]:
    """A block's labels as a list: ``y.tolist()`` for pandas and NumPy (one C call, Python
    scalars; ``list(series)`` costs 60 ns a label), else ``list(y)``."""
    tolist = getattr(y, "tolist", None)
    return tolist() if callable(tolist) else list(y)


def row_index(X: Any) -> Any:
    """The index a block's predictions carry: a pandas frame's or series' own, else ``None``
    (a list has an ``index`` method, not an index)."""
    import pandas as pd

    return X.index if isinstance(X, (pd.DataFrame, pd.Series)) else None


def regamma_at(n: int) -> bool:
    """Whether ``gamma="auto"`` is re-estimated once ``n`` rows have been folded in.

    After each of the first ten rows, then after every tenth up to :data:`AUTO_WINDOW`.
    Re-estimating at every row bought no accuracy (the same prequential accuracy to
    +-0.0001 on Bananas, Phishing, ImageSegments and Hyperplane), while each change
    invalidates every cached kernel value; between these points the kernel is constant,
    so a block of rows shares one kernel matrix, warm-up or not.
    """
    return 0 < n <= AUTO_WINDOW and (n <= 10 or n % 10 == 0)


def _next_regamma(n: int) -> int:
    """The first count after ``n`` at which ``gamma="auto"`` is re-estimated (``n`` below
    :data:`AUTO_WINDOW`)."""
    return n + 1 if n < 10 else (n // 10 + 1) * 10


def _folds_in_place(scale: ScaleEstimator, rows: np.ndarray) -> bool:
    """Whether ``rows`` can be folded into ``scale`` by the compiled Welford step directly:
    statistics already as wide as the rows (``update`` would pad them otherwise), rows
    C-contiguous float64, and the compiled core present."""
    mean = scale.mean
    return (
        accel.core is not None
        and scale.n > 0
        and mean.shape[0] == rows.shape[1]
        and rows.dtype == np.float64
        and rows.flags.c_contiguous
        and mean.flags.c_contiguous
        and mean.flags.writeable
        and scale._m2.flags.c_contiguous
        and scale._m2.flags.writeable
    )


def _events_of(X: Any) -> list[Any]:
    """A block's rows as events: a NumPy row as ``{j: value}``, a DataFrame's row without
    its NaN cells (absent features), anything else as it comes."""
    if isinstance(X, np.ndarray):
        return [dict(enumerate(row)) for row in X.tolist()]
    if hasattr(X, "to_dict"):  # a DataFrame: NaN cells are absent features
        return frame_records(X)
    return list(X)


#: Keys every kernel learner's state has (learners add their own: labels, counters ...).
_STATE_KEYS = ("params", "features", "support", "scale", "policy", "n_learned")
#: Counters a learner's state may hold: ints in [0, 2**63).
_COUNTS = ("n_learned", "n_mistakes", "n_updates")


def _count(value: Any, key: str) -> int:
    """A counter of a state (``n_learned`` ...): an int in ``[0, 2**63)``, else StateError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise StateError(f"state {key!r} must be an int, got {type(value).__name__} {value!r:.40}")
    if not 0 <= value < ID_LIMIT:
        raise StateError(f"state {key!r} must be in [0, 2**63), got {value}")
    return int(value)


class _InvalidInputState(StateError, InvalidInput):
    """A state holding input the learner refuses on a stream: both kinds of error."""


@contextlib.contextmanager
def _state_key(key: str | None) -> Iterator[None]:
    """Turn an error rebuilding part of a state into a :class:`StateError` naming the key.

    ``from_state`` of a part (a kernel or policy spec, scale statistics, a learner's own
    keys) raises what it meets (``KeyError``, ``TypeError``, ``ConfigError`` ...); the
    caller sees one exception type, with the path of the part that was wrong.
    """
    where = "learner state" if key is None else f"state {key!r}"
    try:
        yield
    except StateError:
        raise
    except InvalidInput as exc:  # e.g. a support string the kernel refuses, as on input
        raise _InvalidInputState(f"{where} is invalid: {exc}") from exc
    except KeyError as exc:
        raise StateError(f"{where} is missing {exc}") from exc
    except (TypeError, ValueError, AttributeError, OverflowError, IndexError) as exc:
        raise StateError(f"{where} is invalid: {type(exc).__name__}: {exc}") from exc


class Offset:
    """A write view of a list shifted by ``start`` (the rows of one run under one kernel):
    what :meth:`KernelLearner._event_rows` writes a block's predictions through."""

    __slots__ = ("items", "start")

    def __init__(self, items: list[Any], start: int):
        self.items, self.start = items, start

    def __getitem__(self, j: int) -> Any:
        return self.items[self.start + j]

    def __setitem__(self, j: int, value: Any) -> None:
        self.items[self.start + j] = value

    def put(self, j: int, values: list[Any]) -> None:
        """Write ``values`` at ``j, j + 1, ...`` in one slice assignment."""
        self.items[self.start + j : self.start + j + len(values)] = values


class KernelLearner:
    """Mixin with the shared state of a kernel learner.

    Subclasses set ``self.kernel`` and ``self.budget`` in ``__init__``, call
    :meth:`_reset`, and may override :meth:`_extra_state` / :meth:`_load_extra_state`.
    """

    kernel: Kernel | None
    budget: int | BudgetPolicy | None
    _keep_gram = False

    # -- construction -------------------------------------------------------------------------
    def _resolve_kernel_param(self) -> Kernel:
        if self.kernel is None:
            return RBF(gamma="auto")
        if not isinstance(self.kernel, Kernel):
            raise ConfigError(
                "kernel must be a streamk.kernels.Kernel (e.g. RBF(gamma=0.5)), "
                f"got {self.kernel!r}"
            )
        return self.kernel

    def _reset(self, n_outputs: int = 1) -> None:
        """Create all learned state (river's convention: construction and reset share it)."""
        kernel = self._resolve_kernel_param()
        self._policy = make_policy(self.budget)
        self._features = FeatureIndex()
        self._features.sq_window = sqnorm_window(kernel)
        self._scale = None if kernel.is_resolved else ScaleEstimator()
        self._auto_kernel = kernel
        keep_gram = self._keep_gram or self._policy.needs_gram
        self._objects = kernel.takes_objects
        self._policy.check_kernel(kernel)  # a pairing that cannot work, before any event
        if self._objects:  # strings or trees: the support set holds the objects themselves
            self._scale = None
            self._auto_kernel = kernel
            self._support = ObjectSupportSet(kernel, n_outputs=n_outputs, keep_gram=keep_gram)
            self._n_learned = 0
            self._row_cache = None
            return
        self._support = SupportSet(
            kernel if kernel.is_resolved else kernel.resolve(ScaleEstimator()),
            n_outputs=n_outputs,
            keep_gram=keep_gram,
        )
        self._bound_growth()
        self._n_learned = 0
        # (rows_version, version, row bytes, K(row, S), f(row) or None): see _margins
        self._row_cache: tuple[int, int, bytes, np.ndarray, np.ndarray | None] | None = None

    # -- public read-only views -----------------------------------------------------------------
    @property
    def n_support(self) -> int:
        """Number of support vectors currently held."""
        return self._support.n

    @property
    def support_(self) -> SupportSet:
        """The support set (rows, coefficients, ids)."""
        return self._support

    @property
    def kernel_(self) -> Kernel:
        """The kernel in use, with ``"auto"`` parameters resolved."""
        return self._support.kernel

    @property
    def n_learned(self) -> int:
        """Number of examples learned from so far."""
        return self._n_learned

    # -- rows ---------------------------------------------------------------------------------
    @property
    def _warming_up(self) -> bool:
        return self._scale is not None and self._scale.n < AUTO_WINDOW

    def _object(self, x: Any) -> Any:
        """The string or tree of an event, validated by the kernel: ``x`` itself, or the
        one value of a one-entry dict (e.g. ``{"text": "..."}``)."""
        if isinstance(x, dict):
            if len(x) != 1:
                raise InvalidInput(
                    f"{self.kernel_!r} takes one string or tree per event: pass it as x or "
                    f"as a one-entry dict, got a dict with keys {sorted(map(str, x))[:5]}"
                )
            (x,) = x.values()
        return validate_object(self._support.kernel, x)

    def _learn_row(self, x: dict) -> np.ndarray:
        """Dense row of a learned event; during the warm-up it refines ``gamma="auto"``."""
        if self._objects:
            return self._object(x)
        row = self._features.row(x, grow=True)
        scale = self._scale
        if scale is not None and scale.n < AUTO_WINDOW:  # _warming_up, inlined: every event
            self._refine_gamma(row)
        return row

    def _refine_gamma(self, row: np.ndarray) -> None:
        """During the warm-up, fold a learned row into the ``gamma="auto"`` estimate
        (re-estimated at the counts :func:`regamma_at` names)."""
        if self._warming_up:
            self._scale.update(row[None, :])
            if regamma_at(self._scale.n):
                self._support.set_kernel(self._auto_kernel.resolve(self._scale))

    def _fold_kernel_run(self, rows: np.ndarray, start: int) -> int:
        """Fold warm-up rows from ``start`` into ``gamma="auto"``; return the end of the run
        of rows that ``learn_one`` would learn with the kernel in use after row ``start``.

        The run stops before the next row that moves the kernel (see :func:`regamma_at`);
        after the warm-up it is the whole block. Row ``start`` itself may have moved it.
        """
        end, kernel = self._fold_run(self._scale, rows, start)
        if kernel is not None:
            self._support.set_kernel(kernel)
        return end

    def _fold_run(
        self, scale: ScaleEstimator | None, rows: np.ndarray, start: int
    ) -> tuple[int, Kernel | None]:
        """:meth:`_fold_kernel_run` on ``scale`` without touching the support set: the run's
        end and the kernel row ``start`` moved it to (``None``: unchanged). The estimator
        does not depend on learning, so a copy of it gives a warm-up's kernels ahead."""
        if scale is None or scale.n >= AUTO_WINDOW:  # not warming up
            return rows.shape[0], None
        kernel = None
        in_place = _folds_in_place(scale, rows)
        if not in_place:  # what _refine_gamma does
            scale.update(rows[start][None, :])
        else:  # the same numbers, to the bit, in one compiled call
            accel.core.welford_each(rows[start : start + 1], scale.n, scale.mean, scale._m2)
            scale.n += 1
        if regamma_at(scale.n):
            kernel = self._auto_kernel.resolve(scale)
        n = scale.n
        if n >= AUTO_WINDOW:  # that row froze gamma
            return rows.shape[0], kernel
        end = min(rows.shape[0], start + _next_regamma(n) - n)
        if end <= start + 1:
            return end, kernel
        if in_place or _folds_in_place(scale, rows):  # counts n + 1 .. change - 1
            scale.n = accel.core.welford_each(rows[start + 1 : end], n, scale.mean, scale._m2)
        else:
            scale.update_each(rows[start + 1 : end])
        return end, kernel

    def _fold_runs(
        self, scale: ScaleEstimator, rows: np.ndarray, start: int, stop: int
    ) -> tuple[list[int], list[Kernel | None]]:
        """:meth:`_fold_run` from ``start`` over the runs that end by ``stop``: their bounds
        and the kernel each run's first row moved ``scale`` to (``None``: unchanged), with
        one compiled fold per run (Welford's step is row by row whatever the calls' sizes).
        A run's end depends on the count alone, so a run past ``stop`` is not folded."""
        m, in_place = rows.shape[0], _folds_in_place(scale, rows)
        each = hasattr(self._auto_kernel, "resolve_each")
        marked = each and hasattr(accel.core, "welford_marks")  # the rest in one call
        if marked and in_place and scale.n < AUTO_WINDOW:
            return self._fold_runs_marked(scale, rows, start, stop)
        bounds, kernels, done = [start], [], start  # rows[:done] are in the estimate
        # the runs whose kernel is resolved at the end, all at once: (run, count, m2)
        later: list[tuple[int, int, np.ndarray]] = []
        while bounds[-1] < m:
            first = bounds[-1]
            n = scale.n + first + 1 - done  # the count once the run's first row is in
            if scale.n >= AUTO_WINDOW or n >= AUTO_WINDOW:
                end = m  # frozen, or freezing: the rest under one kernel
            else:
                end = min(m, first + _next_regamma(n) - n)
            if end > stop:
                break
            if scale.n >= AUTO_WINDOW:
                kernel = None
            elif not in_place:  # widths differ or no compiled core: the general fold
                end, kernel = self._fold_run(scale, rows, first)
                done, in_place = end, _folds_in_place(scale, rows)
            else:
                fold = accel.core.welford_each
                scale.n = fold(rows[done : first + 1], scale.n, scale.mean, scale._m2)
                done = first + 1
                kernel = None
                if regamma_at(n):
                    if each:
                        later.append((len(kernels), n, scale._m2.copy()))
                    else:
                        kernel = self._auto_kernel.resolve(scale)
            bounds.append(end)
            kernels.append(kernel)
            if marked and in_place and not later and done == end and scale.n < AUTO_WINDOW:
                more, moved = self._fold_runs_marked(scale, rows, end, stop)  # a fresh model
                return bounds + more[1:], kernels + moved
        if later:
            runs, counts, m2 = zip(*later)
            for r, kernel in zip(runs, self._auto_kernel.resolve_each(counts, np.array(m2))):
                kernels[r] = kernel
        last = bounds[-1]
        if in_place and scale.n < AUTO_WINDOW and done < last:
            scale.n = accel.core.welford_each(rows[done:last], scale.n, scale.mean, scale._m2)
        return bounds, kernels

    def _runs_ahead(
        self, rows: np.ndarray, start: int, stop: int
    ) -> tuple[ScaleEstimator, list[int], list[Kernel]]:
        """The warm-up's runs from row ``start`` to ``stop``, ahead of learning them: a copy
        of the estimator with their rows folded in, their bounds and the kernel each one is
        learned under (:meth:`_fold_runs`, the kernel in use carried where a run's first row
        does not move it). The estimator does not depend on learning, so these are the
        kernels the runs one at a time would meet; :meth:`_take_runs` commits them."""
        scale = self._scale.copy()
        bounds, moved = self._fold_runs(scale, rows, start, stop)
        kernels, kernel = [], self._support.kernel
        for k in moved:
            kernel = kernel if k is None else k
            kernels.append(kernel)
        return scale, bounds, kernels

    def _warm_untracked(self, rows: np.ndarray, learn: Callable[..., bool]) -> int:
        """The block's rows under ``gamma="auto"``'s warm-up, run after run, in one go: the
        kernels ahead (:meth:`_runs_ahead`), then ``learn(Q, q_sq, runs)``, the learner's
        untracked passes over them (:func:`streamk.learners.fastpass.untracked_runs`: no
        Python between the runs), which records what it learned and says whether it took
        the rows. The row it got to (0: nothing changed, the runs go one at a time)."""
        if accel.core is None or rows.shape[1] == 0:
            return 0
        scale, bounds, kernels = self._runs_ahead(rows, 0, rows.shape[0])
        Q = np.ascontiguousarray(rows[: bounds[-1]], dtype=np.float64)
        if not learn(Q, accel.sqnorms(Q), (bounds, kernels)):
            return 0
        self._take_runs(scale, rows, bounds, kernels, len(kernels))
        return bounds[-1]

    def _room_until_full(self) -> int | None:
        """The rows the set can still take before a policy that acts only on a full set and
        has no block pass of its own (``Merge``: the perceptrons' hint pass merges, but not
        their warm-up's pass nor the other learners' passes) does anything; ``None`` for
        other policies (``RemoveSmallest`` acts only on a full set too, but its own passes
        take it)."""
        policy = self._policy
        return policy.budget - self._support.n if type(policy) is Merge else None

    def _policy_while(self, rows: int) -> BudgetPolicy:
        """The policy to learn the next ``rows`` rows with: an unbounded stand-in while the
        set has room for all of them under :meth:`_room_until_full` (no update can then
        reach the budget: the same model), else the policy itself."""
        room = self._room_until_full()
        return Unbounded() if room is not None and rows <= room else self._policy

    def _until_full(
        self, start: int, end: int, learn: Callable[[int, int, BudgetPolicy], bool]
    ) -> int:
        """Rows ``start:end`` of a run under one kernel learned by ``learn(a, b, policy)``
        chunk by chunk with an unbounded stand-in (:meth:`_policy_while`), while each chunk
        (at least :data:`UNTIL_FULL_ROWS` rows, or the rest of the run) fits in the room
        :meth:`_room_until_full` leaves: no update can then reach the budget, so the
        unbounded set's compiled passes learn the policy's model (a ``Merge(200)`` never
        fills on Phishing). ``learn`` says whether it took the rows; the row this got to
        (``start``: none)."""
        if self._room_until_full() is None:
            return start
        i = start
        while i < end:
            take = min(self._room_until_full(), end - i)
            if take <= 0 or take < min(UNTIL_FULL_ROWS, end - i):
                break
            if not learn(i, i + take, self._policy_while(take)):
                break
            i += take
        return i

    def _take_runs(
        self,
        scale: ScaleEstimator,
        rows: np.ndarray,
        bounds: list[int],
        kernels: list[Kernel],
        runs: int,
    ) -> None:
        """Commit the first ``runs >= 1`` runs of :meth:`_runs_ahead`, learned: the estimator
        as after their rows (``scale`` when every run was learned; else the rows folded
        again at once, Welford's step row by row, the same bits) and the last one's kernel."""
        if runs == len(kernels):
            self._scale.n, self._scale.mean, self._scale._m2 = scale.n, scale.mean, scale._m2
        else:
            self._fold_runs(self._scale, rows, bounds[0], bounds[runs])
        self._support.set_kernel(kernels[runs - 1])

    def _fold_runs_marked(
        self, scale: ScaleEstimator, rows: np.ndarray, start: int, stop: int
    ) -> tuple[list[int], list[Kernel | None]]:
        """:meth:`_fold_runs` where the compiled Welford step folds in place and the kernel
        resolves many widths at once: the runs' bounds from the counts alone, then one
        compiled fold (``welford_marks``) over every run, keeping the sums of squared
        deviations where a run's first row re-estimates the width. The same numbers, to
        the bit: Welford's step is row by row whatever the calls' sizes."""
        m, n0 = rows.shape[0], scale.n
        bounds: list[int] = [start]
        marks: list[int] = []  # rows folded when a run's first row moves gamma
        counts: list[int] = []
        runs: list[int] = []
        folded = start  # the rows the estimate takes in: up to the count freezing it
        while bounds[-1] < m:
            first = bounds[-1]
            n = n0 + first + 1 - start  # the count once the run's first row is in
            end = m if n >= AUTO_WINDOW else min(m, first + _next_regamma(n) - n)
            if end > stop:
                break
            if regamma_at(n):
                marks.append(first + 1 - start)
                counts.append(n)
                runs.append(len(bounds) - 1)
            folded = first + 1 if n >= AUTO_WINDOW else end
            bounds.append(end)
        kernels: list[Kernel | None] = [None] * (len(bounds) - 1)
        if folded == start:
            return bounds, kernels
        m2 = np.empty((len(marks), scale._m2.shape[0]))
        fold = accel.core.welford_marks
        marked = np.array(marks, dtype=np.int64)
        scale.n = fold(rows[start:folded], n0, scale.mean, scale._m2, marked, m2)
        if runs:
            for r, kernel in zip(runs, self._auto_kernel.resolve_each(counts, m2)):
                kernels[r] = kernel
        return bounds, kernels

    def _learn_rows(self, rows: np.ndarray, items: list, step: Callable) -> None:
        """``step(row, k_row, item)`` for each row in order, as ``learn_one`` would see it.

        ``k_row`` is ``K(row, S)`` for the support set as it is at that row. Each run of
        rows under one kernel (the whole block, after the warm-up) shares one tracked
        block, so ``K(block, S)`` is computed once and kept current through every change
        ``step`` makes. This is the exactness contract of ``learn_many``.
        """
        if self._objects:  # no block tracking for objects: one row at a time, exactly
            for row, item in zip(rows, items):
                step(row, self._support.kernel_row(row), item)
            return
        i = 0
        while i < len(items):
            end = self._fold_kernel_run(rows, i)
            with self._support.track(rows[i:end]) as block:
                for j, item in enumerate(items[i:end]):
                    k_row = block.K[j, : self._support.n].copy()
                    block.start = j + 1
                    step(rows[i + j], k_row, item)
            i = end

    def _warm_event_rows(self, rows: np.ndarray, items: list | None, step: Callable) -> int:
        """The warm-up's rows of a block through the compiled per-event core, each folded
        into ``gamma="auto"`` there as ``learn_one`` folds it (``EventPass.learn_rows`` with
        ``fold``): no split into runs, no Python between rows. A row the core hands back is
        folded and learned as ``learn_one``'s NumPy path would (``step(row, K(row, S),
        item)``). Returns the row it got to: the warm-up's end at most, 0 when the core does
        not take this learner; the caller's runs go on from there."""
        event = self._event
        if event is None or not self._warming_up or not event.applies(self):
            return 0
        m = min(rows.shape[0], AUTO_WINDOW - self._scale.n)  # the rows the warm-up folds
        Q = np.ascontiguousarray(rows[:m], dtype=np.float64)
        i = stalls = 0
        while i < m:
            j = event.learn_rows(self, Q[i:], None if items is None else items[i:], None, True)
            fastpass.COUNTS["compiled"] += j
            fastpass.COUNTS["event_rows"] += j
            stalls = stalls + 1 if j == 0 else 0
            if stalls > _EVENT_STALLS:  # it declines row after row: the caller goes on
                return i
            i += j
            if i < m:  # the row the core stopped at, unfolded: learn_one's NumPy path
                self._refine_gamma(Q[i])
                step(Q[i], self._kernel_row(Q[i]), None if items is None else items[i])
                i += 1
        return i

    def _learn_predict_each(self, X: Any, y: Any, said_X: Any = None) -> list[Any]:
        """Test-then-train on a block the plain way: ``predict_one`` then ``learn_one`` for
        each row, in order; what was said before each row was learned (prequential). The
        ``learn_predict_many`` of a learner whose block cannot take the per-event core
        (resweeps, strings or trees, the ``gamma="auto"`` warm-up). ``y=None``: a learner
        without labels (novelty), ``learn_one(x)``. ``said_X``: the rows to predict from
        (:meth:`_learn_predict_block`)."""
        xs = _events_of(X)
        said_xs = xs if said_X is None else _events_of(said_X)
        if len(said_xs) != len(xs):
            raise InvalidInput(f"X has {len(xs)} rows but said_X has {len(said_xs)}")
        preds = []
        if y is None:
            for x, said_x in zip(xs, said_xs):
                preds.append(self.predict_one(said_x))
                self.learn_one(x)
            return preds
        labels = list(y)
        if len(labels) != len(xs):
            raise InvalidInput(f"X has {len(xs)} rows but y has {len(labels)} labels")
        for x, said_x, label in zip(xs, said_xs, labels):
            preds.append(self.predict_one(said_x))
            self.learn_one(x, label)
        return preds

    def _learn_predict_block(
        self,
        X: Any,
        items: list[Any] | None,
        said: Callable,
        plain: bool = False,
        said_X: Any = None,
    ) -> list[Any]:
        """``learn_predict_many`` once the block's labels are checked (``items``; ``None``
        for novelty): the plain loop (:meth:`_learn_predict_each`) where ``plain`` (the
        resweeps), without the per-event core, on strings or trees and during the
        ``gamma="auto"`` warm-up; otherwise one loop of the compiled per-event core over
        the rows, its predictions from the kernel row it learns from (:meth:`_event_rows`),
        the rows it declines on the NumPy path in place (``said(row, K(row, S))`` then
        :meth:`_learn_block_row`). Returns what ``predict_one`` said before each row.

        ``said_X`` (the same columns as ``X``): each prediction is ``predict_one`` of its
        row, not of ``X``'s, before ``X``'s row is learned; what a wrapper that transforms
        an event one way to predict and another to learn hands over (on-line
        standardisation, :mod:`streamk.learners.scaling`)."""
        if (
            plain
            or self._event is None
            or self._objects
            or self._warming_up
            or self._late_features(X)  # (rare: a feature new mid-stream)
        ):
            return self._learn_predict_each(X, items, said_X)
        rows = self._block(X, grow=True)
        said_rows = rows if said_X is None else self._block(said_X, grow=False)
        if said_rows.shape != rows.shape:
            raise InvalidInput("said_X must have X's rows and columns")
        if items is None:
            items = [None] * len(rows)
        elif len(items) != len(rows):
            raise InvalidInput(f"X has {len(rows)} rows but y has {len(items)} labels")
        preds: list[Any] = [None] * len(items)
        step = self._learn_block_row
        i = self._event_rows(
            rows, items, step, Offset(preds, 0), said, None if said_X is None else said_rows
        )
        for j in range(i, len(items)):  # the core does not take this model, or stalled
            k_row = self._kernel_row(rows[j])
            said_k = k_row if said_rows is rows else self._kernel_row(said_rows[j])
            preds[j] = said(said_rows[j], said_k)
            step(rows[j], k_row, items[j])
        return preds

    def _event_rows(
        self,
        rows: np.ndarray,
        items: list | None,
        step: Callable,
        out: Any = None,
        predict: Callable | None = None,
        said_rows: np.ndarray | None = None,
    ) -> int:
        """Learn a run (one kernel, rows already folded into ``gamma="auto"``) through the
        compiled per-event core (``EventPass.learn_rows``) where no block pass applies.

        Where the core stops (a new label, no room, ...) that one row takes the NumPy
        path, ``step(row, K(row, S), item)``, and the core goes on after it; after
        :data:`_EVENT_STALLS` stops in a row it hands the rest back. ``out[j]`` /
        ``out.put(j, values)`` receive what ``predict_one`` said before each row
        (``predict(row, k_row)`` for a NumPy row), of ``said_rows``' row where given
        (:meth:`_learn_predict_block`'s ``said_X``). Returns the rows learned from the
        start: 0 when the core does not take this learner (policy, kernel, rule) at all.
        """
        event = self._event
        m = rows.shape[0]
        if event is None or m == 0 or not event.applies(self):
            return 0
        Q = np.ascontiguousarray(rows, dtype=np.float64)
        P = Q if said_rows is None else np.ascontiguousarray(said_rows, dtype=np.float64)
        i = stalls = 0
        while i < m:
            said = None if out is None else []
            apart = {} if said_rows is None else {"said_rows": P[i:]}
            j = event.learn_rows(self, Q[i:], None if items is None else items[i:], said, **apart)
            fastpass.COUNTS["compiled"] += j
            fastpass.COUNTS["event_rows"] += j
            if said:
                out.put(i, said)
            stalls = stalls + 1 if j == 0 else 0
            if stalls > _EVENT_STALLS:  # it declines row after row: the caller goes on
                return i
            i += j
            if i < m:  # the row the core stopped at, on the NumPy path
                k_row = self._kernel_row(Q[i])
                if out is not None and predict is not None:
                    out[i] = predict(P[i], k_row if P is Q else self._kernel_row(P[i]))
                step(Q[i], k_row, None if items is None else items[i])
                i += 1
        return i

    def _late_features(self, X: Any) -> bool:
        """Whether a block path would learn ``X`` at other feature widths than
        ``learn_one`` does (:meth:`FeatureIndex.late_features`): then an exact
        test-then-train goes one event at a time."""
        return self._features.late_features(X, fresh=self._support.n == 0)

    def _one(self, row: Any) -> Any:
        """A one-row block: ``row[None, :]`` for a float row, ``[row]`` for a string/tree."""
        return [row] if self._objects else row[None, :]

    def _predict_row(self, x: dict) -> np.ndarray:
        if self._objects:
            return self._object(x)
        return self._features.row(x, grow=False)

    def _kernel_row(self, row: np.ndarray) -> np.ndarray:
        """``K(row, S)``, reused when the same row was just scored against the same set.

        Test-then-train calls ``predict_one(x)`` then ``learn_one(x, y)``; the second call
        finds the kernel row the first computed (same rows, same kernel: bit-identical).
        """
        support = self._support
        cache = self._row_cache
        key = row if self._objects else row.tobytes()
        if (
            cache is not None
            and cache[0] == support.rows_version
            and cache[2] == key
            and cache[3] is not None  # None: f came from a weight map, K(row, S) was not needed
        ):
            return cache[3]
        k_row = support.kernel_row(row)
        self._row_cache = (support.rows_version, support.version, key, k_row, None)
        return k_row

    def _margins(self, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(K(row, S), K(row, S) @ coef)``, both reused while the row and the set are unchanged.

        Test-then-train scores the same row twice against the same set; the second call
        gets the first call's arrays (bit-identical, no arithmetic). Do not modify them.
        """
        support = self._support
        cache = self._row_cache
        if self._objects:
            return self._object_margins(row)
        key = row.tobytes()
        if cache is not None and cache[0] == support.rows_version and cache[2] == key:
            if cache[1] == support.version and cache[4] is not None:
                return cache[3], cache[4]
            k_row = cache[3]  # only coefficients changed since
        else:
            k_row = support.kernel_row(row)
        f = k_row.dot(support._coef[: support.n])
        self._row_cache = (support.rows_version, support.version, key, k_row, f)
        return k_row, f

    def _object_margins(self, obj: Any) -> tuple[np.ndarray | None, np.ndarray]:
        """``(K(obj, S), f(obj))`` for a string or tree; with a weight map (Remark 11.55)
        ``K(obj, S)`` is ``None`` (not needed to predict) and ``f`` costs O(|obj|)."""
        support = self._support
        cache = self._row_cache
        if cache is not None and cache[2] == obj:
            if cache[1] == support.version and cache[4] is not None:
                return cache[3], cache[4]
            if cache[0] == support.rows_version and cache[3] is not None:
                f = cache[3].dot(support._coef[: support.n])  # only coefficients changed
                self._row_cache = (cache[0], support.version, obj, cache[3], f)
                return cache[3], f
        if support.has_primal:
            k_row, f = None, support.decision_one(obj)
        else:
            k_row = support.kernel_row(obj)
            f = k_row.dot(support._coef[: support.n])
        self._row_cache = (support.rows_version, support.version, obj, k_row, f)
        return k_row, f

    def _block(self, X: Any, grow: bool) -> np.ndarray:
        if self._objects:
            if hasattr(X, "columns") and hasattr(X, "iloc"):  # a DataFrame: its one column
                if X.shape[1] != 1:
                    raise InvalidInput(
                        f"{self.kernel_!r} takes one string or tree per event: pass a list, "
                        f"a Series or a one-column DataFrame, got columns "
                        f"{sorted(map(str, X.columns))[:5]}"
                    )
                X = X.iloc[:, 0]
            tolist = getattr(X, "tolist", None)  # a pandas Series or NumPy array of str
            items = tolist() if callable(tolist) else list(X)
            return [self._object(x) for x in items]
        return self._features.rows(X, grow=grow)

    # -- plain data ---------------------------------------------------------------------------
    def _params_state(self) -> dict[str, Any]:
        params = {}
        for name in inspect.signature(type(self).__init__).parameters:
            if name == "self":
                continue
            value = getattr(self, name)
            if isinstance(value, Kernel):
                value = {"__kernel__": value.to_spec()}
            elif isinstance(value, BudgetPolicy):
                value = {"__budget__": value.to_spec()}
            params[name] = value
        return params

    @staticmethod
    def _params_from_state(params: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, value in params.items():
            if isinstance(value, dict) and "__kernel__" in value:
                value = kernel_from_spec(value["__kernel__"])
            elif isinstance(value, dict) and "__budget__" in value:
                value = policy_from_spec(value["__budget__"])
            out[name] = value
        return out

    def state(self) -> dict[str, Any]:
        """Everything needed to rebuild this learner, as plain data (docs/snapshot-format.md)."""
        return {
            "params": self._params_state(),
            "features": self._features.state(),
            "support": self._support.state(),
            "scale": None if self._scale is None else self._scale.state(),
            "policy": self._policy.to_spec(),
            "n_learned": self._n_learned,
            **self._extra_state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]):
        """Rebuild a learner from :meth:`state` output; predictions are identical.

        The state is checked as it is read (snapshots are checked for shapes and limits
        before this, but a checksum only proves the bytes were not changed by accident):
        finite support rows and coefficients, distinct ids below ``next_id``, feature names
        distinct and naming every column the support rows hold a value in (consolidation
        may leave zero columns beyond them), counts ``>= 0``.

        Raises
        ------
        SnapshotError
            (a :class:`~streamk.learners.support.StateError`) naming the key at fault, for
            any state a learner does not write: missing keys, wrong types, bad values.
        """
        if not isinstance(state, dict):
            raise StateError(f"a learner state must be a map, got {type(state).__name__}")
        for key in _STATE_KEYS:
            if key not in state:
                raise StateError(f"learner state is missing {key!r}")
        params = state["params"]
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            raise StateError(f"state 'params' must be a map of names to values, got {params!r:.80}")
        with _state_key("params"):
            model = cls(**cls._params_from_state(params))
        features = FeatureIndex.from_state(state["features"])
        sup = state["support"]
        if not isinstance(sup, dict):
            raise StateError(f"state 'support' must be a map, got {type(sup).__name__}")
        kind = ObjectSupportSet if sup.get("objects") else SupportSet  # each checks its state
        with _state_key("support"):
            model._support = kind.from_state(sup)
        X = model._support.X if isinstance(model._support, SupportSet) else None
        if X is not None and X.shape[1] > len(features) and X[:, len(features) :].any():
            raise StateError(
                f"state 'features' names {len(features)} features but the support rows "
                f"(state 'support.X') hold values in {X.shape[1]} columns: every column "
                "with a value needs its name"
            )
        features.sq_window = model._features.sq_window
        model._features = features
        with _state_key("scale"):
            model._scale = (
                None if state["scale"] is None else ScaleEstimator.from_state(state["scale"])
            )
        with _state_key("policy"):
            model._policy = policy_from_spec(state["policy"])
            model._policy.check_kernel(model._support.kernel)
        model._bound_growth()
        for key in _COUNTS:
            if key in state:
                _count(state[key], key)
        model._n_learned = int(state["n_learned"])
        with _state_key(None):
            model._load_extra_state(state)
        return model

    def _bound_growth(self) -> None:
        """Tell a vector support set the most rows its policy holds at once
        (:attr:`SupportSet.rows_limit`), so its buffers grow to that and no further."""
        budget = self._policy.budget
        if isinstance(self._support, SupportSet) and budget is not None:
            self._support.rows_limit = budget + 1

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        pass
