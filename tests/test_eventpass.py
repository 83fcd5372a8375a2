"""The compiled per-event path (streamk/learners/_event.pyx) against the NumPy path.

The NumPy ``learn_one`` / ``predict_one`` is the oracle: a learner whose ``_event`` is
``None`` runs it alone. Both must make the same predictions and end with the same
support set (and policy state, and the ranker's thresholds) on streams that exercise
every branch the compiled path takes or declines (new features, absent features, ints,
bools, ``None`` values, a new class or rank, a full budget, a full buffer), over the
perceptron, the margin perceptron, the ranker, the SVR, novelty and the adatron × every
budget policy the path takes (the Projectron's projections and removals included) × the
vector kernels. A plain book perceptron (Alg. 7.52) checks both against a third implementation,
and a subprocess checks that with ``STREAMK_NO_ACCEL=1`` the NumPy path runs.
"""

from __future__ import annotations

import copy
import math
import os
import pickle
import subprocess
import sys
from collections import deque
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from streamk import (
    Constant,
    Forgetron,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    Laplacian,
    Linear,
    MarginPerceptron,
    Merge,
    Normalized,
    OnlineRanker,
    OnlineSVR,
    Polynomial,
    Product,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    Scaled,
    Sum,
)
from streamk.budget import Projectron, compiled
from streamk.errors import ConfigError, InvalidInput
from streamk.kernels import RBF, Kernel
from streamk.learners import base, eventpass

pytestmark = pytest.mark.skipif(
    not eventpass.available(), reason="the compiled per-event path is not built here"
)

ROOT = Path(__file__).resolve().parents[1]


def stream(n: int, d: int, seed: int, classes=(False, True)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    score = np.sin(2 * X @ w) + 0.3 * rng.normal(size=n)
    if len(classes) == 2:
        y = [classes[1] if s > 0 else classes[0] for s in score]
    else:
        cuts = np.quantile(score, np.linspace(0, 1, len(classes) + 1)[1:-1])
        y = [classes[int(np.searchsorted(cuts, s))] for s in score]
    return [({f"x{j}": float(v) for j, v in enumerate(r)}, t) for r, t in zip(X, y)]


def run_pair(make, events):
    """Test-then-train with the compiled path and without it; both predictions and models."""
    fast, slow = make(), make()
    slow._event = None  # the NumPy path only
    assert fast._event is not None
    out = []
    for m in (fast, slow):
        preds = []
        for x, y in events:
            preds.append(m.predict_one(x))
            m.learn_one(x, y)
        out.append(preds)
    # each learn_one took the row its predict_one had just computed (EventPass._keep_pre),
    # after gamma="auto"'s warm-up (base.AUTO_WINDOW events) where there is one
    reused = fast._event.rows_reused + fast._event.hints_reused  # (the row, or the hints)
    assert reused > (len(events) - base.AUTO_WINDOW) // 2
    x, y = events[-1]
    assert fast._event.predict(fast, x) is not eventpass.NOT_HANDLED  # the compiled path ran
    assert fast._event.learn(fast, x, y) and slow.learn_one(x, y) is None
    return fast, slow, out[0], out[1]


def assert_same_support(fast, slow, exact: bool = True):
    """The same support set (and kept Gram matrix), counters and policy state; ``exact=False``
    for kernels whose NumPy row is a BLAS product or ``cdist`` (and the Forgetron's shrink,
    which cancels): the same to rounding, as in ``tests/test_grid_paths.py``."""
    a, b = fast.support_, slow.support_
    assert a.n == b.n and a.next_id == b.next_id and a.width == b.width
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.sqnorm, b.sqnorm)
    if exact:
        np.testing.assert_array_equal(a.coef, b.coef)
        np.testing.assert_array_equal(a.kdiag, b.kdiag)
    else:  # the Projectron's projections and removals to 1e-9 (checked on every kernel)
        rtol = 1e-9 if isinstance(fast._policy, Projectron) else 1e-7
        np.testing.assert_allclose(a.coef, b.coef, rtol=rtol, atol=1e-12)
        np.testing.assert_allclose(a.kdiag, b.kdiag, rtol=1e-12)
    assert a._sq_max == b._sq_max
    assert (a._G is None) == (b._G is None)
    if a._G is not None:
        np.testing.assert_allclose(a.gram_matrix, b.gram_matrix, rtol=1e-12, atol=1e-14)
    assert fast.n_learned == slow.n_learned
    pf, ps = fast._policy.state(), slow._policy.state()
    assert pf.keys() == ps.keys()
    for key in pf:  # remove-random's generator state exactly, the Forgetron's Q to rounding
        if isinstance(pf[key], float):
            np.testing.assert_allclose(pf[key], ps[key], rtol=1e-9 if exact else 1e-7)
        elif isinstance(pf[key], np.ndarray) and pf[key].dtype.kind == "f":  # Projectron's P
            scale = np.abs(ps[key]).max(initial=1.0)
            np.testing.assert_allclose(pf[key], ps[key], rtol=1e-8, atol=1e-8 * scale)
        elif isinstance(pf[key], np.ndarray):  # the ids P was built for
            np.testing.assert_array_equal(pf[key], ps[key])
        else:
            assert pf[key] == ps[key]


def assert_same_model(fast, slow, exact: bool = True):
    """:func:`assert_same_support`, the mistakes, and the same decisions on fresh events."""
    a = fast.support_
    assert_same_support(fast, slow, exact)
    assert fast.n_mistakes == slow.n_mistakes
    probe = [x for x, _ in stream(50, a.width, 99)]
    probe = [{f"x{j}": v for j, v in enumerate(x.values())} for x in probe]
    if isinstance(fast, OnlineRanker):
        np.testing.assert_array_equal(fast.thresholds_, slow.thresholds_)
        assert fast.ranks_ == slow.ranks_
        for x in probe:
            np.testing.assert_allclose(fast.score_one(x), slow.score_one(x), rtol=1e-9, atol=1e-9)
        return
    assert fast.classes_ == slow.classes_
    for x in probe:
        np.testing.assert_allclose(
            fast.decision_function_one(x),
            slow.decision_function_one(x),
            rtol=0 if exact else 1e-9,
            atol=1e-12 if exact else 1e-9,
        )


