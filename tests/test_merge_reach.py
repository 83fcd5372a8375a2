"""Merge's reach (``_dense.h``'s ``skm_reach``): the distance beyond which no partner can win.

Entry ``k`` of the table claims that every partner at ``u >= u_k = 2^(k/16 - 15)``
(``u = gamma d2``) whose ``||alpha_n||² = nn >= mm = ||alpha_m||²`` loses at least
``mm * table[k]``, whatever its coefficients; the compiled search rules out by one compare a
row the partners beyond the reach of the best loss so far. A table entry too high could rule
the winner out. Oracles: ``tests.test_merge_search.oracle`` (the best of 100 001 points of the
kept weight, polished in long double) on partners of every kind at and between the table's
points, the worst kind included (equal coefficients, and for ``u > 6`` a same-signed partner a
little heavier); and the least loss over all coefficients written out here in closed form in
``s = sqrt(nn / mm)``, minimised on a dense grid in ``h`` at 256 points an octave. The picks of
the compiled search on sets whose rows straddle the reach are the NumPy search's.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from streamk.budget import compiled
from streamk.budget.merge import best_h, merge_search
from streamk.kernels import RBF
from streamk.learners.support import SupportSet
from tests.test_merge_search import oracle
from tests.test_policies_compiled import needs_compiled

#: The table's points: ``u_k = 2^(k / PER_OCTAVE) * U0``
U0, PER_OCTAVE = 2.0**-15, 16


def reach_bound(table: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The table's bound at ``u``: its entry at the largest point ``u_k <= u`` (0 below the
    first point)."""
    k = np.floor(np.log2(np.asarray(u, dtype=float) / U0) * PER_OCTAVE + 1e-9).astype(int)
    k = np.minimum(k, len(table) - 1)
    return np.where(k >= 0, table[np.maximum(k, 0)], 0.0)


#: Partners ``(nn, mn)`` per unit ``mm``: equal coefficients (the least loss up to u ~ 6),
#: same-signed and a little or much heavier (the least beyond), orthogonal, opposite
PARTNERS = [(1.0, 1.0), (1.1, 1.1**0.5), (3.3, 3.3**0.5), (2.0, 0.0), (1.5, -(1.5**0.5))]


def oracle_points() -> np.ndarray:
    """``u`` at table points and between them, from near 0 to where the loss is all of ``mm``."""
    k = np.array([0, 40, 80, 120, 160, 176, 192, 200, 208, 212, 216, 220, 224, 232, 240, 256, 280])
    u = U0 * 2.0 ** (k / PER_OCTAVE)
    return np.concatenate([u, u[1:] * 2.0 ** (0.5 / PER_OCTAVE)])


@functools.lru_cache(maxsize=1)
def oracle_losses() -> tuple[np.ndarray, np.ndarray]:
    """``(u, loss / mm)`` of every partner of :data:`PARTNERS` at every :func:`oracle_points`
    (``mm = 0.7``)."""
    mm, us, rel = 0.7, [], []
    for u in oracle_points():
        for nn, mn in PARTNERS:
            f = oracle(float(u), mm, nn * mm, mn * mm)[1]
            us.append(u)
            rel.append((mm + nn * mm + 2.0 * np.exp(-u) * mn * mm - f) / mm)
    return np.array(us), np.array(rel)


def violations(table: np.ndarray) -> int:
    """How many of the oracle's partners lose less than the table says any can (beyond
    rounding)."""
    u, rel = oracle_losses()
    return int(np.sum(reach_bound(table, u) > rel + 1e-12))


@needs_compiled
def test_no_partner_loses_less_than_the_reach_says():
    """At and between the table's points, partners of every kind (the least losing among
    them) lose at least ``mm`` times the table's entry."""
    assert violations(compiled.policies.merge_reach()) == 0


