"""Kernel adatron (Alg. 7.59 / CF 7.13): oracles, exactness of learn_many, state, river checks."""

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
from streamk.learners import KernelAdatron


def _data(seed: int, m: int = 40, d: int = 2, classes: int = 2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    if classes == 2:
        y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.4 * rng.normal(size=m) > 0, 1, -1)
    else:
        y = rng.integers(0, classes, size=m)
        X[:, 0] += y
    return X, y


def _dicts(X):
    return [{j: float(v) for j, v in enumerate(r)} for r in X]  # keys as for a NumPy array


def _qp_oracle(K, y, C, norm):
    """max sum(a) - a'Ha/2 s.t. 0 <= a <= C (no bias), by scipy's L-BFGS-B."""
    H = K * np.outer(y, y)
    if norm == 2 and math.isfinite(C):
        H = H + np.eye(len(y)) / C
    upper = C if norm == 1 and math.isfinite(C) else None
    res = minimize(
        lambda a: (0.5 * a @ H @ a - a.sum(), H @ a - 1.0),
        np.zeros(len(y)),
        jac=True,
        bounds=[(0.0, upper)] * len(y),
        method="L-BFGS-B",
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000},
    )
    return res.x, -res.fun


def _dual_objective(K, y, alpha, C, norm):
    H = K * np.outer(y, y)
    if norm == 2 and math.isfinite(C):
        H = H + np.eye(len(y)) / C
    return alpha.sum() - 0.5 * alpha @ H @ alpha


def _alpha_of(model, X):
    """alpha (in training-row order) of a model fitted on X, from its support set."""
    S = model.support_
    alpha = np.zeros(len(X))
    for row, c in zip(S.X, S.coef[:, 0]):
        i = int(np.argmin(((X - row[: X.shape[1]]) ** 2).sum(axis=1)))
        alpha[i] = abs(c)
    return alpha


# -- batch fit against an independent QP solver -------------------------------------------------
@pytest.mark.parametrize(
    "C, norm", [(1.0, 1), (0.1, 1), (10.0, 1), (1.0, 2), (0.5, 2), (math.inf, 1)]
)
def test_fit_matches_scipy_qp(C, norm):
    X, y = _data(0)
    if math.isinf(C):  # the hard margin needs separable data
        y = np.where(X[:, 0] > 0, 1, -1)
        X[:, 0] += 0.5 * y
    kernel = RBF(gamma=0.5)
    model = KernelAdatron(kernel=kernel, C=C, norm=norm).fit(X, y, max_epochs=20000, tol=1e-10)
    K = kernel.gram(X, X)
    alpha = _alpha_of(model, X)
    _, w_qp = _qp_oracle(K, y.astype(float), C, norm)
    w_ours = _dual_objective(K, y.astype(float), alpha, C, norm)
    assert w_ours == pytest.approx(w_qp, abs=1e-6)
    assert w_ours >= w_qp - 1e-6
    assert (alpha >= 0).all() and (alpha <= C + 1e-12).all() if norm == 1 else True
    # same held-out predictions as the QP solution
    a_qp, _ = _qp_oracle(K, y.astype(float), C, norm)
    Xt, _ = _data(1, m=200)
    f_qp = kernel.gram(Xt, X) @ (a_qp * y)
    f_ours = model.predict_many(Xt).to_numpy()
    clear = np.abs(f_qp) > 1e-3
    assert (np.where(f_qp[clear] >= 0, 1, -1) == f_ours[clear].astype(int)).all()


def test_fit_kkt_hard_margin_separable():
    # separable data: every margin >= 1, free support vectors exactly on it
    X, _ = _data(2)
    y = np.where(X[:, 0] > 0, 1, -1)
    X[:, 0] += 0.5 * y
    model = KernelAdatron(kernel=RBF(gamma=1.0)).fit(X, y, max_epochs=20000, tol=1e-10)
    f = np.array([model.decision_function_one(x)[0] for x in _dicts(X)])
    margins = y * f
    assert margins.min() >= 1 - 1e-6
    sv = _alpha_of(model, X) > 1e-9
    assert np.allclose(margins[sv], 1.0, atol=1e-6)


