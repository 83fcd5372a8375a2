"""String kernels against the book's worked values and brute-force feature maps.

The oracles enumerate each kernel's definition directly (every index vector, every
``u`` in ``alphabet ** p``) with plain loops; nothing here reuses the kernels' code.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk import kernels as K
from streamk.errors import ConfigError, InvalidInput
from streamk.kernels import (
    RBF,
    Constant,
    GapWeightedSubsequences,
    Mismatch,
    Normalized,
    Product,
    RestrictedGapWeighted,
    Spectrum,
    Sum,
    kernel_from_spec,
)
from streamk.kernels.strings import MAX_STRING_LENGTH

# -- brute-force feature maps ---------------------------------------------------------------------


def words(alphabet, p):
    return ["".join(w) for w in itertools.product(alphabet, repeat=p)]


def phi_gap(s, p, lam, max_gaps=None):
    """Def. of the (restricted) gap-weighted map: every index vector i, weight lam**span
    (restricted: span <= p + m, weight lam**(span - p))."""
    out = {}
    for idx in itertools.combinations(range(len(s)), p):
        span = idx[-1] - idx[0] + 1
        u = "".join(s[i] for i in idx)
        if max_gaps is None:
            out[u] = out.get(u, 0.0) + lam**span
        elif span - p <= max_gaps:
            out[u] = out.get(u, 0.0) + lam ** (span - p)
    return out


def phi_spectrum(s, p, alphabet):
    return {
        u: sum(1 for i in range(len(s) - p + 1) if s[i : i + p] == u) for u in words(alphabet, p)
    }


def phi_mismatch(s, k, m, alphabet):
    out = {}
    for u in words(alphabet, k):
        out[u] = sum(
            1 for i in range(len(s) - k + 1) if sum(a != b for a, b in zip(u, s[i : i + k])) <= m
        )
    return out


def dot(a, b):
    return math.fsum(v * b.get(u, 0.0) for u, v in a.items())


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


short = st.text(alphabet="abc", max_size=8)
dna = st.text(alphabet="acgt", max_size=9)
lams = st.floats(0.05, 1.0)


# -- the book's worked examples -------------------------------------------------------------------


@given(lams)
def test_gatta_cata_example_11_34(lam):
    expected = [6 * lam**2, lam**7 + 2 * lam**5 + 2 * lam**4, 2 * lam**7]
    for p, want in zip((1, 2, 3), expected):
        assert close(GapWeightedSubsequences(p, lam)("gatta", "cata"), want)


def test_gatta_cata_at_half_matches_the_catalogue():
    values = [GapWeightedSubsequences(p, 0.5)("gatta", "cata") for p in (1, 2, 3)]
    assert values == pytest.approx([1.5, 0.1953125, 0.015625], rel=1e-12)


def test_cat_car_bat_bar_tutorial_table():
    lam = 0.7
    k = GapWeightedSubsequences(2, lam)
    assert close(k("cat", "car"), lam**4)
    assert close(k("bat", "bar"), lam**4)
    assert k("cat", "bar") == 0.0
    assert close(k("cat", "cat"), 2 * lam**4 + lam**6)
    assert close(Normalized(k)("cat", "car"), 1 / (2 + lam**2))


def test_spectrum_and_mismatch_catalogue_values():
    assert Spectrum(3)("statistics", "computation") == 2
    assert Spectrum(3)("statistics", "pastapistan") == 3
    m = Mismatch(3, 1, "acgt")
    assert m("gattaca", "tacgat") == 38
    assert m("acgtacgt", "ttgca") == 24
    assert m("aaaa", "aaat") == 28


# -- brute force on random strings ---------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(short, short, st.integers(1, 4), lams)
def test_gap_weighted_equals_its_feature_map(s, t, p, lam):
    assert close(GapWeightedSubsequences(p, lam)(s, t), dot(phi_gap(s, p, lam), phi_gap(t, p, lam)))


@settings(max_examples=60, deadline=None)
@given(short, short, st.integers(1, 4))
def test_spectrum_equals_its_feature_map(s, t, p):
    want = dot(phi_spectrum(s, p, "abc"), phi_spectrum(t, p, "abc"))
    assert Spectrum(p)(s, t) == want


@settings(max_examples=40, deadline=None)
@given(dna, dna, st.integers(1, 4), st.integers(0, 2))
def test_mismatch_equals_its_feature_map(s, t, k, m):
    m = min(m, k)
    want = dot(phi_mismatch(s, k, m, "acgt"), phi_mismatch(t, k, m, "acgt"))
    assert Mismatch(k, m, "acgt")(s, t) == want


@settings(max_examples=60, deadline=None)
@given(short, short, st.integers(1, 4), st.integers(0, 3), lams)
def test_restricted_gap_weighted_equals_its_feature_map(s, t, p, m, lam):
    want = dot(phi_gap(s, p, lam, m), phi_gap(t, p, lam, m))
    assert close(RestrictedGapWeighted(p, m, lam)(s, t), want)


@settings(max_examples=20, deadline=None)
@given(short, short, st.integers(1, 3), lams)
def test_restricted_with_room_for_every_gap_is_the_full_kernel_rescaled(s, t, p, lam):
    # span <= p + m always holds when m >= len - p, and lam**(span-p) = lam**span / lam**p
    full = GapWeightedSubsequences(p, lam)(s, t) / lam ** (2 * p)
    assert close(RestrictedGapWeighted(p, 8, lam)(s, t), full)


# -- gram, diag, combinators, PSD ----------------------------------------------------------------

KERNELS = [
    GapWeightedSubsequences(2, 0.6),
    Spectrum(2),
    Mismatch(2, 1, "abc"),
    RestrictedGapWeighted(3, 1, 0.5),
    Normalized(Spectrum(3)),
    Normalized(GapWeightedSubsequences(3, 0.4)),
    Sum(Spectrum(1), Spectrum(2)),
    Product(Normalized(Spectrum(2)), RestrictedGapWeighted(2, 2, 0.8)),
    Sum(Spectrum(2), Constant(1.0)),
    2.5 * Mismatch(3, 1, "abc"),
]


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_gram_is_pairwise_calls_and_diag_its_diagonal(kernel):
    A = ["abcab", "", "ccc", "abcabcabc", "ba"]
    B = ["abc", "cab", "a"]
    G = kernel.gram(A, B)
    assert G.shape == (5, 3)
    for i, s in enumerate(A):
        for j, t in enumerate(B):
            assert close(G[i, j], kernel(s, t))
    assert np.allclose(kernel.diag(A), np.diag(kernel.gram(A, A)), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
@settings(max_examples=15, deadline=None)
@given(st.lists(st.text(alphabet="abc", max_size=10), min_size=2, max_size=12))
def test_gram_is_symmetric_psd(kernel, sample):
    G = kernel.gram(sample, sample)
    assert np.allclose(G, G.T, rtol=1e-12, atol=1e-12)
    scale = max(1.0, float(np.abs(G).max()))
    assert np.linalg.eigvalsh(G).min() >= -1e-9 * scale


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_spec_round_trip(kernel):
    back = kernel_from_spec(kernel.to_spec())
    assert back == kernel
    assert back("abcab", "cabb") == kernel("abcab", "cabb")


def test_names_are_public_from_streamk_and_kernels():
    import streamk

    for name in ("GapWeightedSubsequences", "Spectrum", "Mismatch", "RestrictedGapWeighted"):
        assert getattr(streamk, name) is getattr(K, name)


# -- bad input and bad parameters ----------------------------------------------------------------


@pytest.mark.parametrize(
    "kernel", [GapWeightedSubsequences(2, 0.5), Spectrum(2), Normalized(Spectrum(2))], ids=repr
)
@pytest.mark.parametrize(
    "bad, words_",
    [
        (3, "needs a str"),
        ([1.0, 2.0], "needs a str"),
        (None, "needs a str"),
        (b"\xff\xfe", "UTF-8"),
        ("a" * (MAX_STRING_LENGTH + 1), "longer than"),
    ],
)
def test_bad_strings_raise_invalid_input(kernel, bad, words_):
    with pytest.raises(InvalidInput, match=words_):
        kernel("abc", bad)
    with pytest.raises(InvalidInput, match=words_):
        kernel.gram(["abc"], [bad])


def test_utf8_bytes_are_text():
    assert Spectrum(2)("héllo".encode(), "héllo") == Spectrum(2)("héllo", "héllo")


def test_gram_wants_lists_not_a_bare_string():
    with pytest.raises(InvalidInput, match="list"):
        Spectrum(2).gram("abc", ["abc"])


def test_mismatch_refuses_symbols_outside_its_alphabet():
    with pytest.raises(InvalidInput, match="alphabet"):
        Mismatch(3, 1, "acgt")("acgt", "acgn")


@pytest.mark.parametrize(
    "make",
    [
        lambda: Spectrum(0),
        lambda: Spectrum(2.5),
        lambda: GapWeightedSubsequences(2, 0.0),
        lambda: GapWeightedSubsequences(2, 1.5),
        lambda: Mismatch(3, 4),
        lambda: Mismatch(3, 1, ""),
        lambda: Mismatch(3, 1, "aab"),
        lambda: RestrictedGapWeighted(2, -1, 0.5),
        lambda: Sum(Spectrum(2), RBF(1.0)),
    ],
)
def test_bad_parameters_raise_config_error(make):
    with pytest.raises(ConfigError):
        make()


def test_long_strings_skip_the_map_cache_and_agree_with_brute_force():
    from streamk.kernels.strings import CACHED_LENGTH

    rng = np.random.default_rng(0)
    s = "".join(rng.choice(list("ab"), CACHED_LENGTH + 500))
    t = "".join(rng.choice(list("ab"), 300))
    assert Spectrum(3)(s, t) == dot(phi_spectrum(s, 3, "ab"), phi_spectrum(t, 3, "ab"))