@needs_compiled
def test_a_reach_one_hundredth_too_high_is_caught():
    """The table is tight where it matters: 1% higher, some partner loses less than it says
    (so the test above can fail)."""
    assert violations(compiled.policies.merge_reach() * 1.01) > 0


def least_loss(u: np.ndarray) -> np.ndarray:
    """``min`` over ``h in [0, 1/2]`` and ``s = sqrt(nn / mm) >= 1`` of the loss per ``mm`` at
    the worst ``mn = sqrt(mm nn)``: ``(1 - a²) + (1 - b²) s² - 2 (ab - e^-u) s``. A grid of 2
    001 points in ``h``, then 2 001 across the best point's neighbours (a grid's minimum is
    above the true one by its spacing squared: 1e-13 here)."""
    u = np.asarray(u, dtype=float)[:, None]

    def at(h):
        Q11 = -np.expm1(-2.0 * u * (1.0 - h) ** 2)
        Q22 = -np.expm1(-2.0 * u * h * h)
        C = np.exp(-u) * np.expm1(2.0 * u * h * (1.0 - h))
        s = np.maximum(C / np.where(Q22 > 0.0, Q22, 1.0), 1.0)
        s = np.where(Q22 > 0.0, s, 1.0)
        return Q11 + Q22 * s * s - 2.0 * C * s

    H = np.linspace(0.0, 0.5, 2001)[None, :]
    v = at(H)
    j = np.argmin(v, axis=1)[:, None]
    fine = np.clip(H[0, np.clip(j - 1, 0, 2000)] + np.linspace(0.0, 0.0005, 2001)[None, :], 0, 0.5)
    return np.minimum(v.min(axis=1), at(fine).min(axis=1))


@needs_compiled
def test_the_reach_lies_below_the_least_loss_everywhere():
    """At 256 points an octave from the first table point to ``u = 32`` (between the table's
    points too: the least loss rises with ``u``) the table's bound is under the least loss
    of any partner, and within 5% of it at the table's own points up to ``u = 4``."""
    table = compiled.policies.merge_reach()
    u = U0 * 2.0 ** (np.arange(20 * 256 + 1) / 256)
    L = least_loss(u)
    assert np.all(reach_bound(table, u) <= L * (1.0 + 1e-12))
    at = u[::16][u[::16] <= 4.0]
    assert np.all(reach_bound(table, at) >= 0.95 * least_loss(at))


@needs_compiled
@pytest.mark.parametrize("mm", [1e-6, 0.3, 2.0])
@pytest.mark.parametrize("frac", [0.0, 1e-6, 0.05, 0.5, 0.9, 0.99])
def test_the_reach_of_a_loss(mm, frac):
    """``skm_reach_at``: ``u1`` is the first table point whose bound beats ``best`` by the
    search's margin ``1e-9 (mm + nn)``, and for every ``nn`` in ``[mm, cap1]``; ``u2`` the
    point an octave farther (or the last), whose bound beats it for every ``nn`` up to
    ``cap2``."""
    table = compiled.policies.merge_reach()
    best = frac * mm
    found = compiled.policies.merge_reach_at(mm, best)
    assert found is not None
    u1, cap1, u2, cap2 = found
    k = int(round(np.log2(u1 / U0) * PER_OCTAVE))
    assert u1 == pytest.approx(U0 * 2.0 ** (k / PER_OCTAVE), rel=1e-15)
    assert mm * table[k] > best + 1e-9 * (mm + cap1) and cap1 >= mm
    assert k == 0 or mm * table[k - 1] <= best + 2e-9 * mm
    far = min(k + PER_OCTAVE, len(table) - 1)
    assert u2 == pytest.approx(U0 * 2.0 ** (far / PER_OCTAVE), rel=1e-15)
    assert mm * table[far] > best + 1e-9 * (mm + cap2) and cap2 >= cap1