FACTORIES = {
    "perceptron, remove-oldest": lambda: KernelPerceptron(budget=60),
    "perceptron, unbounded, fixed gamma": lambda: KernelPerceptron(kernel=RBF(0.3)),
    "margin perceptron, remove-oldest": lambda: MarginPerceptron(budget=60, margin=1.0),
    "margin perceptron, unbounded": lambda: MarginPerceptron(kernel=RBF(0.3), margin=0.5),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("classes", [(False, True), ("a", "b", "c", "d")])
def test_compiled_and_numpy_paths_agree(name, classes):
    events = stream(1500, 5, 1, classes)
    fast, slow, p_fast, p_slow = run_pair(FACTORIES[name], events)
    assert p_fast == p_slow
    assert_same_model(fast, slow)
    assert fast.n_mistakes > 50  # the stream exercised updates, budget and growth


#: Kernels the compiled path computes (name -> factory, whether the NumPy row is the same
#: C loop: the RBF's is ``_core.rbf_row``, the others a BLAS product or ``cdist``).
KERNELS = {
    "rbf": (lambda: RBF(0.3), True),
    "rbf-auto": (lambda: RBF("auto"), True),
    "laplacian": (lambda: Laplacian(0.3), False),
    "laplacian-auto": (lambda: Laplacian("auto"), False),
    "poly": (lambda: Polynomial(degree=2, scale=0.2, offset=1.0), False),
    "poly-3": (lambda: Polynomial(degree=3, scale=0.1, offset=0.5), False),
    "linear": (lambda: Linear(), False),
    "scaled-rbf": (lambda: Scaled(RBF(0.3), 2.0), False),
    "scaled-laplacian": (lambda: Scaled(Laplacian(0.3), 2.0), False),
    # programs (streamk/kernels/program.py): every node kind, and a width still "auto"
    "sum3": (lambda: Sum(RBF(0.3), Linear(), Constant(0.5)), False),
    "sum-auto": (lambda: Sum(RBF("auto"), Constant(1.0)), False),
    "scaled-laplacian-product": (
        lambda: Scaled(Product(Laplacian(0.3), Polynomial(degree=2, scale=0.2)), 1.5),
        False,
    ),
    "normalized-sum": (
        lambda: Normalized(Sum(Polynomial(degree=3, scale=0.3), Linear())),
        False,
    ),
}
POLICIES = {
    "unbounded": lambda: None,
    "oldest": lambda: RemoveOldest(40),
    "random": lambda: RemoveRandom(40, seed=3),
    "forgetron": lambda: Forgetron(40),
    "projectron": lambda: Projectron(40),
    "smallest": lambda: RemoveSmallest(40),
}


def assert_projected_and_turned_over(model, kernel: str, updates: int) -> None:
    """A Projectron's stream exercised its branches: some updates were projected onto the
    span (fewer vectors added than updates; not with the Laplacian here, whose new vectors
    all stay far from it) and, with a kernel of infinite feature space (a linear or
    polynomial one spans at most 35 dimensions here, so the set stays below the budget),
    the set filled and had vectors removed."""
    S = model.support_
    if "laplacian" not in kernel:
        assert S.next_id < updates, (S.next_id, updates)
    if kernel.startswith(("rbf", "laplacian", "scaled")):
        assert S.n == 40 and S.next_id > 60, (S.n, S.next_id)


LEARNERS = {
    "perceptron": lambda k, b: KernelPerceptron(kernel=k, budget=b),
    "margin": lambda k, b: MarginPerceptron(kernel=k, budget=b, margin=0.5),
    "ranker": lambda k, b: OnlineRanker(kernel=k, ranks=(0, 1, 2, 3), budget=b),
    "ranker, ranks seen": lambda k, b: OnlineRanker(kernel=k, budget=b),
}
GRID = [
    (learner, kernel, policy, classes)
    for learner in sorted(LEARNERS)
    for kernel in sorted(KERNELS)
    for policy in sorted(POLICIES)
    for classes in (
        ((0, 1, 2, 3),) if learner.startswith("ranker") else ((False, True), ("a", "b", "c"))
    )
]


@pytest.mark.parametrize(("learner", "kernel", "policy", "classes"), GRID)
def test_every_policy_kernel_and_learner_agrees_with_numpy(learner, kernel, policy, classes):
    """Event for event: predictions, support set, policy state (remove-random's generator,
    the Forgetron's Q and M) and the ranker's thresholds."""
    make_kernel, exact = KERNELS[kernel]
    events = stream(700, 4, 11, classes)

    def make():
        return LEARNERS[learner](make_kernel(), POLICIES[policy]())

    fast, slow, p_fast, p_slow = run_pair(make, events)
    assert p_fast == p_slow
    assert_same_model(fast, slow, exact=exact and policy != "forgetron")
    if policy == "projectron":
        assert_projected_and_turned_over(fast, kernel, fast.n_mistakes)
    elif policy != "unbounded":
        assert fast.n_mistakes > 120  # the budget filled and turned over


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly", "linear"])
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda k: KernelAdatron(kernel=k, C=1.0, budget=Forgetron(40)), id="adatron"),
        pytest.param(lambda k: OnlineSVR(kernel=k, budget=Forgetron(40)), id="svr"),
        pytest.param(lambda k: KernelPerceptron(kernel=k, budget=Forgetron(40)), id="perceptron"),
    ],
)
def test_a_full_forgetron_takes_the_row_and_the_leaving_column_in_one_pass(make, kernel):
    """Every adatron event that meets a full Forgetron on the per-event path reads the set
    once for its kernel row and the oldest vector's column (which the shrink reads): as
    many fused passes as events learned with 40 vectors held, and the model the NumPy
    path's. The SVR and the perceptron, whose events may not update, take the column only
    when they do (none fused)."""
    xs = [x for x, _ in stream(400, 4, 5)]
    targets = [float(np.sin(3 * x["x0"]) + x["x1"] * x["x2"]) for x in xs]
    model = make(KERNELS[kernel][0]())
    labels = targets if isinstance(model, OnlineSVR) else [t > 0 for t in targets]
    slow = make(KERNELS[kernel][0]())
    slow._event = None
    full = 0
    for x, y in zip(xs, labels):
        full += model.support_.n == 40
        model.learn_one(x, y)
        slow.learn_one(x, y)
    assert full > 150  # the set filled early and turned over
    assert model._event.fused_columns == (full if isinstance(model, KernelAdatron) else 0)
    assert_same_support(model, slow, exact=False)


