"""The compiled SMO core and the NumPy solver, each against LIBSVM (scikit-learn) on real data.

Oracle: scikit-learn's SVC / NuSVC / SVR / NuSVR / OneClassSVM on the same precomputed kernel,
at a tight tolerance so both optima are pinned: dual objective to 1e-6 relative, the same
support set, intercept within 1e-6. Then the kernel sources: rows with an RBF kernel computed
in C, any other kernel through the callback, and a cache too small to hold two columns' worth
of the problem all give the Gram path's solution.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_wine, make_moons
from sklearn.svm import SVC, SVR, NuSVC, NuSVR, OneClassSVM

from streamk.kernels import RBF, Laplacian, Polynomial
from streamk.solvers import nu_svc, nu_svr, one_class, project_box_equality, svc, svr
from streamk.solvers.core import KernelColumns, compiled_available

BACKENDS = [
    "numpy",
    pytest.param(
        "compiled",
        marks=pytest.mark.skipif(not compiled_available(), reason="compiled core not built"),
    ),
]
TOL = 1e-9
# The compiled core caches Q in single precision, as LIBSVM does (half the memory traffic);
# gradients, alpha and the objective are double. Against the all-double NumPy path that is
# rounding of Q at 2^-24 relative: measured 2e-8 on the objective and 3e-6 on alpha.
QF_OBJ = 1e-7
QF_ALPHA = 1e-5


def _standard(X: np.ndarray) -> np.ndarray:
    X = X - X.mean(0)
    sd = X.std(0)
    return X / np.where(sd > 0, sd, 1.0)


def _rbf(X: np.ndarray) -> np.ndarray:
    gamma = 1.0 / X.shape[1]  # scikit-learn's gamma='scale' on standardised data
    return RBF(gamma=gamma).gram(X, X)


def classification(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if name == "breast_cancer":
        X, t = load_breast_cancer(return_X_y=True)
        y = np.where(t == 1, 1.0, -1.0)
    elif name == "digits":
        X, t = load_digits(return_X_y=True)
        X, t = X[:600], t[:600]
        y = np.where(t == 0, 1.0, -1.0)
    else:
        X, t = load_wine(return_X_y=True)
        y = np.where(t == 0, 1.0, -1.0)
    X = _standard(X.astype(np.float64))
    return X, _rbf(X), y


def regression() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, t = load_diabetes(return_X_y=True)
    X = _standard(X)
    return X, _rbf(X), (t - t.mean()) / t.std()


def _sv(alpha: np.ndarray) -> set[int]:
    return set(np.flatnonzero(np.abs(alpha) > 0).tolist())


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["breast_cancer", "digits", "wine"])
@pytest.mark.parametrize("C", [1.0, 10.0])
def test_svc_equals_libsvm(backend: str, name: str, C: float) -> None:
    _, K, y = classification(name)
    ours = svc(K, y, C=C, tol=TOL, backend=backend)
    ref = SVC(kernel="precomputed", C=C, tol=TOL).fit(K, y)
    a = np.zeros(len(y))
    a[ref.support_] = np.abs(ref.dual_coef_[0])
    ref_obj = 0.5 * (a * y) @ K @ (a * y) - a.sum()
    assert _rel(ours.objective, ref_obj) < 1e-6
    assert _sv(ours.alpha) == set(ref.support_.tolist())
    assert abs(ours.b - ref.intercept_[0]) < 1e-6
    assert ours.status == 0 and ours.gap < TOL


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["breast_cancer", "wine"])
def test_nu_svc_equals_libsvm(backend: str, name: str) -> None:
    _, K, y = classification(name)
    ours = nu_svc(K, y, nu=0.2, tol=TOL, backend=backend)
    ref = NuSVC(kernel="precomputed", nu=0.2, tol=TOL).fit(K, y)
    a = np.zeros(len(y))
    a[ref.support_] = np.abs(ref.dual_coef_[0])
    assert np.allclose(ours.alpha, a, atol=1e-6 * a.max())
    assert _sv(ours.alpha) == set(ref.support_.tolist())
    assert abs(ours.b - ref.intercept_[0]) < 1e-6


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["breast_cancer", "digits", "wine"])
def test_one_class_equals_libsvm(backend: str, name: str) -> None:
    _, K, _ = classification(name)
    ours = one_class(K, nu=0.1, tol=TOL, backend=backend)
    ref = OneClassSVM(kernel="precomputed", nu=0.1, tol=TOL).fit(K)
    a = np.zeros(len(K))
    a[ref.support_] = ref.dual_coef_[0]
    assert _rel(ours.objective, 0.5 * a @ K @ a) < 1e-6
    assert _sv(ours.alpha) == set(ref.support_.tolist())
    assert abs(ours.b - ref.intercept_[0]) < 1e-6


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("C, eps", [(1.0, 0.1), (10.0, 0.2)])
def test_svr_equals_libsvm(backend: str, C: float, eps: float) -> None:
    _, K, t = regression()
    ours = svr(K, t, C=C, epsilon=eps, tol=TOL, backend=backend)
    ref = SVR(kernel="precomputed", C=C, epsilon=eps, tol=TOL).fit(K, t)
    beta = np.zeros(len(t))
    beta[ref.support_] = ref.dual_coef_[0]
    ref_obj = 0.5 * beta @ K @ beta - t @ beta + eps * np.abs(beta).sum()
    assert _rel(ours.objective, ref_obj) < 1e-6
    assert _sv(ours.alpha) == set(ref.support_.tolist())
    assert abs(ours.b - ref.intercept_[0]) < 1e-6


@pytest.mark.parametrize("backend", BACKENDS)
def test_nu_svr_equals_libsvm(backend: str) -> None:
    _, K, t = regression()
    ours = nu_svr(K, t, C=1.0, nu=0.3, tol=TOL, backend=backend)
    ref = NuSVR(kernel="precomputed", C=1.0, nu=0.3, tol=TOL).fit(K, t)
    beta = np.zeros(len(t))
    beta[ref.support_] = ref.dual_coef_[0]
    assert np.allclose(ours.alpha, beta, atol=1e-6)
    assert _sv(ours.alpha) == set(ref.support_.tolist())
    assert abs(ours.b - ref.intercept_[0]) < 1e-6


# -- the two paths agree, warm and cold --------------------------------------------------------
@pytest.mark.skipif(not compiled_available(), reason="compiled core not built")
@pytest.mark.parametrize("name", ["breast_cancer", "digits"])
def test_compiled_equals_numpy_warm_and_cold(name: str) -> None:
    _, K, y = classification(name)
    rng = np.random.default_rng(0)
    a0 = rng.uniform(0.0, 2.0, len(y))
    for alpha0 in (None, a0):
        c = svc(K, y, C=2.0, tol=TOL, alpha0=alpha0, backend="compiled")
        n = svc(K, y, C=2.0, tol=TOL, alpha0=alpha0, backend="numpy")
        assert np.allclose(c.alpha, n.alpha, atol=QF_ALPHA)
        assert _rel(c.objective, n.objective) < QF_OBJ
        assert abs(c.b - n.b) < 1e-6


# -- kernel sources and the cache ----------------------------------------------------------------
@pytest.mark.skipif(not compiled_available(), reason="compiled core not built")
@pytest.mark.parametrize(
    "kernel", [RBF(gamma=1.0 / 30), Laplacian(gamma=0.02), Polynomial(degree=2, scale=0.03)]
)
@pytest.mark.parametrize("cache_bytes", [1, 200 * 2**20])
def test_columns_from_rows_equal_the_gram_path(kernel, cache_bytes: int) -> None:
    """RBF columns computed in C and other kernels through the callback, with a cache of two
    columns (every other fetch evicts) or a roomy one, reach the Gram path's optimum."""
    X, _, y = classification("breast_cancer")
    K = kernel.gram(X, X)
    cols = KernelColumns(X, kernel, cache_bytes=cache_bytes)
    for fn, kw, s in ((svc, {"y": y, "C": 3.0}, y), (one_class, {"nu": 0.2}, 1.0)):
        a = fn(cols, tol=TOL, backend="compiled", **kw)
        b = fn(K, tol=TOL, backend="numpy", **kw)
        # the polynomial Gram has rank <= 496 < 569: alpha need not be unique, the model is
        assert _rel(a.objective, b.objective) < QF_OBJ
        fa, fb = K @ (a.alpha * s) + a.b, K @ (b.alpha * s) + b.b
        assert np.max(np.abs(fa - fb)) < 1e-5 * np.max(np.abs(fb))


