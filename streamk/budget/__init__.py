"""Budget policies: what happens when a new support vector would exceed the budget.

A policy is passed to a learner as ``budget=Policy(200)`` (an ``int`` means
``RemoveOldest(int)``, ``None`` means unbounded). The learner calls
:meth:`BudgetPolicy.insert` whenever its algorithm wants a new support vector; the
policy changes the :class:`~streamk.learners.support.SupportSet` only through its methods, so
micro-batch tracking keeps ``learn_many`` exactly equal to ``learn_one``.

=================  ================================================================
``Unbounded``      keep everything (the book's algorithms as written)
``RemoveOldest``   sliding window
``RemoveRandom``   randomised budget perceptron (Cavallanti et al. 2007), seeded
``RemoveSmallest`` least ``||coef_i|| sqrt(k(x_i, x_i))``
``Forgetron``      oldest, with self-tuned shrinking (Dekel et al. 2008)
``Projectron``     project onto the span when close (Orabona et al. 2009)
``Merge``          merge two RBF vectors (Wang, Crammer & Vucetic 2012)
=================  ================================================================
"""

from __future__ import annotations

from .base import BudgetPolicy, Unbounded, make_policy, policy_from_spec, register_policy
from .merge import Merge
from .projectron import Projectron
from .removal import Forgetron, RemoveOldest, RemoveRandom, RemoveSmallest

__all__ = [
    "BudgetPolicy",
    "Unbounded",
    "RemoveOldest",
    "RemoveRandom",
    "RemoveSmallest",
    "Forgetron",
    "Projectron",
    "Merge",
    "make_policy",
    "policy_from_spec",
    "register_policy",
]