@pytest.mark.parametrize("how", ["learn_one", "learn_many"])
@pytest.mark.parametrize("older_by", [5e-13, 3e-12])
def test_remove_smallest_ties_within_1e12_go_to_the_oldest(older_by, how):
    """``RemoveSmallest`` drops the oldest of the vectors whose cost is within 1e-12 of the
    least (``oldest_among(cost <= min (1 + 1e-12))``): with the oldest vector's cost
    ``1 + older_by`` times the least one's, the oldest leaves at 5e-13 and the cheapest
    at 3e-12, on the NumPy path, the per-event core (``learn_one``) and the block pass
    (``learn_many``), the rows up to the next insert learned."""
    from streamk.learners import fastpass

    events = stream(400, 3, 5)

    def filled(compiled: bool):
        model = KernelPerceptron(kernel=RBF(0.3), budget=RemoveSmallest(5))
        if not compiled:
            model._event = None
        i = 0
        while model.n_support < 5:
            model.learn_one(*events[i])
            i += 1
        S = model.support_
        order = np.argsort(S.ids)  # slots, oldest first
        costs = np.full(5, 2.0)
        costs[order[0]] = 1.0 + older_by  # the oldest, just above the least
        costs[order[-1]] = 1.0  # the newest, the least
        S._coef[:5, 0] = np.sign(S._coef[:5, 0]) * costs
        return model, i, S.ids[order[0]], S.ids[order[-1]]

    slow, start, oldest, newest = filled(False)
    end, before = start, slow.n_mistakes
    while slow.n_mistakes == before:  # the NumPy path up to the next insert (one removal)
        slow.learn_one(*events[end])
        end += 1
    fast = filled(True)[0]
    fastpass.COUNTS.clear()
    if how == "learn_one":
        for x, y in events[start:end]:
            fast.learn_one(x, y)
    else:
        X = pd.DataFrame([x for x, _ in events[start:end]])
        fast.learn_many(X, pd.Series([y for _, y in events[start:end]], dtype=object))
        assert fastpass.COUNTS["event_rows"] == 0 < fastpass.COUNTS["compiled"]
    assert sorted(fast.support_.ids) == sorted(slow.support_.ids)
    gone = oldest if older_by < 1e-12 else newest
    assert gone not in fast.support_.ids
    assert ({oldest, newest} - {gone}) <= set(fast.support_.ids)


def test_remove_random_draws_as_its_generator_does():
    """Budgets of 1 (``integers(1)`` draws nothing), 2 and 3; the generator's state after
    the stream is the NumPy path's to the bit."""
    for budget in (1, 2, 3):
        events = stream(400, 3, 12)
        fast, slow, p_fast, p_slow = run_pair(
            lambda b=budget: KernelPerceptron(kernel=RBF(0.5), budget=RemoveRandom(b, seed=5)),
            events,
        )
        assert p_fast == p_slow
        assert fast._policy.state() == slow._policy.state()
        assert_same_model(fast, slow)


@pytest.mark.parametrize("n", [1, 2, 3, 40, 1000, 2**31 + 1, 3 * 2**30, 2**32 - 2])
def test_the_compiled_draw_is_numpys_integers(n):
    """Remove-random's compiled draw against ``Generator.integers(n)``: the same values and
    the same generator state after, rejections included (large ``n`` rejects often)."""
    mine, numpys = (np.random.Generator(np.random.PCG64(n)) for _ in "ab")
    numpys.integers(2)  # an odd number of 32-bit draws: the bit generator buffers one
    mine.integers(2)
    got = eventpass._event.draw_slots(mine, n, 300)
    assert got == [int(numpys.integers(n)) for _ in range(300)]
    assert mine.bit_generator.state == numpys.bit_generator.state


def test_snapshots_and_copies_carry_the_policy_state_into_the_compiled_path():
    """A restored or copied learner has a new generator (and Forgetron or Projectron state):
    the compiled path must take it, not the one it was bound to."""
    events = stream(900, 4, 13)
    for policy in (lambda: RemoveRandom(30, seed=1), lambda: Forgetron(30), lambda: Projectron(30)):
        model = KernelPerceptron(kernel=Laplacian(0.4), budget=policy())
        for x, y in events[:400]:
            model.learn_one(x, y)
        snapshot = pickle.dumps(model.state())
        restored, restored_oracle = (type(model).from_state(pickle.loads(snapshot)) for _ in "ab")
        twin, oracle = copy.deepcopy(model), copy.deepcopy(model)
        oracle._event = restored_oracle._event = None
        for x, y in events[400:]:
            for m in (model, twin, restored, oracle, restored_oracle):
                m.learn_one(x, y)
        for m, reference in ((model, oracle), (twin, oracle), (restored, restored_oracle)):
            assert m._event is not None
            assert_same_model(m, reference, exact=False)


def test_a_policy_state_loaded_in_place_is_the_one_drawn_from():
    """``load_state`` gives remove-random a new generator, the Forgetron new ``Q``/``M`` and
    the Projectron a new ``P`` (for another set: rebuilt) on the same policy object: the
    compiled path must use them, not the bound ones."""
    events = stream(700, 3, 17)
    for make in (lambda: RemoveRandom(25, seed=4), lambda: Forgetron(25), lambda: Projectron(25)):
        other = KernelPerceptron(kernel=RBF(0.5), budget=make())
        for x, y in events[300:600]:
            other.learn_one(x, y)
        model = KernelPerceptron(kernel=RBF(0.5), budget=make())
        oracle = KernelPerceptron(kernel=RBF(0.5), budget=make())
        oracle._event = None
        for i, (x, y) in enumerate(events):
            if i in (30, 400):  # (at 30 the set is smaller than the one the state is for)
                for m in (model, oracle):
                    m._policy.load_state(other._policy.state())
            for m in (model, oracle):
                m.learn_one(x, y)
        assert_same_model(model, oracle, exact=False)


class Cubic(Kernel):
    """A user's own kernel: no program (streamk.kernels.program) describes it."""

    def _gram(self, A, B, a_sq, b_sq):
        return (A @ B.T) ** 3 + 1.0

    def diag(self, A):
        return np.einsum("ij,ij->i", A, A) ** 3 + 1.0


DECLINED_KERNELS = {
    "own": lambda: Cubic(),
    "sum-with-own": lambda: Sum(RBF(0.4), Cubic()),
    "normalized-own": lambda: Normalized(Product(Cubic(), Linear())),
}


class RemoveOldestOfMine(RemoveOldest):
    """A user's own policy (here RemoveOldest's rule): the compiled path knows only its
    own policies, by type, so it declines this one."""


DECLINED_POLICIES = {
    "own": lambda: RemoveOldestOfMine(30),
}
DECLINED = [(k, "oldest") for k in sorted(DECLINED_KERNELS)] + [
    ("rbf", p) for p in sorted(DECLINED_POLICIES)
]