# -- the book's hand oracles (algorithms.md §9.2 item 8) -----------------------------------------
def test_book_oracle_8_two_orthogonal_points():
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    y = [1, -1]
    model = KernelAdatron(kernel=Linear(), resweeps=0)
    for x, label in zip(_dicts(X), y):
        model.learn_one(x, label)
    assert np.allclose(model.support_.coef[:, 0], [1.0, -1.0])  # alpha = (1, 1)
    fitted = KernelAdatron(kernel=Linear()).fit(X, y)
    assert np.allclose(np.sort(np.abs(fitted.support_.coef[:, 0])), [1.0, 1.0])
    margins = [label * fitted.decision_function_one(x)[0] for x, label in zip(_dicts(X), y)]
    assert np.allclose(margins, 1.0)


def test_book_divergence_check_single_point_x3():
    # The book's step 1 oscillates 0, 1, 0, 1, ... on x = 3 (k = 9) ...
    alpha, seen = 0.0, []
    for _ in range(4):
        alpha = max(alpha + 1.0 - 9.0 * alpha, 0.0)
        seen.append(alpha)
    assert seen == [1.0, 0.0, 1.0, 0.0]
    # ... eta = 1/k gives alpha = 1/9 at once, and it stays there.
    model = KernelAdatron(kernel=Linear(), resweeps=5)
    model.learn_one({"x": 3.0}, True)
    assert model.support_.coef[0, 0] == pytest.approx(1.0 / 9.0)
    assert model.decision_function_one({"x": 3.0})[0] == pytest.approx(1.0)
    fitted = KernelAdatron(kernel=Linear()).fit(np.array([[3.0]]), [True])
    assert fitted.support_.coef[0, 0] == pytest.approx(1.0 / 9.0)


# -- the on-line procedure, written plainly ----------------------------------------------------
def _plain_online(X, y, kernel, C, norm, resweeps):
    """The documented on-line rule with loops: new-example step, resweeps, zeros leave."""
    mu = 1.0 / C if norm == 2 else 0.0
    upper = C if norm == 1 else math.inf
    sv: list[int] = []  # indices into X, in insertion order
    alpha: dict[int, float] = {}

    def k(a, b):
        return float(kernel.gram(X[a][None, :], X[b][None, :])[0, 0])

    for i in range(len(X)):
        f = sum(alpha[j] * y[j] * k(j, i) for j in sv)
        a = min(max((1.0 - y[i] * f) / (k(i, i) + mu), 0.0), upper)
        if a > 0:
            sv.append(i)
            alpha[i] = a
        for _ in range(resweeps):
            for s in list(sv):
                f = sum(alpha[j] * y[j] * k(j, s) for j in sv)
                g = 1.0 - y[s] * f - mu * alpha[s]
                alpha[s] = min(max(alpha[s] + g / (k(s, s) + mu), 0.0), upper)
        for s in [s for s in sv if alpha[s] == 0.0]:
            sv.remove(s)
            del alpha[s]
    return {i: alpha[i] * y[i] for i in sv}


@pytest.mark.parametrize("C, norm, resweeps", [(1.0, 1, 1), (math.inf, 1, 2), (2.0, 2, 1)])
def test_learn_one_matches_plain_online_loop(C, norm, resweeps):
    X, y = _data(3, m=30)
    kernel = RBF(gamma=0.7)
    model = KernelAdatron(kernel=kernel, C=C, norm=norm, resweeps=resweeps)
    for x, label in zip(_dicts(X), y):
        model.learn_one(x, int(label))
    expected = _plain_online(X, y.astype(float), kernel, C, norm, resweeps)
    S = model.support_
    order = np.argsort(S.ids)
    got = S.coef[order, 0]
    assert len(got) == len(expected)
    assert np.allclose(got, list(expected.values()), atol=1e-10)
    assert np.allclose(S.X[order], X[list(expected)], atol=0)


def test_resweeps_drive_support_set_to_its_optimum():
    X, y = _data(4, m=25)
    kernel = RBF(gamma=0.5)
    model = KernelAdatron(kernel=kernel, C=1.0, resweeps=1)
    for x, label in zip(_dicts(X), y):
        model.learn_one(x, int(label))
    model._resweep(2000)  # many more passes over the same support set
    S = model.support_
    signs = np.sign(S.coef[:, 0])
    _, w_qp = _qp_oracle(S.gram_matrix, signs, 1.0, 1)
    assert _dual_objective(S.gram_matrix, signs, np.abs(S.coef[:, 0]), 1.0, 1) == pytest.approx(
        w_qp, abs=1e-6
    )


def test_fit_then_continue_online():
    X, y = _data(5, m=60)
    model = KernelAdatron(kernel=RBF(gamma=0.5), C=1.0).fit(X[:40], y[:40])
    n0 = model.n_support
    assert 0 < n0 <= 40 and model.n_learned == 40
    for x, label in zip(_dicts(X[40:]), y[40:]):
        model.learn_one(x, int(label))
    assert model.n_learned == 60
    acc = np.mean(model.predict_many(X).to_numpy().astype(int) == y)
    assert acc > 0.8


