"""Hand a micro-batch (or one event) to a compiled pass when one applies.

The kernel perceptron and the perceptron with margin (``margin > 0``), with no Gram matrix
kept; the ranker; the on-line SVR (no resweep) and the novelty detector. The compiled
loops change the support set's buffers in place, exactly as the Python path would through
:class:`~streamk.learners.support.SupportSet`'s methods and the policy's ``insert``; this
module checks that a case applies, reserves room beforehand and brings the set's counters
(and the policy's state) up to date afterwards.

* :func:`perceptron_run` — a whole run of rows whose labels are all known, with decision
  hints in float32 and no kernel matrix (:func:`streamk._core.perceptron_hint_pass`):
  the fast path of ``learn_many``, for an RBF kernel with no budget, remove-oldest,
  remove-random, remove-smallest or the Forgetron.
* :func:`svr_pass` and :func:`novelty_pass` — the on-line SVR's step (no resweep) and the
  novelty detector's insertion of every row, over a tracked block with the same kernels
  and policies as :func:`perceptron_pass` (the novelty detector's centre statistics
  included); :func:`svr_rows` and :func:`novelty_rows` the same
  without a block (:func:`rows_plan`: kernels computed in C), each row's kernel values
  computed afresh, which is cheaper when nearly every row joins the set;
  :class:`OneRow` the same for ``learn_one``, one event per compiled call.
* :func:`perceptron_rows` and :func:`ranker_rows` — the perceptrons' and the ranker's
  rule without a block (:func:`rows_plan`), each row's kernel values against the set
  computed afresh in C: the ranker's ``learn_many`` for every kernel computed in C, the
  perceptrons' for the Laplacian, polynomial and linear kernels (possibly scaled). A row
  costs ``n`` kernel values where the tracked block pays them for every row up front and
  a block column per update besides.
* :func:`perceptron_pass` — rows of a tracked block
  (:class:`~streamk.learners.tracking.BlockTracker`, float64 kernel matrix) for every other
  case :func:`plan` accepts: RBF, Laplacian, polynomial and linear kernels (each possibly
  :class:`~streamk.kernels.Scaled`) computed in C, a kernel of the user's own through the
  block's own Gram matrix (the combinations of these are the per-event core's programs);
  no budget, remove-oldest, remove-random, remove-smallest and the Forgetron (not with a
  Gram-matrix kernel).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import accel
from ..budget.base import Unbounded
from ..budget.merge import Merge
from ..budget.removal import Forgetron, RemoveOldest, RemoveRandom, RemoveSmallest
from ..kernels import RBF, Kernel, Laplacian, Linear, Polynomial, Scaled
from ..kernels.program import kernel_program
from . import eventpass

if TYPE_CHECKING:
    from ..budget.base import BudgetPolicy
    from .support import SupportSet
    from .tracking import BlockTracker

__all__ = [
    "Plan",
    "plan",
    "perceptron_pass",
    "perceptron_run",
    "perceptron_rows",
    "ranker_pass",
    "ranker_rows",
    "rows_plan",
    "block_pass_applies",
    "svr_pass",
    "svr_rows",
    "Centre",
    "novelty_pass",
    "novelty_rows",
    "HINT_LIMIT",
    "COUNTS",
]

#: Rows learned by a compiled pass (``"compiled"``), for benchmarks and tests to see which
#: path a combination takes; clear it before a run. The SVR's and the novelty detector's
#: passes also count their rows under ``"tracked"`` or ``"untracked"`` (the perceptrons'
#: and the ranker's under ``"untracked"``), and
#: :class:`OneRow` its events under ``"one"``; rows ``learn_many`` gave the compiled
#: per-event core (``EventPass.learn_rows``) count under ``"compiled"`` and ``"event_rows"``;
#: the merges of :func:`perceptron_run` under ``Merge`` count under ``"merges"``.
COUNTS: Counter[str] = Counter()
_UNBOUNDED = Unbounded()  # the kernel checks of a run under Merge (no policy plan of its own)

_EMPTY = np.zeros((0, 0))
_NO_DRAWS = np.zeros(0, dtype=np.int64)
_NO_JOINED = np.zeros(0, dtype=np.uint8)
_NO_TARGETS = np.zeros(0)
_UNUSED_DRAW = np.zeros(1, dtype=np.int64)  # remove-random's draw on a set not yet full

#: The float32 hints are used while a float32 kernel value's error bound (before its
#: constant part) stays below this; the bound is linearised there (see the pass).
HINT_LIMIT = 1e-3


class Centre(NamedTuple):
    """The novelty detector's centre statistics as a pass takes and returns them: ``r =
    K(S, S) w`` (``None``: stale), ``cc = w' K(S, S) w``, the removals ``r`` followed since
    it was computed exactly (with the Projectron's projections and Merge's merges, which the
    per-event path follows), and after how many it is dropped for an exact recomputation."""

    r: np.ndarray | None
    cc: float
    updates: int
    every: int


class Plan(NamedTuple):
    """How a compiled tracked pass runs: kernel code and parameters, policy code, budget."""

    kcode: int
    kp: np.ndarray
    pcode: int
    budget: int
    policy: BudgetPolicy


def _kernel_plan(kernel: Kernel) -> tuple[int, np.ndarray] | None:
    """The compiled pass's code for ``kernel`` and its parameters ``(gamma or scale, offset,
    degree, c)``; ``K_GRAM`` (columns from the block's Gram matrix) for any other vector
    kernel; ``None`` for strings and trees, and for a combination the per-event core runs
    as a program (:mod:`streamk.kernels.program`): ``learn_many`` then loops that core
    over its rows, which beat the block's Gram matrix on every stream of
    ``python -m benchmarks.online_throughput --quick --kernel sum``."""
    if kernel.takes_objects:
        return None
    c, inner = 1.0, kernel
    if type(inner) is Scaled:
        c, inner = inner.c, inner.kernel
    codes = accel.core.KERNEL_CODES
    if type(inner) in (RBF, Laplacian):
        return codes[type(inner).__name__], np.array([inner.gamma, 0.0, 0.0, c])
    if type(inner) is Polynomial:
        return codes["Polynomial"], np.array([inner.scale, inner.offset, inner.degree, c])
    if type(inner) is Linear:
        return codes["Linear"], np.array([0.0, 0.0, 0.0, c])
    if eventpass.available() and kernel_program(kernel) is not None:
        return None
    return codes["gram"], np.array([0.0, 0.0, 0.0, 1.0])


def _policy_plan(support: SupportSet, policy: BudgetPolicy) -> tuple[int, int] | None:
    """The compiled pass's policy code and budget (0: none), or ``None``."""
    name = type(policy).__name__
    code = accel.core.POLICY_CODES.get(name)
    kinds = (Unbounded, RemoveOldest, RemoveRandom, Forgetron, RemoveSmallest)
    if code is None or type(policy) not in kinds:
        return None
    budget = 0 if policy.budget is None else int(policy.budget)
    if budget and support.n > budget:  # a set over its budget (a restored snapshot)
        return None
    return code, budget


def _plan(support: SupportSet, policy: BudgetPolicy, q_max: float) -> Plan | None:
    """What :func:`plan` and :func:`rows_plan` share; ``q_max``: the rows' largest squared
    norm. None for a set that keeps a Gram matrix (no pass writes one)."""
    if accel.core is None or support._G is not None:
        return None
    kernel = support.kernel
    kplan = _kernel_plan(kernel)
    pplan = _policy_plan(support, policy)
    if kplan is None or pplan is None:
        return None
    if kplan[0] == accel.core.KERNEL_CODES["gram"] and type(policy) is Forgetron:
        return None  # its removal step needs k(x_r, S), which the Gram of the block lacks
    if type(kernel) is RBF and not kernel.expansion_exact(q_max + max(support._sq_max, q_max)):
        return None
    return Plan(kplan[0], kplan[1], pplan[0], pplan[1], policy)


def plan(support: SupportSet, policy: BudgetPolicy, block: BlockTracker) -> Plan | None:
    """The plan of a compiled pass over ``block``, or ``None`` when none applies."""
    if len(support._trackers) != 1:
        return None
    if not (block.Q.flags.c_contiguous and block.K.flags.c_contiguous):
        return None
    return _plan(support, policy, block.sq_max)


def rows_plan(support: SupportSet, policy: BudgetPolicy, q_sq: np.ndarray) -> Plan | None:
    """The plan of an untracked pass (:func:`svr_rows`, :func:`novelty_rows`,
    :func:`perceptron_rows`, :func:`ranker_rows`) over rows
    with squared norms ``q_sq``: a kernel computed in C (no Gram-matrix kernel), no block
    being tracked; ``None`` when none applies."""
    if support._trackers:
        return None
    how = _plan(support, policy, float(q_sq.max(initial=0.0)))
    if how is None or how.kcode == accel.core.KERNEL_CODES["gram"]:
        return None
    return how


def block_pass_applies(support: SupportSet, policy: BudgetPolicy, rows: np.ndarray) -> bool:
    """Whether a compiled pass over a tracked block of ``rows`` would apply (:func:`plan`
    once the block is taken): ``learn_many`` hands a run to the compiled per-event core
    (``EventPass.learn_rows``) only where none does, before taking a block."""
    if accel.core is None:
        return False
    q_sq = accel.sqnorms(np.ascontiguousarray(rows, dtype=np.float64))
    return _plan(support, policy, float(q_sq.max(initial=0.0))) is not None


def _hint_budget(support: SupportSet, policy: BudgetPolicy) -> int | None:
    """The budget to pass (0: none) when the float32 hint pass applies, else ``None``."""
    if accel.core is None or type(support.kernel) is not RBF:
        return None
    if support._G is not None or support._trackers:
        return None
    pplan = _policy_plan(support, policy)
    return None if pplan is None else pplan[1]


def _buffers(support: SupportSet) -> tuple[np.ndarray, ...]:
    """The support set's buffers a compiled pass writes, in its argument order: rows,
    squared norms, coefficients, ``k(x, x)``, insertion ids."""
    return support._X, support._sq, support._coef, support._kdiag, support._ids


def _rows_after(support: SupportSet, added: int, budget: int) -> int:
    """Support rows needed once ``added`` more vectors may have joined."""
    n = support.n
    return n + added if budget == 0 else max(n, min(budget, n + added))


def _rbf_exact(support: SupportSet, q_sq: np.ndarray, kernels: list[Kernel]) -> bool:
    """Whether every kernel is an RBF whose norm expansion is exact for rows of squared
    norms ``q_sq`` against the set, whatever the rows it has taken in by then (the bound
    covers every run: each run's own is below it)."""
    if any(type(k) is not RBF for k in kernels):
        return False
    # Python's max is the same number and a fraction of a reduction's cost on a short run
    q_max = float(max(q_sq.tolist(), default=0.0) if len(q_sq) <= 16 else q_sq.max())
    widths = [k.gamma for k in kernels]
    # the rule is monotone in gamma: the widest kernel's answer is every kernel's
    return kernels[widths.index(max(widths))].expansion_exact(q_max + max(support._sq_max, q_max))


def perceptron_run(
    support: SupportSet,
    policy: BudgetPolicy,
    rows: np.ndarray,
    T: np.ndarray,
    codes: np.ndarray,
    margin: float = 0.0,
    q_sq: np.ndarray | None = None,
    runs: tuple[list[int], list[Kernel]] | None = None,
    ranks: np.ndarray | None = None,
    thresholds: np.ndarray | None = None,
) -> tuple[int, int] | None:
    """Learn ``rows`` (targets ``T``, every label known) in one compiled pass with float32
    hints; ``(mistakes, rows decided afresh)``, or ``None`` when the pass does not apply.

    Under ``Merge`` (one run of the perceptrons, no ``runs`` or ``ranks``) the pass appends
    each update's row and merges two vectors whenever that fills the set past its budget
    (``MERGE_CODE``), as the per-event core does, filling or full alike.

    With rank indices ``ranks`` and the ranker's ``thresholds`` (C-contiguous float64,
    changed in place; ``T`` one column of zeros, ``margin`` 0, no ``runs``) it is the
    ranker's rule (:func:`ranker_rows`), its ranks taken from the hints where certain.

    ``codes`` receives the predictions as for :func:`perceptron_pass`. ``q_sq``, the rows'
    squared norms as :func:`streamk.accel.sqnorms` gives them, saves recomputing them
    when a block's runs share one array.

    ``runs = (bounds, kernels)``: the ``gamma="auto"`` warm-up, rows ``bounds[r]:bounds[r +
    1]`` learned under ``kernels[r]`` (each RBF), one compiled pass each with nothing but
    the width changing between them; then it returns ``(mistakes, runs learned)``. It stops
    before a run the pass declines. Under remove-random the runs read one sequence of
    draws, each insertion into a full set the next one whatever run it is in: the draws
    the runs one at a time would peek and skip in turn.
    """
    merge = type(policy) is Merge
    if merge and (runs is not None or ranks is not None or support.n > policy.budget):
        return None  # (Merge: one run of the perceptrons, on a set within its budget)
    budget = _hint_budget(support, _UNBOUNDED if merge else policy)
    if budget is None or rows.shape[1] == 0 or (ranks is not None and runs is not None):
        return None
    if merge:
        budget = int(policy.budget)
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    if q_sq is None:
        q_sq = accel.sqnorms(rows)
    m = rows.shape[0]
    bounds, kernels = ([0, m], [support.kernel]) if runs is None else runs
    if not _rbf_exact(support, q_sq, kernels):
        return None
    widths = [k.gamma for k in kernels]
    pcode = accel.core.MERGE_CODE if merge else accel.core.POLICY_CODES[type(policy).__name__]
    draws, pstate = _NO_DRAWS, None
    if merge:  # (pstate[0] gets the merges)
        pstate = np.zeros(3)
    elif type(policy) is RemoveRandom:
        if budget and support.n + m > budget:
            draws = policy.peek_slots(m)
        elif budget:  # no insertion can find the set full: the pass reads no draw
            draws = np.zeros(m, dtype=np.int64)
        pstate = np.zeros(3)
    elif type(policy) is Forgetron:
        st = policy.state()
        pstate = np.array([0.0, float(st["Q"]), float(st["M"])])
    elif type(policy) is RemoveSmallest:  # (no state: the pass finds its slots itself)
        pstate = np.zeros(3)
    rows_needed = budget + 1 if merge else _rows_after(support, m, budget)  # Merge appends
    support.reserve(rows_needed, rows.shape[1])
    T = np.ascontiguousarray(T, dtype=np.float64)
    args = (*_buffers(support), T, support.n, budget, support.next_id)
    rule = (codes, HINT_LIMIT, margin, pcode, draws, pstate)  # both passes end alike
    if runs is None:
        gamma = float(support.kernel.gamma)
        done = accel.core.perceptron_hint_pass(rows, q_sq, *args, gamma, *rule, ranks, thresholds)
        if done is None:
            return None
        done_runs, (n, next_id, mistakes, sq_max, fresh) = 1, done
    else:
        gammas = np.array(widths[: len(kernels)], dtype=np.float64)  # remove-random: a prefix
        run_bounds = np.array(bounds, dtype=np.int64)
        done_runs, n, next_id, mistakes, sq_max, fresh = accel.core.perceptron_warm_pass(
            rows, q_sq, *args, gammas, run_bounds, *rule
        )
        if not done_runs:
            return None
    used, fq, fm = 0, 0.0, 0
    if merge:
        COUNTS["merges"] += int(pstate[0])
    elif pstate is not None:  # remove-random's draws used, the Forgetron's Q and M
        used, fq, fm = int(pstate[0]), float(pstate[1]), int(pstate[2])
    _settle(support, policy, rows.shape[1], n, next_id, mistakes, sq_max, used, fq, fm)
    COUNTS["compiled"] += bounds[done_runs]
    COUNTS["hints"] += bounds[done_runs]
    return (mistakes, fresh) if runs is None else (mistakes, done_runs)


def _policy_args(
    support: SupportSet, block: BlockTracker, start: int, end: int, how: Plan
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int]:
    """What a tracked pass needs besides the buffers: the block's Gram matrix (for a
    ``K_GRAM`` kernel), ``k(q, q)`` of its rows, remove-random's next draws, the
    Forgetron's state."""
    core = accel.core
    kernel, policy, Q = support.kernel, how.policy, block.Q
    G = _EMPTY
    if how.kcode == core.KERNEL_CODES["gram"]:
        sq = block.sq[start:]
        G = np.ascontiguousarray(kernel.gram(Q[start:], Q[start:], a_sqnorm=sq, b_sqnorm=sq))
    draws = _NO_DRAWS
    if type(policy) is RemoveRandom and how.budget:
        draws = policy.peek_slots(end - start)
    fq, fm = 0.0, 0
    if type(policy) is Forgetron:
        st = policy.state()
        fq, fm = float(st["Q"]), int(st["M"])
    qdiag = np.ascontiguousarray(kernel.diag(Q), dtype=np.float64)
    return G, qdiag, draws, fq, fm


def _settle(
    support: SupportSet,
    policy: BudgetPolicy,
    width: int,
    n: int,
    next_id: int,
    updates: int,
    sq_max: float,
    used: int,
    fq: float,
    fm: int,
) -> None:
    """The set and the policy after a compiled pass changed the buffers: remove-random's
    ``used`` draws consumed, the Forgetron's ``Q`` and ``M`` taken back, and the set's
    counters where a row joined (rows ``width`` wide, the largest new squared norm
    ``sq_max``)."""
    if used:
        policy.skip_slots(used)
    if type(policy) is Forgetron:
        policy.load_state({"Q": fq, "M": fm})
    if updates:
        support.after_compiled_changes(n, next_id, width, sq_max)


def _after_pass(support: SupportSet, block: BlockTracker, end: int, how: Plan, done: tuple) -> int:
    """Bring the set, the tracker and the policy up to date after a tracked pass; returns
    the number of updates."""
    n, next_id, mistakes, coef_l1, sq_max, kmax, used, fq, fm = done
    block.start = end
    block.coef_l1 = coef_l1
    block.kmax = kmax
    _settle(support, how.policy, block.Q.shape[1], n, next_id, mistakes, sq_max, used, fq, fm)
    return mistakes


def perceptron_pass(
    support: SupportSet,
    block: BlockTracker,
    T: np.ndarray,
    start: int,
    end: int,
    how: Plan,
    codes: np.ndarray,
    margin: float = 0.0,
) -> int:
    """Learn block rows ``start:end`` (targets ``T``) in compiled code; returns the updates.

    ``how`` comes from :func:`plan`; ``margin > 0`` is the perceptron with margin.
    ``codes`` receives the per-row predictions made before learning (see
    :meth:`~streamk.learners.labels.LabelCoder.decode`).
    """
    support.reserve(_rows_after(support, end - start, how.budget), block.Q.shape[1])
    block.F = np.ascontiguousarray(block.F)  # no copy unless a remap left it strided
    G, qdiag, draws, fq, fm = _policy_args(support, block, start, end, how)
    done = accel.core.perceptron_pass(
        block.K,
        block.F,
        block.Q,
        block.sq,
        *_buffers(support),
        np.ascontiguousarray(T, dtype=np.float64),
        start,
        end,
        support.n,
        how.budget,
        support.next_id,
        block.coef_l1,
        codes,
        how.kcode,
        how.kp,
        G,
        qdiag,
        float(block.kmax),
        block.bound is not None,
        how.pcode,
        draws,
        fq,
        fm,
        float(margin),
    )
    COUNTS["compiled"] += end - start
    return _after_pass(support, block, end, how, done)


def ranker_pass(
    support: SupportSet, block: BlockTracker, ranks: np.ndarray, b: np.ndarray, how: Plan
) -> int:
    """Learn every row of ``block`` (rank indices ``ranks``) with the on-line ranker in
    compiled code, thresholds ``b`` changed in place; returns the updates."""
    m = block.Q.shape[0]
    support.reserve(_rows_after(support, m, how.budget), block.Q.shape[1])
    block.F = np.ascontiguousarray(block.F)
    G, qdiag, draws, fq, fm = _policy_args(support, block, 0, m, how)
    done = accel.core.ranker_pass(
        block.K,
        block.F,
        block.Q,
        block.sq,
        *_buffers(support),
        np.ascontiguousarray(ranks, dtype=np.int64),
        b,
        0,
        m,
        support.n,
        how.budget,
        support.next_id,
        block.coef_l1,
        how.kcode,
        how.kp,
        G,
        qdiag,
        float(block.kmax),
        block.bound is not None,
        how.pcode,
        draws,
        fq,
        fm,
    )
    COUNTS["compiled"] += m
    return _after_pass(support, block, m, how, done)


def _rows_call(
    support: SupportSet,
    how: Plan,
    Q: np.ndarray,
    q_sq: np.ndarray,
    compiled: Callable[..., tuple],
    targets: tuple,
    codes: tuple = (),
    rule: tuple = (),
) -> int:
    """Run an untracked pass (:func:`streamk._core.perceptron_rows` or
    :func:`streamk._core.ranker_rows`) over rows ``Q``: room reserved, ``compiled`` called
    with the scratch row, the rows and the set's buffers, the learner's ``targets``, the
    set's size, budget and next id, the learner's ``codes``, the kernel, the policy's state
    and the rule's own constants ``rule`` (the two passes' common signature), then the set
    and the policy brought up to date; returns the updates."""
    m = Q.shape[0]
    support.reserve(_rows_after(support, m, how.budget), Q.shape[1])
    qdiag = np.ascontiguousarray(support.kernel.diag(Q), dtype=np.float64)
    draws, fq, fm = _policy_state(how.policy, how, m)
    K = np.zeros((1, support.capacity))
    n, next_id, updates, sq_max, used, fq, fm = compiled(
        K, Q, q_sq, *_buffers(support), *targets, support.n, how.budget, support.next_id,
        *codes, how.kcode, how.kp, qdiag, how.pcode, draws, fq, fm, *rule,
    )  # fmt: skip
    _settle(support, how.policy, Q.shape[1], n, next_id, updates, sq_max, used, fq, fm)
    COUNTS["compiled"] += m
    COUNTS["untracked"] += m
    return updates


def perceptron_rows(
    support: SupportSet,
    Q: np.ndarray,
    q_sq: np.ndarray,
    T: np.ndarray,
    how: Plan,
    codes: np.ndarray,
    margin: float = 0.0,
) -> int:
    """:func:`perceptron_pass` without a block (``how`` from :func:`rows_plan`; ``Q``
    C-contiguous float64 rows with squared norms ``q_sq`` as :func:`streamk.accel.sqnorms`
    sums them): each row's kernel values against the set computed afresh in C, which is
    cheaper than keeping a block current when the block is not one matrix product. Every
    row's code is the decided one (never ``-1``); returns the updates."""
    T = np.ascontiguousarray(T, dtype=np.float64)
    compiled = accel.core.perceptron_rows
    return _rows_call(support, how, Q, q_sq, compiled, (T,), (codes,), (float(margin),))


def ranker_rows(
    support: SupportSet,
    Q: np.ndarray,
    q_sq: np.ndarray,
    ranks: np.ndarray,
    b: np.ndarray,
    how: Plan,
) -> int:
    """:func:`ranker_pass` without a block (see :func:`perceptron_rows`); thresholds ``b``
    (C-contiguous float64) change in place; returns the updates."""
    ranks = np.ascontiguousarray(ranks, dtype=np.int64)
    return _rows_call(support, how, Q, q_sq, accel.core.ranker_rows, (ranks, b))


def _policy_state(policy: BudgetPolicy, how: Plan, count: int) -> tuple[np.ndarray, float, int]:
    """Remove-random's next ``count`` draws and the Forgetron's state, for a pass."""
    draws = _NO_DRAWS
    if type(policy) is RemoveRandom and how.budget:
        draws = policy.peek_slots(count)
    fq, fm = 0.0, 0
    if type(policy) is Forgetron:
        st = policy.state()
        fq, fm = float(st["Q"]), int(st["M"])
    return draws, fq, fm


def _step(
    support: SupportSet,
    how: Plan,
    rule: str,
    stats: np.ndarray,
    Q: np.ndarray,
    q_sq: np.ndarray,
    block: BlockTracker | None,
    end: int,
    Y: np.ndarray = _NO_TARGETS,
    r_in: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One :func:`streamk._core.step_pass` over rows ``0:end`` of ``Q`` (of ``block`` when
    tracked, else untracked); returns the joined flags (SVR) and ``r`` (novelty)."""
    support.reserve(_rows_after(support, end, how.budget), Q.shape[1])
    if block is not None:
        block.F = np.ascontiguousarray(block.F)  # no copy unless a remap left it strided
        K, F = block.K, block.F
        G, qdiag = _policy_args(support, block, 0, end, how)[:2]
        coef_l1, kmax, bounded = block.coef_l1, float(block.kmax), block.bound is not None
    else:
        K, F, G = np.zeros((1, support.capacity)), np.zeros((1, 1)), _EMPTY
        qdiag = np.ascontiguousarray(support.kernel.diag(Q), dtype=np.float64)
        coef_l1, kmax, bounded = 0.0, 0.0, True
    draws, fq, fm = _policy_state(how.policy, how, end)
    joined = np.zeros(end if rule == "svr" else 0, dtype=np.uint8)
    r = np.zeros(support.capacity if r_in is not None else 0)
    if r_in is not None:
        r[: r_in.shape[0]] = r_in
    done = accel.core.step_pass(
        K,
        F,
        Q,
        q_sq,
        *_buffers(support),
        accel.core.RULE_CODES[rule],
        Y,
        stats,
        joined,
        r,
        block is not None,
        0,
        end,
        support.n,
        how.budget,
        support.next_id,
        coef_l1,
        how.kcode,
        how.kp,
        G,
        qdiag,
        kmax,
        bounded,
        how.pcode,
        draws,
        fq,
        fm,
    )
    COUNTS["compiled"] += end
    COUNTS["untracked" if block is None else "tracked"] += end
    if block is not None:
        _after_pass(support, block, end, how, done)
    else:
        n, next_id, joins, _, sq_max, _, used, fq, fm = done
        _settle(support, how.policy, Q.shape[1], n, next_id, joins, sq_max, used, fq, fm)
    return joined.view(bool), r


def untracked_runs(
    support: SupportSet,
    policy: BudgetPolicy,
    Q: np.ndarray,
    q_sq: np.ndarray,
    runs: tuple[list[int], list[Kernel]],
    call: Callable[..., tuple],
) -> int | None:
    """The ``gamma="auto"`` warm-up's runs through one untracked compiled pass each, with
    nothing but the calls between them; the updates, or ``None`` (nothing changed) where
    :func:`rows_plan` would not take every run.

    ``runs = (bounds, kernels)``: rows ``bounds[r]:bounds[r + 1]`` of ``Q`` (squared norms
    ``q_sq``) under ``kernels[r]``, RBFs of which only the width moves. ``call(K, a, b, n,
    next_id, how, qdiag, draws, fq, fm)`` learns rows ``a:b`` with the scratch row ``K``,
    the set's size and next id, the run's :class:`Plan`, every row's ``k(q, q)``, the
    remove-random draws from the run's first insertion on and the Forgetron's state; it
    returns ``(n, next_id, updates, largest new squared norm, draws used, fq, fm)``. The
    runs one at a time would each reserve, plan and peek their draws; here that happens
    once (the draws as one sequence, as :func:`perceptron_run` reads them).
    """
    bounds, kernels = runs
    m = bounds[-1]
    if accel.core is None or Q.shape[1] == 0:
        return None
    how = rows_plan(support, policy, q_sq[bounds[0] : m])
    if how is None or not _rbf_exact(support, q_sq[bounds[0] : m], kernels):
        return None
    pcode, budget = how.pcode, how.budget
    support.reserve(_rows_after(support, m - bounds[0], budget), Q.shape[1])
    qdiag = np.ascontiguousarray(kernels[0].diag(Q), dtype=np.float64)  # the width's no part
    draws, fq, fm = _policy_state(policy, how, m - bounds[0])
    K = np.zeros((1, support.capacity))
    kcode = accel.core.KERNEL_CODES["RBF"]
    n, next_id, updates, used, sq_max = support.n, support.next_id, 0, 0, 0.0
    for r, kernel in enumerate(kernels):
        how = Plan(kcode, np.array([kernel.gamma, 0.0, 0.0, 1.0]), pcode, budget, policy)
        n, next_id, done, run_sq_max, run_used, fq, fm = call(
            K, bounds[r], bounds[r + 1], n, next_id, how, qdiag, draws[used:], fq, fm
        )
        updates += done
        used += run_used
        sq_max = max(sq_max, run_sq_max)
    _settle(support, policy, Q.shape[1], n, next_id, updates, sq_max, used, fq, fm)
    COUNTS["compiled"] += m - bounds[0]
    COUNTS["untracked"] += m - bounds[0]
    return updates


def _step_runs(
    support: SupportSet,
    policy: BudgetPolicy,
    Q: np.ndarray,
    q_sq: np.ndarray,
    runs: tuple[list[int], list[Kernel]],
    rule: str,
    stats: np.ndarray,
    Y: np.ndarray = _NO_TARGETS,
    joined: np.ndarray = _NO_JOINED,
) -> int | None:
    """:func:`untracked_runs` of :func:`streamk._core.step_pass` under ``rule`` (``stats``
    carried from run to run in place, ``Y``/``joined`` a target and a flag per row of ``Q``
    for the SVR, empty for novelty)."""
    F, r_unused, code = np.zeros((1, 1)), np.zeros(0), accel.core.RULE_CODES[rule]

    def run(K, a, b, n, next_id, how, qdiag, draws, fq, fm):  # noqa: ANN001, ANN202
        done = accel.core.step_pass(
            K, F, Q, q_sq, *_buffers(support), code, Y[a:b], stats, joined[a:b], r_unused,
            False, a, b, n, how.budget, next_id, 0.0, how.kcode, how.kp, _EMPTY, qdiag, 0.0,
            True, how.pcode, draws, fq, fm,
        )  # fmt: skip
        n, next_id, joins, _, sq_max, _, used, fq, fm = done
        return n, next_id, joins, sq_max, used, fq, fm

    return untracked_runs(support, policy, Q, q_sq, runs, run)


def svr_runs(
    support: SupportSet,
    policy: BudgetPolicy,
    Q: np.ndarray,
    q_sq: np.ndarray,
    Y: np.ndarray,
    stats: np.ndarray,
    runs: tuple[list[int], list[Kernel]],
) -> np.ndarray | None:
    """:func:`svr_rows` over the warm-up's runs (:func:`untracked_runs`; ``Y`` a target per
    row of ``Q``): which rows joined the set, or ``None`` (nothing changed)."""
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    joined = np.zeros(Q.shape[0], dtype=np.uint8)
    if _step_runs(support, policy, Q, q_sq, runs, "svr", stats, Y, joined) is None:
        return None
    return joined.view(bool)


def novelty_runs(
    support: SupportSet,
    policy: BudgetPolicy,
    Q: np.ndarray,
    q_sq: np.ndarray,
    centre: Centre,
    runs: tuple[list[int], list[Kernel]],
) -> tuple[None, float, int] | None:
    """:func:`novelty_rows` over the warm-up's runs (:func:`untracked_runs`) with the centre's
    statistics stale (``centre.r`` is ``None``; a run's new kernel leaves them so, and the
    passes do not track a stale ``r``): ``(None, cc, updates)``, or ``None`` (nothing
    changed, also for a current ``r``)."""
    if centre.r is not None:
        return None
    stats = np.array([centre.updates, centre.every, 0, 0, 0, 0, centre.cc, 0], dtype=np.float64)
    if _step_runs(support, policy, Q, q_sq, runs, "novelty", stats) is None:
        return None
    return None, float(stats[6]), int(stats[0])


def ranker_runs(
    support: SupportSet,
    policy: BudgetPolicy,
    Q: np.ndarray,
    q_sq: np.ndarray,
    ranks: np.ndarray,
    b: np.ndarray,
    runs: tuple[list[int], list[Kernel]],
) -> int | None:
    """:func:`ranker_rows` over the warm-up's runs (:func:`untracked_runs`): the updates,
    or ``None`` (nothing changed); thresholds ``b`` change in place."""
    ranks = np.ascontiguousarray(ranks, dtype=np.int64)

    def run(K, a, z, n, next_id, how, qdiag, draws, fq, fm):  # noqa: ANN001, ANN202
        return accel.core.ranker_rows(
            K, Q[a:z], q_sq[a:z], *_buffers(support), ranks[a:z], b, n, how.budget, next_id,
            how.kcode, how.kp, qdiag[a:z], how.pcode, draws, fq, fm,
        )  # fmt: skip

    return untracked_runs(support, policy, Q, q_sq, runs, run)


def svr_stats(count: int, mean: float, m2: float, rule: tuple[float, float, float]) -> np.ndarray:
    """The SVR's ``stats`` for :func:`svr_pass` / :func:`svr_rows`: the targets' running
    count, mean and sum of squared deviations, then ``rule = (eps, C, offset)`` (``eps`` or
    ``C`` < 0: ``"auto"``; a NaN offset: the running mean)."""
    return np.array([count, mean, m2, *rule, 0.0, 0.0], dtype=np.float64)


def svr_pass(
    support: SupportSet, block: BlockTracker, Y: np.ndarray, how: Plan, stats: np.ndarray
) -> np.ndarray:
    """Learn every row of ``block`` (targets ``Y``) with the on-line SVR's step, no resweep
    (:func:`streamk._core.step_pass`); ``stats`` (:func:`svr_stats`) changes in place.
    Returns which rows joined the set (a boolean mask)."""
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    m = block.Q.shape[0]
    return _step(support, how, "svr", stats, block.Q, block.sq, block, m, Y)[0]


def svr_rows(
    support: SupportSet,
    Q: np.ndarray,
    q_sq: np.ndarray,
    Y: np.ndarray,
    how: Plan,
    stats: np.ndarray,
) -> np.ndarray:
    """:func:`svr_pass` without a block (``how`` from :func:`rows_plan`; ``Q`` C-contiguous
    float64 rows with squared norms ``q_sq`` summed as :func:`streamk.accel.sqnorms` does)."""
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    return _step(support, how, "svr", stats, Q, q_sq, None, Q.shape[0], Y)[0]


def _novelty(
    support: SupportSet,
    how: Plan,
    Q: np.ndarray,
    q_sq: np.ndarray,
    block: BlockTracker | None,
    centre: Centre,
) -> tuple[np.ndarray | None, float, int]:
    r = centre.r
    stats = np.array(
        [centre.updates, centre.every, 0, 0, 0, 0, centre.cc, r is not None], dtype=np.float64
    )
    r_out = _step(support, how, "novelty", stats, Q, q_sq, block, Q.shape[0], r_in=r)[1]
    r = r_out[: support.n].copy() if stats[7] else None
    return r, float(stats[6]), int(stats[0])


def novelty_pass(
    support: SupportSet, block: BlockTracker, how: Plan, centre: Centre
) -> tuple[np.ndarray | None, float, int]:
    """Insert every row of ``block`` with weight 1 (the novelty detector), its centre's
    statistics carried through growth and removals (:class:`Centre`; a removal under a
    Gram-matrix kernel, whose leaving column the pass cannot compute, leaves them stale).
    Returns ``(r, cc, updates)`` after the pass, ``r = None`` once stale."""
    return _novelty(support, how, block.Q, block.sq, block, centre)


def novelty_rows(
    support: SupportSet,
    Q: np.ndarray,
    q_sq: np.ndarray,
    how: Plan,
    centre: Centre,
) -> tuple[np.ndarray | None, float, int]:
    """:func:`novelty_pass` without a block (see :func:`svr_rows`)."""
    return _novelty(support, how, Q, q_sq, None, centre)


class OneRow:
    """A learner's compiled ``learn_one`` for the SVR or novelty rule: one row through
    :func:`streamk._core.step_pass` untracked, with the plan cached per kernel and policy
    and the scratch buffers kept, so an event costs one compiled call and a few checks.

    :meth:`learn` declines (``None``, nothing changed) wherever :func:`rows_plan` would,
    and for the SVR on a full remove-random set (see there).
    """

    __slots__ = ("rule", "stats", "_key", "_how", "_K", "_F", "_Y", "_qd", "_joined", "_r", "_draw")

    def __init__(self, rule: str):
        self.rule = rule
        self.stats = np.zeros(8)  # see step_pass; the learner fills what its rule reads
        self._key: tuple | None = None
        self._how: Plan | None = None
        self._K = np.zeros((1, 0))
        self._F = np.zeros((1, 1))
        self._Y = np.zeros(1)
        self._qd = np.zeros(1)
        self._joined = np.zeros(1, dtype=np.uint8)
        self._draw = np.zeros(1, dtype=np.int64)
        self._r = np.zeros(0)  # the novelty statistics' buffer, one entry per slot

    def _plan(self, support: SupportSet, policy: BudgetPolicy) -> Plan | None:
        """:func:`rows_plan` cached per kernel and policy, but for the RBF expansion's
        bound (:meth:`learn` checks it per row); ``None`` also where the SVR would peek at
        remove-random's draw on a full set (it may not insert: peeking costs more than the
        NumPy path's whole step)."""
        key = self._key
        if key is None or not (
            key[0] is support.kernel and key[1] is policy and key[2] == (support._G is None)
        ):
            key = (support.kernel, policy, support._G is None)
            how = _plan(support, policy, 0.0)
            if how is not None and how.kcode == accel.core.KERNEL_CODES["gram"]:
                how = None
            self._key, self._how = key, how
        how = self._how
        if how is None or support._trackers:
            return None
        if how.budget and support.n >= how.budget:
            if support.n > how.budget:  # a set over its budget (a restored snapshot)
                return None
            if self.rule != "novelty" and type(policy) is RemoveRandom:
                return None
        return how

    def learn(
        self,
        support: SupportSet,
        policy: BudgetPolicy,
        row: np.ndarray,
        y: float = 0.0,
        r: np.ndarray | None = None,
        head: Callable[[], tuple[float, ...]] | None = None,
    ) -> tuple[bool, np.ndarray] | None:
        """Learn ``row`` (the SVR: target ``y``, ``head()`` the first six ``stats``; novelty:
        ``r`` the centre's statistics when current, with ``stats[6:8] = (cc, 1)`` and
        ``stats[0:2]`` the removals followed and the limit, see :class:`Centre`);
        ``(joined, r)``, or ``None`` when the compiled path does not apply (nothing
        changed). The returned ``r`` is a buffer updated in place by later events: take
        ``r[:n]`` as the statistics."""
        if accel.core is None or row.dtype != np.float64 or not row.flags.c_contiguous:
            return None
        how = self._plan(support, policy)
        if how is None:
            return None
        Q = row[None, :]
        q_sq = accel.core.sqnorms(Q)
        kernel = support.kernel
        if type(kernel) is RBF:
            q, sq_max = float(q_sq[0]), support._sq_max
            bound = q + max(sq_max, q)
            if how.budget and support.n >= how.budget:  # a leaving vector's column too
                bound = max(bound, 2.0 * sq_max)
            if not kernel.expansion_exact(bound):
                return None
        if head is not None:
            self.stats[:6] = head()
        draws, fq, fm = _NO_DRAWS, 0.0, 0
        if type(policy) is RemoveRandom and how.budget:
            draws = _UNUSED_DRAW  # a draw is read only on a full set
            if support.n >= how.budget:  # novelty (see _plan): the row joins, so the draw
                draws = self._draw  # insert makes is taken now (a scalar draw: a fifth
                draws[0] = policy._rng.integers(how.budget)  # of the cost of a sized one)
        elif type(policy) is Forgetron:
            st = policy.state()
            fq, fm = float(st["Q"]), int(st["M"])
        support.reserve(_rows_after(support, 1, how.budget), Q.shape[1])
        if self._K.shape[1] < support.capacity:
            self._K = np.zeros((1, support.capacity))
        self._Y[0] = y
        self._qd[0] = support.kernel.diag_one(row)
        r_buf = _NO_TARGETS
        if r is not None:  # r is a view of the buffer when this path made it: no copy
            r_buf = self._r
            if r.base is not r_buf or r_buf.shape[0] < support.capacity:
                r_buf = self._r = np.zeros(support.capacity)
                r_buf[: r.shape[0]] = r
        n, next_id, joins, _, sq_max, _, _, fq, fm = accel.core.step_pass(
            self._K,
            self._F,
            Q,
            q_sq,
            *_buffers(support),
            accel.core.RULE_CODES[self.rule],
            self._Y,
            self.stats,
            self._joined,
            r_buf,
            False,
            0,
            1,
            support.n,
            how.budget,
            support.next_id,
            0.0,
            how.kcode,
            how.kp,
            _EMPTY,
            self._qd,
            0.0,
            True,
            how.pcode,
            draws,
            fq,
            fm,
        )
        # (remove-random's draw, if used, is taken already: no draws to skip)
        _settle(support, policy, Q.shape[1], n, next_id, joins, sq_max, 0, fq, fm)
        COUNTS["one"] += 1
        return bool(joins), r_buf
