"""FeatureIndex and SupportSet: rows, growth, Gram upkeep and block tracking under changes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk.errors import InvalidInput
from streamk.kernels import RBF, Linear, Polynomial
from streamk.learners.features import FeatureIndex
from streamk.learners.support import SupportSet

# -- FeatureIndex --------------------------------------------------------------------------


def test_feature_index_grows_and_reads_missing_as_zero():
    fi = FeatureIndex()
    np.testing.assert_array_equal(fi.row({"a": 1.0, "b": 2.0}, grow=True), [1.0, 2.0])
    np.testing.assert_array_equal(fi.row({"b": 5.0}, grow=True), [0.0, 5.0])
    np.testing.assert_array_equal(fi.row({"c": 3.0, "a": 4.0}, grow=True), [4.0, 0.0, 3.0])
    assert fi.names == ["a", "b", "c"]


def test_feature_index_cache_follows_key_order():
    fi = FeatureIndex()
    fi.row({"a": 1.0, "b": 2.0}, grow=True)
    np.testing.assert_array_equal(fi.row({"b": 7.0, "a": 9.0}, grow=True), [9.0, 7.0])
    np.testing.assert_array_equal(fi.row({"a": 1.0, "b": 2.0}, grow=True), [1.0, 2.0])


def test_unknown_features_at_predict_time_are_appended_not_learned():
    fi = FeatureIndex(["a"])
    row = fi.row({"a": 1.0, "z": 3.0}, grow=False)
    np.testing.assert_array_equal(row, [1.0, 3.0])
    assert fi.names == ["a"]


def test_rows_from_frames_arrays_and_dicts_agree():
    dicts = [{"a": 1.0, "b": 2.0}, {"a": 3.0}, {"b": -1.0, "c": 0.5}]
    from_dicts = FeatureIndex().rows(dicts, grow=True)
    frame = pd.DataFrame(dicts)  # absent keys become NaN, read as 0
    from_frame = FeatureIndex().rows(frame, grow=True)
    np.testing.assert_array_equal(from_dicts, from_frame)
    arr = FeatureIndex().rows(from_frame, grow=True)
    np.testing.assert_array_equal(arr, from_frame)


@pytest.mark.parametrize(
    "x", [{"a": float("nan")}, {"a": float("inf")}, {"a": "red"}, {"a": None, "b": float("-inf")}]
)
def test_non_numeric_or_non_finite_values_raise_a_clear_error(x):
    with pytest.raises(InvalidInput):
        FeatureIndex().row(x, grow=True)


def test_none_means_absent():
    np.testing.assert_array_equal(FeatureIndex().row({"a": None, "b": 2.0}, grow=True), [0, 2])


def test_infinite_values_in_a_frame_raise():
    with pytest.raises(InvalidInput, match="finite"):
        FeatureIndex().rows(pd.DataFrame({"a": [1.0, np.inf]}), grow=True)


# -- SupportSet ----------------------------------------------------------------------------


def brute_decision(kernel, X, coef, Q):
    """f(q) = sum_i coef_i k(x_i, q) with one kernel call per pair."""
    return np.array(
        [
            [sum(kernel(x, q) * c[j] for x, c in zip(X, coef)) for j in range(coef.shape[1])]
            for q in Q
        ]
    )


def test_append_remove_replace_keep_views_and_gram_consistent():
    rng = np.random.default_rng(0)
    k = RBF(0.5)
    s = SupportSet(k, n_outputs=2, keep_gram=True, capacity=2)
    rows = rng.normal(size=(10, 3))
    for r in rows:
        s.append(r, rng.normal(size=2))
    s.remove(3)
    s.remove(s.n - 1)
    s.replace(0, rng.normal(size=4), np.array([1.0, -1.0]))  # a wider row grows the width
    assert s.n == 8 and s.width == 4
    np.testing.assert_allclose(s.gram_matrix, k.gram(s.X, s.X), atol=1e-12)
    np.testing.assert_allclose(s.sqnorm, (s.X**2).sum(1))
    np.testing.assert_allclose(s.kdiag, 1.0)
    Q = rng.normal(size=(5, 4))
    np.testing.assert_allclose(s.decision(Q), brute_decision(k, s.X, s.coef, Q), atol=1e-12)


def test_oldest_follows_insertion_order_through_swaps():
    s = SupportSet(Linear())
    for i in range(5):
        s.append(np.array([float(i)]), np.array([1.0]))
    s.remove(0)  # row 4 moves into slot 0
    assert s.X[s.oldest(), 0] == 1.0


ops = st.lists(
    st.tuples(
        st.sampled_from(["append", "remove", "replace", "add", "scale", "remap"]),
        st.integers(0, 10**6),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(ops=ops, kernel_id=st.integers(0, 2))
def test_tracked_block_stays_equal_to_fresh_computation(ops, kernel_id):
    """Whatever sequence of changes, a tracked block's K equals a fresh K(Q, S)."""
    kernel = [RBF(0.3), Linear(), Polynomial(2)][kernel_id]
    rng = np.random.default_rng(len(ops))
    s = SupportSet(kernel, n_outputs=2, keep_gram=True, capacity=1)
    for _ in range(3):
        s.append(rng.normal(size=3), rng.normal(size=2))
    Q = rng.normal(size=(6, 4))
    with s.track(Q) as block:
        for op, r in ops:
            if op == "append":
                s.append(rng.normal(size=int(2 + r % 3)), rng.normal(size=s.n_outputs))
            elif op == "remove" and s.n:
                s.remove(r % s.n)
            elif op == "replace" and s.n:
                s.replace(r % s.n, rng.normal(size=3), rng.normal(size=s.n_outputs))
            elif op == "add" and s.n:
                s.add_coef(r % s.n, rng.normal(size=s.n_outputs))
            elif op == "scale":
                s.scale_coef(0.5 + (r % 7) / 7)
            elif op == "remap" and s.n_outputs < 5:
                s.remap_outputs(np.hstack([np.eye(s.n_outputs), rng.normal(size=(s.n_outputs, 1))]))
        fresh_K = kernel.gram(Q, s.X) if s.n else np.zeros((6, 0))
        np.testing.assert_allclose(block.K[:, : s.n], fresh_K, atol=1e-10)
        np.testing.assert_allclose(
            block.K[:, : s.n] @ s.coef, brute_decision(kernel, s.X, s.coef, Q), atol=1e-8
        )
        if s.n:
            np.testing.assert_allclose(s.gram_matrix, kernel.gram(s.X, s.X), atol=1e-10)


