"""The compiled core (streamk/_core.pyx) against plain oracles and against the NumPy path."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk import RBF, KernelPerceptron, Laplacian, accel
from tests.test_perceptron import plain_one_vs_rest, plain_perceptron, random_stream, rbf


def test_the_compiled_core_is_built():
    # The install compiles it wherever a C compiler exists (CI has one); without it streamk
    # still works on NumPy alone, which the tests below check too.
    if os.environ.get("STREAMK_NO_ACCEL", "").strip() not in ("", "0"):
        pytest.skip("STREAMK_NO_ACCEL is set")
    assert accel.available()


@pytest.fixture(params=["compiled", "numpy"])
def path(request, monkeypatch):
    if request.param == "compiled" and not accel.available():
        pytest.skip("compiled core not built")
    if request.param == "numpy":
        monkeypatch.setattr(accel, "core", None)
    return request.param


def test_sqnorms_match_an_exact_sum_and_ignore_trailing_zero_padding(path):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(50, 7)) * 10.0 ** rng.integers(-3, 4, size=(50, 1))
    got = accel.sqnorms(A)
    exact = [math.fsum(float(v) ** 2 for v in row) for row in A]
    np.testing.assert_allclose(got, exact, rtol=1e-14)
    if path == "compiled":  # the compiled rule promises bit-equality under padding
        padded = np.hstack([A, np.zeros((50, 9))])
        assert np.array_equal(accel.sqnorms(padded), got)
        assert all(accel.row_sqnorm(A[i]) == got[i] for i in range(50))


#: Rows whose correctly rounded sums need every partial: cancellation, terms far apart,
#: round-half-even ties settled by the terms below them (CPython's own fsum cases among them)
HARD_SUMS = [
    [],
    [0.0],
    [-0.0, -0.0],
    [1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50],
    [2.0**53, -0.5, -(2.0**-54)],
    [2.0**53, 1.0, 2.0**-100],
    [2.0**53 - 1.0, 0.5, 2.0**-54],
    [1.0, 1e100, 1.0, -1e100],
    [1.7976931348623157e308, -1.7976931348623157e308, 1.0],
    [0.1] * 10,
    [5e-324, 5e-324, -5e-324, 1e-308],
]


def test_fsum_rows_is_math_fsum_on_either_path(path):
    """Every row's sum is ``math.fsum``'s, to the bit (the ``gamma="auto"`` widths are
    resolved from it, and the per-event path sums one row with ``math.fsum`` itself)."""
    rng = np.random.default_rng(5)
    rows = [rng.normal(size=w) * 10.0 ** rng.integers(-300, 300, size=w) for w in range(0, 70, 3)]
    rows += [rng.choice([1e16, -1e16, 1.0, -1.0, 2.0**-53, 0.5], size=40) for _ in range(40)]
    rows += [np.array(r, dtype=float) for r in HARD_SUMS]
    for row in rows:
        got = accel.fsum_rows(row[None, :])
        assert got == [math.fsum(row.tolist())] and type(got[0]) is float
    if path == "compiled":  # the compiled loop itself, many rows at once
        A = rng.uniform(0.0, 3.0, size=(30, 50)) * 10.0 ** rng.integers(-8, 8, size=(30, 50))
        sums, finite = accel.core.fsum_rows(A)
        assert finite and sums.tolist() == [math.fsum(r) for r in A.tolist()]


@pytest.mark.parametrize(
    "row, outcome",
    [
        ([1.0, math.inf], math.inf),
        ([math.nan, 1.0], "nan"),
        ([1e308, 1e308], OverflowError),
        ([math.inf, -math.inf], ValueError),
    ],
)
def test_fsum_rows_leaves_what_is_not_finite_to_math_fsum(path, row, outcome):
    A = np.array([[0.5, 0.25], row])
    if isinstance(outcome, type):
        with pytest.raises(outcome):
            accel.fsum_rows(A)
        return
    got = accel.fsum_rows(A)
    assert got[0] == 0.75 and (math.isnan(got[1]) if outcome == "nan" else got[1] == outcome)


def blocks_of(stream, size):
    for i in range(0, len(stream), size):
        chunk = stream[i : i + size]
        yield pd.DataFrame([x for x, _ in chunk]), [y for _, y in chunk]


@pytest.mark.parametrize("budget", [None, 9])
@pytest.mark.parametrize("block", [1, 37, 400])
def test_block_pass_matches_the_plain_algorithm(path, budget, block):
    stream = random_stream(400, 3, seed=3)
    expected, support = plain_perceptron(stream, rbf(0.7), budget=budget)
    model = KernelPerceptron(kernel=RBF(0.7), budget=budget)
    got = []
    for X, y in blocks_of(stream, block):
        got += model.learn_predict_many(X, y)
    assert got[0] is None and got[1:] == expected[1:]  # nothing is predicted before a label
    assert model.n_support == len(support)
    # The support rows, oldest first, are the oracle's support set.
    order = np.argsort(model.support_.ids)
    rows = model.support_.X[order]
    want = np.array([[x[f"f{j}"] for j in range(3)] for x, _ in support])
    assert np.array_equal(rows, want)
    assert np.array_equal(model.support_.coef[order, 0], [y for _, y in support])


def test_block_pass_matches_plain_one_vs_rest(path):
    classes = ["a", "b", "c", "d"]
    stream = random_stream(300, 4, seed=5, labels=tuple(classes))
    seen = list(dict.fromkeys(y for _, y in stream))
    expected, support = plain_one_vs_rest(stream, rbf(0.5), seen)
    model = KernelPerceptron(kernel=RBF(0.5))
    for c in seen:  # all classes known from the start, as in the plain loop
        model._add_label(c)
    got = []
    for X, y in blocks_of(stream, 64):
        got += model.learn_predict_many(X, y)
    assert got == expected
    assert model.n_support == len(support)
    order = np.argsort(model.support_.ids)
    want = [[coef[c] for c in seen] for _, coef in support]
    assert np.array_equal(model.support_.coef[order], want)


def _fingerprint(model):
    s = model.support_
    order = np.argsort(s.ids)
    return s.X[order], s.coef[order], s.ids[order], model.n_mistakes, model.classes_


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    block=st.integers(1, 90),
    budget=st.sampled_from([None, 4, 25]),
    n_classes=st.sampled_from([1, 2, 3, 5]),
    grow_features=st.booleans(),
)
def test_compiled_and_numpy_paths_learn_the_same_model(
    seed, block, budget, n_classes, grow_features
):
    labels = ("x",) * 2 if n_classes == 1 else tuple(range(n_classes))
    stream = random_stream(260, 4, seed=seed, labels=labels)
    if grow_features:  # features appear over time, and a third class arrives mid-block
        stream = [
            ({k: v for k, v in x.items() if i > 120 or k in ("f0", "f1")}, y)
            for i, (x, y) in enumerate(stream)
        ]
    runs = []
    for core in (accel.core, None):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(accel, "core", core)
            model = KernelPerceptron(kernel=RBF(0.6), budget=budget)
            preds = []
            for X, y in blocks_of(stream, block):
                preds += model.learn_predict_many(X, y)
            runs.append((preds, _fingerprint(model)))
    (p1, f1), (p2, f2) = runs
    assert p1 == p2
    for a, b in zip(f1[:3], f2[:3]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    assert f1[3:] == f2[3:]


def test_other_kernels_and_policies_take_the_numpy_path_and_still_learn():
    from streamk import Projectron

    stream = random_stream(200, 3, seed=8)
    for model in (
        KernelPerceptron(kernel=Laplacian(0.5), budget=10),
        KernelPerceptron(kernel=RBF(0.5), budget=Projectron(10)),
    ):
        expected = []
        one = model.clone()
        for x, y in stream:
            expected.append(one.predict_one(x))
            one.learn_one(x, y)
        got = []
        for X, y in blocks_of(stream, 50):
            got += model.learn_predict_many(X, y)
        assert got == expected


def test_the_compiled_exponential_is_within_two_ulp_of_the_c_library(path):
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [-rng.random(200_000) * 708, -rng.random(20_000) * 1e-6, rng.random(20_000) * 700]
    )
    want = np.array([math.exp(v) for v in x])
    got = accel.scaled_exp(x.copy(), 1.0)
    assert np.all(np.abs(got - want) <= 2 * np.spacing(want))
    # Scaling happens before the exponential, as in exp(-gamma * d2).
    np.testing.assert_array_equal(accel.scaled_exp(x[:100] / -0.5, -0.5), got[:100])
    with np.errstate(over="ignore"):
        edges = accel.scaled_exp(np.array([0.0, -800.0, 800.0, -np.inf, np.inf]), 1.0)
    assert edges.tolist() == [1.0, 0.0, math.inf, 0.0, math.inf]


def test_the_compiled_exponential_holds_two_ulp_densely_and_at_its_edges(path):
    """A dense even grid over the whole range, the points where the reduced argument is at
    its widest (``|r| = ln(2)/2``, where the polynomial's error peaks), tiny arguments and
    the clamps' neighbourhoods; the RBF row's loop (``rbf_from_dots``) agrees bit for bit."""
    half = (np.arange(-1022, 1023) + 0.5) * math.log(2.0)
    widest = np.concatenate([half, np.nextafter(half, -np.inf), np.nextafter(half, np.inf)])
    tiny = np.array([0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e-300, 2.0**-53, -(2.0**-54)])
    edges = np.array([-708.0, 709.0, np.nextafter(-708.0, 0.0), np.nextafter(709.0, 0.0)])
    grid = np.linspace(-708.0, 709.0, 1_000_001)
    x = np.concatenate([grid, widest[(widest >= -708.0) & (widest <= 709.0)], tiny, edges])
    want = np.array([math.exp(v) for v in x.tolist()])
    got = accel.scaled_exp(x.copy(), 1.0)
    assert np.all(np.abs(got - want) <= 2 * np.spacing(want))
    if path == "compiled":  # the clamps (NumPy's exp goes on into the subnormals)
        below = np.array([np.nextafter(-708.0, -np.inf), -745.2, -1e308])
        above = np.array([np.nextafter(709.0, np.inf), 709.8, 1e308])
        assert accel.scaled_exp(below, 1.0).tolist() == [0.0] * 3
        assert accel.scaled_exp(above, 1.0).tolist() == [math.inf] * 3
    assert np.isnan(accel.scaled_exp(np.array([np.nan]), 1.0)[0])
    d2 = -x[x <= 0.0]  # exp(-1 * d2) through the RBF row's loop (sk_exp_nonpos): the same bits
    rows = accel.rbf_from_dots(np.zeros((1, d2.shape[0])), np.zeros(1), d2, 1.0)
    np.testing.assert_array_equal(rows[0], got[x <= 0.0])


@pytest.mark.parametrize("d", [1, 3, 10])
def test_kernel_rows_and_blocks_match_the_rbf_formula(path, d):
    from streamk.learners.support import SupportSet

    rng = np.random.default_rng(d)
    gamma = 0.3
    support = SupportSet(RBF(gamma))
    for _ in range(37):  # not a multiple of the four-row unrolling
        support.append(rng.normal(size=d), np.ones(1))
    Q = rng.normal(size=(11, d))
    want = np.array([[math.exp(-gamma * math.fsum((q - s) ** 2)) for s in support.X] for q in Q])
    np.testing.assert_allclose(support.kernel_block(Q), want, rtol=1e-12, atol=1e-15)
    for q, w in zip(Q, want):
        np.testing.assert_allclose(support.kernel_row(q), w, rtol=1e-12, atol=1e-15)
    # A narrower row (trailing features absent) reads them as 0.
    short = Q[0, : d - 1] if d > 1 else Q[0, :0]
    padded = np.concatenate([short, [0.0]])
    np.testing.assert_allclose(
        support.kernel_row(np.ascontiguousarray(short)), support.kernel_row(padded), rtol=1e-13
    )


# -- the float32 hints of learn_many (streamk._core.perceptron_hint_pass) -------------------
needs_core = pytest.mark.skipif(not accel.available(), reason="compiled core not built")
U32 = 2.0**-24


@needs_core
def test_the_float32_exponential_is_within_four_ulp():
    rng = np.random.default_rng(2)
    x = np.concatenate([-rng.random(200_000) * 87, -rng.random(20_000) * 1e-4, [0.0, -87.0]])
    x = x.astype(np.float32)
    want = np.exp(x.astype(np.float64))
    got = x.copy()
    accel.core.expf32(got)
    ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got - want) <= 4 * ulp)
    below = np.array([-87.5, -100.0, -1e30], dtype=np.float32)
    accel.core.expf32(below)
    assert below.tolist() == [0.0, 0.0, 0.0]


def _exact_decisions(Q, X, coef, gamma):
    """f_c(q) = sum_s coef[s, c] exp(-gamma ||q - s||^2), from the differences, summed with
    fsum (rows narrower than X read the missing features as 0)."""
    Qp = np.zeros((Q.shape[0], X.shape[1]))
    Qp[:, : Q.shape[1]] = Q
    k = np.exp(-gamma * ((Qp[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
    return np.array(
        [[math.fsum(k[r] * coef[:, c]) for r in range(Q.shape[0])] for c in range(coef.shape[1])]
    )


@needs_core
@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    m=st.integers(1, 75),
    n=st.integers(0, 45),
    w=st.integers(1, 12),
    extra=st.integers(0, 3),
    p=st.sampled_from([1, 3]),
    offset=st.sampled_from([0.0, 5.0, 1e3]),
    spread=st.sampled_from([1e-3, 1.0, 20.0]),
    gamma_scale=st.sampled_from([0.01, 1.0, 4.0]),
)
def test_the_hints_are_within_their_bound_of_the_exact_decision(
    seed, m, n, w, extra, p, offset, spread, gamma_scale
):
    """|H - f| <= E_r for every row: the claim the hint pass decides rows by."""
    rng = np.random.default_rng(seed)
    Q = offset + spread * rng.normal(size=(m, w))
    X = offset + spread * rng.normal(size=(n, w + extra))  # support rows may be wider
    X[:, w:] = spread * rng.normal(size=(n, extra))
    coef = rng.choice([-1.0, 1.0], size=(n, p)) * rng.random((n, p)) * 2
    gamma = gamma_scale / (w * spread**2)
    got = accel.core.hint_values(Q, X, coef, gamma)
    Qc = Q - Q.mean(axis=0)
    Xc = X.copy()
    Xc[:, :w] -= Q.mean(axis=0)
    sq = (Qc**2).sum(axis=1).max() + max(
        (Qc**2).sum(axis=1).max(), (Xc**2).sum(axis=1).max(initial=0)
    )
    if got is None:  # only when the documented condition fails
        assert 1.03 * gamma * (w + 8) * U32 * sq > 1e-3
        return
    H, E = got
    f = _exact_decisions(Q, X, coef, gamma)
    assert np.all(np.abs(H - f) <= E)
    assert np.all(E < 1e-3 * (1.0 + np.abs(coef).sum(axis=0).max()) + 1e-6)


def _counting_runs(monkeypatch):
    """Wrap fastpass.perceptron_run; returns the list of its results, appended per call."""
    from streamk.learners import fastpass

    results = []
    run = fastpass.perceptron_run

    def counted(*args):
        out = run(*args)
        results.append((args[2].shape[0], out))
        return out

    monkeypatch.setattr(fastpass, "perceptron_run", counted)
    return results


@needs_core
@pytest.mark.parametrize("labels", [(True, False), ("a", "b", "c")])
def test_learn_many_uses_the_hints_and_decides_few_rows_afresh(monkeypatch, labels):
    stream = random_stream(3000, 6, seed=4, labels=labels)
    one = KernelPerceptron(budget=120)
    expected = []
    for x, y in stream:
        expected.append(one.predict_one(x))
        one.learn_one(x, y)
    results = _counting_runs(monkeypatch)
    many = KernelPerceptron(budget=120)
    got = []
    for X, y in blocks_of(stream, 250):
        got += many.learn_predict_many(X, y)
    assert got == expected
    assert np.array_equal(
        many.support_.X[np.argsort(many.support_.ids)], one.support_.X[np.argsort(one.support_.ids)]
    )
    used = [(rows, out) for rows, out in results if out is not None]
    assert sum(rows for rows, _ in used) >= 2500  # after the warm-up, every run
    mistakes = sum(out[0] for _, out in used)
    fresh = sum(out[1] for _, out in used)
    assert mistakes > 100
    # Binary mistakes are certain from the hint; one-vs-rest ones are decided afresh.
    assert fresh <= (0.05 * 2500 if len(labels) == 2 else mistakes + 0.05 * 2500)


@needs_core
def test_the_hints_step_aside_when_their_bound_is_loose(monkeypatch):
    """One feature spread over [0, 100] against gamma = 1: neighbours still matter, but the
    centred squared norms (~2500) make the float32 bound too loose, so learn_many takes the
    float64 path, and still learns exactly what learn_one learns."""
    rng = np.random.default_rng(6)
    stream = [
        ({"f0": 100.0 * rng.random(), "f1": rng.random(), "f2": rng.random()}, y)
        for _, y in random_stream(400, 3, seed=6)
    ]
    one = KernelPerceptron(kernel=RBF(1.0), budget=40)
    expected = []
    for x, y in stream:
        expected.append(one.predict_one(x))
        one.learn_one(x, y)
    results = _counting_runs(monkeypatch)
    model = KernelPerceptron(kernel=RBF(1.0), budget=40)
    got = []
    for X, y in blocks_of(stream, 60):
        got += model.learn_predict_many(X, y)
    assert got == expected
    assert model.n_mistakes == one.n_mistakes > 50
    assert results and all(out is None for _, out in results)


@needs_core
@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 15, 16, 17, 31, 64, 203, 1000])
def test_the_oldest_slot_is_the_first_smallest_id(n):
    """``sk_oldest`` (remove-oldest's and the Forgetron's slot in every compiled pass) is
    ``argmin``'s slot: distinct ids shuffled as a set's are, and ties (the first wins)."""
    rng = np.random.default_rng(n)
    for trial in range(40):
        ids = rng.permutation(n).astype(np.int64) + int(rng.integers(0, 10**6))
        if trial % 2:  # ties, at random places: the first of the smallest
            ids = rng.integers(0, max(n // 3, 1), size=n).astype(np.int64)
        assert accel.core.oldest_slot(ids) == int(np.argmin(ids))


def plain_smallest_slot(coef: np.ndarray, kdiag: np.ndarray, ids: np.ndarray) -> int:
    """``RemoveSmallest``'s slot as the compiled scalar loop decides it, written plainly: the
    least squared cost ``(0 + sum c²) k(x, x)`` (NaN never the least), the rows within
    3e-12 of it in squares and 1e-12 in roots, the oldest of them; none: the oldest."""
    costs = []
    for row, k in zip(coef.tolist(), kdiag.tolist()):
        t = 0.0
        for c in row:
            t = t + c * c
        costs.append(t * k)
    lo = math.inf
    for t in costs:
        if t < lo:
            lo = t
    near, root = lo * (1.0 + 3e-12), math.sqrt(lo) * (1.0 + 1e-12) if lo >= 0 else math.nan
    slot = -1
    for s, t in enumerate(costs):
        if t <= near and (t == lo or math.sqrt(t) <= root) and (slot < 0 or ids[s] < ids[slot]):
            slot = s
    return int(np.argmin(ids)) if slot < 0 else slot


@needs_core
@pytest.mark.parametrize("p", [1, 3])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 15, 16, 17, 31, 64, 203, 1000])
def test_the_smallest_slot_is_the_plain_rules(n, p):
    """``_smallest_slot`` (``RemoveSmallest``'s slot in every compiled pass; one column: eight
    rows at a time) is the plain rule's, and NumPy's ``removal_cost``/``oldest_among`` where
    the costs are finite: equal costs (a perceptron's), the least one's near ties 5e-13 and
    3e-12 above it in any lane, zeros, NaN, infinite and huge costs, a negative diagonal."""
    from streamk.budget.base import oldest_among
    from streamk.budget.removal import removal_cost

    rng = np.random.default_rng(1000 * p + n)
    for trial in range(60):
        coef = rng.standard_normal((n, p))
        kdiag = rng.uniform(0.5, 2.0, n) if trial % 3 else np.ones(n)
        ids = rng.permutation(n).astype(np.int64) + int(rng.integers(0, 10**6))
        kind = trial % 10
        if kind == 1:  # every cost equal: the oldest
            coef = np.sign(coef)
            kdiag = np.ones(n)
        elif kind in (2, 3):  # the least and rows just above it: 5e-13 ties, 3e-12 does not
            cost = np.full(n, 2.0)
            lo_at = rng.integers(n)
            cost[lo_at] = 1.0
            near = rng.choice(n, size=min(n, 3), replace=False)
            cost[near] = np.where(near == lo_at, 1.0, 1.0 + (5e-13 if kind == 2 else 3e-12))
            coef = np.zeros((n, p))
            coef[:, 0] = np.sqrt(cost)
            kdiag = np.ones(n)
        elif kind == 4:  # zeros
            coef[rng.random(n) < 0.3] = 0.0
        elif kind == 5:  # NaN costs: never the least
            coef[rng.random(n) < 0.3, 0] = np.nan
        elif kind == 6:  # every cost NaN: the oldest
            coef[:, 0] = np.nan
        elif kind == 7:  # infinite and huge costs
            coef *= 10.0 ** rng.integers(100, 200, size=(n, 1))
            coef[rng.random(n) < 0.2, 0] = np.inf
        elif kind == 8:  # a negative diagonal
            kdiag[rng.random(n) < 0.5] *= -1.0
        coef = np.ascontiguousarray(coef)
        got = accel.core.smallest_slot(coef, kdiag, ids)
        assert got == plain_smallest_slot(coef, kdiag, ids), (trial, kind)
        if kind not in (5, 6, 7, 8):

            class Set:  # what the NumPy policy reads of a support set
                pass

            S = Set()
            S.coef, S.kdiag, S.ids = coef, kdiag, ids
            cost = removal_cost(S)
            assert got == oldest_among(S, cost <= cost.min() * (1.0 + 1e-12)), (trial, kind)
