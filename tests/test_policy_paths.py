"""The Projectron's and Merge's compiled work against their NumPy code, for every learner.

Every learner hands new support vectors to ``policy.insert(support, row, coef, k_row)``;
with ``streamk/budget/_policies.pyx`` built, the Projectron's insert does its projection,
removal downdate and block-inverse growth in one compiled call and Merge searches its pair
compiled. The oracle is the same learner with only that module unloaded
(``streamk.budget.compiled.policies = None``: the NumPy code in ``projectron.py`` and
``merge.py``), on the same stream, one event at a time and then in blocks: same
predictions, same support set (ids, rows, coefficients to ~1e-9) and the same inverse Gram
matrix. The budgets are small so that every run removes (Projectron) or merges (Merge).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamk import (
    RBF,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    Laplacian,
    Linear,
    MarginPerceptron,
    Merge,
    OnlineRanker,
    OnlineSVR,
    Polynomial,
    Projectron,
    Scaled,
    Spectrum,
    Sum,
)
from streamk.budget import compiled
from streamk.budget.projectron import MIN_REL_DELTA
from streamk.errors import ConfigError
from streamk.learners import fastpass
from streamk.learners.support import SupportSet

pytestmark = pytest.mark.skipif(
    not compiled.available(), reason="streamk.budget._policies is not built (NumPy path only)"
)

KERNELS = {
    "rbf": lambda: RBF(gamma=0.4),
    "rbf-auto": lambda: RBF(gamma="auto"),  # P rebuilt each time the width moves
    "laplacian": lambda: Laplacian(gamma=0.3),
    "poly": lambda: Polynomial(degree=2, scale=0.2, offset=1.0),
    "linear": lambda: Linear(),
    "scaled-rbf": lambda: Scaled(RBF(gamma=0.4), 2.0),
    "sum": lambda: Sum(RBF(gamma=0.4), Linear()),
}
#: name -> (learner factory, task)
LEARNERS = {
    "perceptron": (lambda k, b: KernelPerceptron(kernel=k, budget=b), "clf"),
    "margin": (lambda k, b: MarginPerceptron(kernel=k, budget=b, margin=0.5), "clf"),
    "ranker": (lambda k, b: OnlineRanker(kernel=k, ranks=(0, 1, 2, 3, 4), budget=b), "rank"),
    "adatron": (lambda k, b: KernelAdatron(kernel=k, budget=b), "clf"),
    "svr": (lambda k, b: OnlineSVR(kernel=k, budget=b), "reg"),
    "novelty": (lambda k, b: KernelNovelty(kernel=k, budget=b), "novelty"),
}
POLICIES = {
    "projectron": lambda b: Projectron(b, eta=0.01),
    "projectron-eta": lambda b: Projectron(b, eta=0.5),
    "merge": Merge,
}
#: Budgets below the dimension of the kernel's feature space in d = 4 (4 for the linear
#: kernel, 15 for the quadratic one): above it every new vector is in the span of the set,
#: is projected, and the set never fills.
BUDGETS = {"linear": 3, "poly": 8}
EVENTS = {"adatron": 160, "svr": 300}


def _stream(n: int, task: str, seed: int = 0) -> tuple[pd.DataFrame, list]:
    """A noisy non-linear stream in d = 4 (many updates, so the budget turns over)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 4))
    score = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(n)
    if task == "reg":
        y = score.tolist()
    elif task == "rank":
        y = np.searchsorted(np.quantile(score, [0.2, 0.4, 0.6, 0.8]), score).tolist()
    else:
        y = (score > 0).tolist()
    return pd.DataFrame(X, columns=["a", "b", "c", "d"]), y


def _run(model, task: str, X: pd.DataFrame, y: list) -> list:
    """The first third one event at a time, the rest in two blocks; predictions on a probe
    after each stage."""
    probe = X.iloc[::23]
    rows = X.to_dict(orient="records")
    split = len(rows) // 3
    half = (split + len(rows)) // 2
    preds = []
    for x, label in zip(rows[:split], y[:split]):
        model.learn_one(x) if task == "novelty" else model.learn_one(x, label)
    preds.append(np.asarray(model.predict_many(probe)).tolist())
    for a, b in ((split, half), (half, len(rows))):
        if task == "novelty":
            model.learn_many(X.iloc[a:b])
        else:
            model.learn_many(X.iloc[a:b], y[a:b])
        preds.append(np.asarray(model.predict_many(probe)).tolist())
    return preds


def _same_model(fast, slow) -> None:
    sf, ss = fast.support_, slow.support_
    assert sf.n == ss.n
    np.testing.assert_array_equal(sf.ids, ss.ids)
    np.testing.assert_allclose(sf.X, ss.X, rtol=1e-9, atol=1e-12)  # Merge builds rows
    np.testing.assert_allclose(sf.coef, ss.coef, rtol=1e-9, atol=1e-9)
    if isinstance(fast._policy, Projectron):
        P, Q = fast._policy.inverse_gram, slow._policy.inverse_gram
        np.testing.assert_allclose(P, Q, rtol=1e-9, atol=1e-9 * np.abs(Q).max())


CASES = [
    (learner, kernel, policy)
    for learner in sorted(LEARNERS)
    for kernel in sorted(KERNELS)
    for policy in sorted(POLICIES)
    if not (policy == "merge" and kernel not in ("rbf", "rbf-auto", "scaled-rbf"))
]


