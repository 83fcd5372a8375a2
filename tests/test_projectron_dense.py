"""The Projectron's dense steps on ``P = K(S, S)^-1`` (streamk/_dense.h) against NumPy.

``_policies.projectron_insert`` runs the C loops every compiled path shares (the per-event
path of streamk/learners/_event.pyx includes the same ``_projectron.pxi``): the matvec
``d = P k``, the growth, and the removal's downdate fused with the growth that follows it.
Here each branch is checked against the reference's steps written out in NumPy, on the
lower triangle of ``P`` (the one the compiled steps read and write)
(:meth:`streamk.budget.Projectron.insert`: downdate, move the last slot into the removed
one, ``d`` recomputed for the smaller set, block-inverse growth) for set sizes around the
four-lane and eight-row groupings of the loops, with the removed slot inside the set and
last, and ``P``'s unused capacity left as it was. The rebuild (``inverse_by_cholesky``) must
give an exactly symmetric inverse.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk.budget import Projectron, compiled
from streamk.kernels import RBF

policies = compiled.policies
pytestmark = pytest.mark.skipif(
    policies is None, reason="streamk.budget._policies is not built (NumPy path only)"
)

SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 12, 17, 33, 40]


def gram(n: int, seed: int) -> np.ndarray:
    """An RBF Gram matrix of ``n`` random points in d = 3 (well enough conditioned)."""
    X = np.random.default_rng(seed).normal(size=(n, 3))
    return RBF(gamma=0.7).gram(X, X)


def lower(P: np.ndarray, n: int) -> np.ndarray:
    """The symmetric matrix whose lower triangle is ``P[:n, :n]``'s (the one the compiled
    steps keep current)."""
    low = np.tril(P[:n, :n])
    return low + np.tril(low, -1).T


def without_slot(k: np.ndarray, slot: int) -> np.ndarray:
    """``k`` without entry ``slot``, the last entry moved into it (``SupportSet.remove``)."""
    out = k.copy()
    out[slot] = k[-1]
    return out[:-1]


def reference_insert(P, k, kxx, coef, eta, full):
    """:meth:`Projectron.insert`'s steps on ``P`` (n x n) in NumPy: ``(slot, P, d)``, slot -2
    projected, -1 appended, else the removed slot."""
    P, k = P.copy(), k.copy()
    n = P.shape[0]
    d = P @ k
    delta = kxx - k @ d
    if delta <= eta:
        return -2, P, d
    slot = -1
    if full:
        slot = int(np.argmin(np.einsum("ij,ij->i", coef, coef) / np.diag(P)))
        P -= np.outer(P[:, slot], P[slot, :]) / P[slot, slot]
        last = n - 1
        P[slot, :] = P[last, :]
        P[:, slot] = P[:, last]
        P, k, n = P[:last, :last], without_slot(k, slot), last
        d = P @ k
        delta = kxx - k @ d
    grown = np.zeros((n + 1, n + 1))
    grown[:n, :n] = P + np.outer(d, d) / delta
    grown[:n, n] = grown[n, :n] = -d / delta
    grown[n, n] = 1.0 / delta
    return slot, grown, d


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("branch", ["projected", "grow", "remove-inside", "remove-last"])
def test_projectron_insert_follows_the_reference_steps(n, branch):
    if branch == "remove-inside" and n < 2:
        pytest.skip("a set of one has no slot inside")
    G = gram(n + 1, seed=n)
    ldp = n + 5  # capacity beyond the set: must stay untouched
    P = np.zeros((ldp, ldp))
    inv = np.linalg.inv(G[:n, :n])
    P[:n, :n] = (inv + inv.T) / 2.0  # symmetric to the bit, as the compiled steps keep it
    P[n + 1 :, :] = P[:, n + 1 :] = 7.0  # a marker outside the rows the step may write
    full = P[:n, :n].copy()
    P[np.triu_indices(n, 1)] = np.nan  # the compiled steps must not read the upper triangle
    k, kxx = G[n, :n].copy(), 1.0
    coef = np.random.default_rng(n).normal(size=(n, 2)) + 3.0
    slot_wanted = {"remove-inside": n // 2, "remove-last": n - 1}.get(branch)
    if slot_wanted is not None:
        coef[slot_wanted] = 1e-3  # the cheapest vector to drop
    eta = 10.0 if branch == "projected" else 0.0
    want_slot, want_P, want_d = reference_insert(full, k, kxx, coef, eta, slot_wanted is not None)

    kk, d, col = k.copy(), np.empty(n), np.empty(2 * n)
    before = P.copy()
    slot, pii = policies.projectron_insert(
        P, coef, kk, d, col, n, slot_wanted is not None, kxx, eta, 0.0
    )

    assert slot == want_slot and (slot_wanted is None or slot == slot_wanted)
    size = want_P.shape[0]
    scale = np.abs(want_P).max()
    np.testing.assert_allclose(lower(P, size), want_P, rtol=1e-10, atol=1e-11 * scale)
    m = n if slot < 0 else n - 1
    np.testing.assert_allclose(
        d[:m], want_d, rtol=1e-10, atol=1e-11 * np.abs(want_d).max(initial=1.0)
    )
    np.testing.assert_array_equal(P[size:, :], before[size:, :])  # capacity untouched
    np.testing.assert_array_equal(P[:, size:], before[:, size:])
    if slot >= 0:
        assert pii == before[slot, slot]
        np.testing.assert_array_equal(col[:n], full[:, slot])  # P[:, slot] before
        np.testing.assert_array_equal(kk[: n - 1], without_slot(k, slot))
    if slot == -2:
        np.testing.assert_array_equal(P, before)  # projected: P unchanged


@pytest.mark.parametrize("n", SIZES + [64, 101])
def test_inverse_by_cholesky_is_exactly_symmetric(n):
    """The rebuild computes each entry of ``P = N Nᵀ`` once (a dot of two rows of
    ``N = L^-ᵀ``) and mirrors it: symmetric to the bit, the inverse to rounding, and ``P``'s
    capacity beyond ``n`` untouched."""
    G = gram(n, seed=100 + n)
    P = np.full((n + 3, n + 3), 5.0)
    assert policies.inverse_by_cholesky(G, P, 1e-12)
    inv = P[:n, :n]
    np.testing.assert_array_equal(inv, inv.T)
    want = np.linalg.inv(G)
    np.testing.assert_allclose(inv, want, rtol=1e-9, atol=1e-10 * np.abs(want).max())
    np.testing.assert_allclose(G @ inv, np.eye(n), atol=1e-8)
    assert (P[n:, :] == 5.0).all() and (P[:, n:] == 5.0).all()


def test_inverse_by_cholesky_declines_without_touching_p():
    """A pivot at or below ``min_rel G_jj`` (two equal rows): ``False`` and ``P`` as it was."""
    X = np.random.default_rng(3).normal(size=(20, 3))
    X[11] = X[4]
    G = RBF(gamma=0.7).gram(X, X)
    P = np.full((21, 21), 2.0)
    assert not policies.inverse_by_cholesky(G, P, 1e-8)
    assert (P == 2.0).all()


@pytest.mark.parametrize("offset", [0.0, 3e6])
def test_the_compiled_run_takes_the_exact_distances_when_the_expansion_is_not(offset, monkeypatch):
    """``projectron_run``'s kernel rows come from the norm expansion (the per-event path's
    loops) only where ``RBF.expansion_exact`` holds; rows far from the origin (``offset``)
    take the distances themselves, and both give the NumPy path's model."""
    from streamk.learners.budgeted import MarginPerceptron

    rng = np.random.default_rng(9)
    X = rng.uniform(-1.0, 1.0, size=(600, 3)) + offset
    y = (np.sin(3.0 * (X[:, 0] - offset)) > 0).tolist()

    def run():
        model = MarginPerceptron(kernel=RBF(gamma=2.0), budget=Projectron(25, eta=0.01))
        preds = []
        for i in range(0, len(y), 150):
            preds += model.learn_predict_many(X[i : i + 150], y[i : i + 150])
        return model, preds

    fast, fast_preds = run()
    monkeypatch.setattr(compiled, "policies", None)
    ref, ref_preds = run()
    assert fast_preds == ref_preds
    assert fast.support_.ids.tolist() == ref.support_.ids.tolist()
    assert fast.support_.next_id > 40  # the budget turned over
    np.testing.assert_allclose(fast.support_.coef, ref.support_.coef, rtol=1e-9, atol=1e-9)


