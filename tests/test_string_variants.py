"""The gap-weighted variants (book Alg. 11.40-11.42) against brute-force feature maps.

Each oracle enumerates every index vector of a short random string and builds the
variant's feature map from its definition with plain loops; the soft-matching oracle
factors the symbol similarity ``A = B B^T`` and enumerates the tensor-product features.
Nothing here reuses the kernels' dynamic programme.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk.errors import ConfigError, InvalidInput
from streamk.kernels import (
    CharacterWeightedSubsequences,
    GapNumberWeightedSubsequences,
    GapWeightedSubsequences,
    Normalized,
    SoftMatchingSubsequences,
    kernel_from_spec,
)

short = st.text(alphabet="abc", max_size=7)
lams = st.floats(0.05, 1.0)
weights = st.dictionaries(st.sampled_from("abc"), st.floats(0.05, 1.0), max_size=3)


def dot(a, b):
    return math.fsum(v * b.get(u, 0.0) for u, v in a.items())


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def phi_character_weighted(s, p, gap, match, dg, dm):
    """Alg. 11.40's map: match weight per chosen character, gap weight per skipped one."""
    out = {}
    for idx in itertools.combinations(range(len(s)), p):
        u = "".join(s[i] for i in idx)
        w = 1.0
        for i in idx:
            w *= match.get(s[i], dm)
        for r in range(idx[0], idx[-1] + 1):
            if r not in idx:
                w *= gap.get(s[r], dg)
        out[u] = out.get(u, 0.0) + w
    return out


def phi_gap_number(s, p, lam):
    """Alg. 11.42's map: lam ** (number of gaps), whatever their lengths."""
    out = {}
    for idx in itertools.combinations(range(len(s)), p):
        u = "".join(s[i] for i in idx)
        gaps = sum(1 for a, b in zip(idx, idx[1:]) if b > a + 1)
        out[u] = out.get(u, 0.0) + lam**gaps
    return out


def phi_soft(s, p, lam, alphabet, A):
    """Alg. 11.41's map: with A = B B^T, phi_v(s) = sum_i lam**span prod_k B[s_{i_k}, v_k]."""
    w, V = np.linalg.eigh(np.array(A, dtype=float))
    B = V * np.sqrt(np.clip(w, 0.0, None))
    r = B.shape[1]
    out = {}
    for v in itertools.product(range(r), repeat=p):
        total = 0.0
        for idx in itertools.combinations(range(len(s)), p):
            term = lam ** (idx[-1] - idx[0] + 1)
            for i, c in zip(idx, v):
                term *= B[alphabet.index(s[i]), c]
            total += term
        out[v] = total
    return out


def random_psd(rng, n):
    X = rng.normal(size=(n, n - 1))  # rank n-1: singular, still PSD
    return (X @ X.T / n).tolist()


@settings(max_examples=60, deadline=None)
@given(short, short, st.integers(1, 4), weights, weights, lams, st.floats(0.1, 2.0))
def test_character_weighted_equals_its_feature_map(s, t, p, gap, match, dg, dm):
    k = CharacterWeightedSubsequences(p, gap, match, dg, dm)
    a = phi_character_weighted(s, p, gap, match, dg, dm)
    b = phi_character_weighted(t, p, gap, match, dg, dm)
    assert close(k(s, t), dot(a, b))


@settings(max_examples=60, deadline=None)
@given(short, short, st.integers(1, 4), lams)
def test_gap_number_weighted_equals_its_feature_map(s, t, p, lam):
    k = GapNumberWeightedSubsequences(p, lam)
    assert close(k(s, t), dot(phi_gap_number(s, p, lam), phi_gap_number(t, p, lam)))


@settings(max_examples=40, deadline=None)
@given(short, short, st.integers(1, 3), lams, st.integers(0, 2**31 - 1))
def test_soft_matching_equals_its_feature_map(s, t, p, lam, seed):
    A = random_psd(np.random.default_rng(seed), 3)
    k = SoftMatchingSubsequences(p, lam, "abc", A)
    want = dot(phi_soft(s, p, lam, "abc", A), phi_soft(t, p, lam, "abc", A))
    assert math.isclose(k(s, t), want, rel_tol=1e-7, abs_tol=1e-10)


