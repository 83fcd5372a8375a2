"""SMO solvers against LIBSVM (scikit-learn), KKT conditions, warm starts and the book's oracles."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_moons
from sklearn.svm import SVC, SVR, NuSVC, NuSVR, OneClassSVM

from streamk.errors import ConvergenceWarning
from streamk.solvers import hypersphere, nu_svc, nu_svr, one_class, svc, svr


def rbf(X: np.ndarray, gamma: float) -> np.ndarray:
    sq = (X * X).sum(1)
    return np.exp(-gamma * np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0))


def moons(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = make_moons(n, noise=0.3, random_state=seed)
    return X, rbf(X, 1.0), 2.0 * y - 1.0


def blobs(n: int = 300, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.5 * rng.standard_normal(n) > 0.5, 1.0, -1.0)
    return X, rbf(X, 0.2), y


def bananas(n: int = 600) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    river_datasets = pytest.importorskip("river.datasets")
    rows = []
    for i, (x, label) in enumerate(river_datasets.Bananas()):
        if i >= n:
            break
        rows.append((x["1"], x["2"], label))
    X = np.array([[r[0], r[1]] for r in rows])
    y = np.array([1.0 if r[2] else -1.0 for r in rows])
    return X, rbf(X, 2.0), y


DATA = {"moons": moons, "blobs": blobs, "bananas": bananas}


def libsvm_svc_objective(model: SVC, K: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    a = np.zeros(len(y))
    a[model.support_] = np.abs(model.dual_coef_[0])
    Q = np.outer(y, y) * K
    return a, 0.5 * a @ Q @ a - a.sum()


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_svc_matches_libsvm(name: str, C: float) -> None:
    _, K, y = DATA[name]()
    ours = svc(K, y, C=C, tol=1e-3)
    ref = SVC(kernel="precomputed", C=C, tol=1e-3).fit(K, y)
    _, ref_obj = libsvm_svc_objective(ref, K, y)
    assert ours.status == 0
    assert abs(ours.objective - ref_obj) <= 1e-3 * abs(ref_obj)
    f = K @ (ours.alpha * y) + ours.b
    agree = np.mean(np.sign(f) == np.sign(ref.decision_function(K)))
    assert agree >= 0.995
    assert abs(ours.b - ref.intercept_[0]) <= 0.05 * max(1.0, abs(ref.intercept_[0]))


def test_svc_kkt_conditions() -> None:
    _, K, y = moons(500, seed=3)
    C, tol = 2.0, 1e-3
    r = svc(K, y, C=C, tol=tol)
    a = r.alpha
    assert np.all(a >= 0) and np.all(a <= C)
    assert abs(a @ y) <= 1e-9 * C * len(y)
    m = y * (K @ (a * y) + r.b)  # functional margins
    free = (a > 0) & (a < C)
    assert np.all(m[a == 0] >= 1 - tol)
    assert np.all(m[a == C] <= 1 + tol)
    assert np.all(np.abs(m[free] - 1) <= tol)
    assert r.gap < tol


def test_svc_without_shrinking_gives_same_optimum() -> None:
    _, K, y = blobs()
    a = svc(K, y, C=1.0, shrinking=True)
    b = svc(K, y, C=1.0, shrinking=False)
    assert abs(a.objective - b.objective) <= 1e-3 * abs(b.objective)


def test_svc_shrinking_compacts_on_a_larger_problem() -> None:
    """Enough rows that shrinking runs, compacts the block, and reconstructs gradients."""
    _, K, y = moons(2500, seed=5)
    ours = svc(K, y, C=1.0)
    ref = SVC(kernel="precomputed", C=1.0).fit(K, y)
    _, ref_obj = libsvm_svc_objective(ref, K, y)
    assert abs(ours.objective - ref_obj) <= 1e-3 * abs(ref_obj)
    assert np.mean(np.sign(K @ (ours.alpha * y) + ours.b) == ref.predict(K)) >= 0.995


@pytest.mark.parametrize("C,ratio", [(1.0, 0.5), (10.0, 0.8)])
def test_svc_warm_start_from_90_percent_needs_fewer_iterations(C: float, ratio: float) -> None:
    """Measured (NumPy / compiled): 76 / 74 vs 209 / 233 iterations at C=1, 591 / 669 vs
    1016 / 860 at C=10 (many bounded SVs move; the compiled path is LIBSVM's heuristics)."""
    _, K, y = moons(1000, seed=7)
    m = 900
    part = svc(K[:m, :m], y[:m], C=C)
    alpha0 = np.concatenate((part.alpha, np.zeros(len(y) - m)))
    cold = svc(K, y, C=C)
    warm = svc(K, y, C=C, alpha0=alpha0)
    assert warm.status == 0
    assert abs(warm.objective - cold.objective) <= 1e-3 * abs(cold.objective)
    assert warm.n_iter < ratio * cold.n_iter


def test_svc_infeasible_warm_start_is_projected_and_converges() -> None:
    _, K, y = blobs()
    rng = np.random.default_rng(0)
    alpha0 = rng.uniform(-1.0, 3.0, len(y))  # outside the box and off y'a = 0
    cold = svc(K, y, C=1.0)
    warm = svc(K, y, C=1.0, alpha0=alpha0)
    assert warm.status == 0
    assert np.all((warm.alpha >= 0) & (warm.alpha <= 1.0))
    assert abs(warm.alpha @ y) < 1e-8
    assert abs(warm.objective - cold.objective) <= 1e-3 * abs(cold.objective)


def test_svc_max_iter_warns_and_reports_status() -> None:
    _, K, y = blobs()
    with pytest.warns(ConvergenceWarning):
        r = svc(K, y, C=1.0, max_iter=5)
    assert r.status == 1 and r.n_iter == 5


def test_hard_margin_oracle_item_6() -> None:
    """algorithms.md §9.2 item 6: x = {-1, +1}, linear kernel: alpha = (1/2, 1/2), w = 1, b = 0."""
    x = np.array([-1.0, 1.0])
    r = svc(np.outer(x, x), np.array([-1.0, 1.0]), C=np.inf, tol=1e-9)
    assert np.allclose(r.alpha, [0.5, 0.5])
    assert abs(r.b) < 1e-12
    assert np.isclose((r.alpha * np.array([-1.0, 1.0])) @ x, 1.0)  # w
    assert np.isclose(r.alpha.sum() ** -0.5, 1.0)  # gamma* = (sum alpha)^(-1/2)


def test_two_norm_svm_threshold_is_the_same_for_every_sv_item_14() -> None:
    """Item 14: on K + mu I (hard margin), b = y_i - sum_j a_j y_j (K_ij + mu d_ij) for every SV."""
    _, K, y = blobs(150)
    mu = 0.5
    Kmu = K + mu * np.eye(len(y))
    r = svc(Kmu, y, C=np.inf, tol=1e-8)
    sv = r.alpha > 1e-10
    b_each = y[sv] - (Kmu @ (r.alpha * y))[sv]
    assert b_each.max() - b_each.min() < 1e-6
    assert abs(np.mean(b_each) - r.b) < 1e-6


def test_nu_svc_matches_libsvm() -> None:
    _, K, y = moons(400)
    ours = nu_svc(K, y, nu=0.3)
    ref = NuSVC(kernel="precomputed", nu=0.3).fit(K, y)
    f = K @ (ours.alpha * y) + ours.b
    assert np.mean(np.sign(f) == np.sign(ref.decision_function(K))) >= 0.995
    assert np.max(np.abs(f - ref.decision_function(K))) < 0.02
    book = ours.info["alpha_book"]  # the book's CF 7.7 normalisation
    assert np.isclose(book.sum(), 1.0) and np.all(book <= 1.0 / (0.3 * len(y)) + 1e-12)
    assert np.isclose(book @ y, 0.0, atol=1e-12)


def test_one_class_matches_libsvm() -> None:
    _, K, _ = blobs()
    ours = one_class(K, nu=0.2)
    ref = OneClassSVM(kernel="precomputed", nu=0.2).fit(K)
    f = K @ ours.alpha + ours.b
    assert np.mean(np.sign(f) == np.sign(ref.decision_function(K))) >= 0.995
    assert abs(ours.b - ref.intercept_[0]) <= 1e-2 * abs(ref.intercept_[0])
    assert np.isclose(ours.alpha.sum(), 0.2 * len(K))


@pytest.mark.parametrize("C,eps", [(1.0, 0.1), (10.0, 0.05)])
def test_svr_matches_libsvm(C: float, eps: float) -> None:
    X, K, _ = moons(400)
    t = np.sin(3 * X[:, 0]) + 0.1 * np.random.default_rng(0).standard_normal(len(X))
    ours = svr(K, t, C=C, epsilon=eps)
    ref = SVR(kernel="precomputed", C=C, epsilon=eps).fit(K, t)
    beta = np.zeros(len(t))
    beta[ref.support_] = ref.dual_coef_[0]
    ref_obj = 0.5 * beta @ K @ beta - t @ beta + eps * np.abs(beta).sum()
    assert abs(ours.objective - ref_obj) <= 1e-3 * abs(ref_obj)
    assert np.max(np.abs(K @ ours.alpha + ours.b - ref.predict(K))) < 5e-3
    assert abs(ours.alpha.sum()) < 1e-9 and np.all(np.abs(ours.alpha) <= C + 1e-12)


def test_svr_warm_start_needs_fewer_iterations() -> None:
    X, K, _ = moons(800, seed=2)
    t = np.sin(3 * X[:, 0])
    m = 720
    part = svr(K[:m, :m], t[:m], C=1.0, epsilon=0.05)
    cold = svr(K, t, C=1.0, epsilon=0.05)
    warm = svr(K, t, C=1.0, epsilon=0.05, alpha0=np.concatenate((part.alpha, np.zeros(80))))
    assert abs(warm.objective - cold.objective) <= 1e-3 * abs(cold.objective)
    assert warm.n_iter < 0.8 * cold.n_iter  # measured 415 vs 594


def test_nu_svr_matches_libsvm() -> None:
    X, K, _ = moons(300)
    t = X[:, 0] + 0.1 * np.random.default_rng(1).standard_normal(len(X))
    ours = nu_svr(K, t, C=1.0, nu=0.3)
    ref = NuSVR(kernel="precomputed", C=1.0, nu=0.3).fit(K, t)
    assert np.max(np.abs(K @ ours.alpha + ours.b - ref.predict(K))) < 5e-3
    out = np.abs(t - (K @ ours.alpha + ours.b)) > ours.info["epsilon"] + 1e-3
    assert out.sum() <= 0.3 * len(t) + 1  # nu bounds the fraction outside the tube


def test_hard_hypersphere_oracle_item_5() -> None:
    """Item 5: points {0, 2}, linear kernel: alpha = (1/2, 1/2), centre 1, r^2 = W = 1."""
    x = np.array([0.0, 2.0])
    r = hypersphere(np.outer(x, x))
    assert np.allclose(r.alpha, [0.5, 0.5])
    assert np.isclose(r.info["radius2"], 1.0) and np.isclose(r.info["W"], 1.0)
    assert np.isclose(r.alpha @ x, 1.0)


def test_soft_hypersphere_strong_duality_and_nu_bounds_item_13() -> None:
    _, K, _ = blobs(200)
    n, nu = len(K), 0.2
    C = 1.0 / (nu * n)
    r = hypersphere(K, C=C, tol=1e-9)
    a = r.alpha
    assert np.isclose(a.sum(), 1.0) and np.all((a >= 0) & (a <= C + 1e-15))
    dist2 = np.diag(K) - 2 * K @ a + a @ K @ a
    r2 = r.info["radius2"]
    xi = np.maximum(dist2 - r2, 0.0)
    assert np.isclose(r2 + C * xi.sum(), r.info["W"], rtol=1e-6)  # primal = dual
    assert np.isclose(xi.sum(), r.info["slack_sum"], rtol=1e-5, atol=1e-9)
    outside = np.sum(dist2 > r2 + 1e-7)
    not_interior = np.sum(dist2 >= r2 - 1e-7)
    assert outside <= nu * n <= not_interior


def test_hypersphere_equals_one_class_for_normalised_kernel() -> None:
    """Remark 7.16: with k(x, x) = 1 the sphere and the one-class SVM coincide (alpha scaled)."""
    _, K, _ = blobs(200)
    nu = 0.3
    sph = hypersphere(K, C=1.0 / (nu * len(K)), tol=1e-8)
    oc = one_class(K, nu=nu, tol=1e-8)
    assert np.allclose(sph.alpha, oc.alpha / oc.alpha.sum(), atol=1e-5)