def test_multiclass_fit_is_one_adatron_per_column():
    X, y = _data(6, m=45, classes=3)
    kernel = RBF(gamma=0.5)
    model = KernelAdatron(kernel=kernel, C=1.0).fit(X, y, max_epochs=5000, tol=1e-10)
    assert model.support_.n_outputs == 3
    F = np.array([model.decision_function_one(x) for x in _dicts(X)])
    for c, cls in enumerate(model.classes_):
        yc = np.where(y == cls, 1, -1)
        binary = KernelAdatron(kernel=kernel, C=1.0).fit(X, yc, max_epochs=5000, tol=1e-10)
        fb = np.array([binary.decision_function_one(x)[0] for x in _dicts(X)])
        assert np.allclose(F[:, c], fb, atol=1e-8)
    assert set(model.predict_many(X)) <= set(model.classes_)


# -- learn_many == learn_one -------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    blocks=st.lists(st.integers(1, 12), min_size=1, max_size=6),
    classes=st.sampled_from([2, 3]),
    budget=st.sampled_from([None, 5, 12]),
    norm=st.sampled_from([1, 2]),
)
def test_learn_many_equals_learn_one(seed, blocks, classes, budget, norm):
    m = sum(blocks)
    X, y = _data(seed, m=m, d=3, classes=classes)
    params = dict(kernel=RBF(gamma=0.4), C=2.0, norm=norm, resweeps=1)
    if budget is not None:
        params["budget"] = RemoveOldest(budget)
    one, many = KernelAdatron(**params), KernelAdatron(**params)
    for x, label in zip(_dicts(X), y):
        one.learn_one(x, int(label))
    start = 0
    for b in blocks:
        frame = pd.DataFrame(X[start : start + b])
        many.learn_many(frame, pd.Series(y[start : start + b]))
        start += b
    assert one.n_support == many.n_support
    assert np.allclose(one.support_.coef, many.support_.coef, atol=1e-9)
    assert np.array_equal(one.support_.ids, many.support_.ids)
    Xt, _ = _data(seed + 1, m=20, d=3)
    Ft = np.array([one.decision_function_one(x) for x in _dicts(Xt)])
    Fm = np.array([many.decision_function_one(x) for x in _dicts(Xt)])
    assert np.allclose(Ft, Fm, atol=1e-9)


def test_learn_many_with_auto_gamma_warmup():
    X, y = _data(7, m=260, d=2)
    one, many = KernelAdatron(C=1.0, budget=30), KernelAdatron(C=1.0, budget=30)
    for x, label in zip(_dicts(X), y):
        one.learn_one(x, int(label))
    for s in range(0, 260, 50):
        many.learn_many(pd.DataFrame(X[s : s + 50]), list(y[s : s + 50]))
    assert one.kernel_ == many.kernel_
    assert np.allclose(one.support_.coef, many.support_.coef, atol=1e-9)


# -- budget, state, errors ---------------------------------------------------------------------
def test_budget_bounds_support_set():
    X, y = _data(8, m=200)
    model = KernelAdatron(kernel=RBF(gamma=0.5), C=1.0, budget=15)
    for x, label in zip(_dicts(X), y):
        model.learn_one(x, int(label))
        assert model.n_support <= 15
    assert model.n_updates >= model.n_support


def test_state_round_trip_continues_identically():
    X, y = _data(9, m=80, classes=3)
    model = KernelAdatron(kernel=RBF(gamma=0.5), C=1.0, budget=20, resweeps=2)
    for x, label in zip(_dicts(X[:50]), y[:50]):
        model.learn_one(x, int(label))
    clone = KernelAdatron.from_state(model.state())
    for x, label in zip(_dicts(X[50:]), y[50:]):
        model.learn_one(x, int(label))
        clone.learn_one(x, int(label))
    assert np.allclose(model.support_.coef, clone.support_.coef, atol=1e-12)
    assert model.predict_many(X).tolist() == clone.predict_many(X).tolist()


@pytest.mark.parametrize(
    "params",
    [{"C": 0.0}, {"C": -1.0}, {"C": "big"}, {"norm": 3}, {"resweeps": -1}, {"resweeps": 1.5}],
)
def test_bad_parameters_raise_config_error(params):
    with pytest.raises(ConfigError):
        KernelAdatron(**params)


