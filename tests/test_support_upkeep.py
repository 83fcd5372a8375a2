"""Support-set upkeep: Merge's compiled merge, the kept Gram under changes, SlotData.

The compiled merge (``_policies.merge_apply``) is checked against the NumPy steps of
``merge.merge_smallest`` (the extension switched off by ``compiled.policies = None``, as in
tests/test_policy_paths.py) on the raw support set, with and without a kept Gram matrix and
one or several coefficient columns; the learners' end-to-end runs are in that file.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk import Merge, RemoveOldest, RemoveRandom
from streamk.budget import compiled
from streamk.budget.merge import merge_smallest
from streamk.kernels import RBF, Laplacian
from streamk.learners._slotdata import PRUNE_FACTOR, PRUNE_SLACK, SlotData
from streamk.learners.support import SupportSet

needs_ext = pytest.mark.skipif(not compiled.available(), reason="_policies not built")


def _filled(keep_gram: bool, outputs: int, n: int = 24, seed: int = 0, kernel=None) -> SupportSet:
    """A support set of ``n`` random rows (d = 5) with coefficients of mixed sign."""
    rng = np.random.default_rng(seed)
    s = SupportSet(kernel or RBF(gamma=0.3), outputs, keep_gram=keep_gram, capacity=4)
    for _ in range(n):
        s.append(rng.normal(size=5), rng.normal(size=outputs))
    return s


def _same_set(a: SupportSet, b: SupportSet) -> None:
    assert a.n == b.n and a.next_id == b.next_id and a.width == b.width
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_allclose(a.X, b.X, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.sqnorm, b.sqnorm, rtol=1e-9)
    np.testing.assert_array_equal(a.kdiag, b.kdiag)
    np.testing.assert_allclose(a._sq_max, b._sq_max, rtol=1e-12)
    assert not a._X[a.n :].any() and not a._coef[a.n :].any()  # freed rows read as zero
    if a.keep_gram:
        np.testing.assert_allclose(a.gram_matrix, b.gram_matrix, rtol=1e-9, atol=1e-15)


def _merge_numpy(s: SupportSet, gamma: float, monkeypatch) -> None:
    with monkeypatch.context() as m:
        m.setattr(compiled, "policies", None)
        merge_smallest(s, gamma)


@needs_ext
@pytest.mark.parametrize("keep_gram", [False, True])
@pytest.mark.parametrize("outputs", [1, 3])
def test_compiled_merge_equals_numpy_merge(keep_gram, outputs, monkeypatch):
    fast, slow = _filled(keep_gram, outputs), _filled(keep_gram, outputs)
    rng = np.random.default_rng(1)
    for step in range(40):  # merge down to 4 rows, with new rows arriving now and then
        if step % 3 == 0:
            row, coef = rng.normal(size=5), rng.normal(size=outputs)
            fast.append(row, coef)
            slow.append(row, coef)
        if fast.n < 4:
            break
        version = fast.version
        merge_smallest(fast, 0.3)
        _merge_numpy(slow, 0.3, monkeypatch)
        assert fast.version > version
        _same_set(fast, slow)
    if keep_gram:  # and the kept Gram matrix is the kernel's
        X = fast.X
        np.testing.assert_allclose(fast.gram_matrix, fast.kernel.gram(X, X), atol=1e-12)


@needs_ext
def test_compiled_merge_declines_with_a_tracked_block(monkeypatch):
    """A tracked block follows the set only through its methods: the compiled merge leaves
    the set alone, and the NumPy steps (compiled search) keep the block current."""
    s = _filled(True, 1)
    before = (s.X.copy(), s.coef.copy(), s.ids.copy(), s.gram_matrix.copy())
    Q = np.random.default_rng(2).normal(size=(3, 5))
    with s.track(Q) as t:
        assert not compiled.merge_apply(s, 0.3)
        np.testing.assert_array_equal(s.X, before[0])
        np.testing.assert_array_equal(s.coef, before[1])
        np.testing.assert_array_equal(s.ids, before[2])
        np.testing.assert_array_equal(s.gram_matrix, before[3])
        merge_smallest(s, 0.3)
        np.testing.assert_allclose(t.K[:, : s.n], s.kernel_block(Q), atol=1e-12)
    ref = _filled(True, 1)
    _merge_numpy(ref, 0.3, monkeypatch)
    _same_set(s, ref)


def test_compiled_merge_declines_for_other_kernels_and_small_sets():
    s = _filled(False, 1, kernel=Laplacian(gamma=0.3))
    X = s.X.copy()
    assert not compiled.merge_apply(s, 0.3)
    np.testing.assert_array_equal(s.X, X)
    assert not compiled.merge_apply(_filled(False, 1, n=1), 0.3)


# -- the kept Gram matrix under changes ------------------------------------------------------


@pytest.mark.parametrize("with_k_row", [False, True])
def test_kept_gram_follows_removes_and_replaces(with_k_row):
    """``remove`` moves only the live part of the Gram row and column; ``replace`` takes the
    caller's kernel row. After every change ``K(S, S)`` is the kernel's."""
    s = _filled(True, 2, n=12)
    rng = np.random.default_rng(3)
    for step in range(60):
        row, coef = rng.normal(size=5), rng.normal(size=2)
        op = step % 3
        if op == 0 and s.n > 2:
            s.remove(int(rng.integers(s.n)))
        elif op == 1:
            k = s.kernel_row(row) if with_k_row else None
            s.replace(int(rng.integers(s.n)), row, coef, new_id=bool(step % 2), k_row=k)
        else:
            s.append(row, coef)
        X = s.X
        np.testing.assert_allclose(s.gram_matrix, s.kernel.gram(X, X), atol=1e-12)
        np.testing.assert_array_equal(s.gram_matrix, s.gram_matrix.T)


# -- SlotData --------------------------------------------------------------------------------


def _align_reference(ids: np.ndarray, values: np.ndarray, live: np.ndarray) -> np.ndarray:
    """What ``align`` must return: each live id's value, NaN for unknown ids (a dict)."""
    known = {int(i): v for i, v in zip(ids, values)}
    out = np.full((live.size, values.shape[1]), np.nan)
    for j, i in enumerate(live):
        if int(i) in known:
            out[j] = known[int(i)]
    return out


