"""Ridge, coordinate ascent, ranking, projection and input checks against independent oracles."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

from streamk.errors import ConvergenceWarning, SolverError
from streamk.solvers import (
    RidgeWindow,
    adatron_dual,
    nu_svc,
    project_box_equality,
    rank,
    ridge,
    svc,
    svr_dual_no_bias,
)
from streamk.solvers import core as _smo_core


def rbf(X: np.ndarray, gamma: float) -> np.ndarray:
    sq = (X * X).sum(1)
    return np.exp(-gamma * np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0))


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, rbf(X, 0.5), y


# ---------------------------------------------------------------- ridge
def test_ridge_primal_equals_dual_item_1() -> None:
    X = np.array([[1.0], [2.0]])
    r = ridge(X @ X.T, np.array([1.0, 2.0]), lam=1.0)
    assert np.allclose(r.alpha, [1 / 6, 1 / 3])
    assert np.isclose((X.T @ r.alpha)[0], 5 / 6)
    assert np.isclose((X.T @ r.alpha)[0], np.linalg.solve(X.T @ X + 1.0, X.T @ [1.0, 2.0])[0])


def test_ridge_equals_numpy_solve() -> None:
    X, K, _ = data(120)
    t = np.random.default_rng(3).standard_normal((120, 2))
    r = ridge(K, t, lam=0.3)
    assert np.allclose(r.alpha, np.linalg.solve(K + 0.3 * np.eye(120), t), atol=1e-10)


def test_ridge_window_rank_k_updates_equal_a_fresh_cholesky() -> None:
    X, K, _ = data(150, seed=4)
    t = X[:, 0] - X[:, 1]
    lam = 0.1
    w = RidgeWindow(lam)
    edges = [0, 1, 20, 21, 70, 150]
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        w.append(K[lo:hi, :lo], K[lo:hi, lo:hi], t[lo:hi])
    assert w.n == 150
    assert np.allclose(w.L, np.linalg.cholesky(K + lam * np.eye(150)), atol=1e-10)
    assert np.allclose(w.alpha, ridge(K, t, lam).alpha, atol=1e-9)


# ---------------------------------------------------------------- coordinate ascent
def lbfgs_min(fun, grad, x0: np.ndarray, bounds: list) -> float:
    res = minimize(fun, x0, jac=grad, method="L-BFGS-B", bounds=bounds,
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})  # fmt: skip
    return float(res.fun)


@pytest.mark.parametrize("C,norm", [(np.inf, 1), (1.0, 1), (0.1, 1), (1.0, 2)])
def test_adatron_equals_an_independent_qp(C: float, norm: int) -> None:
    _, K, y = data(40, seed=1)
    H = np.outer(y, y) * K + (np.eye(40) / C if norm == 2 else 0.0)
    r = adatron_dual(K, y, C=C, norm=norm, tol=1e-10, max_epochs=100000)
    assert r.status == 0
    ub = C if norm == 1 else np.inf
    ref = lbfgs_min(lambda a: 0.5 * a @ H @ a - a.sum(), lambda a: H @ a - 1.0, np.zeros(40),
                    [(0.0, None if np.isinf(ub) else ub)] * 40)  # fmt: skip
    assert abs(r.objective - ref) <= 1e-6 * max(1.0, abs(ref))
    assert np.all((r.alpha >= 0) & (r.alpha <= ub))


def test_adatron_step_is_exact_item_8() -> None:
    """Item 8: one point x = 3, linear kernel: eta = 1/K_ii gives alpha = 1/9 at once."""
    r = adatron_dual(np.array([[9.0]]), np.array([1.0]))
    assert np.isclose(r.alpha[0], 1 / 9) and r.info["steps"] == 1


def test_adatron_warm_start_from_the_solution_needs_no_epoch() -> None:
    _, K, y = data(60, seed=2)
    r = adatron_dual(K, y, C=1.0, tol=1e-8)
    again = adatron_dual(K, y, C=1.0, tol=1e-6, alpha0=r.alpha)
    assert again.n_iter == 0 and again.status == 0


def test_svr_no_bias_one_point_oracle_item_9() -> None:
    r = svr_dual_no_bias(np.array([[1.0]]), np.array([3.0]), epsilon=0.5)
    assert np.isclose(r.alpha[0], 2.5)


@pytest.mark.parametrize("C", [np.inf, 0.5])
def test_svr_no_bias_equals_an_independent_qp(C: float) -> None:
    X, K, _ = data(40, seed=5)
    t = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    K = K + 1e-3 * np.eye(40)  # strictly convex so C = inf is bounded
    eps = 0.05
    r = svr_dual_no_bias(K, t, epsilon=eps, C=C, tol=1e-10, max_epochs=100000)
    assert r.status == 0

    def fun(v: np.ndarray) -> float:
        b = v[:40] - v[40:]
        return 0.5 * b @ K @ b - t @ b + eps * v.sum()

    def grad(v: np.ndarray) -> np.ndarray:
        g = K @ (v[:40] - v[40:]) - t
        return np.concatenate((g + eps, -g + eps))

    ref = lbfgs_min(fun, grad, np.zeros(80), [(0.0, None if np.isinf(C) else C)] * 80)
    assert abs(r.objective - ref) <= 1e-6 * max(1.0, abs(ref))
    assert np.all(np.abs(r.alpha) <= C)


# ---------------------------------------------------------------- ranking
def ranking_data(n: int, seed: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    score = X @ np.array([1.0, 0.5]) + noise * rng.standard_normal(n)
    return X, np.digitize(score, [-0.8, 0.0, 0.8]) + 1


def predict_rank(f: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([1 + int(np.argmax(fi < b)) for fi in f])  # min{y : f < b_y}


def test_rank_constraints_hold() -> None:
    X, y = ranking_data(200, 0, 0.3)
    nu = 0.1
    with pytest.warns(ConvergenceWarning):  # feasibility holds at every iterate
        r = rank(rbf(X, 0.1), y, nu=nu, max_iter=3000)
    au, al = r.info["au"], r.info["al"]
    box = 1.0 / (nu * len(y))
    assert np.all((au >= 0) & (au <= box + 1e-15) & (al >= 0) & (al <= box + 1e-15))
    assert np.isclose(au.sum() + al.sum(), 1.0)
    assert np.all(al[y == 4] == 0) and np.all(au[y == 1] == 0)
    for g in (1, 2, 3):
        assert np.isclose(al[y == g].sum(), au[y == g + 1].sum(), atol=1e-12)
    b = r.info["thresholds"]
    assert np.all(np.diff(b[:-1]) >= 0) and np.isinf(b[-1])
    assert np.allclose(r.alpha, au - al)


def test_rank_separable_data_is_ranked_correctly() -> None:
    X, y = ranking_data(120, 1, 0.0)
    keep = np.abs(X @ np.array([1.0, 0.5])[:, None] - np.array([-0.8, 0.0, 0.8])).min(1) > 0.1
    X, y = X[keep], y[keep]
    K = X @ X.T
    r = rank(K, y, C=1.0, tol=1e-8)  # box inactive: hard-margin ranking
    assert r.status == 0 and r.info["gamma"] > 0
    assert np.array_equal(predict_rank(K @ r.alpha, r.info["thresholds"]), y)


def test_rank_objective_matches_slsqp_on_a_tiny_problem() -> None:
    X, y = ranking_data(24, 2, 0.4)
    K = rbf(X, 0.5)
    n, nu = len(y), 0.5
    r = rank(K, y, nu=nu, tol=1e-9)
    R, box = int(y.max()), 1.0 / (nu * n)
    cons = [{"type": "eq", "fun": lambda v: v.sum() - 1.0}]
    for g in range(1, R):
        cons.append(
            {"type": "eq", "fun": lambda v, g=g: v[n:][y == g].sum() - v[:n][y == g + 1].sum()}
        )  # noqa: E501
    bounds = [(0.0, 0.0) if y[i] == 1 else (0.0, box) for i in range(n)]
    bounds += [(0.0, 0.0) if y[i] == R else (0.0, box) for i in range(n)]
    x0 = np.array([0.0 if hi == 0 else 1.0 for _, hi in bounds])
    res = minimize(lambda v: 0.5 * (v[:n] - v[n:]) @ K @ (v[:n] - v[n:]), x0 / x0.sum(),
                   method="SLSQP", bounds=bounds, constraints=cons,
                   options={"ftol": 1e-14, "maxiter": 2000})  # fmt: skip
    assert res.success
    assert abs(r.objective - res.fun) <= 1e-6 * abs(res.fun) + 1e-12


# ---------------------------------------------------------------- projection and checks
def test_projection_is_the_euclidean_projection() -> None:
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 2, 12)
    z = np.where(rng.random(12) > 0.5, 1.0, -1.0)
    C = np.full(12, 1.0)
    x = project_box_equality(a, z, C, 0.5)
    assert np.all((x >= 0) & (x <= 1)) and np.isclose(z @ x, 0.5)
    res = minimize(lambda v: 0.5 * np.sum((v - a) ** 2), np.clip(a, 0, 1), method="SLSQP",
                   bounds=[(0, 1)] * 12, constraints=[{"type": "eq", "fun": lambda v: z @ v - 0.5}],
                   options={"ftol": 1e-14})  # fmt: skip
    assert np.allclose(x, res.x, atol=1e-6)
    assert np.array_equal(project_box_equality(x, z, C, 0.5), x)


def test_projection_reports_an_empty_set() -> None:
    with pytest.raises(SolverError, match="no feasible point"):
        project_box_equality(np.zeros(3), np.ones(3), np.ones(3), 5.0)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: svc(np.ones((3, 2)), [1, -1, 1]), "square"),
        (lambda: svc(np.array([[1.0, np.nan], [np.nan, 1.0]]), [1, -1]), "non-finite"),
        (lambda: svc(np.eye(3), [1, 0, -1]), "labels -1 and \\+1"),
        (lambda: svc(np.eye(3), [1, -1]), "entries"),
        (lambda: svc(np.eye(2), [1, -1], C=0.0), "C must be > 0"),
        (lambda: svc(np.eye(2), [1, -1], C=-1.0), "C must be > 0"),
        (lambda: nu_svc(np.eye(4), [1, -1, 1, -1], nu=0.0), "nu must lie in"),
        (lambda: nu_svc(np.eye(4), [1, -1, 1, -1], nu=1.5), "nu must lie in"),
        (lambda: ridge(np.eye(2), [1.0, 2.0], lam=0.0), "lam must be > 0"),
        (lambda: rank(np.eye(3), [1, 1, 1], C=1.0), "two distinct levels"),
    ],
)
def test_bad_inputs_raise_solver_error(call, match: str) -> None:
    with pytest.raises(SolverError, match=match):
        call()


def _not_separable_through_the_origin() -> tuple[np.ndarray, np.ndarray]:
    """A linear kernel with more points than features, labels no hyperplane through the
    origin separates: the bias-free hard-margin dual is unbounded."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = np.where(X[:, 0] + 0.7 * rng.normal(size=120) > 0, 1.0, -1.0)
    return X @ X.T, y