def test_missing_label_raises():
    with pytest.raises(InvalidInput):
        KernelAdatron().learn_one({"a": 1.0}, None)


@pytest.mark.parametrize("params", list(KernelAdatron._unit_test_params()))
def test_river_check_estimator(params, river_checks):
    assert river_checks(KernelAdatron(**params)) > 20


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
    X, y = _data(10, m=90, d=2, classes=3)
    params = dict(kernel=RBF(gamma=0.5), C=1.0, budget=policy)
    one, many = KernelAdatron(**params), KernelAdatron(**params)
    for x, label in zip(_dicts(X), y):
        one.learn_one(x, int(label))
        assert one.n_support <= 8
    for s in range(0, 90, 13):
        many.learn_many(pd.DataFrame(X[s : s + 13]), list(y[s : s + 13]))
    assert np.array_equal(one.support_.ids, many.support_.ids)
    assert np.allclose(one.support_.coef, many.support_.coef, atol=1e-9)
    assert np.mean(one.predict_many(X).to_numpy().astype(int) == y) > 0.4


# -- 2-norm resweeps on both labels (issue 15) -----------------------------------------------------
@pytest.mark.parametrize("label, sign", [(True, 1.0), (False, -1.0)])
@pytest.mark.parametrize("resweeps", [1, 5])
def test_two_norm_resweeps_single_point_closed_form(label, sign, resweeps):
    """One point x = 1, linear kernel, C = 1: alpha = 1 / (k(x, x) + 1/C) = 0.5 for either label.

    The fixed point of the 2-norm dual max a - a^2 (k + 1/C) / 2 does not depend on the label;
    the resweep once used the signed coefficient in the 1/C term and ran away for y = -1.
    """
    model = KernelAdatron(kernel=Linear(), C=1.0, norm=2, resweeps=resweeps)
    model.learn_one({"x": 1.0}, label)
    assert model.support_.coef[0, 0] == pytest.approx(sign * 0.5, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_two_norm_resweeps_reach_the_qp_optimum_for_both_labels(seed):
    """Many resweeps over a mixed-label support set converge to the 2-norm dual's optimum."""
    X, y = _data(seed, m=20)
    model = KernelAdatron(kernel=RBF(gamma=0.5), C=2.0, norm=2, resweeps=1)
    for x, label in zip(_dicts(X), y):
        model.learn_one(x, int(label))
    model._resweep(3000)
    S = model.support_
    signs = np.sign(S.coef[:, 0])
    assert (signs < 0).any() and (signs > 0).any()
    a_qp, w_qp = _qp_oracle(S.gram_matrix, signs, 2.0, 2)
    assert np.allclose(np.abs(S.coef[:, 0]), a_qp, atol=1e-5)
    assert _dual_objective(S.gram_matrix, signs, np.abs(S.coef[:, 0]), 2.0, 2) == pytest.approx(
        w_qp, abs=1e-8
    )


def test_two_norm_multiclass_resweeps_match_plain_loop_per_column():
    """The multiclass (array) branch of the resweep takes the same step as the book's loop."""
    X, y = _data(5, m=24, classes=3)
    kernel = RBF(gamma=0.6)
    model = KernelAdatron(kernel=kernel, C=1.0, norm=2, resweeps=2)
    for x, label in zip(_dicts(X), y):
        model.learn_one(x, int(label))
    S = model.support_
    # in the 2-norm every example joins (alpha = 1/(k + 1/C) > 0 from zero), none leaves
    for c, cls in enumerate(model.classes_):
        t = np.where(y == cls, 1.0, -1.0)
        expected = _plain_online_no_removal(X, t, kernel, 1.0, 2)
        order = np.argsort(S.ids)
        assert np.allclose(S.coef[order, c], expected, atol=1e-10)


def _plain_online_no_removal(X, y, kernel, C, mu_norm, resweeps=2):
    mu = 1.0 / C
    n = len(X)
    K = kernel.gram(X, X)
    alpha = np.zeros(n)
    for i in range(n):
        f = sum(alpha[j] * y[j] * K[j, i] for j in range(i))
        alpha[i] = max((1.0 - y[i] * f) / (K[i, i] + mu), 0.0)
        for _ in range(resweeps):
            for s in range(i + 1):
                f = sum(alpha[j] * y[j] * K[j, s] for j in range(i + 1))
                g = 1.0 - y[s] * f - mu * alpha[s]
                alpha[s] = max(alpha[s] + g / (K[s, s] + mu), 0.0)
    return alpha * y
