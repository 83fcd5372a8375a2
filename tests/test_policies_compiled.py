"""The compiled Projectron and Merge work (streamk/budget/_policies.pyx) against the NumPy code.

The NumPy code in ``streamk/budget/projectron.py`` and ``merge.py`` is the reference (and is
itself tested against direct computations in ``test_budget_policies.py``); here the compiled
loops must give the same predictions and the same model to rounding. The Projectron's
incremental inverse ``P`` is also checked against a fresh inverse of the support Gram matrix
after long streams at B = 200 (issue 16: no drift beyond 1e-8 relative).
"""

from __future__ import annotations

import numpy as np
import pytest
from river import datasets

from streamk.budget import Merge, Projectron, compiled
from streamk.budget.merge import merge_search
from streamk.kernels import RBF
from streamk.learners.budgeted import MarginPerceptron
from streamk.learners.support import SupportSet

needs_compiled = pytest.mark.skipif(
    not compiled.available(), reason="streamk.budget._policies is not built (NumPy path only)"
)


def bananas(n: int | None = None) -> tuple[np.ndarray, list]:
    events = list(datasets.Bananas())[:n]
    X = np.array([[x[k] for k in sorted(x)] for x, _ in events])
    return X, [y for _, y in events]


def blobs(n: int, d: int, classes: int, seed: int) -> tuple[np.ndarray, list]:
    """Overlapping Gaussian classes: mistakes and margin errors all along the stream."""
    rng = np.random.default_rng(seed)
    y = rng.integers(classes, size=n)
    centres = rng.normal(scale=1.5, size=(classes, d))
    return centres[y] + rng.normal(size=(n, d)), [f"c{c}" for c in y]


def prequential(model, X, y, block: int) -> list:
    preds: list = []
    for i in range(0, len(y), block):
        preds += model.learn_predict_many(X[i : i + block], y[i : i + block])
    return preds


def numpy_path(monkeypatch):
    """Run what follows on the NumPy reference (the compiled module unloaded)."""
    monkeypatch.setattr(compiled, "policies", None)


def relative_drift(model) -> float:
    """``||P - K(S, S)^-1|| / ||K(S, S)^-1||`` (Frobenius) for a Projectron learner."""
    support = model.support_
    fresh = np.linalg.inv(support.kernel_block(support.X))
    P = model._policy.inverse_gram
    return float(np.linalg.norm(P - fresh) / np.linalg.norm(fresh))


CASES = {
    # name: (data, learner parameters, block size)
    "bananas recommended": (lambda: bananas(2500), {"budget": Projectron(200)}, 500),
    "bananas small budget": (lambda: bananas(2500), {"budget": Projectron(12, eta=0.01)}, 250),
    "bananas margin 0": (lambda: bananas(2000), {"budget": Projectron(30), "margin": 0.0}, 333),
    "3 classes, d 5": (
        lambda: blobs(1500, 5, 3, seed=1),
        {"kernel": RBF(0.3), "budget": Projectron(25, eta=0.05), "margin": 1.5},
        200,
    ),
    "unbounded, gamma auto": (
        lambda: blobs(1200, 3, 2, seed=2),
        {"budget": Projectron(None, eta=0.2)},
        97,
    ),
}


@needs_compiled
@pytest.mark.parametrize("case", list(CASES))
def test_compiled_projectron_run_equals_the_numpy_path(case, monkeypatch):
    make_data, params, block = CASES[case]
    X, y = make_data()
    fast = MarginPerceptron(**params)
    fast_preds = prequential(fast, X, y, block)
    numpy_path(monkeypatch)
    ref = MarginPerceptron(**params)
    ref_preds = prequential(ref, X, y, block)

    assert fast_preds == ref_preds
    assert fast.n_mistakes == ref.n_mistakes and fast.n_learned == ref.n_learned
    a, b = fast.support_, ref.support_
    assert a.n == b.n and a.ids.tolist() == b.ids.tolist()
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        fast._policy.inverse_gram, ref._policy.inverse_gram, rtol=1e-9, atol=1e-9
    )
    if params["budget"].budget is not None:
        assert a.n <= params["budget"].budget
    assert relative_drift(fast) < 1e-8