def test_uniform_weights_and_identity_similarity_are_the_plain_kernel():
    for lam in (0.3, 0.8):
        plain = GapWeightedSubsequences(3, lam)
        cw = CharacterWeightedSubsequences(3, default_gap=lam, default_match=lam)
        soft = SoftMatchingSubsequences(3, lam, "acgt")
        for s, t in [("gatta", "cata"), ("acgtacg", "ttacgga")]:
            assert close(cw(s, t), plain(s, t))
            assert close(soft(s, t), plain(s, t))


def test_gap_number_counts_gaps_not_lengths():
    # "ab" in "axxxb" is one gap; so is "ab" in "axb": the same weight lam
    k = GapNumberWeightedSubsequences(2, 0.25)
    assert close(k("axxxb", "ab"), 0.25)
    assert close(k("axb", "ab"), 0.25)
    assert close(k("ab", "ab"), 1.0)


VARIANTS = [
    CharacterWeightedSubsequences(2, {"a": 0.9}, {"b": 1.5}, 0.4, 0.7),
    SoftMatchingSubsequences(3, 0.6, "abc", [[1.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 1.0]]),
    GapNumberWeightedSubsequences(3, 0.5),
    Normalized(GapNumberWeightedSubsequences(2, 0.3)),
]


@pytest.mark.parametrize("kernel", VARIANTS, ids=repr)
@settings(max_examples=15, deadline=None)
@given(st.lists(st.text(alphabet="abc", max_size=10), min_size=2, max_size=12))
def test_gram_is_symmetric_psd(kernel, sample):
    G = kernel.gram(sample, sample)
    assert np.allclose(G, G.T, rtol=1e-12, atol=1e-12)
    scale = max(1.0, float(np.abs(G).max()))
    assert np.linalg.eigvalsh(G).min() >= -1e-9 * scale


@pytest.mark.parametrize("kernel", VARIANTS, ids=repr)
def test_gram_diag_and_spec_round_trip(kernel):
    A, B = ["abcab", "", "ccc", "ba"], ["abc", "cab"]
    G = kernel.gram(A, B)
    assert G.shape == (4, 2)
    assert all(close(G[i, j], kernel(s, t)) for i, s in enumerate(A) for j, t in enumerate(B))
    assert np.allclose(kernel.diag(A), np.diag(kernel.gram(A, A)), rtol=1e-12, atol=0)
    back = kernel_from_spec(kernel.to_spec())
    assert back == kernel and back("abcab", "cabb") == kernel("abcab", "cabb")


def test_bad_similarity_and_weights_raise_config_error():
    with pytest.raises(ConfigError, match="positive semi-definite"):
        SoftMatchingSubsequences(2, 0.5, "ab", [[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ConfigError, match="symmetric"):
        SoftMatchingSubsequences(2, 0.5, "ab", [[1.0, 0.5], [0.0, 1.0]])
    with pytest.raises(ConfigError, match="2x2"):
        SoftMatchingSubsequences(2, 0.5, "ab", [[1.0]])
    with pytest.raises(ConfigError):
        CharacterWeightedSubsequences(2, gap={"ab": 0.5})
    with pytest.raises(ConfigError):
        CharacterWeightedSubsequences(2, gap={"a": 1.5})
    with pytest.raises(ConfigError):
        GapNumberWeightedSubsequences(0, 0.5)


def test_bad_strings_raise_invalid_input():
    soft = SoftMatchingSubsequences(2, 0.5, "ab")
    with pytest.raises(InvalidInput, match="alphabet"):
        soft("abz", "ab")
    for k in VARIANTS:
        with pytest.raises(InvalidInput):
            k(3, "ab")
        with pytest.raises(InvalidInput):
            k(b"\xff", "ab")
