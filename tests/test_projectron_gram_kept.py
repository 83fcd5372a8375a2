"""The Projectron's rebuilds of ``P`` from kept dots (``compiled.support_gram_kept``).

During ``gamma="auto"``'s warm-up every kernel change makes the Projectron rebuild ``P`` from
the Gram matrix. The policy keeps the rows' dots between rebuilds (by support id, checked
against the row itself) so a new ``gamma`` costs the exps; the Gram matrix must have the
bits :func:`_policies.rbf_gram` computes from scratch, whatever the set did in between
(rows removed, moved to another slot, new rows, a row rewritten under its id, a wider
buffer), and the cache must never travel with the policy (pickle, deep copy).
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from streamk import OnlineSVR
from streamk.budget import Projectron, compiled
from streamk.budget.projectron import KEEP_FROM, KEEP_UP_TO
from streamk.kernels import RBF
from streamk.learners.support import SupportSet

pytestmark = pytest.mark.skipif(not compiled.available(), reason="_policies is not built")


def _scratch(support: SupportSet) -> np.ndarray:
    """The Gram matrix computed from scratch: ``rbf_gram``'s bits."""
    return compiled.policies.rbf_gram(
        support._X, support._sq, support.n, float(support.kernel.gamma)
    )


def _oracle(support: SupportSet) -> np.ndarray:
    """An independent Gram matrix: ``exp(-gamma ||x_i - x_j||²)`` from the differences."""
    X = support.X
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return np.exp(-float(support.kernel.gamma) * d2)


def _check(support: SupportSet, kept):
    got = compiled.support_gram_kept(support, kept)
    assert got is not None
    G, kept = got
    np.testing.assert_array_equal(G, _scratch(support))
    np.testing.assert_allclose(G, _oracle(support), rtol=1e-12, atol=1e-13)
    assert kept.m == support.n
    np.testing.assert_array_equal(kept.kept[0][: kept.m], support.ids)
    return kept


def test_kept_dots_give_the_bits_of_a_gram_from_scratch():
    rng = np.random.default_rng(11)
    support = SupportSet(RBF(gamma=0.05))
    for row in rng.normal(size=(40, 7)):
        support.append(row, np.ones(1))
    kept = _check(support, None)
    for step in range(12):
        support.set_kernel(RBF(gamma=0.05 + 0.01 * step))
        if step % 3 == 0:
            support.remove(int(rng.integers(support.n)))  # the last row moves into the slot
        if step % 3 == 1:
            support.append(rng.normal(size=7), np.ones(1))
        if step == 5:  # a row rewritten under its id: its kept dots are stale
            support.replace(4, rng.normal(size=7), np.ones(1))
        if step == 8:  # a wider buffer: every row is compared anew
            support.append(rng.normal(size=9), np.ones(1))
        kept = _check(support, kept)


def _gram_from(support: SupportSet, ids, X, D) -> tuple[np.ndarray, int]:
    """``rbf_gram_kept`` of ``support`` with the kept rows ``ids``, ``X`` and dots ``D``: the
    Gram matrix and how many rows it found kept."""
    n, w = support.n, support._X.shape[1]
    out = (np.empty(n, dtype=np.int64), np.empty((n, w)), np.empty((n, n)))
    G = np.full((n, n), np.nan)
    gamma = float(support.kernel.gamma)
    found = compiled.policies.rbf_gram_kept(
        support._X, support._sq, support._ids, n, gamma, ids, X, D, ids.shape[0], *out, G
    )
    return G, found


