"""Hand a micro-batch to a compiled perceptron pass when one applies.

Both compiled loops cover the common case: an RBF kernel, no budget or remove-oldest, no
Gram matrix kept. They change the support set's buffers in place, exactly as the Python
path would through :class:`~streamk.learners.support.SupportSet`'s methods; this module checks
that the case applies, reserves room beforehand and brings the set's counters up to date
afterwards.

* :func:`perceptron_run` — a whole run of rows whose labels are all known, with decision
  hints in float32 and no kernel matrix (:func:`streamk._core.perceptron_hint_pass`):
  the fast path of ``learn_many``.
* :func:`perceptron_pass` — rows of a tracked block
  (:class:`~streamk.learners.tracking.BlockTracker`, float64 kernel matrix): when the
  float32 bound would be too loose, or around a row that brings a new class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import accel
from ..budget.base import Unbounded
from ..budget.removal import RemoveOldest
from ..kernels import RBF

if TYPE_CHECKING:
    from ..budget.base import BudgetPolicy
    from .support import SupportSet
    from .tracking import BlockTracker

__all__ = ["perceptron_budget", "perceptron_pass", "perceptron_run", "HINT_LIMIT"]

#: The float32 hints are used while a float32 kernel value's error bound (before its
#: constant part) stays below this; the bound is linearised there (see the pass).
HINT_LIMIT = 1e-3


def _compiled_budget(support: SupportSet, policy: BudgetPolicy, trackers: int) -> int | None:
    """The budget to pass (0: none) when a compiled pass applies, else ``None``."""
    if accel.core is None or type(support.kernel) is not RBF:
        return None
    if support._G is not None or len(support._trackers) != trackers:
        return None
    if type(policy) is RemoveOldest:
        return int(policy.budget)
    if type(policy) is Unbounded:
        return 0
    return None


def _buffers(support: SupportSet) -> tuple[np.ndarray, ...]:
    """The support set's buffers a compiled pass writes, in its argument order: rows,
    squared norms, coefficients, ``k(x, x)``, insertion ids."""
    return support._X, support._sq, support._coef, support._kdiag, support._ids


def _rows_after(support: SupportSet, added: int, budget: int) -> int:
    """Support rows needed once ``added`` more vectors may have joined."""
    n = support.n
    return n + added if budget == 0 else max(n, min(budget, n + added))


def perceptron_budget(support: SupportSet, policy: BudgetPolicy, block: BlockTracker) -> int | None:
    """The budget to pass (0: none) when the compiled pass applies to ``block``, else ``None``."""
    budget = _compiled_budget(support, policy, trackers=1)
    if budget is None:
        return None
    if not support.kernel.expansion_exact(block.sq_max + max(support._sq_max, block.sq_max)):
        return None
    if not (block.Q.flags.c_contiguous and block.K.flags.c_contiguous):
        return None
    return budget


def perceptron_run(
    support: SupportSet, policy: BudgetPolicy, rows: np.ndarray, T: np.ndarray, codes: np.ndarray
) -> tuple[int, int] | None:
    """Learn ``rows`` (targets ``T``, every label known) in one compiled pass with float32
    hints; ``(mistakes, rows decided afresh)``, or ``None`` when the pass does not apply.

    ``codes`` receives the predictions as for :func:`perceptron_pass`.
    """
    budget = _compiled_budget(support, policy, trackers=0)
    if budget is None or rows.shape[1] == 0:
        return None
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    q_sq = accel.sqnorms(rows)
    q_max = float(q_sq.max(initial=0.0))
    if not support.kernel.expansion_exact(q_max + max(support._sq_max, q_max)):
        return None
    support.reserve(_rows_after(support, rows.shape[0], budget), rows.shape[1])
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
    )
    if done is None:
        return None
    n, next_id, mistakes, sq_max, fresh = done
    if mistakes:
        support.after_compiled_changes(n, next_id, rows.shape[1], sq_max)
    return mistakes, fresh


def perceptron_pass(
    support: SupportSet,
    block: BlockTracker,
    T: np.ndarray,
    start: int,
    end: int,
    budget: int,
    codes: np.ndarray,
) -> int:
    """Learn block rows ``start:end`` (targets ``T``) in compiled code; returns the mistakes.

    ``codes`` receives the per-row predictions made before learning (see
    :meth:`~streamk.learners.labels.LabelCoder.decode`).
    """
    support.reserve(_rows_after(support, end - start, budget), block.Q.shape[1])  # and K's width
    block.F = np.ascontiguousarray(block.F)  # no copy unless a remap left it strided
    n, next_id, mistakes, coef_l1, sq_max = accel.core.perceptron_pass(
        block.K,
        block.F,
        block.Q,
        block.sq,
        *_buffers(support),
        np.ascontiguousarray(T, dtype=np.float64),
        start,
        end,
        support.n,
        budget,
        support.next_id,
        float(support.kernel.gamma),
        block.coef_l1,
        codes,
    )
    block.start = end
    block.coef_l1 = coef_l1
    if mistakes:
        support.after_compiled_changes(n, next_id, block.Q.shape[1], sq_max)
    return mistakes