@pytest.mark.parametrize(("learner", "kernel", "policy"), CASES)
def test_compiled_policy_equals_numpy_policy(learner, kernel, policy, monkeypatch):
    make, task = LEARNERS[learner]
    X, y = _stream(EVENTS.get(learner, 450), task)
    budget = BUDGETS.get(kernel, 15)
    if policy == "merge" and kernel == "scaled-rbf":  # Merge takes a plain RBF only
        with pytest.raises(ConfigError, match="RBF"):
            _run(make(KERNELS[kernel](), Merge(budget)), task, X, y)
        return
    fast = make(KERNELS[kernel](), POLICIES[policy](budget))
    fast_preds = _run(fast, task, X, y)
    monkeypatch.setattr(compiled, "policies", None)
    slow = make(KERNELS[kernel](), POLICIES[policy](budget))
    slow_preds = _run(slow, task, X, y)

    if task == "reg":  # decision values: equal to rounding
        np.testing.assert_allclose(fast_preds, slow_preds, rtol=1e-9, atol=1e-12)
    else:
        assert fast_preds == slow_preds
    _same_model(fast, slow)
    assert fast.support_.next_id > fast.support_.n == budget  # removals or merges happened


def test_compiled_projectron_on_strings_equals_numpy(monkeypatch):
    """The compiled insert needs only the kernel row and ``k(x, x)``: a string kernel's
    support set (object rows) takes it too, with the NumPy code's model."""
    rng = np.random.default_rng(4)
    words = ["".join(rng.choice(list("acgt"), size=12)) for _ in range(300)]
    labels = [w.count("a") > w.count("g") for w in words]

    def run():
        model = KernelPerceptron(kernel=Spectrum(2), budget=Projectron(10, eta=4.0))
        preds = []
        for w, t in zip(words, labels):
            preds.append(model.predict_one(w))
            model.learn_one(w, t)
        return model, preds

    fast, fast_preds = run()
    monkeypatch.setattr(compiled, "policies", None)
    slow, slow_preds = run()
    assert fast_preds == slow_preds
    assert fast.support_.X == slow.support_.X and fast.support_.n == 10
    np.testing.assert_allclose(fast.support_.coef, slow.support_.coef, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        fast._policy.inverse_gram, slow._policy.inverse_gram, rtol=1e-9, atol=1e-9
    )


def test_projectron_insert_declines_before_changing_anything(monkeypatch):
    """Without a kernel row, or with one that does not match the set, the compiled insert
    leaves ``P`` and the set alone and the NumPy code runs."""
    policy = Projectron(5)
    model = KernelPerceptron(kernel=RBF(0.5), budget=policy)
    X, y = _stream(60, "clf")
    for x, label in zip(X.to_dict(orient="records"), y):
        model.learn_one(x, label)
    p, s = model._policy, model.support_
    before = (p.inverse_gram, s.X.copy(), s.coef.copy(), s.ids.copy())
    row = np.ones(4)
    for k_row in (None, np.ones(s.n + 1)):
        assert not compiled.projectron_insert(p, s, row, np.ones(1), 1.0, k_row, MIN_REL_DELTA)
    after = (p.inverse_gram, s.X, s.coef, s.ids)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_inverse_by_cholesky_equals_lapack_and_declines_near_singular():
    """The compiled rebuild of ``P`` (Cholesky, no BLAS threads) against
    ``np.linalg.inv``; a Gram matrix with two equal rows is left to LAPACK's caller."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 3))
    G = RBF(gamma=0.5).gram(X, X)
    P = np.zeros((64, 64))
    assert compiled.inverse_gram(G, P, MIN_REL_DELTA)
    want = np.linalg.inv(G)
    np.testing.assert_allclose(P[:60, :60], want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    assert not P[60:].any() and not P[:, 60:].any()
    X[7] = X[3]
    assert not compiled.inverse_gram(RBF(gamma=0.5).gram(X, X), np.zeros((60, 60)), MIN_REL_DELTA)


def test_support_gram_equals_kernel_block_for_rbf_and_declines_otherwise():
    """The compiled RBF Gram matrix of a rebuild equals ``kernel_block`` to rounding; other
    kernels and rows too large for the norm expansion are left to ``kernel_block``."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(70, 50))
    for kernel, rows in ((RBF(gamma=0.01), X), (Laplacian(gamma=0.01), X), (RBF(1.0), X * 1e4)):
        support = SupportSet(kernel)
        for row in rows:
            support.append(row, np.ones(1))
        G = compiled.support_gram(support)
        if type(kernel) is RBF and kernel.gamma < 1.0:
            np.testing.assert_allclose(G, support.kernel_block(support.X), rtol=1e-12, atol=1e-14)
            np.testing.assert_array_equal(G, G.T)
        else:
            assert G is None


@pytest.mark.parametrize("learner", ["perceptron", "margin"])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_projectron_run_serves_the_perceptron(learner, kernel, monkeypatch):
    """``learn_many`` of both perceptrons with a Projectron is compiled (counted in
    ``fastpass.COUNTS``) but for the rows that bring a new class: the Projectron's own run
    (RBF, labels known) or the per-event core (the first block; other kernels). Either way
    the model is the NumPy path's."""
    make, task = LEARNERS[learner]
    X, y = _stream(600, task)
    fast = make(KERNELS[kernel](), Projectron(20, eta=0.05))
    fastpass.COUNTS.clear()
    blocks = ((0, 300), (300, 600))
    fast_preds = [p for a, b in blocks for p in fast.learn_predict_many(X[a:b], y[a:b])]
    took = fastpass.COUNTS["compiled"]
    monkeypatch.setattr(compiled, "policies", None)
    slow = make(KERNELS[kernel](), Projectron(20, eta=0.05))
    slow_preds = []
    for x, label in zip(X.to_dict(orient="records"), y):
        slow_preds.append(slow.predict_one(x))
        slow.learn_one(x, label)
    assert fast_preds == slow_preds
    assert fast.n_mistakes == slow.n_mistakes
    _same_model(fast, slow)
    assert 590 <= took < 600