@pytest.mark.skipif(not compiled_available(), reason="compiled core not built")
def test_svr_from_rows_with_a_tiny_cache_equals_libsvm() -> None:
    X, K, t = regression()
    cols = KernelColumns(X, RBF(gamma=1.0 / X.shape[1]), cache_bytes=1)
    ours = svr(cols, t, C=1.0, epsilon=0.1, tol=TOL)
    ref = SVR(kernel="precomputed", C=1.0, epsilon=0.1, tol=TOL).fit(K, t)
    beta = np.zeros(len(t))
    beta[ref.support_] = ref.dual_coef_[0]
    ref_obj = 0.5 * beta @ K @ beta - t @ beta + 0.1 * np.abs(beta).sum()
    assert _rel(ours.objective, ref_obj) < 1e-6
    assert _sv(ours.alpha) == set(ref.support_.tolist())
    assert abs(ours.b - ref.intercept_[0]) < 1e-6


def test_kernel_columns_reject_bad_rows() -> None:
    from streamk.errors import SolverError

    with pytest.raises(SolverError, match="non-finite"):
        KernelColumns(np.array([[1.0, np.nan]]), RBF(gamma=1.0))
    with pytest.raises(SolverError, match="not resolved"):
        KernelColumns(np.ones((3, 2)), RBF())