@pytest.mark.parametrize("learner", ["perceptron", "ranker"])
@pytest.mark.parametrize(("kernel", "policy"), DECLINED)
def test_other_kernels_and_policies_decline_before_changing_anything(learner, kernel, policy):
    make_kernel = DECLINED_KERNELS.get(kernel, lambda: RBF(0.4))
    make_policy = DECLINED_POLICIES.get(policy, lambda: RemoveOldest(30))
    model = LEARNERS[learner](make_kernel(), make_policy())
    events = stream(300, 3, 14, (0, 1, 2, 3) if learner == "ranker" else (False, True))
    for x, y in events[:-1]:
        model.learn_one(x, y)
    before = pickle.dumps(model.state())
    x, y = events[-1]
    assert model._event.predict(model, x) is eventpass.NOT_HANDLED
    assert not model._event.learn(model, x, y)
    assert pickle.dumps(model.state()) == before
    oracle = LEARNERS[learner](make_kernel(), make_policy())
    oracle._event = None
    for m in (model, oracle):
        preds = [m.predict_one(x) for x, _ in events[:50]]
    assert preds == [oracle.predict_one(x) for x, _ in events[:50]]
    model.learn_one(x, y)  # the NumPy path, through learn_one


def test_the_ranker_declines_new_ranks_and_odd_events():
    """Ranks discovered from the stream (a new one appears late), with events the compiled
    path hands back mixed in: the same predictions, scores and thresholds."""
    events = stream(900, 4, 15, (0, 1, 2))
    odd = []
    for i, (x, y) in enumerate(events):
        x = dict(x)
        if i % 97 == 5:
            x = dict(reversed(list(x.items())))
        elif i % 89 == 7:
            del x["x1"]
        elif i % 83 == 9:
            x["x0"] = 1
        if i >= 600 and i % 7 == 0:
            y = 3  # a new top rank
        odd.append((x, y))
    fast, slow, p_fast, p_slow = run_pair(
        lambda: OnlineRanker(kernel=RBF(0.5), budget=RemoveRandom(40, seed=2)), odd
    )
    assert p_fast == p_slow
    assert fast.ranks_ == [0, 1, 2, 3]
    assert_same_model(fast, slow)


def test_the_ranker_refuses_bad_labels_as_on_the_numpy_path():
    model = OnlineRanker(kernel=RBF(0.5), ranks=(1, 2, 3), budget=Forgetron(20))
    for x, y in stream(200, 3, 16, (1, 2, 3)):
        model.learn_one(x, y)
    before = pickle.dumps(model.state())
    x = {"x0": 0.0, "x1": 0.0, "x2": 0.0}
    for bad in (4, None, [1]):
        with pytest.raises(InvalidInput):
            model.learn_one(x, bad)
    assert pickle.dumps(model.state()) == before
    assert OnlineRanker(ranks=(1, 2)).predict_one(x) == 2  # the top rank before learning
    assert OnlineRanker().predict_one(x) is None


@pytest.mark.parametrize(
    "budget", [lambda: 40, lambda: Projectron(40)], ids=["oldest", "projectron"]
)
def test_events_the_compiled_path_declines_give_the_numpy_result(budget):
    """Every kind of event the compiled path hands back, mixed into one stream (under a
    Projectron the two paths then take turns with its ``P``)."""
    events = stream(1200, 4, 2, (-1, 1))
    odd = []
    for i, (x, y) in enumerate(events):
        x = dict(x)
        if i % 97 == 5:
            x = dict(reversed(list(x.items())))  # keys out of column order
        elif i % 89 == 7:
            del x["x1"]  # an absent feature
        elif i % 83 == 9:
            x["x0"] = 1  # an int
        elif i % 79 == 11:
            x["x2"] = None  # None reads as 0
        elif i % 73 == 13:
            x["x3"] = True  # a bool
        elif i == 600:
            x["late"] = 0.5  # a new feature, from then on in every event
        if i > 600:
            x["late"] = 0.25 * (i % 3)
        if i == 800:
            y = 0  # a third class: one-vs-rest from here
        odd.append((x, y))
    fast, slow, p_fast, p_slow = run_pair(lambda: KernelPerceptron(budget=budget()), odd)
    assert p_fast == p_slow
    assert_same_model(fast, slow)
    assert fast.support_.n_outputs == 3


@pytest.mark.parametrize(
    "make, task",
    [
        (lambda: KernelPerceptron(budget=40), "clf"),
        (lambda: OnlineSVR(budget=Projectron(40)), "reg"),
        (lambda: KernelPerceptron(budget=Merge(40)), "clf"),
    ],
    ids=["perceptron", "svr-projectron", "perceptron-merge"],
)
def test_numpy_float64_values_take_the_compiled_path_with_the_floats_bits(make, task):
    """A dict built from a NumPy row (``dict(zip(names, row))``) holds ``numpy.float64``:
    the compiled path takes it as the float it is, and learns the same bits as from the
    row's Python floats, which the NumPy path matches as well."""
    floats = stream(600, 4, 11)
    if task == "reg":
        floats = [(x, float(sum(x.values()))) for x, _ in floats]
    wrapped = [({k: np.float64(v) for k, v in x.items()}, y) for x, y in floats]
    assert all(type(v) is np.float64 for x, _ in wrapped for v in x.values())
    fast, slow, p_fast, p_slow = run_pair(make, wrapped)  # it learns the last event twice
    plain = make()
    for x, y in [*floats, floats[-1]]:
        plain.learn_one(x, y)
    if task == "reg":  # a sum of kernel values: the NumPy path's to rounding
        np.testing.assert_allclose(p_fast, p_slow, rtol=1e-9, atol=1e-12)
    else:
        assert p_fast == p_slow
    same = assert_same_value_model if task == "reg" else assert_same_model
    same(fast, plain, exact=True)  # the same bits as from Python floats
    same(fast, slow, exact=False)


def test_bad_events_raise_as_on_the_numpy_path_and_change_nothing():
    model = KernelPerceptron(kernel=RBF(0.5), budget=30)
    for x, y in stream(300, 3, 3):
        model.learn_one(x, y)
    before = pickle.dumps(model.state())
    for bad in ({"x0": math.nan, "x1": 0.0, "x2": 0.0}, {"x0": "a", "x1": 0.0, "x2": 0.0}):
        with pytest.raises(InvalidInput):
            model.learn_one(bad, True)
        with pytest.raises(InvalidInput):
            model.predict_one(bad)
    with pytest.raises(InvalidInput):
        model.learn_one({"x0": 0.0, "x1": 0.0, "x2": 0.0}, None)
    assert pickle.dumps(model.state()) == before


