"""Centre-of-mass novelty detection (§5.1, eq. 5.2, Alg. 5.4 / CF 5.3): NumPy oracles, AUC."""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import datasets, preprocessing
from sklearn.metrics import roc_auc_score

from streamk.budget import Forgetron, Merge, Projectron, RemoveOldest, RemoveRandom, RemoveSmallest
from streamk.errors import ConfigError
from streamk.kernels import RBF, Linear, Polynomial
from streamk.learners import KernelNovelty


def _dicts(X):
    return [{j: float(v) for j, v in enumerate(r)} for r in X]


def _centre_distance(kernel, S, x, w=None):
    """Eq. (5.2) in plain NumPy: k(x,x) - 2/W sum_i w_i k(x,x_i) + 1/W^2 sum_ij w_i w_j K_ij."""
    w = np.ones(len(S)) if w is None else w
    W = w.sum()
    K = kernel.gram(S, S)
    kx = kernel.gram(x[None, :], S)[0]
    return kernel.gram(x[None, :], x[None, :])[0, 0] - 2.0 / W * kx @ w + w @ K @ w / W**2


def _cf53_threshold(K, delta=0.01):
    """Code Fragment 5.3, transliterated."""
    ell = K.shape[0]
    D = K.sum(axis=0) / ell
    E = D.sum() / ell
    traindist2 = np.diag(K) - 2 * D + E
    maxdist = np.sqrt(traindist2.max())
    esterr = np.sqrt(2 * np.diag(K).max() / ell) * (np.sqrt(2) + np.sqrt(np.log(1 / delta)))
    return (maxdist + 2 * esterr) ** 2


@pytest.mark.parametrize("kernel", [RBF(gamma=0.3), Linear(), Polynomial(2)])
def test_score_is_eq_5_2_on_every_step(kernel):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    model = KernelNovelty(kernel=kernel)
    for i, x in enumerate(_dicts(X)):
        if i:
            expected = _centre_distance(kernel, X[:i], X[i])
            assert model.score_one(x) == pytest.approx(expected, rel=1e-9, abs=1e-9)
        model.learn_one(x)
    probe = rng.normal(size=(10, 3)) * 3
    expected = [_centre_distance(kernel, X, q) for q in probe]
    assert np.allclose(model.score_many(probe), expected, rtol=1e-9, atol=1e-9)
    assert model.threshold_ == pytest.approx(_cf53_threshold(kernel.gram(X, X)), rel=1e-9)
    assert list(model.predict_many(probe)) == [d > model.threshold_ for d in expected]


def test_sliding_window_is_the_centre_of_the_last_k_events():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 2))
    kernel = RBF(gamma=0.5)
    model = KernelNovelty(kernel=kernel, budget=RemoveOldest(15))
    for i, x in enumerate(_dicts(X)):
        if i:
            expected = _centre_distance(kernel, X[max(0, i - 15) : i], X[i])
            assert model.score_one(x) == pytest.approx(expected, rel=1e-9, abs=1e-12)
        model.learn_one(x)
    window = X[-15:]
    assert model.threshold_ == pytest.approx(_cf53_threshold(kernel.gram(window, window)))


@pytest.mark.parametrize(
    "policy",
    [
        RemoveRandom(12, seed=3),
        RemoveSmallest(12),
        Forgetron(12),
        Projectron(12, eta=0.05),
        Merge(12),
    ],
    ids=lambda p: type(p).__name__,
)
def test_any_budget_policy_scores_the_weighted_centre_of_its_set(policy):
    # whatever a policy does to the set (evict, shrink, project, merge), the score is the
    # weighted centre of mass of what the set holds
    rng = np.random.default_rng(2)
    X = rng.normal(size=(70, 2))
    kernel = RBF(gamma=0.5)
    model = KernelNovelty(kernel=kernel, budget=policy)
    for i, x in enumerate(_dicts(X)):
        model.learn_one(x)
        if i % 7 == 0 or i > 60:
            S = model.support_
            assert S.n <= 12
            q = rng.normal(size=2)
            expected = _centre_distance(kernel, S.X, q, S.coef[:, 0])
            assert model.score_one({0: q[0], 1: q[1]}) == pytest.approx(expected, abs=1e-9)


