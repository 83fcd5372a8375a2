"""The sums under every compiled kernel row (``sk_dots``, ``sk_l1dists`` in ``_fastexp.h``).

The compiled passes take a kernel row against the support set as one dot per support row
(RBF, polynomial and linear kernels) or one L1 distance (Laplacian). Both sum in four lanes
along the features (lane ``j`` over the features ``k = j (mod 4)``, left to right), then
``(lane0 + lane1) + (lane2 + lane3)``; these tests pin that order to the bit, check it
against NumPy to rounding, and check what the fixed order buys: a dot has the same bits
wherever its row sits, whichever operand is the row, with trailing zero features or
without (on every machine of a build: neither clone fuses a multiply-add).
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk import accel
from streamk.learners import eventpass
from tests.test_eventpass import KERNELS, LEARNERS, POLICIES, assert_same_model, run_pair, stream

pytestmark = pytest.mark.skipif(not accel.available(), reason="compiled core not built")

EPS = np.finfo(np.float64).eps


def lane_sum(terms: list[float]) -> float:
    """The documented order: lane ``k mod 4`` left to right, then the lanes paired."""
    lanes = [0.0, 0.0, 0.0, 0.0]
    for k, t in enumerate(terms):
        lanes[k % 4] = lanes[k % 4] + t
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])


def lane_dot(x: np.ndarray, row: np.ndarray) -> float:
    """``sk_dots``'s dot in Python floats (IEEE doubles, no FMA)."""
    return lane_sum([a * b for a, b in zip(x.tolist(), row.tolist())])


def lane_l1(x: np.ndarray, row: np.ndarray) -> float:
    """``sk_l1dists``'s distance over all of ``x``, ``row``'s absent features read as 0."""
    padded = row.tolist() + [0.0] * (len(x) - len(row))
    return lane_sum([abs(a - b) for a, b in zip(x.tolist(), padded)])


@pytest.mark.parametrize("d", [1, 2, 3, 7, 8, 9, 50, 64, 65])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1000])
def test_compiled_dots_match_numpy_and_their_documented_order(d, n):
    rng = np.random.default_rng(100 * d + n)
    ldx = d + 3  # rows wider than the dotted row: the features past d must not be read
    X = np.full((n + 2, ldx), np.nan)  # nor the rows past n
    X[:n, :d] = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-3, 4, size=(n, 1))
    row = rng.normal(size=d)
    got = accel.core.dots(X, n, row)
    assert got.shape == (n,)
    A = X[:n, :d]
    bound = 2 * d * EPS * (np.abs(A) @ np.abs(row))  # both sums are within d u of exact
    assert np.all(np.abs(got - A @ row) <= bound)
    assert got.tolist() == [lane_dot(x, row) for x in A]


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 9, 50, 65])
def test_a_compiled_dot_has_the_same_bits_wherever_it_is_taken(d):
    rng = np.random.default_rng(d)
    n = 37  # not a multiple of the four rows at a time
    X = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-2, 3, size=(n, 1))
    col = accel.core.dots(X, n, X[5])
    for i in range(n):
        assert accel.core.dots(X[i : i + 1], 1, X[5])[0] == col[i]  # alone
        assert accel.core.dots(X, n, X[i])[5] == col[i]  # the operands swapped
    padded = np.hstack([X, np.zeros((n, 6))])
    assert accel.core.dots(padded, n, padded[5]).tolist() == col.tolist()
    assert accel.core.dots(padded, n, X[5]).tolist() == col.tolist()  # a narrower row


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6, 7, 9, 50, 65])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 9, 37, 1000])
def test_two_rows_dotted_in_one_pass_have_each_rows_own_bits(d, n):
    """``sk_dots2`` (the per-event core's Forgetron: the event's row and the leaving
    vector's column in one pass over the set) gives each row the documented order's bits,
    the same as ``sk_dots`` on that row alone, whatever the rows' count and width."""
    rng = np.random.default_rng(300 * d + n)
    ldx = d + 3  # the features past d must not be read
    X = np.full((n + 2, ldx), np.nan)  # nor the rows past n
    X[:n, :d] = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-3, 4, size=(n, 1))
    row0 = rng.normal(size=d) * 10.0 ** rng.integers(-3, 4, size=d)
    row1 = X[n // 2, :d].copy() if n else rng.normal(size=d)  # a support row, as the column
    got0, got1 = accel.core.dots2(X, n, row0, row1)
    assert got0.tolist() == [lane_dot(x, row0) for x in X[:n, :d]]
    assert got1.tolist() == [lane_dot(x, row1) for x in X[:n, :d]]
    assert got0.tolist() == accel.core.dots(X, n, row0).tolist()
    assert got1.tolist() == accel.core.dots(X, n, row1).tolist()


@pytest.mark.parametrize("d", [1, 2, 3, 7, 8, 9, 50, 64, 65])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1000])
def test_compiled_l1_distances_match_numpy_and_their_documented_order(d, n):
    rng = np.random.default_rng(7 * d + n)
    ldx = d + 3  # the row is d wide: the three features past it count as |x - 0|
    X = np.full((n + 2, ldx), np.nan)  # the rows past n must not be read
    X[:n] = rng.normal(size=(n, ldx)) * 10.0 ** rng.integers(-3, 4, size=(n, 1))
    row = rng.normal(size=d)
    got = accel.core.l1dists(X, n, row)
    assert got.shape == (n,)
    dist = np.abs(X[:n] - np.concatenate([row, np.zeros(ldx - d)])).sum(axis=1)
    assert np.all(np.abs(got - dist) <= 2 * ldx * EPS * dist)
    assert got.tolist() == [lane_l1(x, row) for x in X[:n]]
    padded = np.hstack([X[:n], np.zeros((n, 5))])
    assert accel.core.l1dists(padded, n, row).tolist() == got.tolist()
    if n:
        assert accel.core.l1dists(X[n - 1 : n], 1, row)[0] == got[-1]  # alone