@needs_compiled
@pytest.mark.parametrize("best", [1.0, 1.5, np.inf, np.nan])
def test_no_reach_where_the_best_loses_all_of_m(best):
    """A best loss of ``mm`` or more (or none) leaves every partner in reach."""
    assert compiled.policies.merge_reach_at(1.0, best) is None
    assert compiled.policies.merge_reach_at(0.0, 0.0) is None


def equal_loss_at(target: float) -> float:
    """``u`` at which two equal coefficients lose ``target`` per ``mm`` (the least loss:
    ``2 (1 - e^-u/2)²`` up to ``u = 2``; bisection on :func:`least_loss` beyond)."""
    if target <= 2.0 * (1.0 - np.exp(-1.0)) ** 2:
        return float(-2.0 * np.log1p(-np.sqrt(target / 2.0)))
    lo, hi = 2.0, 64.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if least_loss(np.array([mid]))[0] < target else (lo, mid)
    return lo


def reach_set(seed: int, n_outputs: int) -> tuple[SupportSet, float]:
    """A set whose winner lies just inside the reach of the first loss found: ``m`` (the
    lightest) at the origin, its nearest partner heavier and of the opposite sign (a loss
    ``B`` of a tenth to nine tenths of ``mm``), partners a little heavier than ``m`` (nearly
    the least loss there is) at the ``u`` where equal coefficients lose ``B`` less 5% (the
    winner), 1% and 0.1% and just beyond it, partners of the opposite sign nearer, rows of
    random coefficients from 1.2 times the winner's ``u`` to 50, a few far heavier than the
    margin's cap (never ruled out by distance) and exact copies of rows (equal losses: the
    first slot wins)."""
    rng = np.random.default_rng(seed)
    gamma, d = 0.5, 3

    def at(u: float) -> np.ndarray:
        x = rng.normal(size=d)
        return x * np.sqrt(u / gamma) / np.linalg.norm(x)

    base = rng.normal(size=n_outputs)
    base *= 0.5 / np.linalg.norm(base)
    mm = float(base @ base)
    while True:
        u0, k = rng.uniform(0.05, 0.4), rng.uniform(1.0, 3.0)
        w = best_h(np.array([u0 / gamma]), gamma, mm, np.array([k * k * mm]), np.array([-k * mm]))
        loss = (mm + k * k * mm - 2.0 * np.exp(-u0) * k * mm - w[1][0]) / mm
        if 0.1 < loss < 0.9 and equal_loss_at(0.95 * loss) > 1.01 * u0:
            break
    s = SupportSet(RBF(gamma=gamma), n_outputs=n_outputs)
    s.append(np.zeros(d), base)
    s.append(at(u0), -k * base)
    rows, near = [], []
    for frac in (0.95, 0.99, 0.999, 1.001, 1.05):  # the first the winner
        near.append(equal_loss_at(loss * frac))
        rows.append((at(near[-1]), base * (1.0 + rng.uniform(1e-4, 1e-3))))
    for i in range(int(rng.integers(20, 100))):
        if i % 4 == 0:  # inside the reach: lighter than the nearest's coefficient of its sign
            u = rng.uniform(1.01 * u0, near[0])
            rows.append((at(u), -base * rng.uniform(k, 3.0)))
            continue
        u = np.exp(rng.uniform(np.log(1.2 * near[0]), np.log(50.0)))
        other = rng.normal(size=n_outputs)
        other *= rng.uniform(0.5, 3.0) / np.linalg.norm(other)
        rows.append((at(u), base * 1e5 if i % 10 == 2 else other))
    for j in rng.permutation(len(rows)):
        s.append(*rows[j])
        if j % 7 == 3:  # an exact copy in a later slot
            s.append(rows[j][0].copy(), rows[j][1].copy())
    return s, gamma


