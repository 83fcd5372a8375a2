"""The compiled per-event path of the kernel perceptrons, the ranker, the kernel adatron, the
on-line SVR and the novelty detector, when it is built.

:mod:`streamk.learners._event` (``_event.pyx``) does a whole ``learn_one`` or
``predict_one`` — feature dict to row, kernel row, margins, mistake test, support-set
write — in one call, where the NumPy path makes 17–20 calls. It applies to the RBF,
Laplacian, polynomial and linear kernels (each possibly scaled), and to sums, products,
scalings and normalisations of them (as programs, :mod:`streamk.kernels.program`), under
no budget, remove-oldest, remove-random, remove-smallest, the Forgetron or the
Projectron, and to the RBF kernel under Merge; for everything else (a kernel or policy of
the user's own, new features or labels) it declines before changing anything and the
learner runs its NumPy path, which is the reference the compiled one is tested against
(``tests/test_eventpass.py``).

The kernel adatron with ``resweeps >= 1`` keeps a Gram matrix: its call also writes that
matrix as ``SupportSet`` and the policy's ``insert`` do (append, swap-remove, remove-oldest's
replacement, Merge's merged row), runs the passes (``_adatron_pass.pxi``, the pass of
:mod:`~streamk.learners.dualpass` too) from ``F = G @ coef`` it computes itself, and removes
the vectors they emptied. That product is NumPy's to rounding, so these models are the NumPy
path's to rounding, not to the bit: the same predictions and support ids, coefficients
within 1e-9 relative (``tests/test_event_resweeps.py``). Under the Projectron it declines.

``EventPass.learn_rows`` runs the same core over a run of rows ``learn_many`` has already
converted and folded into ``gamma="auto"``, for the runs no compiled block pass
(:mod:`~streamk.learners.fastpass`) takes: it stops, with nothing changed, at the first row
the core declines, and the learner goes on with the NumPy path from there
(``tests/test_event_rows.py``).

``learn_one`` and ``predict_one`` of the perceptrons and the ranker (plain RBF; no budget,
remove-oldest, remove-random, remove-smallest or the Forgetron) take the decision from a
float32 kernel row against a float32 mirror of the support rows wherever its proven error
bound makes it certain, once events have at least 8 features and the set at least 96
vectors; the mirror costs 4 (w + 1) + 8 bytes per row of the set's buffers (w features)
and exists only past that gate (``tests/test_event_hints.py``).

The extension is optional like the core: without it (no C compiler at install time), or
with ``STREAMK_NO_ACCEL=1``, :func:`event_pass` returns ``None`` and learners take the
NumPy path only.
"""

from __future__ import annotations

from typing import Any

from .. import accel

__all__ = ["event_pass", "available", "NOT_HANDLED"]


_event = accel.optional_extension(f"{__package__}._event")

#: What ``EventPass.predict`` returns when it declined (a unique object, never a label).
NOT_HANDLED: Any = None if _event is None else _event.NOT_HANDLED
#: The base of :class:`~streamk.learners.support.SupportSet`: its counters as C fields the
#: per-event core reaches directly (``_event.SupportCounters``), plain attributes without it.
SUPPORT_COUNTERS: type = object if _event is None else _event.SupportCounters


def available() -> bool:
    """Whether the compiled per-event path is loaded."""
    return _event is not None


def event_pass(margin: float | None = None, ranker: bool = False, rule: str | None = None) -> Any:
    """A learner's compiled per-event path (``None`` without the extension).

    ``margin=None`` is the kernel perceptron's rule (update on a mistake), a number the
    margin perceptron's (update also where ``y f < margin``); ``ranker=True`` the on-line
    ranker's (one score, thresholds per rank); ``rule="svr"`` the on-line SVR's step with
    ``resweeps=0``, ``rule="novelty"`` the novelty detector's insert (its
    ``predict`` is then ``predict_one`` and ``score_one`` respectively);
    ``rule="adatron"`` the kernel adatron's first step (and its resweeps, if any).
    """
    if _event is None:
        return None
    return _event.EventPass(margin, ranker, rule)
