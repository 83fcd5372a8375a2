"""Merge's search for ``h`` against a brute-force oracle, and the compiled search against NumPy's.

Oracle (written here, not the code's formulas): the kept weight
``f(h) = mm e^(-2u(1-h)²) + nn e^(-2uh²) + 2 mn e^(-u((1-h)² + h²))`` evaluated on 100 001
points of ``[0, 1]``; the best point is polished by Newton's method in long double on the
derivative written out below, within 0.01 of it. Candidates cover the hard
cases: equal coefficients (a symmetric objective, bimodal for ``u > 2``), opposite signs
(the maximum at an end), ``k(x_m, x_n) = e^-u`` near 0 (far apart vectors) and near 1 (near
duplicates), and random mixtures with multi-output dot products. The compiled search
(``streamk/budget/_merge.pxi``) must make the NumPy search's pick and ``h`` to rounding while
it rules candidates out by its bounds.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk.budget import compiled
from streamk.budget.merge import best_h, merge_search
from streamk.kernels import RBF
from streamk.learners.support import SupportSet
from tests.test_policies_compiled import needs_compiled

LD = np.longdouble


def _parts(x, u, mm, nn, mn):
    """``(f, f', f'')`` at ``x`` from the three Gaussians' exponents (long double)."""
    A = np.exp(-2 * u * (1 - x) ** 2)
    B = np.exp(-2 * u * x**2)
    P = np.exp(-u * ((1 - x) ** 2 + x**2))
    f = mm * A + nn * B + 2 * mn * P
    d1 = 4 * u * (mm * (1 - x) * A - nn * x * B) - 2 * mn * u * (4 * x - 2) * P
    d2 = mm * A * (16 * u**2 * (1 - x) ** 2 - 4 * u) + nn * B * (16 * u**2 * x**2 - 4 * u)
    return f, d1, d2 + 2 * mn * P * (u**2 * (4 * x - 2) ** 2 - 4 * u)


def oracle(u: float, mm: float, nn: float, mn: float) -> tuple[float, float]:
    """``(h*, f(h*))``: the best of 100 001 points, polished in long double within 0.01 of
    it (near duplicates make ``f`` flat below rounding between neighbouring points)."""
    H = np.linspace(0.0, 1.0, 100_001)
    f = _parts(H.astype(LD), LD(u), LD(mm), LD(nn), LD(mn))[0]
    i = int(np.argmax(f))
    lo, hi = LD(H[max(i - 1000, 0)]), LD(H[min(i + 1000, len(H) - 1)])
    x, args = LD(H[i]), (LD(u), LD(mm), LD(nn), LD(mn))
    for _ in range(40):
        _, d1, d2 = _parts(x, *args)
        if d2 >= 0:
            break
        x = min(max(x - d1 / d2, lo), hi)
    return float(x), float(_parts(x, *args)[0])


def candidates(kind: str, k: int, seed: int) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """``(u, mm, nn, mn)`` for ``k`` partners of one merged vector (``gamma = 1``)."""
    rng = np.random.default_rng(seed)
    mm = float(rng.uniform(0.2, 2.0))
    nn = rng.uniform(0.05, 3.0, k)
    corr = rng.uniform(-1.0, 1.0, k)
    u = np.exp(rng.uniform(np.log(1e-4), np.log(700.0), k))
    if kind == "equal":  # the symmetric objective around its bifurcation at u = 2 and beyond
        u = np.concatenate([rng.uniform(1.0, 4.0, k // 2), rng.uniform(4.0, 60.0, k - k // 2)])
        return u, mm, np.full(k, mm), np.full(k, mm)
    if kind == "opposite":
        corr = -rng.uniform(0.3, 1.0, k)
    elif kind == "kappa0":  # e^-u below 1e-13
        u = rng.uniform(30.0, 700.0, k)
    elif kind == "kappa1":  # e^-u above 0.99
        u = np.exp(rng.uniform(np.log(1e-7), np.log(1e-2), k))
    return u, mm, nn, corr * np.sqrt(mm * nn)


KINDS = ["random", "equal", "opposite", "kappa0", "kappa1"]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", KINDS)
def test_best_h_finds_the_oracles_maximum(kind, seed):
    """The weight kept is the oracle's maximum to rounding and ``h`` its maximiser to
    1e-12; a symmetric objective's two maxima are a tie, taken at the smaller ``h``."""
    u, mm, nn, mn = candidates(kind, 60, seed)
    h, w = best_h(u, 1.0, mm, nn, mn)
    for i in range(len(u)):
        h_star, f_star = oracle(u[i], mm, nn[i], mn[i])
        assert w[i] == pytest.approx(f_star, rel=1e-13), (u[i], nn[i], mn[i])
        if kind == "equal":
            assert h[i] <= 0.5 + 1e-12
            h_star = min(h_star, 1.0 - h_star)
            if abs(u[i] - 2.0) < 0.05:  # a quartic maximum: h is conditioned as eps^(1/4)
                continue
        assert h[i] == pytest.approx(h_star, abs=1e-12), (u[i], nn[i], mn[i])


SYMMETRIC_U = [2.005, 2.01, 2.03, 2.05, 2.5, 5.0, 30.0]


def test_a_symmetric_objective_takes_the_smaller_of_its_two_maxima():
    """Equal coefficients past the bifurcation (``u > 2``): ``h = 1/2`` is a minimum between
    two equal maxima; just past it the best grid point is the centre itself, where the slope
    is zero, and the search must go to the smaller ``h`` whatever rounding says."""
    u = np.array(SYMMETRIC_U)
    for c in (1.0, 0.37):
        h, w = best_h(u, 1.0, c, np.full(len(u), c), np.full(len(u), c))
        for i in range(len(u)):
            h_star, f_star = oracle(u[i], c, c, c)
            assert h[i] < 0.5 and w[i] == pytest.approx(f_star, rel=1e-13)
            assert h[i] == pytest.approx(min(h_star, 1.0 - h_star), abs=1e-6)


def test_maxima_at_an_end_are_the_end_itself():
    """Opposite signs (``mn < -e^-u`` times the lighter norm): the weight falls from the
    heavier vector's end, and ``h`` is exactly that end (the merged vector is its row)."""
    u = np.array([0.5, 3.0, 40.0, 0.5, 3.0])
    nn = np.array([4.0, 4.0, 4.0, 0.01, 0.01])
    mn = np.array([-1.0, -1.9, -0.5, -0.09, -0.05])
    h, w = best_h(u, 1.0, 1.0, nn, mn)
    assert h.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    for i in range(len(u)):
        assert w[i] == pytest.approx(oracle(u[i], 1.0, nn[i], mn[i])[1], rel=1e-13)


def test_coinciding_vectors_keep_the_first_grid_point():
    """``u = 0``: every ``h`` is the same merge; the search keeps ``h = 0`` (no steps)."""
    h, w = best_h(np.zeros(3), 1.0, 1.0, np.array([1.0, 2.0, 0.5]), np.array([1.0, -0.3, 0.2]))
    assert h.tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(w, [4.0, 1.0 + 2.0 - 0.6, 1.0 + 0.5 + 0.4], rtol=1e-15)


def support_set(kind: str, n: int, n_outputs: int, seed: int) -> tuple[SupportSet, float]:
    """A set whose merges meet ``kind``'s objectives (see :func:`candidates`)."""
    rng = np.random.default_rng(seed)
    gamma = float(rng.choice([0.05, 0.5, 2.0, 20.0]))
    s = SupportSet(RBF(gamma=gamma), n_outputs=n_outputs)
    centres = rng.normal(scale=3.0, size=(4, 3))  # clusters: near and far partners at once
    for i in range(n):
        row = centres[i % 4] + rng.normal(scale=0.5, size=3)
        coef = rng.normal(size=n_outputs)
        if kind == "equal":  # a novelty detector's coefficients
            coef = np.ones(n_outputs)
        elif kind == "opposite":
            coef = np.abs(coef) * (1.0 if i % 2 else -1.0)
        elif kind == "kappa1" and i % 3 == 0 and i:  # near duplicates of earlier rows
            row = s.X[i - 1] + rng.normal(scale=1e-5, size=3)
        s.append(row, coef * (0.5 if i == n // 2 else 1.0))
    return s, gamma


@needs_compiled
@pytest.mark.parametrize("u", SYMMETRIC_U)
def test_compiled_search_breaks_a_symmetric_tie_as_numpy_does(u):
    """A novelty detector's equal coefficients with the nearest partner at ``gamma d2 = u``
    (the others far): both searches merge at the smaller of the two maxima."""
    s = SupportSet(RBF(gamma=0.5))
    for row in ([0.0, 0.0], [np.sqrt(u / 0.5), 0.0], [9.0, 9.0], [-9.0, 9.0], [9.0, -9.0]):
        s.append(np.array(row), np.ones(1))
    m, n, h = compiled.compiled_merge_search(s, 0.5)
    assert (m, n) == merge_search(s, 0.5)[:2] == (0, 1)
    assert h < 0.5 and h == pytest.approx(merge_search(s, 0.5)[2], abs=1e-9)


@needs_compiled
@pytest.mark.parametrize("n_outputs", [1, 3])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["random", "equal", "opposite", "kappa1"])
def test_compiled_search_makes_the_numpy_pick(kind, seed, n_outputs):
    """The same ``m`` and partner as the NumPy search over every candidate, ``h`` to 1e-12:
    the compiled bounds rule out only candidates that cannot win."""
    s, gamma = support_set(kind, int(np.random.default_rng(seed).integers(2, 160)), n_outputs, seed)
    m, n, h = compiled.compiled_merge_search(s, gamma)
    m_ref, n_ref, h_ref = merge_search(s, gamma)
    assert (m, n) == (m_ref, n_ref)
    assert h == pytest.approx(h_ref, abs=1e-12)