def test_book_perceptron_oracle():
    """Alg. 7.52 written plainly, remove-oldest budget, fixed gamma: same predictions."""
    gamma, budget = 0.4, 25
    events = stream(1000, 3, 4, (-1, 1))

    def k(a, b):
        return math.exp(-gamma * sum((a[f] - b[f]) ** 2 for f in a))

    support: deque = deque()
    plain = []
    for x, y in events:
        f = sum(yi * k(xi, x) for xi, yi in support)
        plain.append(1 if f >= 0 else -1)
        if plain[-1] != y:
            if len(support) == budget:
                support.popleft()
            support.append((x, y))
    model = KernelPerceptron(kernel=RBF(gamma), budget=budget)
    assert model._event is not None
    got = []
    for x, y in events:
        got.append(model.predict_one(x))
        model.learn_one(x, y)
    got = [1 if p is None else p for p in got]  # no label seen yet: the book says +1
    assert got == plain


def test_copies_snapshots_and_learn_many_keep_the_paths_in_step():
    events = stream(900, 4, 5)
    model = KernelPerceptron(budget=50)
    for x, y in events[:300]:
        model.learn_one(x, y)
    twin = copy.deepcopy(model)
    restored = type(model).from_state(pickle.loads(pickle.dumps(model.state())))
    oracle = copy.deepcopy(model)
    oracle._event = None
    X = np.array([list(x.values()) for x, _ in events[300:600]])
    for m in (model, twin, restored, oracle):  # a block, then single events again
        m.learn_many(
            __import__("pandas").DataFrame(X, columns=list(events[0][0])),
            [y for _, y in events[300:600]],
        )
        for x, y in events[600:]:
            m.learn_one(x, y)
    for m in (model, twin, restored):
        assert m._event is not None
        assert_same_model(m, oracle)


def test_warm_up_takes_the_numpy_path():
    warm = KernelPerceptron()
    x, y = stream(1, 3, 8)[0]
    assert not warm._event.learn(warm, x, y)  # gamma="auto" still being estimated
    assert base.AUTO_WINDOW == 200  # the compiled path's copy of it (_event.pyx)


def test_switching_the_core_off_sends_every_event_to_the_numpy_path(monkeypatch):
    """``accel.core = None`` (the NumPy oracle of ``tests/test_grid_paths.py``) turns the
    compiled per-event path off for learners already bound to it, and back on after."""
    from streamk import accel

    events = stream(300, 3, 18, (0, 1, 2))
    models = [
        KernelPerceptron(kernel=RBF(0.5), budget=RemoveRandom(20, seed=1)),
        OnlineRanker(kernel=Linear(), ranks=(0, 1, 2), budget=Forgetron(20)),
    ]
    for m in models:
        for x, y in events[:-1]:
            m.learn_one(x, y)
        x, y = events[-1]
        before = pickle.dumps(m.state())
        monkeypatch.setattr(accel, "core", None)
        assert m._event.predict(m, x) is eventpass.NOT_HANDLED
        assert not m._event.learn(m, x, y)
        assert pickle.dumps(m.state()) == before
        monkeypatch.undo()
        assert m._event.learn(m, x, y)


