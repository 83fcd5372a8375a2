"""The per-event fast paths give what the general paths give.

``FeatureIndex.row`` (last-event cache, finiteness check), ``SupportSet.append`` /
``replace`` (no conversion for a 1-D float64 row, padding only when needed) and
``LabelCoder.positive`` each have a cheap common case; these tests pin it to the
reference behaviour.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk.errors import InvalidInput
from streamk.kernels import RBF, Linear
from streamk.learners.features import FeatureIndex
from streamk.learners.labels import LabelCoder
from streamk.learners.support import SupportSet


# -- FeatureIndex.row ---------------------------------------------------------------------------
def test_same_event_returns_the_cached_read_only_row():
    fi = FeatureIndex()
    x = {"a": 1.0, "b": 2.0}
    r1 = fi.row(x, grow=True)
    r2 = fi.row(dict(x), grow=True)  # an equal dict: same row object
    assert r2 is r1
    assert not r1.flags.writeable
    with pytest.raises(ValueError):
        r1[0] = 5.0


def test_changed_value_or_order_gives_a_new_row():
    fi = FeatureIndex()
    r1 = fi.row({"a": 1.0, "b": 2.0}, grow=True)
    r2 = fi.row({"a": 1.0, "b": 3.0}, grow=True)
    assert r2 is not r1
    np.testing.assert_array_equal(r2, [1.0, 3.0])
    r3 = fi.row({"b": 3.0, "a": 1.0}, grow=True)  # keys out of column order
    np.testing.assert_array_equal(r3, [1.0, 3.0])
    r4 = fi.row({"b": 4.0, "a": 1.0}, grow=True)  # the cached out-of-order columns
    np.testing.assert_array_equal(r4, [1.0, 4.0])


def test_mutated_dict_is_not_mistaken_for_the_last_event():
    fi = FeatureIndex()
    x = {"a": 1.0, "b": 2.0}
    fi.row(x, grow=True)
    x["b"] = 7.0
    np.testing.assert_array_equal(fi.row(x, grow=True), [1.0, 7.0])


def test_grown_index_invalidates_the_last_row():
    fi = FeatureIndex()
    x = {"a": 1.0}
    fi.row(x, grow=True)
    fi.row({"a": 1.0, "b": 2.0}, grow=True)
    fi.row({"c": 1.0}, grow=True)
    np.testing.assert_array_equal(fi.row(x, grow=True), [1.0, 0.0, 0.0])


def test_unknown_features_without_growing_are_not_cached():
    fi = FeatureIndex(["a"])
    x = {"a": 1.0, "z": 2.0}
    r1 = fi.row(x, grow=False)
    np.testing.assert_array_equal(r1, [1.0, 2.0])
    assert len(fi) == 1
    r2 = fi.row(x, grow=False)
    assert r2 is not r1
    np.testing.assert_array_equal(r2, r1)


def test_values_none_reads_as_zero_and_non_finite_is_rejected():
    fi = FeatureIndex()
    np.testing.assert_array_equal(fi.row({"a": None, "b": 2}, grow=True), [0.0, 2.0])
    with pytest.raises(InvalidInput, match="finite"):
        fi.row({"a": float("nan"), "b": 2.0}, grow=True)
    with pytest.raises(InvalidInput, match="finite"):
        fi.row({"a": 1.0, "b": float("-inf")}, grow=True)
    with pytest.raises(InvalidInput, match="number"):
        fi.row({"a": "red", "b": 2.0}, grow=True)


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_a_row_whose_squared_norm_overflows_is_refused():
    """Finite values whose squares overflow: a kernel value against them is NaN or 0, and
    learned they poisoned ``gamma="auto"`` (a width of 0: the next events raised
    ``ConfigError``); see ``tests/test_huge_values.py``."""
    fi = FeatureIndex()
    np.testing.assert_array_equal(fi.row({"a": 1e150, "b": -1e150}, grow=True), [1e150, -1e150])
    with pytest.raises(InvalidInput, match="too large"):
        fi.row({"a": 1e200, "b": -1e200}, grow=True)


# -- SupportSet.append / replace -----------------------------------------------------------------
def _buffers(s: SupportSet) -> tuple:
    return (
        s.X.copy(),
        s.coef.copy(),
        s.sqnorm.copy(),
        s.kdiag.copy(),
        s.ids.copy(),
        (s.n, s.width, s.next_id, s.version, s.rows_version, float(s._sq_max)),
    )


def _assert_same(a: tuple, b: tuple) -> None:
    for u, v in zip(a, b):
        if isinstance(u, np.ndarray):
            np.testing.assert_array_equal(u, v)
            assert u.dtype == v.dtype
        else:
            assert u == v


@pytest.mark.parametrize("kernel", [RBF(gamma=0.3), Linear()])
def test_append_and_replace_accept_any_row_form(kernel):
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((6, 4))
    forms = [
        lambda r: r.copy(),  # the fast path: 1-D float64
        lambda r: r.tolist(),
        lambda r: r[None, :].copy(),
        lambda r: np.asfortranarray(np.stack([r, r]))[0],  # 1-D, not contiguous
    ]
    results = []
    for form in forms:
        s = SupportSet(kernel, n_outputs=2, capacity=2)
        for r in rows[:4]:
            s.append(form(r), form(np.array([1.0, -1.0])))
        s.replace(1, form(rows[4]), form(np.array([0.5, 0.0])), new_id=True)
        s.replace(s.oldest(), form(rows[5]), [2.0, 1.0])
        results.append(_buffers(s))
    for other in results[1:]:
        _assert_same(results[0], other)


def test_narrower_row_is_padded_with_zeros_in_its_slot():
    s = SupportSet(RBF(gamma=0.5))
    s.append(np.array([1.0, 2.0, 3.0]), np.array([1.0]))
    s.append(np.array([4.0]), np.array([1.0]))
    s.replace(0, np.array([5.0, 6.0]), np.array([-1.0]))
    np.testing.assert_array_equal(s.X, [[5.0, 6.0, 0.0], [4.0, 0.0, 0.0]])
    np.testing.assert_array_equal(s.sqnorm, [61.0, 16.0])
    assert s.width == 3


def test_append_copies_the_row_and_keeps_the_largest_norm():
    s = SupportSet(RBF(gamma=0.5))
    row = np.array([3.0, 4.0])
    s.append(row, np.array([1.0]))
    row[:] = 0.0  # the caller's array is not the stored row
    np.testing.assert_array_equal(s.X[0], [3.0, 4.0])
    s.replace(0, np.array([1.0, 0.0]), np.array([1.0]))
    assert s._sq_max == 25.0  # never lowered


def test_oldest_after_removals_and_replacements():
    s = SupportSet(RBF(gamma=0.5))
    for i in range(5):
        s.append(np.array([float(i)]), np.array([1.0]))
    s.remove(0)  # the last row moves into slot 0
    assert s.X[s.oldest(), 0] == 1.0
    s.replace(s.oldest(), np.array([9.0]), np.array([1.0]), new_id=True)
    assert s.X[s.oldest(), 0] == 2.0


# -- LabelCoder.positive -------------------------------------------------------------------------
def test_positive_matches_the_targets_through_class_changes():
    coder = LabelCoder()
    for label in ["b", "a", "b", "c", "a", "d", "c"]:
        coder.add(label)
        for known in coder.classes:
            assert coder.positive(known) == (coder.targets(known) > 0.0).tolist()
    restored = LabelCoder.from_state(coder.state())
    for known in coder.classes:
        assert restored.positive(known) == coder.positive(known)


@pytest.mark.parametrize("labels", [[True, False], [0, 1], [-1, 1], ["x", "y"]])
def test_positive_of_binary_labels(labels):
    coder = LabelCoder()
    for label in labels:
        coder.add(label)
    for label in labels:
        assert coder.positive(label) == [coder.targets(label)[0] > 0.0]


@pytest.mark.parametrize("labels", [["solo"], [False, True], [1, 0], ["a", "b", "c", "d"]])
def test_probabilities_of_one_row_are_the_blocks(labels):
    """``probabilities_one`` (``predict_proba_one``'s map, in Python floats) against
    ``probabilities`` on a block of one row: within an ulp or two of each, on margins from tiny to
    far past where the logistic saturates and the softmax underflows, ties included."""
    coder = LabelCoder()
    for label in labels:
        coder.add(label)
    rng = np.random.default_rng(4)
    p = coder.n_outputs
    rows = [rng.normal(scale=s, size=p) for s in (1e-12, 1.0, 30.0, 800.0) for _ in range(50)]
    rows += [np.zeros(p), np.full(p, 5.0), np.array([1e308, -1e308, 0.0, 1.0][:p])]
    for f in rows:
        one = coder.probabilities_one(f)
        want = coder.probabilities(f[None, :])[0]
        assert len(one) == len(labels) and all(isinstance(v, float) for v in one)
        np.testing.assert_allclose(one, want, rtol=1e-15, atol=4.5e-16)  # (1 - p: an ulp of p)
        assert int(np.argmax(one)) == int(np.argmax(want))
