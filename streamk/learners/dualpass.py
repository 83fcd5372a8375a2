"""The compiled resweeps of the on-line dual learners, when they are built.

:mod:`streamk.learners._dual` (``_dual.pyx``) runs one cyclic coordinate pass over the
support set (:class:`~streamk.learners.adatron.KernelAdatron`'s CF 7.13,
:class:`~streamk.learners.svr.OnlineSVR`'s CF 7.14) in C, where the NumPy path runs a Python
loop with a NumPy call per step: the same operations in the same order, so the two paths
give the same coefficients. Each pass starts from ``F = G @ coef`` computed here with the
NumPy call the NumPy path makes.

The extension is optional like the core: without it (no C compiler at install time), with
``STREAMK_NO_ACCEL=1``, or with :data:`streamk.accel.core` switched off at run time (as the
tests do), :func:`adatron_resweep` and :func:`svr_resweep` return ``False`` before changing
anything and the learner runs its NumPy loop, the reference the compiled one is tested
against (``tests/test_dual_paths.py``). They decline the same way for a support set of
strings or trees, whose coefficient changes carry other bookkeeping.
"""

from __future__ import annotations

import importlib
import os
from collections import Counter
from types import ModuleType

import numpy as np

from .. import accel
from .support import SupportSet

__all__ = ["available", "adatron_resweep", "svr_resweep", "coef_changed", "COUNTS"]

#: Resweeps run compiled (``"compiled"``): the tests read it to see which path ran.
COUNTS: Counter[str] = Counter()

#: Most coefficient columns (classes) the compiled adatron pass takes.
MAX_OUTPUTS = 64


def _load() -> ModuleType | None:
    if accel.core is None:  # the switch, or no compiler: the NumPy path only
        return None
    if os.environ.get("STREAMK_NO_ACCEL", "").strip() not in ("", "0"):
        return None
    try:
        return importlib.import_module(f"{__package__}._dual")
    except ImportError:
        return None


_dual = _load()


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
    T: np.ndarray,
    eta: np.ndarray,
    order: np.ndarray,
    mu: float,
    upper: float,
    passes: int,
) -> bool:
    """``passes`` adatron passes (CF 7.13) over the slots ``order``; ``False`` (and nothing
    changed) where the compiled pass does not apply.

    ``T`` are the ±1 targets ``(n, n_outputs)``, ``eta`` the steps ``1 / (k(x_i, x_i) + mu)``,
    ``order`` the slots to step through (intp), ``mu`` the 2-norm diagonal shift, ``upper``
    the box. Coefficients are written in place, then :func:`coef_changed`.
    """
    if not _handles(S) or S.n_outputs > MAX_OUTPUTS:
        return False
    n, G, buf = S.n, S._G, S._coef
    T = np.ascontiguousarray(T, dtype=np.float64)
    eta = np.ascontiguousarray(eta, dtype=np.float64)
    order = np.ascontiguousarray(order, dtype=np.intp)
    D = np.zeros((n, S.n_outputs)) if S._trackers else None
    moved = 0
    for _ in range(passes):
        F = G[:n, :n] @ buf[:n]  # the NumPy path's call: the same F, bit for bit
        moved += _dual.adatron_pass(G, buf, F, T, eta, order, mu, upper, D)
    if moved:
        coef_changed(S, D)
    COUNTS["compiled"] += 1
    return True


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