def test_without_the_core_the_numpy_path_runs():
    code = """
import numpy as np
from streamk import KernelPerceptron, accel
from streamk.learners import eventpass
assert not accel.available() and not eventpass.available()
m = KernelPerceptron(budget=30)
assert m._event is None
rng = np.random.default_rng(0)
X = rng.normal(size=(500, 2))
for r in X:
    m.learn_one({"a": r[0], "b": r[1]}, bool(r[0] * r[1] > 0))
print(m.n_support, m.predict_one({"a": 1.0, "b": 1.0}))
"""
    env = {**os.environ, "STREAMK_NO_ACCEL": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["30", "True"]


# -- the on-line SVR (resweeps=0) and the novelty detector -------------------------------------
VALUE_LEARNERS = {
    "svr": lambda k, b: OnlineSVR(kernel=k, budget=b),
    "svr, fixed rule": lambda k, b: OnlineSVR(kernel=k, budget=b, epsilon=0.05, C=2.0, offset=0.0),
    "novelty": lambda k, b: KernelNovelty(kernel=k, budget=b),
}


def value_stream(n: int, d: int, seed: int):
    """Events with a real target (the SVR's; novelty ignores it), off-centre and noisy so
    that the tube, the box and the running mean all matter."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = 5.0 + 3.0 * np.sin(2 * X @ rng.normal(size=d)) + 0.3 * rng.normal(size=n)
    return [({f"x{j}": float(v) for j, v in enumerate(r)}, float(t)) for r, t in zip(X, y)]


def _ask(model, x):
    return model.score_one(x) if isinstance(model, KernelNovelty) else model.predict_one(x)


def _learn(model, x, y):
    return model.learn_one(x) if isinstance(model, KernelNovelty) else model.learn_one(x, y)


def run_value_pair(make, events, compiled_at_end: bool = True):
    """:func:`run_pair` for the SVR and novelty: ``predict_one`` / ``score_one`` then
    ``learn_one`` on each event, with the compiled path and without it."""
    fast, slow = make(), make()
    slow._event = None  # the NumPy path only
    assert fast._event is not None
    out = []
    for m in (fast, slow):
        asked = []
        for x, y in events:
            asked.append(_ask(m, x))
            _learn(m, x, y)
        out.append(asked)
    if compiled_at_end:  # each learn_one took the row its predict_one just computed
        assert fast._event.rows_reused > (len(events) - base.AUTO_WINDOW) // 2
        # (not the last event again: the SVR would sit on its tube's edge)
        x, y = events[-2]
        assert fast._event.learn(fast, x, y)  # the compiled path ran
        _learn(slow, x, y)
    return fast, slow, out[0], out[1]


def assert_same_value_model(fast, slow, exact: bool):
    """The same support set and policy state, the SVR's running statistics (the same
    operations: exactly), per-vector targets and counters, novelty's centre statistics
    (current or stale alike), and the same answers on fresh events."""
    assert_same_support(fast, slow, exact)
    if isinstance(fast, OnlineSVR):
        assert (fast._y_n, fast._y_mean, fast._y_m2) == (slow._y_n, slow._y_mean, slow._y_m2)
        assert fast.n_updates == slow.n_updates
        ids = fast.support_.ids
        np.testing.assert_array_equal(fast._targets.align(ids), slow._targets.align(ids))
    else:
        assert (fast._r is None) == (slow._r is None)
        if fast._r is not None:
            np.testing.assert_allclose(fast._r, slow._r, rtol=1e-12)
            np.testing.assert_allclose(fast._cc, slow._cc, rtol=1e-12)
        np.testing.assert_allclose(fast.threshold_, slow.threshold_, rtol=1e-9)
    for x, _ in value_stream(40, fast.support_.width, 99):
        np.testing.assert_allclose(_ask(fast, x), _ask(slow, x), rtol=1e-9, atol=1e-9)


VALUE_GRID = [
    (learner, kernel, policy)
    for learner in sorted(VALUE_LEARNERS)
    for kernel in sorted(KERNELS)
    for policy in sorted(POLICIES)
]


@pytest.mark.parametrize(("learner", "kernel", "policy"), VALUE_GRID)
def test_svr_and_novelty_agree_with_numpy_for_every_policy_and_kernel(learner, kernel, policy):
    """Event for event: predictions or scores, support set, kept Gram matrix, policy state,
    the SVR's statistics and targets, novelty's centre statistics."""
    make_kernel, exact = KERNELS[kernel]
    events = value_stream(600, 4, 21)

    def make():
        return VALUE_LEARNERS[learner](make_kernel(), POLICIES[policy]())

    fast, slow, a_fast, a_slow = run_value_pair(make, events)
    np.testing.assert_allclose(a_fast, a_slow, rtol=1e-9, atol=1e-9)
    svr = learner.startswith("svr")
    assert_same_value_model(fast, slow, exact=exact and not svr and policy != "forgetron")
    if policy == "projectron":
        updates = fast.n_learned if isinstance(fast, KernelNovelty) else fast.n_updates
        assert_projected_and_turned_over(fast, kernel, updates)
    elif policy != "unbounded":
        assert fast.support_.n == 40 and fast.support_.next_id > 120  # turned over


def test_the_svr_step_inside_the_tube_changes_only_the_statistics():
    """An event the soft-threshold leaves out: no insert (no draw), yet the running
    statistics and the count move, as on the NumPy path."""
    model = OnlineSVR(kernel=RBF(0.5), epsilon=10.0, C=1.0, budget=RemoveRandom(5, seed=1))
    oracle = OnlineSVR(kernel=RBF(0.5), epsilon=10.0, C=1.0, budget=RemoveRandom(5, seed=1))
    oracle._event = None
    for x, y in value_stream(50, 3, 22):
        for m in (model, oracle):
            m.learn_one(x, y)
    assert model.n_support == 0 and model.n_learned == 50
    assert_same_value_model(model, oracle, exact=True)


VALUE_DECLINED = [("svr", k, p) for k, p in DECLINED] + [("novelty", k, p) for k, p in DECLINED]


@pytest.mark.parametrize(("learner", "kernel", "policy"), VALUE_DECLINED)
def test_svr_and_novelty_decline_other_kernels_and_policies_before_changing_anything(
    learner, kernel, policy
):
    make_kernel = DECLINED_KERNELS.get(kernel, lambda: RBF(0.4))
    make_policy = DECLINED_POLICIES.get(policy, lambda: RemoveOldest(30))

    def make():
        return VALUE_LEARNERS[learner](make_kernel(), make_policy())

    model = make()
    events = value_stream(200, 3, 23)
    for x, y in events[:-1]:
        _learn(model, x, y)
    before = pickle.dumps(model.state())
    x, y = events[-1]
    assert model._event.predict(model, x) is eventpass.NOT_HANDLED
    assert not model._event.learn(model, x, y)
    assert pickle.dumps(model.state()) == before
    fast, slow, a_fast, a_slow = run_value_pair(make, events, compiled_at_end=False)
    np.testing.assert_allclose(a_fast, a_slow, rtol=1e-12)


def test_svr_with_resweeps_declines():
    model = OnlineSVR(kernel=RBF(0.4), resweeps=1, budget=20)
    for x, y in value_stream(100, 3, 24):
        model.learn_one(x, y)
    before = pickle.dumps(model.state())
    x, y = value_stream(1, 3, 25)[0]
    assert not model._event.learn(model, x, y)
    assert pickle.dumps(model.state()) == before


@pytest.mark.parametrize("policy", ["random", "projectron"])
@pytest.mark.parametrize("learner", sorted(VALUE_LEARNERS))
def test_svr_and_novelty_events_the_compiled_path_declines_give_the_numpy_result(learner, policy):
    """Keys out of order, absent features, ints, ``None``, bools, a new feature and an int
    target, mixed into one stream under gamma="auto" and remove-random or a Projectron."""
    odd = []
    for i, (x, y) in enumerate(value_stream(700, 4, 26)):
        x = dict(x)
        if i % 97 == 5:
            x = dict(reversed(list(x.items())))
        elif i % 89 == 7:
            del x["x1"]
        elif i % 83 == 9:
            x["x0"] = 1
        elif i % 79 == 11:
            x["x2"] = None
        elif i % 73 == 13:
            x["x3"] = True
        elif i % 71 == 15:
            y = 4  # an int target
        if i >= 400:
            x["late"] = 0.25 * (i % 3)
        odd.append((x, y))
    make_policy = (lambda: RemoveRandom(40, seed=6)) if policy == "random" else POLICIES[policy]
    fast, slow, a_fast, a_slow = run_value_pair(
        lambda: VALUE_LEARNERS[learner](None, make_policy()), odd
    )
    np.testing.assert_allclose(a_fast, a_slow, rtol=1e-9, atol=1e-9)
    assert_same_value_model(fast, slow, exact=learner == "novelty")
    assert fast.support_.width == 5


@pytest.mark.parametrize("learner", sorted(VALUE_LEARNERS))
def test_svr_and_novelty_copies_and_snapshots_keep_the_paths_in_step(learner):
    """A copy, a restored snapshot and a ``learn_many`` block in between: the compiled path
    takes the learner's state (the SVR's pending targets, novelty's ``_r``) as it is."""
    events = value_stream(700, 4, 27)

    def make():
        return VALUE_LEARNERS[learner](RBF(0.3), RemoveOldest(50))

    model = make()
    for x, y in events[:250]:
        _learn(model, x, y)
        _ask(model, x)
    twin = copy.deepcopy(model)
    restored = type(model).from_state(pickle.loads(pickle.dumps(model.state())))
    oracle = copy.deepcopy(model)
    oracle._event = None
    block = __import__("pandas").DataFrame([x for x, _ in events[250:400]])
    for m in (model, twin, restored, oracle):
        if learner == "novelty":
            m.learn_many(block)
        else:
            m.learn_many(block, [y for _, y in events[250:400]])
        for x, y in events[400:]:
            _ask(m, x)
            _learn(m, x, y)
    for m in (model, twin, restored):
        reference = copy.deepcopy(oracle)
        reference._event = None
        assert m._event is not None and m._event.learn(m, *events[1])  # compiled
        _learn(reference, *events[1])
        assert_same_value_model(m, reference, exact=False)


