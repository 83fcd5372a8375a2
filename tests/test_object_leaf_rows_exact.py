"""A restored string model computes the same kernel rows, to the bit, as the live one.

``LeafRows`` holds each support string's trie leaves as a padded row. The padded width is
history: a live set's is the widest row it ever held, a restored set's the widest it holds
now. A kernel value summed over the padded row grouped its terms by that width, so a
restored model's rows differed from the live model's in the last bit and the two drifted
apart as they learned on (``OnlineSVR`` under the Projectron: coefficients 1e-13 apart
after 1,500 more events). Each value now sums its row's own products only.

Oracles: the same rows stored at two padded widths give the same bits; every value is the
row's exactly rounded dot product (``math.fsum``) to rounding; and a model restored from
a snapshot learns on to the same coefficients (``==``) as the model that never stopped.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from streamk import KernelNovelty, MarginPerceptron, OnlineSVR, Projectron
from streamk.budget import compiled as compiled_policies
from streamk.kernels import Linear, Normalized, RestrictedGapWeighted, Spectrum
from streamk.learners.objects import LeafRows
from streamk.snapshot import dumps, loads
from streamk.sources.motifs import motif_stream


def _rows(rng: np.random.Generator, n: int, n_leaves: int) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for _ in range(n):
        m = int(rng.integers(0, 40))
        idx = rng.choice(n_leaves, size=m, replace=False).astype(np.int64)
        out.append((idx, rng.standard_normal(m) * 10.0 ** rng.integers(-6, 6, m)))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_a_kernel_value_does_not_depend_on_the_padded_width(seed):
    rng = np.random.default_rng(seed)
    n_leaves = 200
    rows = _rows(rng, 30, n_leaves)
    narrow, wide = LeafRows(4), LeafRows(4)
    narrow.grow_rows(len(rows))
    wide.grow_rows(len(rows))
    wide.put(0, np.arange(150, dtype=np.int64), np.ones(150))  # a wide row, gone again
    for slot, (idx, vals) in enumerate(rows):
        narrow.put(slot, idx, vals)
        wide.put(slot, idx, vals)
    assert wide.width > narrow.width
    for _ in range(20):
        q_idx = rng.choice(n_leaves, size=60, replace=False).astype(np.int64)
        q_vals = rng.standard_normal(60)
        a = narrow.row(len(rows), q_idx, q_vals, n_leaves)
        b = wide.row(len(rows), q_idx, q_vals, n_leaves)
        assert a.tobytes() == b.tobytes()
        query = dict(zip(q_idx.tolist(), q_vals.tolist()))
        for k, (idx, vals) in zip(a, rows):
            exact = math.fsum(query.get(i, 0.0) * v for i, v in zip(idx.tolist(), vals.tolist()))
            scale = math.fsum(abs(query.get(i, 0.0) * v) for i, v in zip(idx.tolist(), vals))
            assert abs(k - exact) <= 1e-14 * scale


def _dna(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice("acgt") for _ in range(rng.randint(5, 30))) for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_a_restored_svr_learns_on_to_the_same_coefficients(seed):
    rng = random.Random(seed)
    xs = _dna(rng, 3000)
    live = OnlineSVR(kernel=Normalized(RestrictedGapWeighted(3, 1, 0.5)), budget=Projectron(30))
    for x in xs[:1500]:
        live.learn_one(x, float(x.count("a")))
    back = loads(dumps(live)).model
    assert back.support_._leaves.width != live.support_._leaves.width  # the case at stake
    probes = xs[1500:1800]
    assert [back.support_.kernel_row(x).tobytes() for x in probes] == [
        live.support_.kernel_row(x).tobytes() for x in probes
    ]
    for x in xs[1500:]:
        live.learn_one(x, float(x.count("a")))
        back.learn_one(x, float(x.count("a")))
    assert back.support_.X == live.support_.X
    assert np.array_equal(back.support_.coef, live.support_.coef)
    assert dumps(back, created_at=0.0) == dumps(live, created_at=0.0)


def test_a_restored_novelty_detector_learns_on_identically():
    rng = random.Random(7)
    xs = _dna(rng, 1600)
    live = KernelNovelty(kernel=Normalized(RestrictedGapWeighted(3, 1, 0.5)), budget=Projectron(30))
    for x in xs[:800]:
        live.learn_one(x)
    back = loads(dumps(live)).model
    for x in xs[800:]:
        assert back.score_one(x) == live.score_one(x)
        live.learn_one(x)
        back.learn_one(x)
    assert np.array_equal(back.support_.coef, live.support_.coef)
    assert back.threshold_ == live.threshold_


def test_a_kernel_row_is_contiguous_so_blas_rounds_it_as_a_vector_row(monkeypatch):
    """A strided kernel row (every other entry of the per-row sums) went into the
    Projectron's ``P @ k`` on its NumPy path, and BLAS rounds a strided vector
    differently: the string learner then drifted from the same learner on the explicit
    feature map (the oracle, whose kernel values are the same integers)."""
    monkeypatch.setattr(compiled_policies, "projectron_insert", lambda *args: False)
    strings = MarginPerceptron(kernel=Spectrum(2), budget=Projectron(20, eta=0.2), margin=1.0)
    vectors = MarginPerceptron(kernel=Linear(), budget=Projectron(20, eta=0.2), margin=1.0)
    for s, _ in motif_stream(120, seed=11):
        x = dict(Counter(s[i : i + 2] for i in range(len(s) - 1)))
        if strings.support_.n:
            assert strings.support_.kernel_row(s).flags.c_contiguous
        assert strings.predict_one(s) == vectors.predict_one(x)
        strings.learn_one(s, "gat" in s)
        vectors.learn_one(x, "gat" in s)
    assert np.array_equal(strings.support_.coef, vectors.support_.coef)
