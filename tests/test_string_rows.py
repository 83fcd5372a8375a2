"""Compiled kernel rows (streamk/kernels/_strings.pyx) against the NumPy path.

``rows(A, B)`` computes each ``K(s, B)`` in one compiled call; ``use_compiled=False`` runs
the NumPy pair-by-pair path, itself checked against brute-force feature maps in
tests/test_string_kernels.py and tests/test_string_variants.py. The two must agree to
rounding on random strings, including empty ones and characters beyond ASCII.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk.kernels import (
    CharacterWeightedSubsequences,
    GapNumberWeightedSubsequences,
    GapWeightedSubsequences,
    Normalized,
    SoftMatchingSubsequences,
)
from streamk.kernels import strings as S

needs_compiled = pytest.mark.skipif(
    S.compiled is None, reason="streamk.kernels._strings not built (no C compiler)"
)
SIM = [[1.0, 0.6, 0.0, 0.1], [0.6, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.4], [0.1, 0.0, 0.4, 1.0]]
texts = st.lists(st.text(alphabet="acgé😀", max_size=14), min_size=1, max_size=6)
dna = st.lists(st.text(alphabet="acgt", max_size=14), min_size=1, max_size=6)


def agree(kernel, A, B):
    fast = kernel.rows(A, B)
    slow = kernel.rows(A, B, use_compiled=False)
    assert fast.shape == slow.shape == (len(A), len(B))
    np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-14)


@needs_compiled
@settings(max_examples=40, deadline=None)
@given(texts, texts, st.integers(1, 5), st.floats(0.05, 1.0))
def test_gap_weighted_rows_equal_the_numpy_path(A, B, p, lam):
    agree(GapWeightedSubsequences(p, lam), A, B)


@needs_compiled
@settings(max_examples=40, deadline=None)
@given(texts, texts, st.integers(1, 4), st.floats(0.05, 1.0), st.floats(0.1, 2.0))
def test_character_weighted_rows_equal_the_numpy_path(A, B, p, g, mu):
    agree(CharacterWeightedSubsequences(p, {"a": g, "é": 0.3}, {"c": mu, "😀": 1.7}), A, B)


@needs_compiled
@settings(max_examples=40, deadline=None)
@given(dna, dna, st.integers(1, 4), st.floats(0.05, 1.0))
def test_soft_matching_rows_equal_the_numpy_path(A, B, p, lam):
    agree(SoftMatchingSubsequences(p, lam, "acgt", SIM), A, B)


@needs_compiled
def test_gram_and_normalized_use_the_compiled_rows_with_the_same_values():
    A, B = ["gattaca", "", "cat"], ["cata", "gatta", "acgtacgt"]
    for k in (GapWeightedSubsequences(3, 0.5), Normalized(GapWeightedSubsequences(2, 0.7))):
        inner = k.kernel if isinstance(k, Normalized) else k
        G = k.gram(A, B)
        for i, s in enumerate(A):
            for j, t in enumerate(B):
                want = inner._pair(s, t)
                if isinstance(k, Normalized):
                    d = inner._pair(s, s) * inner._pair(t, t)
                    want = want / np.sqrt(d) if d > 0 else 0.0
                assert G[i, j] == pytest.approx(want, rel=1e-10, abs=1e-14)


def test_the_numpy_path_runs_without_the_compiled_module(monkeypatch):
    monkeypatch.setattr(S, "compiled", None)
    k = GapWeightedSubsequences(2, 0.5)
    assert k.gram(["gatta"], ["cata"])[0, 0] == pytest.approx(0.5**7 + 2 * 0.5**5 + 2 * 0.5**4)


def test_gap_number_weighting_has_no_compiled_form_and_uses_numpy():
    k = GapNumberWeightedSubsequences(2, 0.5)
    assert np.array_equal(k.rows(["axb"], ["ab", "axxb"]), k.rows(["axb"], ["ab", "axxb"], False))


@needs_compiled
def test_the_compiled_call_refuses_inconsistent_buffers():
    a = np.array([1, 2], dtype=np.uint32)
    g = np.ones(2)
    with pytest.raises(ValueError):
        S.compiled.subsequence_row(a, g, np.ones(1), a, g, np.array([0, 2]), 2)
    with pytest.raises(ValueError):
        S.compiled.subsequence_row(a, g, g, a, g, np.array([0, 3]), 2)
    with pytest.raises(ValueError, match="outside sim"):
        S.compiled.subsequence_row(a, g, g, a, g, np.array([0, 2]), 2, np.eye(2))