def test_switching_the_core_off_sends_svr_and_novelty_events_to_the_numpy_path(monkeypatch):
    from streamk import accel

    events = value_stream(200, 3, 28)
    for m in (OnlineSVR(kernel=Linear(), budget=Forgetron(20)), KernelNovelty(budget=20)):
        for x, y in events[:-1]:
            _learn(m, x, y)
        x, y = events[-1]
        before = pickle.dumps(m.state())
        monkeypatch.setattr(accel, "core", None)
        assert m._event.predict(m, x) is eventpass.NOT_HANDLED
        assert not m._event.learn(m, x, y)
        assert pickle.dumps(m.state()) == before
        monkeypatch.undo()
        assert m._event.learn(m, x, y)


# -- the kernel adatron (resweeps=0) --------------------------------------------------------------
ADATRONS = {
    "1-norm": lambda k, b: KernelAdatron(kernel=k, budget=b, C=1.0, resweeps=0),
    "2-norm": lambda k, b: KernelAdatron(kernel=k, budget=b, C=0.5, norm=2, resweeps=0),
}
ADATRON_GRID = [
    (norm, kernel, policy, classes)
    for norm in sorted(ADATRONS)
    for kernel in sorted(KERNELS)
    for policy in sorted(POLICIES)
    for classes in ((False, True), ("a", "b", "c"))
]


@pytest.mark.parametrize(("norm", "kernel", "policy", "classes"), ADATRON_GRID)
def test_adatron_agrees_with_numpy_for_every_policy_and_kernel(norm, kernel, policy, classes):
    """Event for event: predictions, support set, policy state, the class of each vector
    and the count of updates, on the 1-norm (box) and 2-norm (shifted diagonal) rules."""
    make_kernel, _ = KERNELS[kernel]
    events = stream(600, 4, 29, classes)

    def make():
        return ADATRONS[norm](make_kernel(), POLICIES[policy]())

    fast, slow, p_fast, p_slow = run_value_pair(make, events)
    assert p_fast == p_slow
    assert_same_support(fast, slow, exact=False)
    assert fast.n_updates == slow.n_updates and fast.classes_ == slow.classes_
    ids = fast.support_.ids
    np.testing.assert_array_equal(fast._cls.align(ids), slow._cls.align(ids))
    for x, _ in stream(40, 4, 99):
        np.testing.assert_allclose(
            fast.decision_function_one(x), slow.decision_function_one(x), rtol=1e-9, atol=1e-9
        )
    if policy == "projectron":
        updates = fast.n_learned if isinstance(fast, KernelNovelty) else fast.n_updates
        assert_projected_and_turned_over(fast, kernel, updates)
    elif policy != "unbounded":
        assert fast.support_.n == 40 and fast.support_.next_id > 120  # turned over


def test_adatron_resweeping_under_the_projectron_or_a_new_class_declines():
    """The resweeping adatron's core declines, nothing changed, under the Projectron (its
    projections would have to follow the kept Gram matrix) and for a new class; under
    remove-oldest it takes the event, with or without resweeps."""
    model = KernelAdatron(kernel=RBF(0.4), budget=Projectron(20), resweeps=1)
    events = stream(100, 3, 30)
    for x, y in events:
        model.learn_one(x, y)
    before = pickle.dumps(model.state())
    assert not model._event.learn(model, *events[0])
    assert pickle.dumps(model.state()) == before
    for resweeps in (0, 1):
        single = KernelAdatron(kernel=RBF(0.4), budget=20, resweeps=resweeps)
        for x, y in events:
            single.learn_one(x, y)
        assert single._event.learn(single, *events[0])
        before = pickle.dumps(single.state())
        assert not single._event.learn(single, events[0][0], "new class")
        assert pickle.dumps(single.state()) == before


# -- the Projectron -------------------------------------------------------------------------------
PROJECTRON_LEARNERS = {
    **{name: (make, stream) for name, make in LEARNERS.items() if name != "ranker, ranks seen"},
    **{name: (make, value_stream) for name, make in VALUE_LEARNERS.items()},
    **{f"adatron {norm}": (make, stream) for norm, make in ADATRONS.items()},
}


@pytest.mark.parametrize("name", sorted(PROJECTRON_LEARNERS))
def test_projectron_events_take_the_compiled_path(name, monkeypatch):
    """Once the labels are known, every ``learn_one`` and ``predict_one`` under a Projectron
    runs compiled: the policy's (NumPy) ``insert`` is never called, yet updates are
    projected and the set fills and turns over."""
    make, make_stream = PROJECTRON_LEARNERS[name]
    model = make(RBF(0.3), Projectron(40))
    events = make_stream(700, 4, 31, (0, 1, 2, 3)) if "ranker" in name else make_stream(700, 4, 31)
    for x, y in events[:20]:
        _learn(model, x, y)
    model.support_.reserve(40, 4)  # (a full buffer is left to the NumPy path, which grows it)
    calls = []
    monkeypatch.setattr(model._policy, "insert", lambda *args: calls.append(args))
    for x, y in events[20:]:
        _ask(model, x)  # (novelty's centre statistics recomputed on the NumPy path if stale)
        assert model._event.predict(model, x) is not eventpass.NOT_HANDLED
        _learn(model, x, y)
    assert calls == []
    if isinstance(model, KernelNovelty):
        updates = model.n_learned
    else:
        updates = getattr(model, "n_updates", None) or model.n_mistakes
    assert_projected_and_turned_over(model, "rbf", updates)


# -- Merge (RBF only), every rule ------------------------------------------------------------------
#: learner -> (factory, labelled stream classes or None for the SVR/novelty's values)
MERGE_LEARNERS = {
    "perceptron": (lambda k, b: KernelPerceptron(kernel=k, budget=b), ("a", "b", "c")),
    "perceptron, binary": (lambda k, b: KernelPerceptron(kernel=k, budget=b), (False, True)),
    "margin": (lambda k, b: MarginPerceptron(kernel=k, budget=b, margin=0.5), ("a", "b", "c")),
    "margin, binary": (lambda k, b: MarginPerceptron(kernel=k, budget=b), (False, True)),
    "ranker": (lambda k, b: OnlineRanker(kernel=k, ranks=(0, 1, 2, 3), budget=b), (0, 1, 2, 3)),
    "adatron": (lambda k, b: KernelAdatron(kernel=k, budget=b, resweeps=0), ("a", "b", "c")),
    "adatron, 2-norm": (
        lambda k, b: KernelAdatron(kernel=k, budget=b, C=0.5, norm=2, resweeps=0),
        (False, True),
    ),
    "svr": (lambda k, b: OnlineSVR(kernel=k, budget=b), None),
    "svr, fixed rule": (
        lambda k, b: OnlineSVR(kernel=k, budget=b, epsilon=0.05, C=2.0, offset=0.0),
        None,
    ),
    "novelty": (lambda k, b: KernelNovelty(kernel=k, budget=b), None),
}
MERGE_KERNELS = {"rbf": lambda: RBF(0.3), "rbf-auto": lambda: RBF("auto")}