def test_dots_refuse_a_row_wider_than_the_rows():
    with pytest.raises(ValueError):
        accel.core.dots(np.zeros((3, 2)), 3, np.zeros(3))
    with pytest.raises(ValueError):
        accel.core.dots(np.zeros((3, 2)), 4, np.zeros(2))
    with pytest.raises(ValueError):
        accel.core.l1dists(np.zeros((3, 2)), 3, np.zeros(3))


# -- the learners on wide rows: compiled against NumPy, event for event ----------------------
WIDE_KERNELS = ["rbf-auto", "laplacian-auto", "poly", "linear", "scaled-laplacian"]
WIDE_GRID = [
    (learner, kernel, policy, d)
    for learner in ("perceptron", "ranker")
    for kernel in WIDE_KERNELS
    for policy in sorted(POLICIES)
    for d in (9, 50)  # a tail of one feature after two lanes' chunks; twelve chunks and two
]


@pytest.mark.skipif(not eventpass.available(), reason="the compiled per-event path is not built")
@pytest.mark.parametrize(("learner", "kernel", "policy", "d"), WIDE_GRID)
def test_wide_rows_agree_with_numpy_on_every_policy_and_kernel(learner, kernel, policy, d):
    """``tests/test_eventpass.py``'s grid on rows wider than its four features: the lane
    order's tails and many chunks, against the NumPy path (the RBF's NumPy row is the same
    C loop, so it agrees to the bit)."""
    make_kernel, exact = KERNELS[kernel]
    classes = (0, 1, 2, 3) if learner == "ranker" else (False, True)
    events = stream(400, d, 5, classes)

    def make():
        return LEARNERS[learner](make_kernel(), POLICIES[policy]())

    fast, slow, p_fast, p_slow = run_pair(make, events)
    assert p_fast == p_slow
    assert_same_model(fast, slow, exact=exact and policy != "forgetron")
    assert fast.n_mistakes > 40


def combine_order(k: list[float], c: list[float]) -> float:
    """The per-event path's one-column sum ``k . coef`` (``_event.pyx``'s ``_combine``) in
    Python floats: four interleaved sums over the whole groups of four, the rest into the
    first, then ``(a0 + a1) + (a2 + a3)``."""
    a = [0.0, 0.0, 0.0, 0.0]
    whole = len(k) - len(k) % 4
    for s in range(whole):
        a[s % 4] = a[s % 4] + k[s] * c[s]
    for s in range(whole, len(k)):
        a[0] = a[0] + k[s] * c[s]
    return (a[0] + a[1]) + (a[2] + a[3])


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 7, 8, 9, 1000, 1003])
def test_the_one_column_sum_keeps_the_per_event_order(n):
    """``sk_coef_dot`` (SIMD lanes) has the bits of the scalar loop it replaced."""
    rng = np.random.default_rng(n)
    k = rng.random(n)
    c = rng.normal(size=n) * 10.0 ** rng.integers(-3, 4, size=n)
    assert accel.core.coef_dot(k, c) == combine_order(k.tolist(), c.tolist())
