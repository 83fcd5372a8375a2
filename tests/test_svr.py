"""On-line SVR (Alg. 7.61 / CF 7.14): oracles, exactness of learn_many, state, river checks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from streamk.budget import (
    Forgetron,
    Merge,
    Projectron,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
)
from streamk.errors import ConfigError, InvalidInput
from streamk.kernels import RBF, Linear
from streamk.learners import OnlineSVR


def _data(seed: int, m: int = 40, d: int = 2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(m, d))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=m)
    return X, y


def _dicts(X):
    return [{j: float(v) for j, v in enumerate(r)} for r in X]  # keys as for a NumPy array


def _objective(K, y, beta, eps):
    return y @ beta - eps * np.abs(beta).sum() - 0.5 * beta @ K @ beta


def _qp_oracle(K, y, eps, C):
    """max y'b - eps|b|_1 - b'Kb/2 s.t. |b| <= C, with b = p - m, p, m in [0, C] (L-BFGS-B)."""
    n = len(y)

    def fun(z):
        p, m = z[:n], z[n:]
        b = p - m
        Kb = K @ b
        val = 0.5 * b @ Kb - y @ b + eps * z.sum()
        return val, np.concatenate([Kb - y + eps, -Kb + y + eps])

    upper = C if math.isfinite(C) else None
    res = minimize(
        fun,
        np.zeros(2 * n),
        jac=True,
        bounds=[(0.0, upper)] * (2 * n),
        method="L-BFGS-B",
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 50000},
    )
    return res.x[:n] - res.x[n:], -res.fun


def _beta_of(model, X):
    S = model.support_
    beta = np.zeros(len(X))
    for row, c in zip(S.X, S.coef[:, 0]):
        beta[int(np.argmin(((X - row[: X.shape[1]]) ** 2).sum(axis=1)))] = c
    return beta


@pytest.mark.parametrize("eps, C", [(0.1, 1.0), (0.05, 0.2), (0.3, 10.0), (0.1, math.inf)])
def test_fit_matches_scipy_qp(eps, C):
    X, y = _data(0)
    # without a box the tube is the only regulariser: keep K well conditioned (book, §7.4)
    kernel = RBF(gamma=0.5 if math.isfinite(C) else 3.0)
    model = OnlineSVR(kernel=kernel, epsilon=eps, C=C, offset=0.0).fit(
        X, y, max_epochs=50000, tol=1e-10
    )
    K = kernel.gram(X, X)
    beta = _beta_of(model, X)
    b_qp, w_qp = _qp_oracle(K, y, eps, C)
    assert _objective(K, y, beta, eps) == pytest.approx(w_qp, abs=1e-6)
    assert (np.abs(beta) <= C + 1e-12).all()
    Xt, _ = _data(1, m=100)
    f_qp = kernel.gram(Xt, X) @ b_qp
    assert np.allclose(model.predict_many(Xt).to_numpy(), f_qp, atol=1e-3)
    # sparsity: examples strictly inside the tube have beta = 0 (KKT)
    inside = np.abs(y - K @ beta) < eps - 1e-6
    assert (beta[inside] == 0).all()


def test_book_oracle_9_one_point():
    # kappa = 1, y = 3, eps = 0.5: alpha = 2.5 (the residual is then exactly eps)
    book = dict(kernel=RBF(gamma=1.0), epsilon=0.5, C=math.inf, offset=0.0)
    model = OnlineSVR(**book)
    model.learn_one({"x": 0.7}, 3.0)
    assert model.support_.coef[0, 0] == pytest.approx(2.5)
    assert model.predict_one({"x": 0.7}) == pytest.approx(2.5)
    fitted = OnlineSVR(**book).fit(np.array([[0.7]]), [3.0])
    assert fitted.support_.coef[0, 0] == pytest.approx(2.5)
    boxed = OnlineSVR(**{**book, "C": 1.0})
    boxed.learn_one({"x": 0.7}, 3.0)
    assert boxed.support_.coef[0, 0] == pytest.approx(1.0)


@pytest.mark.parametrize("resweeps", [0, 2])
def test_examples_inside_the_tube_change_nothing(resweeps):
    X, y = _data(2, m=30)
    model = OnlineSVR(kernel=RBF(gamma=0.5), epsilon=0.2, C=5.0, resweeps=resweeps, offset=0.0)
    for x, target in zip(_dicts(X), y):
        model.learn_one(x, target)
    if resweeps:  # settle, so a resweep after a tube event has nothing left to do
        model._resweep(500)
    before = (model.support_.coef.copy(), model.support_.ids.copy(), model.n_updates)
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = {0: float(rng.uniform(-2, 2)), 1: float(rng.uniform(-2, 2))}
        f = model.predict_one(x)
        model.learn_one(x, f + float(rng.uniform(-0.19, 0.19)))
    assert model.n_updates == before[2]
    assert np.array_equal(model.support_.ids, before[1])
    assert np.allclose(model.support_.coef, before[0], atol=1e-9 if resweeps else 0.0)


def _plain_online(X, y, kernel, eps, C, resweeps):
    """The documented on-line rule with loops (CF 7.14 steps, eta = 1/k, box C)."""
    sv: list[int] = []
    alpha: dict[int, float] = {}
    crossings = 0

    def k(a, b):
        return float(kernel.gram(X[a][None, :], X[b][None, :])[0, 0])

    def soft(r):
        return math.copysign(max(abs(r) - eps, 0.0), r)

    for i in range(len(X)):
        f = sum(alpha[j] * k(j, i) for j in sv)
        a = min(max(soft(y[i] - f) / k(i, i), -C), C)
        if a != 0.0:
            sv.append(i)
            alpha[i] = a
        for _ in range(resweeps):
            for s in list(sv):
                r = y[s] - sum(alpha[j] * k(j, s) for j in sv)
                a = alpha[s]
                g = r - eps if a > 0 else r + eps if a < 0 else soft(r)
                new = a + g / k(s, s)
                if a * new < 0:
                    new = 0.0
                    crossings += 1
                alpha[s] = min(max(new, -C), C)
        for s in [s for s in sv if alpha[s] == 0.0]:
            sv.remove(s)
            del alpha[s]
    return {i: alpha[i] for i in sv}, crossings


@pytest.mark.parametrize("eps, C, resweeps", [(0.1, 1.0, 0), (0.05, math.inf, 1), (0.1, 0.5, 2)])
def test_learn_one_matches_plain_online_loop(eps, C, resweeps):
    X, y = _data(3, m=35)
    y[::4] *= -2.0  # rough targets, so coefficients overshoot and cross zero
    kernel = RBF(gamma=0.8)
    model = OnlineSVR(kernel=kernel, epsilon=eps, C=C, resweeps=resweeps, offset=0.0)
    for x, target in zip(_dicts(X), y):
        model.learn_one(x, float(target))
    expected, crossings = _plain_online(X, y, kernel, eps, C, resweeps)
    if resweeps == 1:
        assert crossings > 0  # the zero-crossing rule was exercised
    S = model.support_
    order = np.argsort(S.ids)
    assert len(order) == len(expected)
    assert np.allclose(S.coef[order, 0], list(expected.values()), atol=1e-10)
    assert np.array_equal(S.X[order], X[list(expected)])


def test_zero_crossing_stops_at_zero():
    # Linear kernel, eps = 0. x1 = 1, y1 = 1: alpha_1 = 1. x2 = 2, y2 = 10: f = 2, alpha_2 = 2,
    # so f(x1) = 5. Resweep: alpha_1 + (1 - 5) = -3 crosses zero -> stops at 0 (and leaves);
    # then alpha_2 + (10 - 8) / 4 = 2.5. Without the rule alpha_1 = -3 and alpha_2 = 4.
    model = OnlineSVR(kernel=Linear(), epsilon=0.0, C=math.inf, resweeps=1, offset=0.0)
    model.learn_one({"x": 1.0}, 1.0)
    model.learn_one({"x": 2.0}, 10.0)
    assert model.n_support == 1
    assert model.support_.X[0, 0] == 2.0
    assert model.support_.coef[0, 0] == pytest.approx(2.5)


# -- learn_many == learn_one -------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    blocks=st.lists(st.integers(1, 12), min_size=1, max_size=6),
    budget=st.sampled_from([None, 4, 10]),
    resweeps=st.sampled_from([0, 1]),
    auto=st.booleans(),
)
def test_learn_many_equals_learn_one(seed, blocks, budget, resweeps, auto):
    X, y = _data(seed, m=sum(blocks), d=3)
    params = dict(kernel=RBF(gamma=0.4), epsilon=0.05, C=3.0, resweeps=resweeps)
    if auto:  # the defaults: epsilon, C and the offset follow the target's running statistics
        params = dict(kernel=RBF(gamma=0.4), resweeps=resweeps)
    if budget is not None:
        params["budget"] = RemoveOldest(budget)
    one, many = OnlineSVR(**params), OnlineSVR(**params)
    for x, target in zip(_dicts(X), y):
        one.learn_one(x, float(target))
    start = 0
    for b in blocks:
        many.learn_many(pd.DataFrame(X[start : start + b]), pd.Series(y[start : start + b]))
        start += b
    assert np.array_equal(one.support_.ids, many.support_.ids)
    assert np.allclose(one.support_.coef, many.support_.coef, atol=1e-9)
    Xt, _ = _data(seed + 1, m=20, d=3)
    assert np.allclose(one.predict_many(Xt), many.predict_many(Xt), atol=1e-9)


def test_learn_many_with_auto_gamma_warmup():
    X, y = _data(4, m=260)
    one, many = OnlineSVR(C=1.0, budget=40, resweeps=1), OnlineSVR(C=1.0, budget=40, resweeps=1)
    for x, target in zip(_dicts(X), y):
        one.learn_one(x, float(target))
    for s in range(0, 260, 70):
        many.learn_many(pd.DataFrame(X[s : s + 70]), y[s : s + 70])
    assert one.kernel_ == many.kernel_
    assert np.allclose(one.support_.coef, many.support_.coef, atol=1e-9)


# -- budget, state, errors ---------------------------------------------------------------------
def test_budget_and_box_hold_on_every_step():
    X, y = _data(5, m=150)
    model = OnlineSVR(kernel=RBF(gamma=0.5), epsilon=0.01, C=0.3, resweeps=1, budget=12)
    for x, target in zip(_dicts(X), y):
        model.learn_one(x, float(target))
        assert model.n_support <= 12
        assert (np.abs(model.support_.coef) <= 0.3).all()


def test_state_round_trip_continues_identically():
    X, y = _data(6, m=80)
    model = OnlineSVR(kernel=RBF(gamma=0.5), C=2.0, budget=20, resweeps=2)
    for x, target in zip(_dicts(X[:50]), y[:50]):
        model.learn_one(x, float(target))
    clone = OnlineSVR.from_state(model.state())
    for x, target in zip(_dicts(X[50:]), y[50:]):
        model.learn_one(x, float(target))
        clone.learn_one(x, float(target))
    assert np.allclose(model.support_.coef, clone.support_.coef, atol=1e-12)
    assert np.allclose(model.predict_many(X), clone.predict_many(X))


def test_fit_then_continue_online():
    X, y = _data(7, m=100)
    model = OnlineSVR(kernel=RBF(gamma=0.5), epsilon=0.05, C=2.0).fit(
        X[:60], y[:60], max_epochs=20000
    )
    assert model.n_learned == 60 and 0 < model.n_support <= 60
    for x, target in zip(_dicts(X[60:]), y[60:]):
        model.learn_one(x, float(target))
    assert np.mean(np.abs(model.predict_many(X) - y)) < 0.2


@pytest.mark.parametrize(
    "params",
    [{"C": 0.0}, {"C": -1.0}, {"epsilon": -0.1}, {"epsilon": math.inf}, {"resweeps": -1}],
)
def test_bad_parameters_raise_config_error(params):
    with pytest.raises(ConfigError):
        OnlineSVR(**params)


@pytest.mark.parametrize("target", [None, "a", "3", b"3", math.nan, math.inf])
def test_bad_target_raises(target):
    with pytest.raises(InvalidInput):
        OnlineSVR().learn_one({"a": 1.0}, target)


@pytest.mark.parametrize("params", list(OnlineSVR._unit_test_params()))
def test_river_check_estimator(params, river_checks):
    assert river_checks(OnlineSVR(**params)) > 15


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
@pytest.mark.parametrize("resweeps", [0, 1])
def test_every_budget_policy_bounds_the_set_and_keeps_learn_many_exact(policy, resweeps):
    X, y = _data(10, m=90)
    params = dict(kernel=RBF(gamma=0.5), epsilon=0.05, C=1.0, resweeps=resweeps, budget=policy)
    one, many = OnlineSVR(**params), OnlineSVR(**params)
    for x, target in zip(_dicts(X), y):
        one.learn_one(x, float(target))
        assert one.n_support <= 8
    for s in range(0, 90, 13):
        many.learn_many(pd.DataFrame(X[s : s + 13]), y[s : s + 13])
    assert np.array_equal(one.support_.ids, many.support_.ids)
    assert np.allclose(one.support_.coef, many.support_.coef, atol=1e-9)
    assert np.mean(np.abs(one.predict_many(X) - y)) < np.mean(np.abs(y))


# -- scale-aware defaults (issue 19) -----------------------------------------------------------
def _plain_auto_online(X, y, kernel):
    """The documented defaults with loops: before event i's step the offset is the mean of
    y[0..i], epsilon 0.1 and C 1.0 times their (population) standard deviation."""
    sv: list[int] = []
    alpha: dict[int, float] = {}

    def k(a, b):
        return float(kernel.gram(X[a][None, :], X[b][None, :])[0, 0])

    predictions = []
    for i in range(len(X)):
        f = sum(alpha[j] * k(j, i) for j in sv)
        offset_before = float(np.mean(y[:i])) if i else 0.0
        predictions.append(offset_before + f)
        seen = y[: i + 1]
        offset, spread = float(np.mean(seen)), float(np.std(seen))
        eps, C = 0.1 * spread, 1.0 * spread
        r = y[i] - offset - f
        a = min(max(math.copysign(max(abs(r) - eps, 0.0), r) / k(i, i), -C), C)
        if a != 0.0:
            sv.append(i)
            alpha[i] = a
    return alpha, predictions


def test_defaults_follow_the_targets_running_mean_and_spread():
    X, y = _data(11, m=60)
    y = 50.0 + 8.0 * y  # far from 0 and wider than 1: the defaults must follow the target
    kernel = RBF(gamma=0.7)
    model = OnlineSVR(kernel=kernel)
    predictions = []
    for x, target in zip(_dicts(X), y):
        predictions.append(model.predict_one(x))
        model.learn_one(x, float(target))
    expected, expected_predictions = _plain_auto_online(X, y, kernel)
    assert np.allclose(predictions, expected_predictions, atol=1e-9)
    S = model.support_
    order = np.argsort(S.ids)
    assert np.allclose(S.coef[order, 0], list(expected.values()), atol=1e-10)
    assert model.offset_ == pytest.approx(y.mean())
    assert model.epsilon_ == pytest.approx(0.1 * y.std())
    assert model.C_ == pytest.approx(y.std())


def test_resolved_defaults_survive_state_and_snapshots():
    from streamk.snapshot import dumps, loads

    X, y = _data(12, m=90)
    y = 20.0 - 3.0 * y
    model = OnlineSVR(budget=30, resweeps=1)
    for x, target in zip(_dicts(X[:60]), y[:60]):
        model.learn_one(x, float(target))
    state = model.state()
    assert state["target_stats"][0] == 60
    clones = [OnlineSVR.from_state(state), loads(dumps(model)).model]
    for clone in clones:
        resolved = (clone.epsilon_, clone.C_, clone.offset_)
        assert resolved == (model.epsilon_, model.C_, model.offset_)
        assert np.allclose(clone.predict_many(X), model.predict_many(X), atol=1e-12)
    for x, target in zip(_dicts(X[60:]), y[60:]):
        for m in [model, *clones]:
            m.learn_one(x, float(target))
    assert model.offset_ == pytest.approx(y.mean())
    for clone in clones:
        assert np.allclose(clone.predict_many(X), model.predict_many(X), atol=1e-12)


def test_fit_with_defaults_centres_and_scales_like_the_book_on_standardised_targets():
    X, y = _data(13, m=50)
    y = 100.0 + 5.0 * y
    kernel = RBF(gamma=0.5)
    model = OnlineSVR(kernel=kernel).fit(X, y, max_epochs=50000, tol=1e-10)
    # the same problem in standardised units, with the book's no-bias parameters
    ys = (y - y.mean()) / y.std()
    book = OnlineSVR(kernel=kernel, epsilon=0.1, C=1.0, offset=0.0).fit(
        X, ys, max_epochs=50000, tol=1e-10
    )
    Xt, _ = _data(14, m=30)
    expected = y.mean() + y.std() * book.predict_many(Xt).to_numpy()
    assert np.allclose(model.predict_many(Xt).to_numpy(), expected, atol=1e-6)


def _prequential_mae(model, stream):
    errors = []
    for x, y in stream:
        errors.append(abs(y - model.predict_one(x)))
        model.learn_one(x, y)
    return float(np.mean(errors))


def _running_mean_mae(stream):
    """Predict the mean of the targets seen so far (0 before any), computed plainly."""
    total, n, errors = 0.0, 0, []
    for _, y in stream:
        errors.append(abs(y - (total / n if n else 0.0)))
        total += y
        n += 1
    return float(np.mean(errors))


@pytest.mark.parametrize(
    "name",
    ["TrumpApproval", "Friedman", "Planes2D"],
)
def test_defaults_beat_the_running_mean_and_river_linear_regression(name):
    from river import datasets, linear_model, preprocessing
    from river.datasets import synth

    def stream():
        if name == "TrumpApproval":
            return list(datasets.TrumpApproval())
        if name == "Friedman":
            return list(synth.Friedman(seed=7).take(1500))
        return list(synth.Planes2D(seed=7).take(1500))

    svr = _prequential_mae(OnlineSVR(), stream())
    mean = _running_mean_mae(stream())
    linear = _prequential_mae(
        preprocessing.StandardScaler() | linear_model.LinearRegression(), stream()
    )
    assert svr < 0.8 * mean
    assert svr < linear


def test_river_check_estimator_with_defaults(river_checks):
    assert river_checks(OnlineSVR()) > 15


@pytest.mark.parametrize("params", [{"offset": "median"}, {"offset": math.nan}, {"C": "big"}])
def test_bad_offset_or_auto_text_raises_config_error(params):
    with pytest.raises(ConfigError):
        OnlineSVR(**params)


@pytest.mark.parametrize(
    "y",
    [
        pd.Series([1.5, -2.0, 3.25]),
        pd.Series([1, 2, 2**60 + 1], dtype="int64"),
        pd.Series([2**64 - 1], dtype="uint64"),
        pd.Series([True, False]),
        np.array([0.1, 2.0], dtype=np.float32),
        pd.Series([1.0, None], dtype="Float64"),
        pd.Series([1.0, np.nan]),
        np.array([1.0, -np.inf]),
        pd.Series(["1.5", "x"]),
        [1, "2.5", 3.0],
        np.array([[1.0, 2.0]]),
    ],
)
def test_learn_many_reads_targets_as_one_by_one(y: object) -> None:
    """``learn_many`` converts a numeric column of finite targets in one go: the same
    floats as ``float`` on each (the oracle), and the same error where one is not a finite
    number (NA, NaN, infinity, text)."""
    from streamk.learners.svr import _target, _targets

    try:
        expected = [_target(v) for v in y]
    except InvalidInput as error:
        with pytest.raises(InvalidInput, match=str(error).split(",")[0]):
            _targets(y)
        return
    got = _targets(y)
    assert all(type(v) is float for v in got)
    assert got == expected


def test_a_block_of_text_targets_is_refused_whole():
    """A target column read as text ("3", "4.5") was converted silently one event at a
    time and refused by no one; it is refused, the model unchanged."""
    model = OnlineSVR()
    with pytest.raises(InvalidInput, match="the text '3'"):
        model.learn_many(pd.DataFrame({"a": [1.0, 2.0]}), pd.Series(["3", "4.5"]))
    assert model.n_learned == 0
