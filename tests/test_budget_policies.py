"""Each budget policy's defining behaviour against a direct computation written here."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from streamk.budget import (
    BudgetPolicy,
    Forgetron,
    Merge,
    Projectron,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    Unbounded,
    make_policy,
    policy_from_spec,
)
from streamk.budget.removal import forgetron_phi
from streamk.errors import ConfigError
from streamk.kernels import RBF, Linear, Polynomial
from streamk.learners.support import SupportSet


def filled(kernel, n, n_outputs=1, seed=0, d=3):
    """A SupportSet with n random rows and random coefficients; returns (set, rng)."""
    rng = np.random.default_rng(seed)
    s = SupportSet(kernel, n_outputs=n_outputs)
    for _ in range(n):
        s.append(rng.normal(size=d), rng.normal(size=n_outputs))
    return s, rng


def insert(policy, s, row, coef):
    policy.insert(s, row, np.atleast_1d(coef), s.kernel_block(row[None, :])[0])


def ids_of(s):
    return set(s.ids.tolist())


# -- construction and specs ------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_budget_must_be_positive_int(bad):
    with pytest.raises(ConfigError):
        RemoveSmallest(bad)


def test_make_policy_int_is_remove_oldest_and_copies():
    assert make_policy(5) == RemoveOldest(5)
    p = Projectron(5, eta=0.3)
    q = make_policy(p)
    assert q == p and q is not p
    assert isinstance(make_policy(None), Unbounded)
    with pytest.raises(ConfigError):
        make_policy("lots")


@pytest.mark.parametrize(
    "policy",
    [
        Unbounded(),
        RemoveOldest(4),
        RemoveRandom(4, seed=3),
        RemoveSmallest(4),
        Forgetron(4),
        Projectron(None, eta=0.2),
        Projectron(4),
        Merge(4),
    ],
    ids=repr,
)
def test_spec_round_trip_is_plain_data(policy):
    s, rng = filled(RBF(gamma=0.5), 0)
    for _ in range(9):
        insert(policy, s, rng.normal(size=3), rng.normal())
    spec = policy.to_spec()
    back = policy_from_spec(spec)
    assert type(back) is type(policy) and back == policy
    state = back.state()
    for key, value in policy.state().items():
        np.testing.assert_array_equal(np.asarray(state[key]), np.asarray(value))
    if not isinstance(policy, Projectron):  # Projectron's state holds arrays (codec-encoded)
        json.dumps(spec)


def test_unknown_spec_is_a_config_error():
    with pytest.raises(ConfigError):
        policy_from_spec({"name": "Nope", "budget": 3})


# -- removal policies -------------------------------------------------------------------------
def test_remove_oldest_drops_the_first_inserted():
    s, rng = filled(RBF(gamma=0.5), 4)
    p = RemoveOldest(4)
    for step in range(10):
        before = ids_of(s)
        insert(p, s, rng.normal(size=3), 1.0)
        assert len(s) == 4
        assert before - ids_of(s) == {min(before)}, step


def test_remove_random_matches_the_seeded_generator():
    s, rng = filled(RBF(gamma=0.5), 5)
    p = RemoveRandom(5, seed=42)
    gen = np.random.Generator(np.random.PCG64(42))
    for _ in range(30):
        slot = int(gen.integers(len(s)))
        expected_gone = int(s.ids[slot])
        insert(p, s, rng.normal(size=3), 1.0)
        assert expected_gone not in ids_of(s) and len(s) == 5


def test_remove_random_is_reproducible_and_seed_dependent():
    def gone(seed):
        s, rng = filled(RBF(gamma=0.5), 5)
        p = RemoveRandom(5, seed=seed)
        for _ in range(40):
            insert(p, s, rng.normal(size=3), 1.0)
        return sorted(s.ids.tolist())

    assert gone(1) == gone(1)
    assert gone(1) != gone(2)


def test_remove_smallest_drops_least_rkhs_norm():
    # a polynomial kernel so that k(x, x) differs between rows; two output columns
    s, rng = filled(Polynomial(2, 0.5, 1.0), 6, n_outputs=2)
    p = RemoveSmallest(6)
    for _ in range(15):
        norms = [math.sqrt(sum(c * c for c in s.coef[i])) * math.sqrt(s.kdiag[i]) for i in range(6)]
        expected_gone = int(s.ids[int(np.argmin(norms))])
        insert(p, s, rng.normal(size=3), rng.normal(size=2))
        assert expected_gone not in ids_of(s) and len(s) == 6


def test_remove_smallest_ties_go_to_the_oldest():
    s = SupportSet(RBF(gamma=1.0))
    p = RemoveSmallest(3)
    for i in range(3):
        insert(p, s, np.array([float(i)]), 1.0)
    s.remove(0)  # swap-remove: slot order no longer follows age
    insert(p, s, np.array([5.0]), -1.0)
    insert(p, s, np.array([6.0]), 1.0)
    assert sorted(s.ids.tolist()) == [2, 3, 4]


# -- Forgetron ----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(30))
def test_forgetron_phi_is_the_largest_feasible(seed):
    rng = np.random.default_rng(seed)
    a, b, c = rng.normal() * 3, abs(rng.normal()) * 2 + 0.1, -abs(rng.normal()) * 2 - 1e-3
    grid = np.linspace(1e-6, 1.0, 200001)
    feasible = grid[a * grid**2 + b * grid + c <= 0]
    phi = forgetron_phi(a, b, c)
    assert a * phi**2 + b * phi + c <= 1e-9
    assert phi == pytest.approx(feasible.max(), abs=1e-5)


def plain_forgetron(stream, k, B):
    """Self-tuned Forgetron (Dekel et al. 2008, Fig. 3) written with lists, binary, alpha = y."""
    S, beta, Q, M = [], [], 0.0, 0
    for x, y in stream:
        f = sum(b_ * k(s_, x) for s_, b_ in zip(S, beta))
        if y * f > 0 if f != 0 else y > 0:  # sgn(0) = +1
            continue
        M += 1
        S.append(x)
        beta.append(float(y))
        if len(S) > B:
            fp = sum(b_ * k(s_, S[0]) for s_, b_ in zip(S, beta))
            a = beta[0] ** 2 - 2 * beta[0] * fp
            b = 2 * abs(beta[0])
            c = Q - 15 / 32 * M
            phis = np.linspace(1e-7, 1, 1_000_001)
            phi = phis[a * phis**2 + b * phis + c <= 0].max()
            beta = [phi * b_ for b_ in beta]
            e = abs(beta[0])
            fpp = sum(b_ * k(s_, S[0]) for s_, b_ in zip(S, beta))
            Q += e * e + 2 * e - 2 * e * math.copysign(1.0, beta[0]) * fpp
            S.pop(0)
            beta.pop(0)
    return S, beta, Q


def test_forgetron_against_the_paper_written_plainly():
    from streamk import KernelPerceptron

    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 2))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    gamma = 0.7

    def k(a, b):
        return math.exp(-gamma * float(((a - b) ** 2).sum()))

    S, beta, Q = plain_forgetron(zip(X, y), k, B=8)
    model = KernelPerceptron(kernel=RBF(gamma=gamma), budget=Forgetron(8))
    for xi, yi in zip(X, y):
        model.learn_one({"a": xi[0], "b": xi[1]}, int(yi))
    order = np.argsort(model.support_.ids)
    np.testing.assert_allclose(model.support_.X[order], np.array(S), atol=0)
    np.testing.assert_allclose(model.support_.coef[order, 0], beta, rtol=1e-4, atol=1e-6)
    assert model._policy.state()["Q"] == pytest.approx(Q, rel=1e-4)
    assert any(abs(b) < 0.999 for b in beta)  # shrinking happened


# -- Projectron ---------------------------------------------------------------------------------
def test_projectron_projects_or_adds_by_the_projection_error():
    kern = RBF(gamma=0.3)
    p = Projectron(None, eta=0.1)
    s = SupportSet(kern, n_outputs=2)
    rng = np.random.default_rng(1)
    added = projected = 0
    for _ in range(120):
        x = rng.normal(size=2)
        c = rng.choice([-1.0, 0.0, 1.0], size=2)
        n = len(s)
        if n:
            K = kern.gram(s.X, s.X)
            k = kern.gram(s.X, x[None, :])[:, 0]
            dvec = np.linalg.solve(K, k)
            delta2 = 1.0 - k @ dvec
        old = s.coef.copy()
        insert(p, s, x, c)
        if n and delta2 <= 0.1:
            projected += 1
            assert len(s) == n
            np.testing.assert_allclose(s.coef, old + np.outer(dvec, c), atol=1e-8)
        else:
            added += 1
            assert len(s) == n + 1
            np.testing.assert_array_equal(s.X[-1], x)
    assert added > 3 and projected > 20


def test_projectron_inverse_gram_stays_exact_under_insertions_and_removals():
    kern = RBF(gamma=0.2)
    p = Projectron(12, eta=0.0)
    s = SupportSet(kern, n_outputs=3)
    rng = np.random.default_rng(7)
    removals = 0
    for _ in range(300):
        n = len(s)
        insert(p, s, rng.normal(size=4) * 2, rng.normal(size=3))
        removals += n == 12 and len(s) == 12
        assert len(s) <= 12
    assert removals > 50
    G = kern.gram(s.X, s.X)
    np.testing.assert_allclose(p.inverse_gram, np.linalg.inv(G), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(p.inverse_gram @ G, np.eye(12), atol=1e-8)


def test_projectron_removal_projects_the_cheapest_vector():
    kern = RBF(gamma=0.5)
    s, rng = filled(kern, 5, n_outputs=2, seed=3)
    p = Projectron(5, eta=0.0)
    G = kern.gram(s.X, s.X)
    P = np.linalg.inv(G)
    cost = (s.coef**2).sum(1) / np.diag(P)
    i = int(np.argmin(cost))
    gone = int(s.ids[i])
    # f over a probe set, with i's term replaced by its projection onto the others
    others = [j for j in range(5) if j != i]
    beta = np.linalg.solve(G[np.ix_(others, others)], G[others, i])
    coef_expected = s.coef[others] + np.outer(beta, s.coef[i])
    X_expected = s.X[others]
    x = np.array([9.0, 9.0, 9.0])  # far away: certainly added
    insert(p, s, x, np.array([1.0, -1.0]))
    assert gone not in ids_of(s) and len(s) == 5
    Z = rng.normal(size=(50, 3))
    f_expected = kern.gram(Z, X_expected) @ coef_expected + kern.gram(Z, x[None, :]) * [1, -1]
    np.testing.assert_allclose(s.decision(Z), f_expected, atol=1e-9)


def test_projectron_rebuilds_when_the_set_changes_behind_its_back():
    kern = RBF(gamma=0.5)
    p = Projectron(None, eta=0.0)
    s = SupportSet(kern)
    rng = np.random.default_rng(2)
    for _ in range(6):
        insert(p, s, rng.normal(size=2) * 3, 1.0)
    s.remove(1)  # not through the policy
    s.set_kernel(RBF(gamma=0.9))
    insert(p, s, np.array([20.0, 20.0]), 1.0)
    G = s.kernel.gram(s.X, s.X)
    np.testing.assert_allclose(p.inverse_gram, np.linalg.inv(G), atol=1e-8)


def test_projectron_p_buffer_never_has_a_power_of_two_stride():
    """``P``'s side is whole cache lines (8 doubles) and never a multiple of 64 doubles (rows
    512 bytes apart alias in the cache: the pass over ``P`` ran up to twice as slow), with
    room for every row asked; growing through such sizes keeps ``P`` the inverse Gram
    matrix."""
    kern = RBF(gamma=0.05)
    p = Projectron(None, eta=0.0)
    s = SupportSet(kern)
    rng = np.random.default_rng(5)
    sides = set()
    for _ in range(140):
        insert(p, s, rng.normal(size=3) * 4, 1.0)
        side = p._P.shape[0]
        sides.add(side)
        assert p._P.shape == (side, side) and side >= len(s)
        assert side % 8 == 0 and side % 64 != 0, side
    assert len(sides) > 2 and len(s) > 128  # (grown past 64 and 128 rows)
    G = kern.gram(s.X, s.X)
    np.testing.assert_allclose(p.inverse_gram @ G, np.eye(len(s)), atol=1e-6)


@pytest.mark.parametrize("bad", [-0.1, "x", float("nan")])
def test_projectron_eta_validated(bad):
    with pytest.raises(ConfigError):
        Projectron(eta=bad)


# -- Merge --------------------------------------------------------------------------------------
def brute_merge(X, C, gamma):
    """BSGD merging (Wang et al. 2012) by exhaustive search: returns (m, n, z, alpha_z)."""
    norms = np.sqrt((C**2).sum(1))
    m = int(np.argmin(norms))
    H = np.linspace(0.0, 1.0, 100001)
    best = (np.inf, None, None, None)
    for n in range(len(X)):
        if n == m:
            continue
        d2 = float(((X[m] - X[n]) ** 2).sum())
        a = np.exp(-gamma * (1 - H) ** 2 * d2)
        b = np.exp(-gamma * H**2 * d2)
        AZ = a[:, None] * C[m] + b[:, None] * C[n]
        kept = (AZ**2).sum(1)
        j = int(np.argmax(kept))
        loss = (C[m] ** 2).sum() + (C[n] ** 2).sum() + 2 * math.exp(-gamma * d2) * C[m] @ C[n]
        loss -= kept[j]
        if loss < best[0]:
            best = (loss, n, H[j] * X[m] + (1 - H[j]) * X[n], AZ[j])
    return m, best[1], best[2], best[3]


@pytest.mark.parametrize("n_outputs", [1, 3])
@pytest.mark.parametrize("seed", range(6))
def test_merge_matches_a_brute_force_grid_search(seed, n_outputs):
    gamma = 0.4
    s, rng = filled(RBF(gamma=gamma), 6, n_outputs=n_outputs, seed=seed, d=2)
    row, coef = rng.normal(size=2), rng.normal(size=n_outputs)
    X = np.vstack([s.X, row])
    C = np.vstack([s.coef, coef])
    ids = np.append(s.ids, s.next_id)
    m, n, z, alpha_z = brute_merge(X, C, gamma)
    insert(Merge(6), s, row, coef)
    assert len(s) == 6
    assert ids[n] not in ids_of(s)
    slot = int(np.flatnonzero(s.ids == ids[m])[0])
    np.testing.assert_allclose(s.X[slot], z, atol=1e-4)
    np.testing.assert_allclose(s.coef[slot], alpha_z, atol=1e-4)


def test_merge_of_two_equal_gaussians_is_the_midpoint():
    gamma = 1.0
    s = SupportSet(RBF(gamma=gamma))
    p = Merge(1)
    insert(p, s, np.array([0.0, 0.0]), 1.0)
    insert(p, s, np.array([1.0, 0.0]), 1.0)
    assert len(s) == 1
    np.testing.assert_allclose(s.X[0], [0.5, 0.0], atol=1e-6)
    # alpha_z = k(x_m, z) + k(x_n, z) = 2 exp(-gamma / 4)
    assert s.coef[0, 0] == pytest.approx(2 * math.exp(-0.25), rel=1e-9)


def test_merge_needs_rbf():
    s = SupportSet(Linear())
    with pytest.raises(ConfigError, match="RBF"):
        insert(Merge(2), s, np.array([1.0]), 1.0)


def test_policies_are_budget_policies():
    for cls in (RemoveOldest, RemoveRandom, RemoveSmallest, Forgetron, Projectron, Merge):
        assert issubclass(cls, BudgetPolicy)