def assert_merge_same(fast, slow) -> None:
    """The same support set to rounding (Merge builds rows from coefficients the two paths
    sum in different orders), the same ids and counters, and the learner's own state."""
    a, b = fast.support_, slow.support_
    assert (a.n, a.next_id, a.width) == (b.n, b.next_id, b.width)
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_allclose(a.X, b.X, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.sqnorm, b.sqnorm, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(a.kdiag, b.kdiag)
    np.testing.assert_allclose(a._sq_max, b._sq_max, rtol=1e-12)
    assert (a._G is None) == (b._G is None)
    if a._G is not None:
        np.testing.assert_allclose(a.gram_matrix, b.gram_matrix, rtol=1e-9, atol=1e-12)
    assert fast.n_learned == slow.n_learned
    if isinstance(fast, OnlineSVR):
        assert (fast._y_n, fast._y_mean, fast._y_m2) == (slow._y_n, slow._y_mean, slow._y_m2)
        assert fast.n_updates == slow.n_updates
        np.testing.assert_array_equal(fast._targets.align(a.ids), slow._targets.align(b.ids))
    elif isinstance(fast, KernelNovelty):
        assert (fast._r is None) == (slow._r is None)
        np.testing.assert_allclose(fast.threshold_, slow.threshold_, rtol=1e-9)
    elif isinstance(fast, KernelAdatron):
        assert fast.n_updates == slow.n_updates
        np.testing.assert_array_equal(fast._cls.align(a.ids), slow._cls.align(b.ids))
    else:
        assert fast.n_mistakes == slow.n_mistakes
    if isinstance(fast, OnlineRanker):
        np.testing.assert_array_equal(fast.thresholds_, slow.thresholds_)


@pytest.mark.parametrize("kernel", sorted(MERGE_KERNELS))
@pytest.mark.parametrize("learner", sorted(MERGE_LEARNERS))
def test_merge_agrees_with_the_numpy_merge_for_every_rule(learner, kernel, monkeypatch):
    """Event for event against the NumPy path with the NumPy merge (``merge_search`` and
    ``merge_smallest``'s steps: ``streamk.budget.compiled`` switched off): the same
    predictions or scores and the same support set, a budget of 40 merged hundreds of times,
    every merge made by the compiled path (its counter)."""
    make, classes = MERGE_LEARNERS[learner]
    monkeypatch.setattr(compiled, "policies", None)  # the oracle's merge is NumPy's

    def build():
        return make(MERGE_KERNELS[kernel](), Merge(40))

    if classes is None:
        fast, slow, a_fast, a_slow = run_value_pair(build, value_stream(600, 4, 21))
        np.testing.assert_allclose(a_fast, a_slow, rtol=1e-9, atol=1e-9)
    else:
        fast, slow, a_fast, a_slow = run_pair(build, stream(700, 4, 11, classes))
        assert a_fast == a_slow
    assert_merge_same(fast, slow)
    S = fast.support_
    assert S.n == 40 and S.next_id > 150  # merged over and over
    if kernel == "rbf":  # (under gamma="auto" the warm-up's last events may run on NumPy)
        assert fast._event.merges == S.next_id - S.n  # every merge was the compiled path's
    else:
        assert fast._event.merges > 100


@pytest.mark.parametrize("kernel", [Scaled(RBF(0.3), 2.0), Laplacian(0.3)])
@pytest.mark.parametrize("learner", ["perceptron", "svr", "novelty"])
def test_merge_with_another_kernel_declines_and_the_numpy_path_refuses_it(learner, kernel):
    """``Merge.insert`` takes an RBF kernel only (``isinstance``: not a scaled one): the
    compiled path declines before changing anything, and the NumPy path raises. (The set
    is filled under an RBF kernel first, then given the other one, as ``gamma="auto"``'s
    re-estimation does: a learner that never learned is not bound to the compiled path.)"""
    make, classes = MERGE_LEARNERS[learner]
    model = make(RBF(0.3), Merge(30))
    events = stream(200, 3, 5, classes) if classes else value_stream(200, 3, 5)
    for x, y in events[:-1]:
        _learn(model, x, y)
    assert model._event.merges > 0
    model._support.set_kernel(copy.deepcopy(kernel))
    before = pickle.dumps(model.state())
    assert not model._event.learn(model, *events[-1])
    assert pickle.dumps(model.state()) == before
    with pytest.raises(ConfigError, match="RBF"):
        for x, y in events:  # (the first update raises)
            _learn(model, x, y)


# -- a growing set ---------------------------------------------------------------------------------
GROWING = {
    **{name: (make, stream) for name, make in LEARNERS.items() if name != "ranker, ranks seen"},
    **{name: (make, value_stream) for name, make in VALUE_LEARNERS.items()},
    **{f"adatron {norm}": (make, stream) for norm, make in ADATRONS.items()},
}


@pytest.mark.parametrize("name", sorted(GROWING))
@pytest.mark.parametrize("policy", ["unbounded", "merge"])
def test_a_growing_set_grows_its_buffers_on_the_compiled_path(name, policy, monkeypatch):
    """Once the labels are known, an append into full buffers (about log2 n of them as the
    set grows) runs compiled too: the core grows the buffers first (``SupportSet.reserve``,
    doubling them) and re-binds, instead of handing the event to the NumPy path (whose
    policy ``insert`` is never called)."""
    make, make_stream = GROWING[name]
    model = make(RBF(0.3), None if policy == "unbounded" else Merge(300))
    events = make_stream(700, 4, 31, (0, 1, 2, 3)) if "ranker" in name else make_stream(700, 4, 31)
    for x, y in events[:20]:
        _learn(model, x, y)
    capacity = model.support_.capacity
    calls = []
    monkeypatch.setattr(model._policy, "insert", lambda *args: calls.append(args))
    for x, y in events[20:]:
        _learn(model, x, y)
    assert calls == []
    assert model.support_.capacity >= 4 * capacity  # it grew twice or more on the way
