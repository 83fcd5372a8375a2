"""The gap-weighted family's pair kernel by its dynamic programme: O(p |s| |t|) a pair.

A pair used to go through the dense closed form ``DPS_{l+1} = M * (P DPS_l Q^T)`` with
``|s| x |s|`` and ``|t| x |t|`` decay matrices: O(p (|s|^2 |t| + |s| |t|^2)) time and
O(|s|^2 + |t|^2) memory (a 4,000-character pair of ``GapNumberWeightedSubsequences``
took 0.73 GB). Beyond ``DENSE_MAX`` characters the Alg. 11.38/11.40/11.41 family now runs
the recursion of Code Fragment 11.3 along anti-diagonals (``subsequence_dp``), and
Alg. 11.42 (gap number) always goes by shifts and prefix sums in row blocks
(``gap_number_levels``).

Oracles: the brute-force feature maps of tests/test_string_kernels.py and
tests/test_string_variants.py (every index vector enumerated), with the dynamic
programme forced on short strings; the closed form written out plainly here (its
matrices built from their definitions with loops) on long strings, to 1e-12 relative;
the book's gatta/cata values. Memory is measured with ``tracemalloc`` (no timing).
"""

from __future__ import annotations

import contextlib
import math
import random
import tracemalloc
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk.kernels import (
    CharacterWeightedSubsequences,
    GapNumberWeightedSubsequences,
    GapWeightedSubsequences,
    SoftMatchingSubsequences,
)
from streamk.kernels import strings as S
from tests.test_string_kernels import phi_gap
from tests.test_string_variants import (
    close,
    dot,
    lams,
    phi_character_weighted,
    phi_gap_number,
    phi_soft,
    random_psd,
    short,
    weights,
)


