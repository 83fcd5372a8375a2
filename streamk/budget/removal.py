"""Removal policies: when the set is full, one support vector leaves before the new one enters.

* :class:`RemoveOldest` — sliding window.
* :class:`RemoveRandom` — randomised budget perceptron (Cavallanti, Cesa-Bianchi & Gentile 2007).
* :class:`RemoveSmallest` — the vector whose removal changes ``f`` least (in RKHS norm).
* :class:`Forgetron` — oldest removal with the self-tuned shrinking of Dekel,
  Shalev-Shwartz & Singer (2008).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..randomness import generator_from_state, generator_state
from .base import BudgetPolicy, oldest_among, register_policy, without_slot

__all__ = ["RemoveOldest", "RemoveRandom", "RemoveSmallest", "Forgetron", "forgetron_phi"]


@register_policy
class RemoveOldest(BudgetPolicy):
    """Sliding window: when full, the oldest support vector leaves before the new one enters.

    The new vector takes the oldest one's slot (``replace(..., new_id=True)``): one slot
    write, where removing and appending would also move the last row and its kernel column.
    """

    needs_k_row = False  # only passed on to append (which computes it if needed)

    def __init__(self, budget: int):
        super().__init__(budget)

    def insert(self, support, row, coef, k_row):
        if self._full(support):
            support.replace(support.oldest(), row, coef, new_id=True)
        else:
            support.append(row, coef, k_row)


@register_policy
class RemoveRandom(BudgetPolicy):
    """Randomised budget perceptron: when full, a uniformly random support vector leaves.

    Cavallanti, Cesa-Bianchi & Gentile, "Tracking the best hyperplane with a simple budget
    Perceptron", Machine Learning 69 (2007). The generator (NumPy PCG64) is seeded by
    ``seed``; its state is part of :meth:`state`, so a restored model draws the same
    sequence. ``seed=None`` seeds from the operating system (not reproducible).
    """

    needs_k_row = False  # only passed on to append (which computes it if needed)

    def __init__(self, budget: int, seed: int | None = None):
        super().__init__(budget)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ConfigError(f"seed must be None or an int, got {seed!r}")
        self.seed = None if seed is None else int(seed)
        self._rng = np.random.Generator(np.random.PCG64(self.seed))

    def _extra_params(self) -> dict[str, Any]:
        return {"seed": self.seed}

    def insert(self, support, row, coef, k_row):
        if self._full(support):
            slot = int(self._rng.integers(support.n))
            support.remove(slot)
            k_row = without_slot(k_row, slot)
        support.append(row, coef, k_row)

    def peek_slots(self, count: int) -> np.ndarray:
        """The slots the next ``count`` insertions into a full set would draw (each one
        ``integers(budget)``, as :meth:`insert` draws them while ``n == budget``), without
        consuming them: a compiled pass takes what it needs, then calls :meth:`skip_slots`."""
        state = self._rng.bit_generator.state
        slots = self._rng.integers(self.budget, size=count)
        self._rng.bit_generator.state = state
        return slots

    def skip_slots(self, count: int) -> None:
        """Consume ``count`` draws, as ``count`` insertions into a full set would."""
        if count:
            self._rng.integers(self.budget, size=count)

    def state(self) -> dict[str, Any]:
        return generator_state(self._rng)

    def load_state(self, state: dict[str, Any]) -> None:
        if state:  # a snapshot from before the policy had state keeps its fresh generator
            self._rng = generator_from_state(state, "RemoveRandom state")


def removal_cost(support) -> np.ndarray:
    """``||coef_i||_2 · sqrt(k(x_i, x_i))``: the RKHS norm of each support vector's term.

    Removing vector ``i`` changes ``f`` by ``coef_i k(x_i, ·)``, whose norm (over the
    output columns) is this value, and ``|Δf_j(x)| <= |coef_ij| sqrt(k(x_i,x_i) k(x,x))``.
    """
    return np.sqrt(np.einsum("ij,ij->i", support.coef, support.coef) * support.kdiag)


@register_policy
class RemoveSmallest(BudgetPolicy):
    """When full, the support vector whose removal changes ``f`` least leaves.

    The cost of removing vector ``i`` is :func:`removal_cost`, ``||coef_i||_2 ·
    sqrt(k(x_i, x_i))`` (the 2-norm over the output columns; for a binary learner
    ``|alpha_i| sqrt(k(x_i, x_i))``), as in the removal step of budgeted SGD (Wang,
    Crammer & Vucetic, JMLR 13, 2012) and Shark's ``RemoveSmallest``. Ties (e.g. a plain
    perceptron, where every ``|alpha| = 1``) go to the oldest. The new vector always enters.
    """

    needs_k_row = False  # only passed on to append (which computes it if needed)

    def __init__(self, budget: int):
        super().__init__(budget)

    def insert(self, support, row, coef, k_row):
        if self._full(support):
            cost = removal_cost(support)
            slot = oldest_among(support, cost <= cost.min() * (1.0 + 1e-12))
            support.remove(slot)
            k_row = without_slot(k_row, slot)
        support.append(row, coef, k_row)


def forgetron_phi(a: float, b: float, c: float) -> float:
    """Largest ``phi`` in ``(0, 1]`` with ``a phi² + b phi + c <= 0`` (``b > 0``, ``c < 0``).

    The self-tuned Forgetron's shrink factor: ``a phi² + b phi = Psi(sigma phi, phi mu)``
    and ``c = Q - 15/32 M`` (see :class:`Forgetron`).
    """
    if a + b + c <= 0.0:  # phi = 1 already satisfies the constraint
        return 1.0
    if a == 0.0:
        return min(1.0, -c / b)
    disc = b * b - 4.0 * a * c
    # a > 0: the set is between the roots; a < 0 with phi = 1 infeasible: below the small root.
    phi = (-b + math.sqrt(max(disc, 0.0))) / (2.0 * a)
    return min(1.0, max(phi, 0.0))


@register_policy
class Forgetron(BudgetPolicy):
    """Oldest removal with coefficient shrinking: the self-tuned Forgetron.

    Dekel, Shalev-Shwartz & Singer, "The Forgetron: a kernel-based perceptron on a
    budget", SIAM J. Computing 37(5), 2008, Fig. 3 (the self-tuned variant; as in
    DOGMA's ``k_forgetron_st``). Every insertion counts as an update: ``M += 1``. When
    the set is full, with ``r`` the oldest vector and ``f' = f + coef·k(x, ·)``:

    * ``phi = max{phi in (0, 1] : Psi(sigma_r phi, mu) + Q <= 15/32 M}``, with
      ``Psi(lambda, mu) = lambda² + 2 lambda - 2 lambda mu``, ``sigma_r = |coef_r|`` and
      ``mu = sign(coef_r) phi f'(x_r)`` (the removed vector's margin after shrinking);
    * ``f <- phi f'`` (through ``support.scale_coef``), then ``r`` is removed, and
      ``Q <- Q + Psi(sigma_r phi, mu)``.

    Multi-output (one-vs-rest columns share one ``phi``): ``Psi`` is summed over the
    columns, i.e. ``a = sum_j (c_rj² - 2 c_rj f'_j(x_r))`` and ``b = 2 sum_j |c_rj|`` in
    ``a phi² + b phi + Q - 15/32 M <= 0``; with one column this is the paper's rule.
    The state is the two scalars ``Q`` and ``M``.
    """

    def __init__(self, budget: int):
        super().__init__(budget)
        self._q = 0.0
        self._m = 0

    def insert(self, support, row, coef, k_row):
        self._m += 1
        if not self._full(support):
            support.append(row, coef, k_row)
            return
        coef = np.asarray(coef, dtype=np.float64).ravel()
        r = support.oldest()
        k_r = support.kernel_block(support.X[r : r + 1])[0]
        f_r = k_r @ support.coef + k_row[r] * coef  # f'(x_r)
        c_r = support.coef[r]
        a = float(c_r @ c_r - 2.0 * (c_r @ f_r))
        b = float(2.0 * np.abs(c_r).sum())
        phi = forgetron_phi(a, b, self._q - 15.0 / 32.0 * self._m) if b > 0 else 1.0
        self._q += a * phi * phi + b * phi
        support.remove(r)
        support.append(row, coef, without_slot(k_row, r))
        if phi != 1.0:
            support.scale_coef(phi)

    def state(self) -> dict[str, Any]:
        return {"Q": self._q, "M": self._m}

    def load_state(self, state: dict[str, Any]) -> None:
        if state:
            self._q = float(state["Q"])
            self._m = int(state["M"])