@pytest.mark.skipif(not compiled_available(), reason="compiled core not built")
@pytest.mark.parametrize("name", ["breast_cancer", "digits"])
def test_float64_cache_matches_the_numpy_path_to_rounding(name: str) -> None:
    """``cache_dtype="float64"``: the compiled core without the float rounding of Q. Against
    the all-double NumPy path (and LIBSVM's support set) the objective agrees to 1e-12,
    where the float cache is 2e-8 apart (QF_OBJ), cold and warm."""
    from streamk.solvers import adatron_dual

    _, K, y = classification(name)
    ref = svc(K, y, C=1.0, tol=TOL, backend="numpy")
    lib = SVC(kernel="precomputed", C=1.0, tol=TOL).fit(K, y)
    for a0 in (None, np.clip(ref.alpha * 0.9, 0.0, 1.0)):
        ours = svc(K, y, C=1.0, tol=TOL, alpha0=a0, cache_dtype="float64")
        assert _rel(ours.objective, ref.objective) < 1e-12
        assert _sv(ours.alpha) == set(lib.support_.tolist())
        np.testing.assert_allclose(ours.alpha, ref.alpha, atol=1e-7)  # float cache: 1e-5
    a = adatron_dual(K, y, 1.0, 1, tol=1e-9, cache_dtype="float64")
    b = adatron_dual(K, y, 1.0, 1, tol=1e-9, backend="numpy", max_epochs=100_000)
    assert _rel(a.objective, b.objective) < 1e-9
    with pytest.raises(Exception, match="cache_dtype"):
        svc(K, y, cache_dtype="float16")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["support row", "warm gradient row", "diagonal"])
