"""Hand a micro-batch to a compiled perceptron pass when one applies.

The kernel perceptron and the perceptron with margin (``margin > 0``), with no Gram matrix
kept. The compiled loops change the support set's buffers in place, exactly as the Python
path would through :class:`~streamk.learners.support.SupportSet`'s methods and the policy's
``insert``; this module checks that a case applies, reserves room beforehand and brings the
set's counters (and the policy's state) up to date afterwards.

* :func:`perceptron_run` — a whole run of rows whose labels are all known, with decision
  hints in float32 and no kernel matrix (:func:`streamk._core.perceptron_hint_pass`):
  the fast path of ``learn_many``, for an RBF kernel with no budget, remove-oldest,
  remove-random or the Forgetron.
* :func:`perceptron_pass` — rows of a tracked block
  (:class:`~streamk.learners.tracking.BlockTracker`, float64 kernel matrix) for every other
  case :func:`plan` accepts: RBF, Laplacian, polynomial and linear kernels (each possibly
  :class:`~streamk.kernels.Scaled`) computed in C, any other vector kernel (sums, products,
  normalised) through the block's own Gram matrix; no budget, remove-oldest, remove-random
  and the Forgetron (not with a Gram-matrix kernel).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import accel
from ..budget.base import Unbounded
from ..budget.removal import Forgetron, RemoveOldest, RemoveRandom
from ..kernels import RBF, Kernel, Laplacian, Linear, Polynomial, Scaled

if TYPE_CHECKING:
    from ..budget.base import BudgetPolicy
    from .support import SupportSet
    from .tracking import BlockTracker

__all__ = [
    "Plan",
    "plan",
    "perceptron_pass",
    "perceptron_run",
    "ranker_pass",
    "HINT_LIMIT",
    "COUNTS",
]

#: Rows learned by a compiled pass (``"compiled"``), for benchmarks and tests to see which
#: path a combination takes; clear it before a run.
COUNTS: Counter[str] = Counter()

_EMPTY = np.zeros((0, 0))
_NO_DRAWS = np.zeros(0, dtype=np.int64)

#: The float32 hints are used while a float32 kernel value's error bound (before its
#: constant part) stays below this; the bound is linearised there (see the pass).
HINT_LIMIT = 1e-3


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
    kernel; ``None`` for strings and trees."""
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
    return codes["gram"], np.array([0.0, 0.0, 0.0, 1.0])


def _policy_plan(support: SupportSet, policy: BudgetPolicy) -> tuple[int, int] | None:
    """The compiled pass's policy code and budget (0: none), or ``None``."""
    name = type(policy).__name__
    code = accel.core.POLICY_CODES.get(name)
    if code is None or type(policy) not in (Unbounded, RemoveOldest, RemoveRandom, Forgetron):
        return None
    budget = 0 if policy.budget is None else int(policy.budget)
    if budget and support.n > budget:  # a set over its budget (a restored snapshot)
        return None
    return code, budget


def plan(support: SupportSet, policy: BudgetPolicy, block: BlockTracker) -> Plan | None:
    """The plan of a compiled pass over ``block``, or ``None`` when none applies."""
    if accel.core is None or support._G is not None or len(support._trackers) != 1:
        return None
    kernel = support.kernel
    kplan = _kernel_plan(kernel)
    pplan = _policy_plan(support, policy)
    if kplan is None or pplan is None:
        return None
    if kplan[0] == accel.core.KERNEL_CODES["gram"] and type(policy) is Forgetron:
        return None  # its removal step needs k(x_r, S), which the Gram of the block lacks
    if type(kernel) is RBF and not kernel.expansion_exact(
        block.sq_max + max(support._sq_max, block.sq_max)
    ):
        return None
    if not (block.Q.flags.c_contiguous and block.K.flags.c_contiguous):
        return None
    return Plan(kplan[0], kplan[1], pplan[0], pplan[1], policy)


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


def perceptron_run(
    support: SupportSet,
    policy: BudgetPolicy,
    rows: np.ndarray,
    T: np.ndarray,
    codes: np.ndarray,
    margin: float = 0.0,
    q_sq: np.ndarray | None = None,
) -> tuple[int, int] | None:
    """Learn ``rows`` (targets ``T``, every label known) in one compiled pass with float32
    hints; ``(mistakes, rows decided afresh)``, or ``None`` when the pass does not apply.

    ``codes`` receives the predictions as for :func:`perceptron_pass`. ``q_sq``, the rows'
    squared norms as :func:`streamk.accel.sqnorms` gives them, saves recomputing them
    when a block's runs share one array.
    """
    budget = _hint_budget(support, policy)
    if budget is None or rows.shape[1] == 0:
        return None
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    if q_sq is None:
        q_sq = accel.sqnorms(rows)
    # Python's max is the same number and a fraction of a reduction's cost on a short run
    q_max = float(max(q_sq.tolist(), default=0.0) if len(q_sq) <= 16 else q_sq.max())
    if not support.kernel.expansion_exact(q_max + max(support._sq_max, q_max)):
        return None
    support.reserve(_rows_after(support, rows.shape[0], budget), rows.shape[1])
    pcode = accel.core.POLICY_CODES[type(policy).__name__]
    draws, pstate = _NO_DRAWS, None
    if type(policy) is RemoveRandom:
        m = rows.shape[0]
        if budget and support.n + m > budget:
            draws = policy.peek_slots(m)
        elif budget:  # no insertion can find the set full: the pass reads no draw
            draws = np.zeros(m, dtype=np.int64)
        pstate = np.zeros(3)
    elif type(policy) is Forgetron:
        st = policy.state()
        pstate = np.array([0.0, float(st["Q"]), float(st["M"])])
    done = accel.core.perceptron_hint_pass(
        rows,
        q_sq,
        *_buffers(support),
        np.ascontiguousarray(T, dtype=np.float64),
        support.n,
        budget,
        support.next_id,
        float(support.kernel.gamma),
        codes,
        HINT_LIMIT,
        margin,
        pcode,
        draws,
        pstate,
    )
    if done is None:
        return None
    if type(policy) is RemoveRandom:
        policy.skip_slots(int(pstate[0]))
    elif type(policy) is Forgetron:
        policy.load_state({"Q": float(pstate[1]), "M": int(pstate[2])})
    n, next_id, mistakes, sq_max, fresh = done
    if mistakes:
        support.after_compiled_changes(n, next_id, rows.shape[1], sq_max)
    COUNTS["compiled"] += rows.shape[0]
    return mistakes, fresh


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


def _after_pass(support: SupportSet, block: BlockTracker, end: int, how: Plan, done: tuple) -> int:
    """Bring the set, the tracker and the policy up to date after a tracked pass; returns
    the number of updates."""
    n, next_id, mistakes, coef_l1, sq_max, kmax, used, fq, fm = done
    block.start = end
    block.coef_l1 = coef_l1
    block.kmax = kmax
    policy = how.policy
    if used:
        policy.skip_slots(used)
    if type(policy) is Forgetron:
        policy.load_state({"Q": fq, "M": fm})
    if mistakes:
        support.after_compiled_changes(n, next_id, block.Q.shape[1], sq_max)
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