def test_python_reads_the_whole_of_p_the_compiled_steps_keep_in_its_lower_triangle():
    """After compiled inserts ``P``'s upper triangle is stale (``_lower``); ``inverse_gram``
    (and ``state``, and the NumPy insert) mirror the lower triangle first: an exactly
    symmetric inverse of the set's Gram matrix, the lower triangle untouched."""
    from streamk.learners.perceptron import KernelPerceptron

    rng = np.random.default_rng(4)
    model = KernelPerceptron(kernel=RBF(gamma=0.5), budget=Projectron(20, eta=0.01))
    for row in rng.normal(size=(400, 3)):
        model.learn_one(dict(enumerate(row)), bool(np.sin(2.0 * row[0]) > 0))
    policy, support = model._policy, model.support_
    assert policy._lower and support.next_id > 40  # compiled, and the budget turned over
    n = support.n
    policy._settle()  # an update the per-event core left for its next pass over P, made
    raw = policy._P[:n, :n].copy()
    assert not np.array_equal(raw, raw.T)  # the upper triangle is behind
    P = policy.inverse_gram
    assert not policy._lower
    np.testing.assert_array_equal(P, P.T)
    np.testing.assert_array_equal(np.tril(P), np.tril(raw))
    fresh = np.linalg.inv(support.kernel_block(support.X))
    assert np.linalg.norm(P - fresh) / np.linalg.norm(fresh) < 1e-8
    np.testing.assert_array_equal(policy.state()["P"], P)
