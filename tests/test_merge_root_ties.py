"""Merge's choice of ``m`` at the edge of a cost tie, to the last bit.

``m`` is the oldest row whose cost ``||coef_i|| sqrt(k(x_i, x_i))`` is within ``1e-12``
(relative) of the smallest: ``sqrt(nn_i) <= sqrt(lo) (1 + 1e-12)``. The compiled pass
(``_dense.h``'s ``skm_smallest``) tests the squares ``nn_i`` against the largest double whose
root passes instead of taking a root a row. These sets put one row's ``nn`` on each double
from a few below to a few above that edge, as the oldest row: it is ``m`` exactly when its
root passes. Oracle: :func:`streamk.budget.merge.merge_search` (NumPy's roots of every cost).
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk.budget import compiled
from streamk.budget.merge import merge_search
from streamk.kernels import RBF
from streamk.learners.support import SupportSet
from tests.test_policies_compiled import needs_compiled

#: The smallest coefficient (the newest row's, at the origin)
LIGHT = 0.8


def two_column_coef(target: float) -> np.ndarray:
    """Coefficients ``(c1, c2)`` with ``c1² + c2²`` (rounded as summed) exactly ``target``."""
    for j in range(1, 400):
        c1 = np.sqrt(target) * (1.0 - j * 1e-9)
        c2 = np.sqrt(target - c1 * c1)
        for c in (c2, np.nextafter(c2, 0.0), np.nextafter(c2, 1.0)):
            if 0.0 + c1 * c1 + c * c == target:
                return np.array([c1, c])
    raise AssertionError(f"no coefficients for {target!r}")


def edge_set(step: int) -> tuple[SupportSet, bool]:
    """A set whose oldest row's ``nn`` is ``step`` doubles from the edge of the tie with the
    lightest row, and whether NumPy's roots put it in the tie."""
    root = np.sqrt(LIGHT * LIGHT + 0.0) * (1.0 + 1e-12)
    edge = root * root
    while np.sqrt(np.nextafter(edge, np.inf)) <= root:
        edge = np.nextafter(edge, np.inf)
    while np.sqrt(edge) > root:
        edge = np.nextafter(edge, 0.0)
    target = edge
    for _ in range(abs(step)):
        target = np.nextafter(target, np.inf if step > 0 else 0.0)
    rng = np.random.default_rng(abs(step))
    s = SupportSet(RBF(gamma=0.5), n_outputs=2)
    s.append(np.array([1.0, 0.0]), two_column_coef(target))  # the oldest
    for _ in range(10):
        s.append(rng.normal(size=2) * 3.0, rng.normal(size=2) + 2.0)
    s.append(np.zeros(2), np.array([LIGHT, 0.0]))  # the lightest, newest
    return s, bool(np.sqrt(target) <= root)


@needs_compiled
@pytest.mark.parametrize("step", range(-4, 5))
def test_the_edge_of_a_cost_tie_to_the_last_bit(step):
    """``m`` is the oldest row exactly where its cost's root passes the tie, as NumPy's."""
    s, tied = edge_set(step)
    m, n, h = compiled.compiled_merge_search(s, 0.5)
    m_ref, n_ref, h_ref = merge_search(s, 0.5)
    assert (m, n) == (m_ref, n_ref)
    assert h == pytest.approx(h_ref, abs=1e-12)
    assert m == (0 if tied else len(s) - 1)


def test_both_sides_of_the_edge_are_covered():
    """The steps put the oldest row in the tie and out of it (the test above can fail)."""
    assert {edge_set(step)[1] for step in range(-4, 5)} == {True, False}