def test_tracker_skips_rows_before_start():
    s = SupportSet(Linear())
    s.append(np.array([1.0]), np.array([1.0]))
    with s.track(np.array([[1.0], [2.0]])) as block:
        block.start = 1
        s.append(np.array([3.0]), np.array([1.0]))
        assert block.K[0, 1] == 0.0  # row 0 is done: its new column is not computed
        assert block.K[1, 1] == 6.0


def test_state_round_trip_preserves_decisions():
    rng = np.random.default_rng(5)
    s = SupportSet(RBF(0.4), n_outputs=3)
    for _ in range(7):
        s.append(rng.normal(size=2), rng.normal(size=3))
    s.remove(2)
    t = SupportSet.from_state(s.state())
    Q = rng.normal(size=(4, 2))
    np.testing.assert_array_equal(t.decision(Q), s.decision(Q))
    np.testing.assert_array_equal(t.ids, s.ids)
    assert t.next_id == s.next_id


def test_add_coefs_equals_row_by_row_add_coef_and_keeps_a_tracked_block_current():
    rng = np.random.default_rng(8)
    one, bulk = SupportSet(RBF(0.6), n_outputs=2), SupportSet(RBF(0.6), n_outputs=2)
    for _ in range(6):
        row, coef = rng.normal(size=3), rng.normal(size=2)
        one.append(row, coef)
        bulk.append(row, coef)
    D = rng.normal(size=(6, 2))
    Q = rng.normal(size=(4, 3))
    with bulk.track(Q) as block:
        bulk.add_coefs(D)
        np.testing.assert_allclose(
            block.F, brute_decision(RBF(0.6), bulk.X, bulk.coef, Q), atol=1e-10
        )
    for slot in range(6):
        one.add_coef(slot, D[slot])
    np.testing.assert_allclose(bulk.coef, one.coef)


@pytest.mark.parametrize("budget", [None, 200, "merge"])
def test_the_buffers_grow_to_the_policys_most_rows_and_no_further(budget):
    """A budgeted set's buffers stop doubling at budget + 1 rows (the most it holds at once:
    an insertion appends before it removes or merges), on a fresh model and a restored one;
    an unbounded set keeps doubling."""
    from streamk import KernelPerceptron, Merge

    rng = np.random.default_rng(3)
    X = rng.normal(size=(700, 50))
    y = (X[:, 0] * X[:, 1] > 0).tolist()
    policy = Merge(200) if budget == "merge" else budget
    model = KernelPerceptron(budget=policy)
    model.learn_many(pd.DataFrame(X[:500]), y[:500])
    cap = model._support.capacity
    if budget is None:
        assert cap >= model.n_support and model._support.rows_limit is None
    else:
        assert model.n_support == 200 and 200 <= cap <= 201 == model._support.rows_limit
    restored = type(model).from_state(model.state())
    assert restored._support.rows_limit == model._support.rows_limit
    restored.learn_many(pd.DataFrame(X[500:]), y[500:])
    model.learn_many(pd.DataFrame(X[500:]), y[500:])
    assert np.array_equal(restored._support.X, model._support.X)
    if budget is not None:
        assert restored._support.capacity <= 201