def test_a_stale_row_is_recomputed_not_read():
    """A kept row whose entries differ from the set's row under the same id is not used
    (the dots it would lend are another row's); nor is a row kept under another id."""
    rng = np.random.default_rng(3)
    support = SupportSet(RBF(gamma=0.2))
    for row in rng.normal(size=(9, 5)):
        support.append(row, np.ones(1))
    n, w = support.n, support._X.shape[1]
    ids, X = support.ids.copy(), support._X[:n].copy()
    D = X @ X.T + 100.0  # dots no row has: read, they change G
    G, found = _gram_from(support, ids, X, D)
    assert found == n and not np.array_equal(G, _scratch(support))
    X[2, 0] += 1.0  # the cache now remembers another row under id ids[2]
    G, found = _gram_from(support, ids[2:3], X[2:3], D[2:3, 2:3])
    assert found == 0
    np.testing.assert_array_equal(G, _scratch(support))
    X = support._X[:n].copy()
    G, found = _gram_from(support, ids[2:3] + 1000, X[2:3], D[2:3, 2:3])
    assert found == 0
    np.testing.assert_array_equal(G, _scratch(support))
    kD = compiled.support_gram_kept(support, None)[1].kept[2]  # the compiled dots
    G, found = _gram_from(support, ids[2:4], X[2:4], kD[2:4, 2:4].copy())
    assert found == 2
    np.testing.assert_array_equal(G, _scratch(support))
    assert w == X.shape[1]


def test_the_warm_up_reuses_dots_and_keeps_the_model_bits(monkeypatch):
    """An SVR learning under ``gamma="auto"`` with a Projectron: its rebuilds take dots from
    the cache, and the model (support set and ``P``) has the bits of one whose rebuilds
    compute every dot afresh."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 6))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    rows = [({f"x{j}": float(v) for j, v in enumerate(r)}, float(t)) for r, t in zip(X, y)]

    def learn(model):
        for x, t in rows:
            model.learn_one(x, t)
        return model

    reused = []
    real = compiled.policies.rbf_gram_kept

    def counting(*args):
        found = real(*args)
        reused.append(found)
        return found

    monkeypatch.setattr(compiled.policies, "rbf_gram_kept", counting)
    kept = learn(OnlineSVR(kernel=RBF("auto"), budget=Projectron(60)))
    assert sum(reused) > 100, reused  # later rebuilds found most rows kept
    monkeypatch.setattr(
        compiled,
        "support_gram_kept",
        lambda s, kept, lower=False: (compiled.support_gram(s), None),
    )
    fresh = learn(OnlineSVR(kernel=RBF("auto"), budget=Projectron(60)))
    for a, b in ((kept.support_, fresh.support_),):
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_array_equal(a.X, b.X)
        np.testing.assert_array_equal(a.coef, b.coef)
    np.testing.assert_array_equal(kept._policy.inverse_gram, fresh._policy.inverse_gram)


def test_a_lower_gram_is_the_lower_triangle_of_the_full_one():
    """``mirror=False`` (what the Projectron's rebuild asks for: its inverse reads the lower
    triangle only) writes the lower triangle, with the full matrix's bits, and nothing
    above it; kept rows in their slots (dots copied whole) and new rows alike."""
    rng = np.random.default_rng(5)
    support = SupportSet(RBF(gamma=0.1))
    for row in rng.normal(size=(KEEP_FROM + 3, 6)):
        support.append(row, np.ones(1))
    kD = compiled.support_gram_kept(support, None)[1].kept[2].copy()
    m = support.n
    for row in rng.normal(size=(5, 6)):  # new rows after the kept ones
        support.append(row, np.ones(1))
    n, w = support.n, support._X.shape[1]
    out = (np.empty(n, dtype=np.int64), np.empty((n, w)), np.empty((n, n)))
    G = np.full((n, n), np.nan)
    found = compiled.policies.rbf_gram_kept(
        support._X, support._sq, support._ids, n, float(support.kernel.gamma),
        support.ids[:m].copy(), support._X[:m].copy(), kD, m, *out, G, False,
    )  # fmt: skip
    assert found == m
    low = np.tril_indices(n)
    np.testing.assert_array_equal(G[low], _scratch(support)[low])
    assert np.isnan(G[np.triu_indices(n, 1)]).all()


def test_a_rebuild_the_compiled_inverse_refuses_reads_the_whole_gram():
    """A set too close to singular for the compiled inverse (a row twice) falls back to
    LAPACK, which reads the whole Gram matrix: the kept path's lower triangle is mirrored
    first, so ``P`` is LAPACK's inverse (or pseudo-inverse) of the full Gram matrix."""
    rng = np.random.default_rng(6)
    rows = rng.normal(size=(KEEP_FROM + 8, 4))
    rows[-1] = rows[5]
    support = SupportSet(RBF(gamma=0.4))
    for row in rows:
        support.append(row, np.ones(1))
    policy = Projectron(KEEP_FROM + 20)
    policy.prepare(support, support.n + 1)
    assert policy._gram_kept is not None and not policy._lower  # (the kept path, LAPACK)
    G = _scratch(support)
    try:
        want = np.linalg.inv(G)
    except np.linalg.LinAlgError:
        want = np.linalg.pinv(G, hermitian=True)
    np.testing.assert_array_equal(policy.inverse_gram, want)


