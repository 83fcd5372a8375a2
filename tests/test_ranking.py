"""On-line ranking (Alg. 8.14 / CF 8.2): the book's oracle, a plain CF 8.2 loop, invariants."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk.budget import (
    Forgetron,
    Merge,
    Projectron,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
)
from streamk.errors import ConfigError, InvalidInput
from streamk.kernels import RBF, Linear, Polynomial
from streamk.learners import OnlineRanker


def _ordinal(seed: int, m: int, d: int = 3, n_ranks: int = 4, noise: float = 0.3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    score = X @ rng.normal(size=d) + noise * rng.normal(size=m)
    cuts = np.quantile(score, np.linspace(0, 1, n_ranks + 1)[1:-1])
    return X, 1 + np.searchsorted(cuts, score)


def _dicts(X):
    return [{j: float(v) for j, v in enumerate(r)} for r in X]


def _plain_cf82(X, y, kernel, n_ranks):
    """CF 8.2 with plain loops: returns predictions, alphas and thresholds after each step."""
    alpha = [0.0] * len(X)
    b = [0.0] * (n_ranks - 1) + [math.inf]
    preds, history = [], []
    for i in range(len(X)):
        f = sum(alpha[j] * kernel(X[j], X[i]) for j in range(i) if alpha[j] != 0)
        yhat = min(r for r in range(1, n_ranks + 1) if f < b[r - 1])
        preds.append(yhat)
        if yhat < y[i]:
            alpha[i] += y[i] - yhat
            for r in range(yhat, y[i]):
                b[r - 1] -= 1
        elif yhat > y[i]:
            alpha[i] += y[i] - yhat
            for r in range(y[i], yhat):
                b[r - 1] += 1
        history.append((list(alpha[: i + 1]), b[:-1]))
    return preds, history


def test_book_oracle_10():
    stream = [(2.0, 3), (-1.0, 1), (0.5, 2), (2.0, 3), (-1.0, 1), (0.5, 2)]
    model = OnlineRanker(kernel=Linear(), ranks=(1, 2, 3))
    preds, thresholds, new_alpha = [], [], []
    for x, y in stream:
        preds.append(model.predict_one({"x": x}))
        n_before = model.n_support
        model.learn_one({"x": x}, y)
        new_alpha.append(model.support_.coef[-1, 0] if model.n_support > n_before else 0.0)
        thresholds.append(model.thresholds_.tolist())
    assert preds == [3, 3, 3, 3, 1, 1]
    assert thresholds == [[0, 0], [1, 1], [1, 2], [1, 2], [1, 2], [0, 2]]
    assert new_alpha == [0, -2, -1, 0, 0, 1]
    assert model.n_mistakes == 3


@pytest.mark.parametrize(
    "kernel, n_ranks, seed",
    [(Linear(), 3, 0), (Linear(), 5, 1), (RBF(gamma=0.5), 4, 2), (Polynomial(2), 6, 3)],
)
def test_matches_plain_cf82(kernel, n_ranks, seed):
    X, y = _ordinal(seed, m=150, n_ranks=n_ranks)
    model = OnlineRanker(kernel=kernel, ranks=tuple(range(1, n_ranks + 1)))
    preds = []
    for x, label in zip(_dicts(X), y):
        preds.append(model.predict_one(x))
        model.learn_one(x, int(label))
    expected, history = _plain_cf82(X, [int(v) for v in y], kernel, n_ranks)
    assert preds == expected
    alphas, b = history[-1]
    assert model.thresholds_.tolist() == b
    nonzero = [a for a in alphas if a != 0]
    assert model.support_.coef[np.argsort(model.support_.ids), 0].tolist() == nonzero


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_ranks=st.integers(2, 7),
    noise=st.sampled_from([0.0, 0.5, 3.0]),
    gamma=st.sampled_from([0.1, 1.0]),
)
def test_invariants_on_every_step(seed, n_ranks, noise, gamma):
    X, y = _ordinal(seed, m=60, n_ranks=n_ranks, noise=noise)
    model = OnlineRanker(kernel=RBF(gamma=gamma), ranks=tuple(range(1, n_ranks + 1)))
    for x, label in zip(_dicts(X), y):
        model.learn_one(x, int(label))
        b, alpha = model.thresholds_, model.support_.coef[:, 0]
        assert len(b) == n_ranks - 1
        assert (np.diff(b) >= 0).all()
        assert (b == np.round(b)).all() and (alpha == np.round(alpha)).all()
        assert (alpha != 0).all()
        assert alpha.sum() + b.sum() == 0


def test_conservative_and_initial_top_rank():
    model = OnlineRanker(kernel=RBF(gamma=1.0), ranks=("low", "mid", "high"))
    assert model.predict_one({"a": 1.0}) == "high"
    assert model.predict_proba_one({"a": 1.0}) == {"low": 0.0, "mid": 0.0, "high": 1.0}
    model.learn_one({"a": 1.0}, "high")  # right: nothing changes
    assert model.n_support == 0 and model.n_mistakes == 0
    model.learn_one({"a": -1.0}, "low")
    assert model.support_.coef[0, 0] == -2.0
    assert model.thresholds_.tolist() == [1.0, 1.0]
    assert model.score_one({"a": -1.0}) == pytest.approx(-2.0)


# -- learn_many == learn_one -------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    blocks=st.lists(st.integers(1, 15), min_size=1, max_size=6),
    budget=st.sampled_from([None, 3, 10]),
)
def test_learn_many_equals_learn_one(seed, blocks, budget):
    X, y = _ordinal(seed, m=sum(blocks), n_ranks=4, noise=1.0)
    params = dict(kernel=RBF(gamma=0.3), ranks=(1, 2, 3, 4))
    if budget is not None:
        params["budget"] = RemoveOldest(budget)
    one, many = OnlineRanker(**params), OnlineRanker(**params)
    for x, label in zip(_dicts(X), y):
        one.learn_one(x, int(label))
    start = 0
    for b in blocks:
        many.learn_many(pd.DataFrame(X[start : start + b]), pd.Series(y[start : start + b]))
        start += b
    assert np.array_equal(one.support_.ids, many.support_.ids)
    assert np.array_equal(one.support_.coef, many.support_.coef)
    assert np.array_equal(one.thresholds_, many.thresholds_)
    Xt, _ = _ordinal(seed + 1, m=30)
    assert np.allclose(one.score_many(Xt), many.score_many(Xt), atol=1e-9)
    assert one.predict_many(Xt).tolist() == many.predict_many(Xt).tolist()


def test_learn_many_with_auto_gamma_warmup():
    X, y = _ordinal(5, m=300)
    one, many = OnlineRanker(ranks=(1, 2, 3, 4)), OnlineRanker(ranks=(1, 2, 3, 4))
    for x, label in zip(_dicts(X), y):
        one.learn_one(x, int(label))
    for s in range(0, 300, 70):
        many.learn_many(pd.DataFrame(X[s : s + 70]), y[s : s + 70])
    assert one.kernel_ == many.kernel_
    assert np.array_equal(one.thresholds_, many.thresholds_)
    assert np.array_equal(one.support_.coef, many.support_.coef)


# -- budget, state, errors ---------------------------------------------------------------------
def test_budget_keeps_thresholds_ordered_and_integral():
    X, y = _ordinal(6, m=300, n_ranks=5, noise=1.0)
    model = OnlineRanker(kernel=RBF(gamma=0.5), budget=20)
    for x, label in zip(_dicts(X), y):
        model.learn_one(x, int(label))
        b = model.thresholds_
        assert model.n_support <= 20
        assert (np.diff(b) >= 0).all() and (b == np.round(b)).all()
    assert model.n_mistakes > 20  # evictions happened


def test_state_round_trip_continues_identically():
    X, y = _ordinal(7, m=120)
    model = OnlineRanker(kernel=RBF(gamma=0.5), ranks=(1, 2, 3, 4), budget=30)
    for x, label in zip(_dicts(X[:70]), y[:70]):
        model.learn_one(x, int(label))
    clone = OnlineRanker.from_state(model.state())
    assert np.array_equal(clone.thresholds_, model.thresholds_)
    for x, label in zip(_dicts(X[70:]), y[70:]):
        assert clone.predict_one(x) == model.predict_one(x)
        model.learn_one(x, int(label))
        clone.learn_one(x, int(label))
    assert np.array_equal(clone.thresholds_, model.thresholds_)
    assert clone.n_mistakes == model.n_mistakes


def test_label_outside_ranks_is_rejected_without_side_effects():
    model = OnlineRanker(ranks=(1, 2, 3))
    with pytest.raises(InvalidInput, match="not one of ranks"):
        model.learn_one({"a": 1.0}, 4)
    assert model.n_learned == 0 and len(model._features) == 0
    with pytest.raises(InvalidInput):
        model.learn_many(pd.DataFrame({"a": [1.0, 2.0]}), [1, 7])
    assert model.n_learned == 0


@pytest.mark.parametrize("ranks", [(1,), (1, 1, 2), ([1], [2]), ()])
def test_bad_ranks_raise_config_error(ranks):
    with pytest.raises(ConfigError):
        OnlineRanker(ranks=ranks)


@pytest.mark.parametrize("params", list(OnlineRanker._unit_test_params()))
def test_river_check_estimator(params, river_checks):
    assert river_checks(OnlineRanker(**params)) > 20


@pytest.mark.parametrize(
    "policy",
    [
        RemoveRandom(8, seed=1),
        RemoveSmallest(8),
        Forgetron(8),
        Projectron(8, eta=0.05),
        Merge(8),
    ],
    ids=lambda p: type(p).__name__,
)
def test_every_budget_policy_bounds_the_set_and_keeps_learn_many_exact(policy):
    X, y = _ordinal(10, m=90, n_ranks=4, noise=0.5)
    params = dict(kernel=RBF(gamma=0.5), ranks=(1, 2, 3, 4), budget=policy)
    one, many = OnlineRanker(**params), OnlineRanker(**params)
    for x, label in zip(_dicts(X), y):
        one.learn_one(x, int(label))
        assert one.n_support <= 8
        assert (np.diff(one.thresholds_) >= 0).all()
    for s in range(0, 90, 13):
        many.learn_many(pd.DataFrame(X[s : s + 13]), list(y[s : s + 13]))
    assert np.array_equal(one.support_.ids, many.support_.ids)
    assert np.allclose(one.support_.coef, many.support_.coef, atol=1e-9)
    assert np.array_equal(one.thresholds_, many.thresholds_)


# -- default ranks: discovered from the stream (issue 19) ---------------------------------------
def _plain_discovered(X, y, kernel):
    """CF 8.2 with plain loops and ranks learned from the labels, by the documented rule.

    A new label takes its sorted place; its threshold copies the lower neighbour's between
    two known ranks, is the top one + 1 above them all, the bottom one - 1 below them all,
    and 0 (the book's initial value) when it is the second label seen.
    """
    ranks, b, alpha, history = [], [], [0.0] * len(X), []
    for i in range(len(X)):
        if y[i] not in ranks:
            k = sorted(ranks + [y[i]]).index(y[i])
            if len(ranks) == 1:
                b = [0.0]
            elif len(ranks) > 1 and k == 0:
                b = [b[0] - 1] + b
            elif len(ranks) > 1 and k == len(ranks):
                b = b + [b[-1] + 1]
            elif len(ranks) > 1:
                b = b[:k] + [b[k - 1]] + b[k:]
            ranks.insert(k, y[i])
        f = sum(alpha[j] * kernel(X[j], X[i]) for j in range(i) if alpha[j] != 0)
        yhat = min(r for r in range(len(ranks)) if r == len(ranks) - 1 or f < b[r])
        target = ranks.index(y[i])
        if yhat != target:
            alpha[i] = float(target - yhat)
            for r in range(min(yhat, target), max(yhat, target)):
                b[r] += 1 if yhat > target else -1
        history.append((list(alpha[: i + 1]), list(b), list(ranks)))
    return history


def test_default_ranks_follow_the_plain_loop_when_labels_arrive_out_of_order():
    X, y = _ordinal(11, m=160, n_ranks=5, noise=0.5)
    labels = [int(v) for v in y]
    # every rank's first appearance out of order: 3, 5, 1, 4, 2, then the rest
    firsts = [labels.index(r) for r in (3, 5, 1, 4, 2)]
    order = firsts + [i for i in range(len(labels)) if i not in firsts]
    X, labels = X[order], [labels[i] for i in order]
    kernel = Linear()
    model = OnlineRanker(kernel=kernel)
    expected = _plain_discovered(list(X), labels, lambda a, c: float(np.dot(a, c)))
    for i, (x, label) in enumerate(zip(_dicts(X), labels)):
        model.learn_one(x, label)
        alpha, b, ranks = expected[i]
        assert model.ranks_ == ranks
        assert model.thresholds_.tolist() == b, i
        assert (np.diff(model.thresholds_) >= 0).all()
    assert model.ranks_ == [1, 2, 3, 4, 5]
    coef = dict(zip(model.support_.ids.tolist(), model.support_.coef[:, 0].tolist()))
    nonzero = {i: a for i, a in enumerate(alpha) if a != 0}
    assert sorted(coef.values()) == sorted(nonzero.values())


def test_a_rank_between_two_known_ones_changes_no_prediction():
    X, y = _ordinal(12, m=200, n_ranks=3, noise=0.5)
    model = OnlineRanker(kernel=RBF(gamma=0.5))
    for x, label in zip(_dicts(X), y):
        if label != 2:
            model.learn_one(x, 2 * int(label))  # ranks 2 and 6 only
    probe = _dicts(np.random.default_rng(0).normal(size=(50, 3)))
    before = [model.predict_one(x) for x in probe]
    # admitting a middle rank (4) alone, before its event's update moves any threshold
    twin = OnlineRanker.from_state(model.state())
    twin._admit(4)
    assert twin.ranks_ == [2, 4, 6]
    assert [twin.predict_one(x) for x in probe] == before


def test_default_ranks_predict_nothing_before_any_label():
    model = OnlineRanker()
    assert model.predict_one({"a": 1.0}) is None
    assert model.predict_proba_one({"a": 1.0}) == {}
    model.learn_one({"a": 1.0}, "b")
    assert model.predict_one({"a": 1.0}) == "b"
    assert model.predict_proba_one({"a": 1.0}) == {"b": 1.0}


def test_default_ranks_pass_river_check_estimator():
    from river import checks

    checks.check_estimator(OnlineRanker())  # what the README promises for every learner


def test_default_ranks_learn_many_matches_learn_one_as_ranks_appear_mid_block():
    X, y = _ordinal(13, m=120, n_ranks=4, noise=0.5)
    labels = [int(v) for v in y]
    one, many = OnlineRanker(kernel=RBF(gamma=0.3)), OnlineRanker(kernel=RBF(gamma=0.3))
    for x, label in zip(_dicts(X), labels):
        one.learn_one(x, label)
    for s in range(0, 120, 17):
        many.learn_many(pd.DataFrame(X[s : s + 17]), labels[s : s + 17])
    assert one.ranks_ == many.ranks_ == [1, 2, 3, 4]
    assert np.array_equal(one.thresholds_, many.thresholds_)
    assert np.array_equal(one.support_.coef, many.support_.coef)


def test_default_ranks_survive_a_state_round_trip():
    X, y = _ordinal(14, m=100, n_ranks=4)
    model = OnlineRanker(kernel=RBF(gamma=0.5))
    for x, label in zip(_dicts(X[:60]), y[:60]):
        model.learn_one(x, int(label))
    from streamk import snapshot

    clone = snapshot.loads(snapshot.dumps(model, offsets={}, seq=1)).model
    assert clone.ranks_ == model.ranks_
    for x, label in zip(_dicts(X[60:]), y[60:]):
        assert clone.predict_one(x) == model.predict_one(x)
        model.learn_one(x, int(label))
        clone.learn_one(x, int(label))
    assert np.array_equal(clone.thresholds_, model.thresholds_)


def test_labels_that_cannot_be_ordered_are_rejected_without_side_effects():
    model = OnlineRanker()
    model.learn_one({"a": 1.0}, 1)
    with pytest.raises(InvalidInput, match="cannot be ordered") as info:
        model.learn_one({"a": 2.0}, "two")
    assert model.ranks_ == [1] and model.n_learned == 1
    assert str(info.value).endswith("ranks=(lowest, ..., highest)")


def test_label_outside_fixed_ranks_error_is_a_whole_sentence():
    model = OnlineRanker(ranks=(1, 2, 3))
    with pytest.raises(InvalidInput) as info:
        model.learn_one({"a": 1.0}, 7)
    message = str(info.value)
    assert "label 7 is not one of ranks=(1, 2, 3)" in message
    assert "OnlineRanker(ranks=(1, 2, 3))" in message  # says how, not "as ranks=" and stop
    assert not message.rstrip().endswith("=")


def test_rankers_that_discovered_different_ranks_are_not_merged():
    from streamk.errors import MergeError
    from streamk.merge import merge_models

    a, b = OnlineRanker(kernel=RBF(1.0)), OnlineRanker(kernel=RBF(1.0))
    for i, label in enumerate([1, 2, 3, 1, 2, 3]):
        a.learn_one({"x": float(i)}, label)
        b.learn_one({"x": float(i)}, min(label, 2))
    with pytest.raises(MergeError, match="seen ranks"):
        merge_models([a, b])
    merged = merge_models([a, OnlineRanker.from_state(a.state())])
    assert merged.ranks_ == [1, 2, 3]
