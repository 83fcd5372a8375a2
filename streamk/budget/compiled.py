"""The compiled Projectron and Merge work (``streamk/budget/_policies.pyx``), when it applies.

The extension is optional, like :mod:`streamk._core`: without it (no C compiler at install,
or ``STREAMK_NO_ACCEL=1``) the NumPy code in :mod:`.projectron` and :mod:`.merge` runs,
and it stays the reference the compiled loops are tested against. This module checks that a
compiled call applies, sizes the buffers it writes and brings the support set's counters
and the policy's state up to date afterwards (the compiled loops change the set's buffers
in place, as :func:`streamk.learners.fastpass.perceptron_run` does).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ..kernels import RBF
from .projectron import MIN_REL_DELTA, Projectron

if TYPE_CHECKING:  # annotations only: learners import the policies
    from ..learners.support import SupportSet

__all__ = ["policies", "available", "margin_run", "compiled_merge_search"]

#: Most coefficient columns the compiled run takes (its scratch is sized for them).
MAX_OUTPUTS = 64


def _load() -> ModuleType | None:
    if os.environ.get("STREAMK_NO_ACCEL", "").strip() not in ("", "0"):
        return None
    try:
        return importlib.import_module(f"{__package__}._policies")
    except ImportError:  # not built (no C compiler at install) or built for another Python
        return None


#: The compiled module, or ``None`` when the NumPy paths run.
policies: ModuleType | None = _load()


def available() -> bool:
    """Whether the compiled policy loops are loaded."""
    return policies is not None


def margin_run(
    support: SupportSet,
    policy: object,
    rows: np.ndarray,
    T: np.ndarray,
    codes: np.ndarray,
    margin: float,
) -> int | None:
    """Learn ``rows`` (±1 targets ``T``, one column per output) with the margin-perceptron
    rule and a :class:`Projectron` budget in one compiled call; the number of updates, or
    ``None`` when the call does not apply (then the caller takes the NumPy path).

    The rule: a row whose decision ``f`` has a wrong sign (sgn(0) = +1) or ``t f < margin``
    in some column is inserted with ``t`` in those columns (``margin = 0``: Alg. 7.52).
    ``codes[j]`` receives the prediction made before row ``j`` was learned (see
    :meth:`~streamk.learners.labels.LabelCoder.decode`). Applies to an RBF kernel, a float
    support set without a kept Gram matrix and no tracked block open.
    """
    if policies is None or type(policy) is not Projectron or type(support.kernel) is not RBF:
        return None
    if support._G is not None or support._trackers or getattr(support, "takes_objects", False):
        return None
    m, w = rows.shape
    p = T.shape[1]
    if m == 0 or w == 0 or p != support.n_outputs or p > MAX_OUTPUTS:
        return None
    budget = policy.budget or 0
    most = max(budget if budget else support.n + m, support.n)
    width = max(w, support.width)
    support.reserve(most, width)
    policy.prepare(support, most)
    Q = np.zeros((m, width))
    Q[:, :w] = rows
    n, next_id, updates, sq_max = policies.projectron_run(
        Q,
        support._X,
        support._sq,
        support._coef,
        support._kdiag,
        support._ids,
        policy._P,
        np.ascontiguousarray(T, dtype=np.float64),
        support.n,
        budget,
        support.next_id,
        float(support.kernel.gamma),
        policy.eta,
        MIN_REL_DELTA,
        float(margin),
        codes,
    )
    if updates:
        support.after_compiled_changes(n, next_id, w, sq_max)
        policy.adopt(support)
    return int(updates)


def compiled_merge_search(support: SupportSet, gamma: float) -> tuple[int, int, float] | None:
    """:func:`streamk.budget.merge.merge_search` compiled: ``(m, n, h)``, or ``None`` when the
    extension is not loaded."""
    if policies is None or support.n < 2:
        return None
    m, n, h = policies.merge_search(
        support._X, support._coef, support._sq, support._kdiag, support._ids, support.n, gamma
    )
    return int(m), int(n), float(h)