def test_planted_outliers_are_ranked_high():
    rng = np.random.default_rng(4)
    m = 1500
    X = rng.normal(size=(m, 4))
    y = rng.random(m) < 0.03
    X[y] = rng.normal(loc=4.0, size=(int(y.sum()), 4))
    model = KernelNovelty(kernel=RBF(gamma=0.1), budget=200)
    scores = []
    for x in _dicts(X):
        scores.append(model.score_one(x))
        model.learn_one(x)
    assert roc_auc_score(y[50:], scores[50:]) > 0.95


def test_shuttle_roc_auc():
    model = preprocessing.StandardScaler() | KernelNovelty(budget=200)
    scores, labels = [], []
    for x, y in datasets.Shuttle().take(3000):
        scores.append(model.score_one(x))
        labels.append(y)
        model.learn_one(x)
    assert roc_auc_score(labels, scores) > 0.9


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    blocks=st.lists(st.integers(1, 15), min_size=1, max_size=6),
    budget=st.sampled_from([None, 4, 11]),
)
def test_learn_many_equals_learn_one(seed, blocks, budget):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(sum(blocks), 3))
    params = dict(kernel=RBF(gamma=0.3), budget=None if budget is None else RemoveOldest(budget))
    one, many = KernelNovelty(**params), KernelNovelty(**params)
    for x in _dicts(X):
        one.learn_one(x)
    start = 0
    for b in blocks:
        many.learn_many(pd.DataFrame(X[start : start + b]))
        start += b
    assert np.array_equal(one.support_.ids, many.support_.ids)
    probe = rng.normal(size=(10, 3))
    assert np.allclose(one.score_many(probe), many.score_many(probe), atol=1e-9)
    assert one.threshold_ == pytest.approx(many.threshold_, abs=1e-9)


def test_learn_many_with_auto_gamma_warmup():
    X = np.random.default_rng(5).normal(size=(260, 2))
    one, many = KernelNovelty(budget=50), KernelNovelty(budget=50)
    for x in _dicts(X):
        one.learn_one(x)
    for s in range(0, 260, 60):
        many.learn_many(X[s : s + 60])
    assert one.kernel_ == many.kernel_
    assert np.allclose(one.score_many(X[:20]), many.score_many(X[:20]), atol=1e-9)


def test_state_round_trip_and_empty_model():
    model = KernelNovelty(kernel=RBF(gamma=0.5), budget=10)
    assert model.score_one({"a": 1.0}) == 0.0
    assert model.threshold_ == math.inf and model.predict_one({"a": 1.0}) is False
    X = np.random.default_rng(6).normal(size=(30, 2))
    for x in _dicts(X[:20]):
        model.learn_one(x)
    clone = KernelNovelty.from_state(model.state())
    for x in _dicts(X[20:]):
        assert clone.score_one(x) == pytest.approx(model.score_one(x), abs=1e-12)
        model.learn_one(x)
        clone.learn_one(x)
    assert clone.threshold_ == pytest.approx(model.threshold_)


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.5, "x", True])
def test_bad_delta_raises(delta):
    with pytest.raises(ConfigError):
        KernelNovelty(delta=delta)


class _PlantedOutliers:
    """Offline stand-in for river's CreditCard check dataset (it is a download)."""

    def __iter__(self):
        rng = np.random.default_rng(7)
        for i in range(600):
            outlier = i % 40 == 39
            x = rng.normal(loc=5.0 if outlier else 0.0, size=4)
            yield {f"v{j}": float(v) for j, v in enumerate(x)}, int(outlier)


def _offline(check):
    """River's anomaly checks iterate CreditCard (a download): substitute a shipped stream."""
    dataset = getattr(check, "keywords", {}).get("dataset")
    if isinstance(dataset, datasets.CreditCard) or type(dataset).__name__ == "islice":
        return functools.partial(check.func, dataset=_PlantedOutliers())
    return check


@pytest.mark.parametrize("params", list(KernelNovelty._unit_test_params()))
def test_river_check_estimator(params, river_checks):
    assert river_checks(KernelNovelty(**params), _offline) > 20