def test_an_unbounded_hard_margin_falls_without_end_and_says_what_to_do():
    """With ``C=inf`` and ``norm=1`` the objective falls in proportion to the iterations
    (four times the epochs: about four times lower, larger alphas): no limit to reach. The
    warning says why and that a finite ``C`` or ``norm=2`` is the way out, not more
    iterations; with a finite ``C`` it converges, and a box that merely ran out of
    iterations gets no such hint."""
    K, y = _not_separable_through_the_origin()
    runs = []
    for epochs in (10, 40):
        with pytest.warns(ConvergenceWarning, match="give a finite C, or norm=2"):
            runs.append(adatron_dual(K, y, max_epochs=epochs, backend="numpy"))
    assert runs[1].objective < 3.0 * runs[0].objective < 0.0
    assert runs[1].alpha.max() > 3.0 * runs[0].alpha.max()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert adatron_dual(K, y, C=1.0, backend="numpy").status == 0
    with pytest.warns(ConvergenceWarning) as caught:
        adatron_dual(K, y, C=1.0, max_epochs=1, tol=1e-12, backend="numpy")
    assert all("finite C" not in str(w.message) for w in caught)


def test_the_compiled_adatron_says_the_same_of_an_unbounded_hard_margin():
    """The compiled core (its step cap, 10^7) ends the same problem with the same hint."""
    if not _smo_core.compiled_available():
        pytest.skip("compiled core not built")
    K, y = _not_separable_through_the_origin()
    with pytest.warns(ConvergenceWarning, match="give a finite C, or norm=2"):
        r = adatron_dual(K, y, backend="compiled")
    assert r.status == 1 and r.objective < -1e6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert adatron_dual(K, y, C=1.0, backend="compiled").status == 0
