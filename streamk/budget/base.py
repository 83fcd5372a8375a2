"""The budget-policy contract, the registry and the two trivial policies.

A policy is passed to a learner as ``budget=Policy(200)`` (an ``int`` means
``RemoveOldest(int)``, ``None`` means unbounded). The learner calls
:meth:`BudgetPolicy.insert` whenever its algorithm wants a new support vector; the
policy changes the :class:`~streamk.learners.support.SupportSet` only through its methods
(``append``, ``remove``, ``replace``, ``add_coef``, ``scale_coef``), so micro-batch
tracking keeps ``learn_many`` equal to ``learn_one`` whatever the policy does.
"""

from __future__ import annotations

import copy
import difflib
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError

if TYPE_CHECKING:  # annotations only: learners import the policies
    from ..kernels import Kernel
    from ..learners.support import SupportSet

__all__ = [
    "BudgetPolicy",
    "Unbounded",
    "register_policy",
    "make_policy",
    "policy_from_spec",
]


class BudgetPolicy:
    """Base class.

    Parameters
    ----------
    budget
        Maximum number of support vectors (``None`` only where a subclass allows it).

    Notes
    -----
    Memory a policy keeps is O(budget) (or O(budget²) for :class:`Projectron`): no
    per-event history, whatever the stream length.
    """

    #: Whether the policy needs ``SupportSet(keep_gram=True)``.
    needs_gram = False
    #: Whether :meth:`insert` reads ``k_row`` (``K(row, S)``); if not, a learner that
    #: predicts without it (a primal weight map) may pass ``None``.
    needs_k_row = True
    #: Whether the policy builds new support points (so needs rows in a vector space).
    needs_vector_space = False

    def __init__(self, budget: int | None):
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1
        ):
            raise ConfigError(f"budget must be a positive integer, got {budget!r}")
        self.budget = None if budget is None else int(budget)

    def check_kernel(self, kernel: Kernel) -> None:
        """Refuse a kernel this policy cannot work with, before any event (a learner calls
        it at construction and on restore): a policy that builds new support points needs
        rows in a vector space, not strings or trees.

        Raises
        ------
        ConfigError
            Naming the policy, the kernel and the policies that take it.
        """
        if kernel.takes_objects and self.needs_vector_space:
            raise ConfigError(
                f"budget policy {self!r} needs a vector space (it builds new support points); "
                f"{kernel!r} works on strings/trees: use RemoveOldest, RemoveRandom, "
                "RemoveSmallest, Forgetron or Projectron"
            )

    def insert(
        self, support: SupportSet, row: np.ndarray, coef: np.ndarray, k_row: np.ndarray
    ) -> None:
        """Add ``row`` with ``coef`` to ``support``, keeping ``len(support) <= budget``.

        ``k_row`` is ``K(row, S)`` for the current set (the learner computed it to predict).
        """
        raise NotImplementedError

    def _full(self, support: SupportSet) -> bool:
        return self.budget is not None and support.n >= self.budget

    # -- plain data ---------------------------------------------------------------------------
    def _extra_params(self) -> dict[str, Any]:
        return {}

    def to_spec(self) -> dict[str, Any]:
        """Plain data: the policy's name, parameters and mutable state."""
        return {
            "name": type(self).__name__,
            "budget": self.budget,
            **self._extra_params(),
            "state": self.state(),
        }

    def state(self) -> dict[str, Any]:
        """Mutable state (e.g. an RNG) as plain data; empty for stateless policies."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state` returned."""

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self._extra_params().items())
        return f"{type(self).__name__}({self.budget!r}{extra})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


def without_slot(k_row: np.ndarray | None, slot: int) -> np.ndarray | None:
    """``k_row`` as it reads after ``support.remove(slot)`` (the last entry moves into ``slot``)."""
    if k_row is None:
        return None
    k = np.array(k_row, dtype=np.float64)
    k[slot] = k[-1]
    return k[:-1]


def oldest_among(support: SupportSet, mask: np.ndarray) -> int:
    """Slot of the oldest support row among those where ``mask`` is true (ties broken by age)."""
    return int(np.argmin(np.where(mask, support.ids, np.iinfo(np.int64).max)))


class Unbounded(BudgetPolicy):
    """No budget: every new support vector is kept (the book's algorithms as written)."""

    needs_k_row = False

    def __init__(self, budget: None = None):
        super().__init__(None)

    def insert(self, support, row, coef, k_row):
        support.append(row, coef, k_row)

    def __repr__(self) -> str:
        return "Unbounded()"


_POLICIES: dict[str, type[BudgetPolicy]] = {"Unbounded": Unbounded}


def register_policy(cls: type[BudgetPolicy]) -> type[BudgetPolicy]:
    """Make a policy class known to :func:`policy_from_spec` (usable as a decorator)."""
    _POLICIES[cls.__name__] = cls
    return cls


def make_policy(budget: int | BudgetPolicy | None) -> BudgetPolicy:
    """The policy a learner uses for its ``budget`` parameter (a private copy)."""
    if budget is None:
        return Unbounded()
    if isinstance(budget, BudgetPolicy):
        return copy.deepcopy(budget)
    if isinstance(budget, (int, np.integer)) and not isinstance(budget, bool):
        return _POLICIES["RemoveOldest"](int(budget))
    raise ConfigError(
        f"budget must be None, a positive int or a BudgetPolicy such as RemoveOldest(200), "
        f"got {budget!r}"
    )


def policy_from_spec(spec: dict[str, Any]) -> BudgetPolicy:
    """Rebuild a policy (with its state) from :meth:`BudgetPolicy.to_spec` output.

    An unknown name (a typo in a configuration's ``policy``) is a :class:`ConfigError`
    naming the closest known policy and all of them, not the spec dict.
    """
    name = spec.get("name") if isinstance(spec, dict) else None
    if not isinstance(name, str) or name not in _POLICIES:
        known = sorted(_POLICIES)
        if not isinstance(name, str):
            raise ConfigError(f"unknown budget policy spec {spec!r:.200}; known: {known}")
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown budget policy {name!r}{hint}; choose one of {', '.join(known)}")
    params = {k: v for k, v in spec.items() if k not in ("name", "state")}
    cls = _POLICIES[spec["name"]]
    policy = cls() if cls is Unbounded else cls(**params)
    policy.load_state(spec.get("state") or {})
    return policy
