"""The lower bounds by which Merge's compiled search rules partners out, against the oracle.

``_merge.pxi``'s ``_loss_bounds`` (``_policies.merge_bounds``) bounds each candidate's loss
``mm + nn + 2 e^-u mn - max_h f(h)`` from below without searching ``h``; the search drops a
candidate whose bound exceeds a loss already reached, so a bound above the true loss could
change the pick. Oracle: ``tests.test_merge_search.oracle``, the best of 100 001 points of
``f`` polished in long double (independent of both searches). Candidates add to that file's
kinds the far ones (``u`` up to 1e5: powers of ``e^-u`` that underflow), those around the
bifurcation ``u = 2`` (where the arc's inflection meets ``h = 1/2``) and partners lighter
than ``m`` (``nn < mm``: the bound over both halves of ``[0, 1]``).
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk.budget import compiled
from tests.test_merge_search import KINDS, candidates, oracle
from tests.test_policies_compiled import needs_compiled


def cases(kind: str, seed: int) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """``(u, mm, nn, mn)`` of 24 candidates of ``kind``."""
    rng = np.random.default_rng(seed)
    base = "random" if kind in ("far", "bifurcation", "lighter") else kind
    u, mm, nn, mn = candidates(base, 24, seed)
    if kind == "far":
        u = np.exp(rng.uniform(np.log(50.0), np.log(1e5), len(u)))
    elif kind == "bifurcation":
        u = rng.uniform(1.9, 2.6, len(u))
    elif kind == "lighter":  # the partner lighter than m, same correlations
        scale = rng.uniform(0.05, 0.9, len(u)) * mm / nn
        nn, mn = nn * scale, mn * np.sqrt(scale)
    return u, mm, nn, mn


def losses(u, mm, nn, mn) -> np.ndarray:
    """The oracle's loss of every candidate."""
    best = np.array([oracle(u[i], mm, nn[i], mn[i])[1] for i in range(len(u))])
    return mm + nn + 2.0 * np.exp(-u) * mn - best


ALL_KINDS = KINDS + ["far", "bifurcation", "lighter"]


@needs_compiled
@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("kind", ALL_KINDS)
def test_bounds_never_exceed_the_oracles_loss(kind, seed):
    """A bound above a candidate's loss (beyond rounding) could rule the winner out."""
    u, mm, nn, mn = cases(kind, seed)
    lb = compiled.policies.merge_bounds(u, nn, mn, mm)
    loss = losses(u, mm, nn, mn)
    over = lb - loss
    assert np.all(over <= 1e-12 * (mm + nn)), (u[np.argmax(over)], over.max())


@needs_compiled
@pytest.mark.parametrize("kind", ALL_KINDS)
def test_bounds_lie_within_two_hundredths_of_the_loss(kind):
    """Where ``nn >= mm`` (every merge of an RBF set: ``m`` has the smallest norm) the bound
    is within 2% of ``mm + nn`` of the loss, so that it rules most partners out (a box
    around the arc alone misses by up to 70%)."""
    u, mm, nn, mn = cases(kind, 0)
    lb = compiled.policies.merge_bounds(u, nn, mn, mm)
    heavier = nn >= mm
    if kind == "lighter":
        assert not heavier.any()
        return
    gap = (losses(u, mm, nn, mn) - lb)[heavier] / (mm + nn[heavier])
    assert gap.max() <= 0.02, (u[heavier][np.argmax(gap)], gap.max())


@needs_compiled
def test_coinciding_and_single_candidates():
    """``u = 0`` (a duplicate row: the loss is 0 at any ``h``) and no candidates at all."""
    bounds = compiled.policies.merge_bounds
    lb = bounds(np.zeros(2), np.array([1.0, 2.0]), np.array([0.5, -1.0]), 1.0)
    assert np.all(lb <= 1e-15)
    assert bounds(np.zeros(0), np.zeros(0), np.zeros(0), 1.0).shape == (0,)