def test_the_cache_never_travels_with_the_policy():
    policy = Projectron(50)
    support = SupportSet(RBF(gamma=0.3))
    for row in np.random.default_rng(1).normal(size=(KEEP_FROM + 4, 3)):
        support.append(row, np.ones(1))
    policy.prepare(support, KEEP_FROM + 5)
    assert policy._gram_kept is not None
    for other in (copy.deepcopy(policy), pickle.loads(pickle.dumps(policy))):
        assert other._gram_kept is None
        np.testing.assert_array_equal(other.inverse_gram, policy.inverse_gram)


def test_a_large_set_keeps_nothing_after_its_rebuild():
    """Above ``KEEP_UP_TO`` rows (no warm-up's set is that large) a rebuild keeps neither
    dots nor scratch, and its ``P`` is still the inverse of the Gram matrix."""
    policy = Projectron(KEEP_UP_TO + 20)
    support = SupportSet(RBF(gamma=0.02))
    rng = np.random.default_rng(2)
    for row in rng.normal(size=(KEEP_UP_TO + 10, 4)) * 3.0:
        support.append(row, np.ones(1))
    policy.prepare(support, KEEP_UP_TO + 11)
    assert policy._gram_kept is None
    K = support.kernel_block(support.X)
    np.testing.assert_allclose(policy.inverse_gram @ K, np.eye(support.n), atol=1e-6)


def test_a_rebuilt_p_is_mirrored_before_numpy_reads_it():
    """The rebuild writes ``P``'s lower triangle only (the compiled steps read no other);
    ``inverse_gram`` and the NumPy steps see the whole symmetric inverse."""
    rng = np.random.default_rng(4)
    support = SupportSet(RBF(gamma=0.3))
    for row in rng.normal(size=(12, 3)):
        support.append(row, np.ones(1))
    policy = Projectron(20)
    policy.prepare(support, 13)
    assert policy._lower  # (compiled: the upper triangle is not current)
    P = policy.inverse_gram
    np.testing.assert_array_equal(P, P.T)
    want = np.linalg.inv(_oracle(support))
    np.testing.assert_allclose(P, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


@pytest.mark.parametrize("compiled_steps", [True, False])
def test_a_reused_p_buffer_gives_the_p_of_a_fresh_one(compiled_steps, monkeypatch):
    """A rebuild for a smaller set keeps the larger ``P`` buffer, stale rows and all beyond
    the set; the inserts after it (compiled or NumPy) must never read them: the same ``P``
    and set as a policy that starts from a fresh buffer."""
    if not compiled_steps:
        monkeypatch.setattr(compiled, "policies", None)
    rng = np.random.default_rng(9)
    rows = rng.normal(size=(60, 4))

    def run(shrink_first: bool):
        support = SupportSet(RBF(gamma=0.2))
        policy = Projectron(50, eta=0.01)
        for row in rows[:45]:
            support.append(row, np.ones(1))
        if shrink_first:
            policy.prepare(support, 46)  # a P for 45 rows (and room)
            policy._P[33:] = np.nan  # what the set of 33 below must never read
            policy._P[:, 33:] = np.nan
        for _ in range(12):  # rows leave behind the policy's back
            support.remove(support.n - 1)
        for row in rows[45:]:
            k = support.kernel_row(row)
            policy.insert(support, row, np.ones(1), k)
        return support, policy

    (s1, p1), (s2, p2) = run(True), run(False)
    assert p1._P.shape != p2._P.shape  # (the first kept its larger buffer)
    np.testing.assert_array_equal(s1.ids, s2.ids)
    np.testing.assert_array_equal(s1.coef, s2.coef)
    np.testing.assert_array_equal(p1.inverse_gram, p2.inverse_gram)