def test_a_non_finite_gram_entry_the_solver_reads_raises(backend: str, where: str) -> None:
    """The compiled core checks the Gram where it reads it (no pass over all n^2 entries): a
    nan in a support vector's row (read by every gradient update), in a warm start's row (read
    by the initial gradient) or on the diagonal raises the same SolverError as the NumPy path's
    full check, cold and warm, never a silent result; for svc and the bias-free adatron."""
    from streamk.errors import SolverError
    from streamk.solvers import adatron_dual

    X, K, y = classification("wine")
    solvers = {
        "svc": lambda M, a0: svc(M, y, C=1.0, tol=1e-3, alpha0=a0, backend=backend),
        "adatron": lambda M, a0: adatron_dual(M, y, 1.0, 1, a0, tol=1e-3, backend=backend),
    }
    for name, solve in solvers.items():
        ref = (svc(K, y, C=1.0, tol=1e-3, backend="numpy") if name == "svc"
               else adatron_dual(K, y, 1.0, 1, tol=1e-3, backend="numpy"))  # fmt: skip
        sv = int(np.flatnonzero((ref.alpha > 0) & (ref.alpha < 1.0))[0])
        other = int(np.flatnonzero(ref.alpha == 0)[0])
        bad = K.copy()
        if where == "diagonal":
            bad[other, other] = np.inf
        else:
            bad[sv, other] = bad[other, sv] = np.nan
        for warm in (None, ref.alpha.copy()):
            if where == "warm gradient row" and warm is None:
                continue
            with pytest.raises(SolverError, match="non-finite"):
                solve(bad, warm)


# -- warm starts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_warm_start_after_a_window_slides_beats_cold_and_the_projection(backend: str) -> None:
    """A window of 1000 rows slides by 100: the previous optimum (dropped rows removed, new rows
    at zero) is off y'a = 0. The Euclidean projection moves every free variable and SMO then
    needs more iterations than from zero; restoring the equality with few moves (warm_point)
    needs fewer (measured, compiled: 88 warm, 208 cold, 553 from the projection)."""
    X, t = make_moons(1100, noise=0.3, random_state=1)
    y = 2.0 * t - 1.0
    K = RBF(gamma=1.0).gram(X, X)
    w0, w1 = np.arange(0, 1000), np.arange(100, 1100)
    prev = svc(K[np.ix_(w0, w0)], y[w0], C=1.0, backend=backend)
    a0 = np.zeros(1000)
    a0[:900] = prev.alpha[100:]
    K1, y1 = K[np.ix_(w1, w1)], y[w1]
    assert abs(a0 @ y1) > 1.0  # the dropped rows unbalanced the equality
    cold = svc(K1, y1, C=1.0, backend=backend)
    warm = svc(K1, y1, C=1.0, alpha0=a0, backend=backend)
    projected = project_box_equality(a0, y1, np.ones(1000), 0.0)
    proj = svc(K1, y1, C=1.0, alpha0=projected, backend=backend)
    assert abs(warm.objective - cold.objective) <= 1e-4 * abs(cold.objective)
    assert warm.n_iter < 0.6 * cold.n_iter
    assert warm.n_iter < 0.5 * proj.n_iter


def test_warm_point_is_feasible_and_changes_few_variables() -> None:
    from streamk.solvers.core import warm_point

    _, K, y = classification("wine")
    rng = np.random.default_rng(1)
    a0 = np.where(rng.random(len(y)) < 0.3, rng.uniform(0, 1.5, len(y)), 0.0)
    C = np.full(len(y), 1.0)
    a = warm_point(K, a0, y, -np.ones(len(y)), C, 0.0)
    assert abs(a @ y) < 1e-12 and np.all((a >= 0) & (a <= 1.0))
    clipped = np.clip(a0, 0, 1.0)
    # the moved variables all end at a bound, but the last one (the move that balances)
    moved = np.flatnonzero(a != clipped)
    at_bound = (a[moved] == 0.0) | (a[moved] == 1.0)
    assert len(moved) >= 1 and (~at_bound).sum() <= 1
    # the gradients handed to the solver are those of the returned point
    a2, (G, G_bar) = warm_point(K, a0, y, -np.ones(len(y)), C, 0.0, with_gradients=True)
    assert np.array_equal(a2, a)
    Q = np.outer(y, y) * K
    assert np.allclose(G, Q @ a - 1.0, atol=1e-12)
    assert np.allclose(G_bar, Q[:, a >= 1.0] @ np.ones(int((a >= 1.0).sum())), atol=1e-12)
    # one-class: the sum is restored
    a = warm_point(K, a0, np.ones(len(y)), np.zeros(len(y)), C, 0.3 * len(y))
    assert abs(a.sum() - 0.3 * len(y)) < 1e-9 and np.all((a >= 0) & (a <= 1.0))