@needs_compiled
def test_compiled_run_equals_learn_one_and_hands_back_to_numpy(monkeypatch):
    """Blocks through the compiled run, then events one at a time on the NumPy insert:
    the same model as ``learn_one`` from the start (P stays in sync across the switch)."""
    X, y = blobs(900, 2, 2, seed=3)
    mixed = MarginPerceptron(kernel=RBF(1.0), budget=Projectron(20, eta=0.05))
    one = MarginPerceptron(kernel=RBF(1.0), budget=Projectron(20, eta=0.05))
    mixed.learn_many(X[:600], y[:600])
    for row, label in zip(X[600:], y[600:]):
        mixed.learn_one(dict(enumerate(row)), label)
    numpy_path(monkeypatch)
    for row, label in zip(X, y):
        one.learn_one(dict(enumerate(row)), label)
    assert mixed.support_.ids.tolist() == one.support_.ids.tolist()
    np.testing.assert_allclose(mixed.support_.coef, one.support_.coef, rtol=1e-9, atol=1e-9)
    assert relative_drift(mixed) < 1e-8


def test_projectron_inverse_does_not_drift_fast():
    """50,000 events at B = 200: over 4,000 removals (rank-one downdates of ``P``), each
    followed by a block-inverse insertion."""
    model, events = drift_run(50_000)
    removals = model.support_.next_id - 200
    assert model.support_.n == 200 and removals > 4_000, removals
    assert relative_drift(model) < 1e-8


@pytest.mark.slow
@needs_compiled
def test_projectron_inverse_does_not_drift_over_a_million_events():
    """Issue 16: 1M events at B = 200, ``P`` within 1e-8 of a fresh inverse throughout."""
    model, events = drift_run(1_000_000, check_every=200_000)
    assert events == 1_000_000 and model.support_.n == 200
    assert model.support_.next_id - 200 > 80_000  # removals
    assert relative_drift(model) < 1e-8


def drift_run(n: int, check_every: int | None = None) -> tuple[MarginPerceptron, int]:
    """A noisy non-linear stream in d = 4 that fills a Projectron(200) with ``eta`` small
    (an ill-conditioned Gram matrix: cond ~ 1e3) and keeps replacing support vectors."""
    rng = np.random.default_rng(0)
    model = MarginPerceptron(kernel=RBF(2.0), budget=Projectron(200, eta=0.01), margin=0.0)
    block = 10_000
    for done in range(0, n, block):
        X = rng.uniform(-1.0, 1.0, size=(block, 4))
        y = (np.sin(3.0 * X[:, 0]) + 0.3 * rng.normal(size=block) > 0).tolist()
        model.learn_many(X, y)
        if check_every and (done + block) % check_every == 0:
            assert relative_drift(model) < 1e-8, done + block
    return model, n


# -- Merge ------------------------------------------------------------------------------------
@needs_compiled
@pytest.mark.parametrize("n_outputs", [1, 3])
@pytest.mark.parametrize("seed", range(8))
def test_compiled_merge_search_equals_the_numpy_search(seed, n_outputs):
    """Every candidate searched in NumPy; the compiled search prunes far partners by a
    bound: the same pair, the same ``h`` to rounding."""
    rng = np.random.default_rng(seed)
    gamma = float(rng.choice([0.1, 0.5, 2.0, 8.0]))
    s = SupportSet(RBF(gamma=gamma), n_outputs=n_outputs)
    for _ in range(int(rng.integers(2, 120))):
        s.append(rng.normal(size=3), rng.normal(size=n_outputs) * rng.choice([0.1, 1.0]))
    m, n, h = compiled.compiled_merge_search(s, gamma)
    m_ref, n_ref, h_ref = merge_search(s, gamma)
    assert (m, n) == (m_ref, n_ref)
    assert h == pytest.approx(h_ref, abs=1e-7)


@needs_compiled
def test_compiled_merge_learner_equals_the_numpy_path(monkeypatch):
    X, y = bananas(1500)
    fast = MarginPerceptron(budget=Merge(40))
    fast_preds = prequential(fast, X, y, 300)
    numpy_path(monkeypatch)
    ref = MarginPerceptron(budget=Merge(40))
    ref_preds = prequential(ref, X, y, 300)
    assert fast_preds == ref_preds
    assert fast.support_.ids.tolist() == ref.support_.ids.tolist()
    np.testing.assert_allclose(fast.support_.X, ref.support_.X, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(fast.support_.coef, ref.support_.coef, rtol=1e-7, atol=1e-7)