@contextlib.contextmanager
def dp_only() -> Iterator[None]:
    """Every pair through the dynamic programme, however short (a context, not a fixture:
    hypothesis runs many inputs in one test call)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "DENSE_MAX", 0)
        yield


# -- the dynamic programme against brute force ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(s=short, t=short, p=st.integers(1, 4), lam=lams)
def test_gap_weighted_dp_equals_its_feature_map(s, t, p, lam):
    want = dot(phi_gap(s, p, lam), phi_gap(t, p, lam))
    with dp_only():
        assert close(GapWeightedSubsequences(p, lam)(s, t), want)


@settings(max_examples=60, deadline=None)
@given(short, short, st.integers(1, 4), weights, weights, lams, st.floats(0.1, 2.0))
def test_character_weighted_dp_equals_its_feature_map(s, t, p, gap, match, dg, dm):
    k = CharacterWeightedSubsequences(p, gap, match, dg, dm)
    a = phi_character_weighted(s, p, gap, match, dg, dm)
    b = phi_character_weighted(t, p, gap, match, dg, dm)
    with dp_only():
        assert close(k(s, t), dot(a, b))


@settings(max_examples=40, deadline=None)
@given(short, short, st.integers(1, 3), lams, st.integers(0, 2**31 - 1))
def test_soft_matching_dp_equals_its_feature_map(s, t, p, lam, seed):
    A = random_psd(np.random.default_rng(seed), 3)
    k = SoftMatchingSubsequences(p, lam, "abc", A)
    want = dot(phi_soft(s, p, lam, "abc", A), phi_soft(t, p, lam, "abc", A))
    with dp_only():
        assert math.isclose(k(s, t), want, rel_tol=1e-7, abs_tol=1e-10)


@settings(max_examples=60, deadline=None)
@given(short, short, st.integers(1, 4), lams, st.integers(1, 5))
def test_gap_number_levels_equal_its_feature_map_in_any_block_size(s, t, p, lam, cells):
    want = dot(phi_gap_number(s, p, lam), phi_gap_number(t, p, lam))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "_BLOCK_CELLS", cells)  # blocks of one row and more
        assert close(GapNumberWeightedSubsequences(p, lam)(s, t), want)


@pytest.mark.parametrize("lam", [0.3, 0.5, 1.0])
def test_the_book_gatta_cata_values_by_the_dp(lam):
    want = [6 * lam**2, lam**7 + 2 * lam**5 + 2 * lam**4, 2 * lam**7]
    got = S.subsequence_dp(S._codes("gatta"), S._codes("cata"), 3, lam, lam, lam * lam)
    assert got.tolist() == pytest.approx(want, rel=1e-14)


# -- long strings against the closed form, written out plainly --------------------------------


def closed_form(M: np.ndarray, gs: list[float], gt: list[float], p: int) -> float:
    """``kappa_p = sum DPS_p`` with ``DPS_{l+1} = M * (P DPS_l Q^T)``, ``P[i, i']`` the
    product of the gap weights strictly between ``i'`` and ``i`` (Alg. 11.40)."""

    def stretch(g: list[float]) -> np.ndarray:
        n = len(g)
        P = np.zeros((n, n))
        for i in range(n):
            for k in range(i):
                P[i, k] = math.prod(g[k + 1 : i])
        return P

    P, Q = stretch(gs), stretch(gt)
    dps = M
    for _ in range(p - 1):
        dps = M * (P @ dps @ Q.T)
    return float(dps.sum())


def gap_number_closed_form(s: str, t: str, p: int, lam: float) -> float:
    def stretch(n: int) -> np.ndarray:
        P = np.zeros((n, n))
        for i in range(n):
            for k in range(i):
                P[i, k] = 1.0 if k == i - 1 else lam
        return P

    M = np.array([[float(a == b) for b in t] for a in s])
    P, Q = stretch(len(s)), stretch(len(t))
    dps = M
    for _ in range(p - 1):
        dps = M * (P @ dps @ Q.T)
    return float(dps.sum())


def _text(rng: random.Random, n: int, alphabet: str = "acgt") -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


SIZES = [(1, 200), (200, 1), (3, 260), (150, 300), (300, 150), (257, 257)]
SIM = [[1.0, 0.3, -0.2, 0.1], [0.3, 1.0, 0.2, 0.0], [-0.2, 0.2, 1.0, 0.4], [0.1, 0.0, 0.4, 1.0]]


@pytest.mark.parametrize("n, m", SIZES)
def test_long_pairs_equal_the_closed_form(n, m):
    rng = random.Random(n * 1000 + m)
    s, t = _text(rng, n), _text(rng, m)
    assert max(n, m) > S.DENSE_MAX  # the dynamic programme runs
    eq = np.array([[float(a == b) for b in t] for a in s])

    for p, lam in [(2, 0.5), (3, 0.9), (4, 0.1)]:
        got = GapWeightedSubsequences(p, lam)(s, t)
        want = closed_form(lam * lam * eq, [lam] * n, [lam] * m, p)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-300)

    gap, match = {"a": 0.2, "c": 0.9}, {"g": 1.7}
    k = CharacterWeightedSubsequences(3, gap, match, 0.6, 0.8)
    ms = np.array([match.get(c, 0.8) ** 2 for c in s])
    want = closed_form(
        eq * ms[:, None], [gap.get(c, 0.6) for c in s], [gap.get(c, 0.6) for c in t], 3
    )
    assert k(s, t) == pytest.approx(want, rel=1e-12, abs=1e-300)

    k = SoftMatchingSubsequences(3, 0.7, "acgt", SIM)
    A = np.array(SIM)
    M = 0.49 * np.array([[A["acgt".index(a), "acgt".index(b)] for b in t] for a in s])
    want = closed_form(M, [0.7] * n, [0.7] * m, 3)
    assert k(s, t) == pytest.approx(want, rel=1e-12, abs=1e-300)

    for p, lam in [(2, 0.5), (3, 0.01), (3, 1.0)]:
        got = GapNumberWeightedSubsequences(p, lam)(s, t)
        assert got == pytest.approx(gap_number_closed_form(s, t, p, lam), rel=1e-12, abs=1e-300)


def test_the_numpy_rows_take_the_dp_for_long_strings(monkeypatch):
    monkeypatch.setattr(S, "compiled", None)
    rng = random.Random(4)
    A, B = [_text(rng, 300)], [_text(rng, 180), _text(rng, 20), ""]
    k = GapWeightedSubsequences(2, 0.5)
    eq = [np.array([[float(a == b) for b in t] for a in A[0]]) for t in B]
    want = [
        closed_form(0.25 * e, [0.5] * 300, [0.5] * len(t), 2) if t else 0.0 for e, t in zip(eq, B)
    ]
    np.testing.assert_allclose(k.gram(A, B)[0], want, rtol=1e-12, atol=0)


# -- memory ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kernel",
    [
        GapWeightedSubsequences(2, 0.5),
        CharacterWeightedSubsequences(2, {"a": 0.3}),
        SoftMatchingSubsequences(2, 0.5, "acgt"),
        GapNumberWeightedSubsequences(2, 0.5),
    ],
    ids=repr,
)
def test_a_long_pair_needs_memory_linear_in_its_length(kernel):
    n = 3000  # one dense decay matrix alone would be 72 MB
    s, t = ("acgt" * n)[:n], ("acgt" * n)[1 : n + 1]
    tracemalloc.start()
    try:
        value = kernel(s, t)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value > 0
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MiB for a {n}-character pair"