@pytest.mark.parametrize("shuffle", [False, True])
def test_slotdata_align_equals_a_lookup(shuffle):
    rng = np.random.default_rng(5)
    for _ in range(50):
        ids = np.sort(rng.choice(200, size=int(rng.integers(0, 40)), replace=False))
        if shuffle:
            rng.shuffle(ids)
        values = rng.normal(size=(ids.size, 2))
        live = rng.choice(220, size=int(rng.integers(0, 30)), replace=False)
        data = SlotData.from_state(ids, values.tolist(), width=2)
        np.testing.assert_array_equal(data.align(live), _align_reference(ids, values, live))
        np.testing.assert_array_equal(data.ids, live)


@pytest.mark.parametrize("policy", [lambda b: RemoveOldest(b), lambda b: RemoveRandom(b, 0), Merge])
def test_slotdata_stays_bounded_over_a_long_budgeted_stream(policy):
    """A learner that never aligns (e.g. the SVR with ``resweeps=0``) but prunes to the live
    ids after each record keeps at most ``2 n + slack`` entries, and reads the same values as
    without pruning."""
    budget = 20
    s = SupportSet(RBF(gamma=0.3))
    pol = policy(budget)
    data = SlotData(1)
    every = SlotData(1)  # unpruned: what an O(events) store reads
    rng = np.random.default_rng(6)
    for event in range(3000):
        row = rng.normal(size=4)
        new_id = s.next_id
        pol.insert(s, row, np.array([rng.normal()]), s.kernel_row(row))
        y = float(event)
        if event % 2:
            data.add(new_id, y)
        else:
            data.extend(np.array([new_id]), np.array([[y]]))
        data.prune(s.ids)
        every.add(new_id, y)
        assert data.ids.size <= PRUNE_FACTOR * s.n + PRUNE_SLACK + 1
        if event % 250 == 0:
            np.testing.assert_array_equal(data.align(s.ids), every.align(s.ids))
    assert s.n == budget and s.next_id == 3000


def test_slotdata_keeps_everything_until_pruned():
    data = SlotData(1)
    for i in range(100):
        data.add(i, float(i))
    assert data.ids.size == 100
    data.prune(np.array([3, 7]))
    np.testing.assert_array_equal(data.values[:, 0], [3.0, 7.0])


@pytest.mark.parametrize("kernel", [RBF(gamma=0.3), Laplacian(gamma=0.3)])
def test_set_kernel_rebuilds_the_kept_gram(kernel):
    """A new kernel (``gamma="auto"`` moving) rebuilds ``K(S, S)``: compiled for an RBF set,
    by ``gram`` otherwise; both are the kernel's."""
    s = _filled(True, 1, n=30, kernel=kernel)
    new = type(kernel)(gamma=0.07)
    s.set_kernel(new)
    X = s.X
    np.testing.assert_allclose(s.gram_matrix, new.gram(X, X), rtol=1e-12, atol=1e-15)
