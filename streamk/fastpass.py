"""Hand a tracked micro-batch to the compiled perceptron pass when it applies.

The compiled loop (:func:`streamk._core.perceptron_pass`) covers the common case: an
RBF kernel, no budget or remove-oldest, no Gram matrix kept. It changes the support
set's buffers and the tracker's block in place, exactly as the Python path would through
:class:`~streamk.support.SupportSet`'s methods; this module checks that the case applies,
reserves room beforehand and brings the set's counters up to date afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import accel
from .budget.base import Unbounded
from .budget.removal import RemoveOldest
from .kernels import RBF

if TYPE_CHECKING:
    from .budget.base import BudgetPolicy
    from .support import SupportSet
    from .tracking import BlockTracker

__all__ = ["perceptron_budget", "perceptron_pass"]


def perceptron_budget(support: SupportSet, policy: BudgetPolicy, block: BlockTracker) -> int | None:
    """The budget to pass (0: none) when the compiled pass applies to ``block``, else ``None``."""
    if accel.core is None or type(support.kernel) is not RBF:
        return None
    if support._G is not None or len(support._trackers) != 1:
        return None
    if type(policy) is RemoveOldest:
        budget = int(policy.budget)
    elif type(policy) is Unbounded:
        budget = 0
    else:
        return None
    if not support.kernel.expansion_exact(block.sq_max + max(support._sq_max, block.sq_max)):
        return None
    if not (block.Q.flags.c_contiguous and block.K.flags.c_contiguous):
        return None
    return budget


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
    added = end - start
    rows = support.n + added if budget == 0 else max(support.n, min(budget, support.n + added))
    support.reserve(rows, block.Q.shape[1])  # also widens the tracker's kernel block
    block.F = np.ascontiguousarray(block.F)  # no copy unless a remap left it strided
    n, next_id, mistakes, coef_l1, sq_max = accel.core.perceptron_pass(
        block.K,
        block.F,
        block.Q,
        block.sq,
        support._X,
        support._sq,
        support._coef,
        support._kdiag,
        support._ids,
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