# -- the no-bias adatron dual on the core (two dummies absorb the equality) ---------------------
def _adatron_qp(K: np.ndarray, y: np.ndarray, C: float, norm: int) -> float:
    """max sum(a) - a'Ha/2, 0 <= a <= C (no bias), by scipy's L-BFGS-B: the optimum's value."""
    from scipy.optimize import minimize

    H = K * np.outer(y, y) + (np.eye(len(y)) / C if norm == 2 else 0.0)
    upper = C if norm == 1 else None
    res = minimize(lambda a: (0.5 * a @ H @ a - a.sum(), H @ a - 1.0), np.zeros(len(y)),
                   jac=True, bounds=[(0.0, upper)] * len(y), method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 50000})  # fmt: skip
    return float(res.fun)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("C, norm", [(1.0, 1), (10.0, 1), (1.0, 2), (5.0, 2)])
def test_adatron_dual_equals_the_qp_optimum(backend: str, C: float, norm: int) -> None:
    from streamk.solvers import adatron_dual

    _, K, y = classification("wine")
    r = adatron_dual(K, y, C, norm, tol=1e-8, backend=backend, max_epochs=100_000)
    assert r.status == 0 and r.gap < 1e-8
    assert _rel(r.objective, _adatron_qp(K, y, C, norm)) < 1e-7
    assert np.all(r.alpha >= 0) and (norm == 2 or np.all(r.alpha <= C))


@pytest.mark.skipif(not compiled_available(), reason="compiled core not built")
def test_adatron_dual_paths_agree_warm() -> None:
    from streamk.solvers import adatron_dual

    _, K, y = classification("breast_cancer")
    a0 = np.random.default_rng(2).uniform(0.0, 3.0, len(y))
    for norm in (1, 2):
        c = adatron_dual(K, y, 2.0, norm, alpha0=a0, tol=1e-8, backend="compiled")
        n = adatron_dual(K, y, 2.0, norm, alpha0=a0, tol=1e-8, backend="numpy", max_epochs=10**5)
        assert _rel(c.objective, n.objective) < QF_OBJ
        assert np.allclose(c.alpha, n.alpha, atol=1e-4)


@pytest.mark.skipif(not compiled_available(), reason="compiled core not built")
@pytest.mark.parametrize("kernel", [RBF(gamma=0.1), Laplacian(gamma=0.05)])
def test_svr_kernel_rows_cache_equals_the_numpy_gram_path(kernel) -> None:
    """SVR has two variables per row: the core caches kernel rows (LIBSVM's SVR_Q) and builds
    Q columns in rotating buffers; from a Gram, from rows in C and through the callback."""
    X, _, t = regression()
    K = kernel.gram(X, X)
    ref = svr(K, t, C=2.0, epsilon=0.05, tol=TOL, backend="numpy")
    for src in (K, KernelColumns(X, kernel, cache_bytes=1)):
        ours = svr(src, t, C=2.0, epsilon=0.05, tol=TOL, backend="compiled")
        assert _rel(ours.objective, ref.objective) < QF_OBJ
        assert np.allclose(ours.alpha, ref.alpha, atol=QF_ALPHA * 2.0)  # scale: C = 2
        assert abs(ours.b - ref.b) < 1e-6