def seed_reach(s: SupportSet, gamma: float, m: int) -> tuple[float, float] | None:
    """``skm_reach_at`` of the nearest partner's loss (the search's first ``best``), NumPy."""
    X, C, sq = s.X, s.coef, s.sqnorm
    u = gamma * np.maximum(sq + sq[m] - 2.0 * (X @ X[m]), 0.0)
    u[m] = np.inf
    j = int(np.argmin(u))
    mm, nn, mn = float(C[m] @ C[m]), float(C[j] @ C[j]), float(C[j] @ C[m])
    w = best_h(np.array([u[j] / gamma]), gamma, mm, np.array([nn]), np.array([mn]))[1][0]
    return compiled.policies.merge_reach_at(mm, mm + nn + 2.0 * np.exp(-u[j]) * mn - w)


@needs_compiled
@pytest.mark.parametrize("n_outputs", [1, 3])
@pytest.mark.parametrize("seed", range(12))
def test_compiled_search_makes_the_numpy_pick_across_the_reach(seed, n_outputs):
    """The same ``m`` and partner as the NumPy search over every candidate, ``h`` to 1e-12,
    on sets where the reach rules some rows out and leaves others just inside it."""
    s, gamma = reach_set(seed, n_outputs)
    m, n, h = compiled.compiled_merge_search(s, gamma)
    m_ref, n_ref, h_ref = merge_search(s, gamma)
    assert (m, n) == (m_ref, n_ref)
    assert h == pytest.approx(h_ref, abs=1e-12)
    reach = seed_reach(s, gamma, m_ref)
    assert reach is not None
    X, sq = s.X, s.sqnorm
    u = gamma * np.maximum(sq + sq[m] - 2.0 * (X @ X[m]), 0.0)
    assert 0 < np.sum(u >= reach[0]) < len(u) - 2  # rows on both sides of it
    assert 0.8 * reach[0] < u[n] < reach[0]  # the winner just inside it


def novelty_set(seed: int) -> tuple[SupportSet, float]:
    """A novelty detector's set: equal coefficients but for merged rows two to eight times
    heavier, and ``m`` (the oldest of the lightest) with a near duplicate (``u = 1e-4``), so
    that the best loss is about the margin and only the reach's second level (an octave
    farther, up to a far larger ``nn``) rules the heavier rows out; the others are at least
    ``u = 2e-4`` away (losses above rounding)."""
    rng = np.random.default_rng(seed)
    gamma = 0.5
    s = SupportSet(RBF(gamma=gamma))
    s.append(np.zeros(2), np.ones(1))
    near = rng.normal(size=2)
    s.append(near / np.linalg.norm(near) * np.sqrt(1e-4 / gamma), np.ones(1))  # u = 1e-4
    for i in range(int(rng.integers(30, 120))):
        x = rng.normal(size=2)
        x *= np.exp(rng.uniform(np.log(0.02), np.log(5.0))) / np.linalg.norm(x)
        s.append(x, np.ones(1) * (rng.uniform(2.0, 8.0) if i % 3 == 0 else 1.0))
    return s, gamma


@needs_compiled
@pytest.mark.parametrize("seed", range(8))
def test_compiled_search_makes_the_numpy_pick_on_a_novelty_set(seed):
    """The same pick as NumPy's where the best loss is about 0, and heavier rows lie between
    the reach's two levels (ruled out by the second alone)."""
    s, gamma = novelty_set(seed)
    m, n, h = compiled.compiled_merge_search(s, gamma)
    m_ref, n_ref, h_ref = merge_search(s, gamma)
    assert (m, n) == (m_ref, n_ref)
    assert h == pytest.approx(h_ref, abs=1e-12)
    u1, cap1, u2, cap2 = seed_reach(s, gamma, m_ref)
    X, C, sq = s.X, s.coef, s.sqnorm
    u = gamma * np.maximum(sq + sq[m] - 2.0 * (X @ X[m]), 0.0)
    nn = np.einsum("ij,ij->i", C, C)
    assert np.any((u >= u2) & (nn > cap1) & (nn <= cap2))
