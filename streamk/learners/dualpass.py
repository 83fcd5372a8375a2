"""The compiled resweeps of the on-line dual learners, when they are built.

:mod:`streamk.learners._dual` (``_dual.pyx``) runs one cyclic coordinate pass over the
support set (:class:`~streamk.learners.adatron.KernelAdatron`'s CF 7.13,
:class:`~streamk.learners.svr.OnlineSVR`'s CF 7.14) in C, where the NumPy path runs a Python
loop with a NumPy call per step: the same operations in the same order, so the two paths
give the same coefficients. Each pass starts from ``F = G @ coef`` computed here with the
NumPy call the NumPy path makes. (The adatron's events that the per-event core takes,
:mod:`~streamk.learners.eventpass`, run the same pass inside its call, ``F`` computed there.)

The extension is optional like the core: without it (no C compiler at install time), with
``STREAMK_NO_ACCEL=1``, or with :data:`streamk.accel.core` switched off at run time (as the
tests do), :func:`adatron_resweep` and :func:`svr_resweep` return ``False`` before changing
anything and the learner runs its NumPy loop, the reference the compiled one is tested
against (``tests/test_dual_paths.py``). They decline the same way for a support set of
strings or trees, whose coefficient changes carry other bookkeeping.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .. import accel
from .support import SupportSet

__all__ = ["available", "adatron_resweep", "svr_resweep", "dead_slots", "coef_changed", "COUNTS"]

#: Resweeps run compiled (``"compiled"``): the tests read it to see which path ran.
COUNTS: Counter[str] = Counter()

#: Most coefficient columns (classes) the compiled adatron pass takes.
MAX_OUTPUTS = 64


_dual = accel.optional_extension(f"{__package__}._dual")


def available() -> bool:
    """Whether the compiled resweeps are loaded and switched on."""
    return _dual is not None and accel.core is not None


def _handles(S: object) -> bool:
    """A vector support set keeping its Gram matrix, with the compiled pass switched on."""
    return available() and type(S) is SupportSet and S._G is not None


def coef_changed(S: SupportSet, D: np.ndarray | None) -> None:
    """The support set's bookkeeping after compiled code added ``D`` to ``coef[:n]`` in place.

    What :meth:`SupportSet.add_coefs` does besides the addition: the version moves (cached
    decision values are stale) and tracked blocks take the net change (``D``; ``None`` when
    no block is tracked). A tracker's ``F`` is a hint kept to rounding (learners decide
    with fresh dots), so one net update stands for the NumPy path's one per step.
    """
    S.version += 1
    if D is not None:
        for t in S._trackers:
            t.add_coefs(D)


def adatron_resweep(
    S: SupportSet,
    cls: np.ndarray,
    signs: np.ndarray | None,
    by_age: np.ndarray,
    mu: float,
    upper: float,
    passes: int,
) -> bool:
    """``passes`` adatron passes (CF 7.13), oldest first; ``False`` (and nothing changed)
    where the compiled pass does not apply.

    ``cls`` is each slot's class index (NaN: unknown, the slot stays fixed), ``signs`` each
    class's ±1 target in binary mode (``None``: one-vs-rest), ``by_age`` the slots oldest
    first, ``mu`` the 2-norm diagonal shift, ``upper`` the box. Slots with ``k(x, x) + mu``
    not positive stay fixed too. Coefficients are written in place, then
    :func:`coef_changed`.
    """
    k = S.n_outputs
    if not _handles(S) or k > MAX_OUTPUTS or (signs is not None and k != 1):
        return False
    n, G, buf = S.n, S._G, S._coef
    cls = np.ascontiguousarray(cls, dtype=np.float64)
    by_age = np.ascontiguousarray(by_age, dtype=np.intp)
    DT = np.zeros((k, n)) if S._trackers else None
    moved = 0
    for _ in range(passes):
        F = G[:n, :n] @ buf[:n]  # the NumPy path's call: the same F, bit for bit
        FT = F.reshape(1, n) if k == 1 else np.ascontiguousarray(F.T)  # a column per row
        moved += _dual.adatron_pass(G, buf, FT, cls, signs, S._kdiag, by_age, mu, upper, DT)
    if moved:
        coef_changed(S, None if DT is None else DT.T)
    COUNTS["compiled"] += 1
    return True


def dead_slots(S: SupportSet, cls: np.ndarray) -> list[int]:
    """Slots of a known class (``cls`` not NaN) whose coefficients are all 0, descending:
    the vectors a resweep took out of ``f``."""
    if available() and type(S) is SupportSet:
        return _dual.dead_slots(S._coef, np.ascontiguousarray(cls, dtype=np.float64))
    dead = np.flatnonzero(~np.isnan(cls) & ~S.coef.any(axis=1))
    return dead[::-1].tolist()


def svr_resweep(
    S: SupportSet, y: np.ndarray, order: np.ndarray, eps: float, C: float, passes: int
) -> bool:
    """``passes`` SVR passes (CF 7.14) over the slots ``order``; ``False`` (and nothing
    changed) where the compiled pass does not apply.

    ``y`` are the targets minus the offset, ``(n,)``; ``eps`` the tube, ``C`` the box.
    Coefficients (column 0) are written in place, then :func:`coef_changed`.
    """
    if not _handles(S):
        return False
    n, G, buf = S.n, S._G, S._coef
    y = np.ascontiguousarray(y, dtype=np.float64)
    order = np.ascontiguousarray(order, dtype=np.intp)
    kdiag = S._kdiag
    D = np.zeros(n) if S._trackers else None
    moved = 0
    for _ in range(passes):
        f = G[:n, :n] @ buf[:n, 0]  # the NumPy path's call: the same f, bit for bit
        moved += _dual.svr_pass(G, buf, f, y, kdiag, order, float(eps), float(C), D)
    if moved:
        coef_changed(S, None if D is None else D[:, None])
    COUNTS["compiled"] += 1
    return True
