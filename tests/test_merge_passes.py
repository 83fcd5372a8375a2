"""Merge's compiled per-row passes (``streamk/_dense.h``'s ``skm_*``) against the NumPy search.

The compiled search finds ``m`` by a pass that skips blocks of eight rows none of whose costs
is near the smallest, gathers the candidates branch-free (a row is written, then kept or
overwritten) and keeps the slot order through two compactions. These sets put what those
passes can get wrong where a block boundary or a compaction would show it: costs tied
within 1e-12 (relative) spread over several blocks with the oldest id in a late slot and in a
short last block, rows just outside the tie, and exact duplicate partners in several slots
(equal losses: the first slot wins). The oracle is :func:`streamk.budget.merge.merge_search`
(NumPy over every candidate), which shares none of the compiled code.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk.budget import compiled
from streamk.budget.merge import merge_search
from streamk.kernels import RBF
from streamk.learners.support import SupportSet
from tests.test_policies_compiled import needs_compiled

#: Row counts around the passes' blocks of eight (a short last block, full blocks only, one)
SIZES = [9, 16, 23, 41, 201]


def tied_set(n: int, seed: int, n_outputs: int) -> SupportSet:
    """``n`` rows whose costs are 1 but for a few tied within 1e-12 below it (the smallest)
    and a few just outside the tie, with ids out of slot order (removals move the last row
    into the removed slot)."""
    rng = np.random.default_rng(seed)
    s = SupportSet(RBF(gamma=0.5), n_outputs=n_outputs)
    for _ in range(n + 3):
        coef = rng.normal(size=n_outputs)
        s.append(rng.normal(size=3), coef / np.linalg.norm(coef))
    for slot in rng.choice(n, 3, replace=False):  # late ids into early slots
        s.remove(int(slot))
    slots = rng.permutation(n)
    low = 0.999  # the smallest cost, its ties within 1e-12 of it and misses just outside
    for k, slot in enumerate(slots[: max(n // 4, 2)]):
        scale = low * (1.0 + (0.3e-12 if k % 3 else 0.0) + (4e-12 if k % 5 == 4 else 0.0))
        s._coef[slot] *= scale
    return s


def assert_same_pick(s: SupportSet, gamma: float) -> None:
    """The compiled search's ``(m, partner)`` are NumPy's, its ``h`` to 1e-12."""
    m, n, h = compiled.compiled_merge_search(s, gamma)
    m_ref, n_ref, h_ref = merge_search(s, gamma)
    assert (m, n) == (m_ref, n_ref)
    assert h == pytest.approx(h_ref, abs=1e-12)


@needs_compiled
@pytest.mark.parametrize("n_outputs", [1, 2])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n", SIZES)
def test_tied_costs_take_the_oldest_in_any_block(n, seed, n_outputs):
    """Costs tied within 1e-12 spread over the blocks: ``m`` is the oldest among them (the
    oracle's ``oldest_among``), wherever its slot, and a cost 4e-12 above is no tie."""
    s = tied_set(n, seed, n_outputs)
    cost = np.sqrt(np.einsum("ij,ij->i", s.coef, s.coef) * s.kdiag)
    tied = cost <= cost.min() * (1.0 + 1e-12)
    assert 1 < tied.sum() < n  # the set has a tie to break and rows outside it
    assert_same_pick(s, 0.5)


@needs_compiled
@pytest.mark.parametrize("m_slot", [0, 7, 8, 15, -1])
@pytest.mark.parametrize("n", SIZES[1:])
def test_the_smallest_cost_alone_in_the_last_block(n, m_slot):
    """One row well below the others' costs, in a block's first or last slot or in the
    short last block: the pass over blocks finds it."""
    rng = np.random.default_rng(n + 100 + m_slot)
    s = SupportSet(RBF(gamma=0.5))
    for _ in range(n):
        s.append(rng.normal(size=2), np.array([rng.choice([-1.0, 1.0]) * rng.uniform(1, 2)]))
    slot = m_slot % n
    s._coef[slot] = 0.25
    assert_same_pick(s, 0.5)
    assert compiled.compiled_merge_search(s, 0.5)[0] == slot


@needs_compiled
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("near", [True, False])
def test_duplicate_partners_keep_the_first_slot(n, near):
    """The best partner copied into several slots (equal losses): the first of them wins
    through the gathering and the compaction after the bounds (``near``: the copies are
    near duplicates of ``m``, so the box bound runs first; else every row is bounded)."""
    rng = np.random.default_rng(n)
    s = SupportSet(RBF(gamma=0.5))
    for _ in range(n):
        s.append(rng.normal(scale=50.0, size=2), np.array([1.0]))
    m_row = s.X[n // 2].copy()
    s._coef[n // 2] = 0.5  # m
    partner = m_row + (1e-3 if near else 1.0)  # losses ~1e-6 mm or ~0.9 mm: box or not
    copies = sorted(rng.choice([i for i in range(n) if i != n // 2], 4 if n > 8 else 2, False))
    for slot in copies:
        s.replace(int(slot), partner, np.array([1.0]))
    assert_same_pick(s, 0.5)
    assert compiled.compiled_merge_search(s, 0.5)[1] == copies[0]
