"""``learn_many`` through the compiled per-event core (``EventPass.learn_rows``) against
the NumPy path.

Where no compiled block pass applies, ``learn_many`` hands each run of rows (one kernel,
already folded into ``gamma="auto"``) to ``EventPass.learn_rows``, which applies
``learn_one``'s rule, insert and counters row by row in C and stops, with nothing changed,
at a row it cannot take. Here every block pass is forced to decline (a stand-in for the
budgets they do not cover), and the result must be the NumPy path's (``accel.core =
None``, as ``tests/test_grid_paths.py`` does): the same prequential predictions
(``learn_predict_many``), the same support set (ids, rows, coefficients to 1e-9
relative), counters and policy state, for every learner with a per-event path × budget
policy × vector kernel. Policies the per-event path declines today (Projectron, Merge)
check the fallback and are then skipped; they run in full once the path takes them.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from streamk import (
    Forgetron,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    Laplacian,
    Linear,
    MarginPerceptron,
    Merge,
    OnlineRanker,
    OnlineSVR,
    Polynomial,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    Scaled,
    accel,
)
from streamk.budget import Projectron
from streamk.kernels import RBF
from streamk.learners import _event, base, eventpass, fastpass
from streamk.learners import perceptron as perceptron_module
from tests.test_grid_paths import _stream

#: the compiled per-event core and the compiled passes it stands beside (the NumPy path is
#: the oracle); other modules mark their core-only tests with it too
needs_core = pytest.mark.skipif(
    not eventpass.available() or accel.core is None,
    reason="the compiled per-event path is not built here",
)
pytestmark = needs_core

KERNELS = {
    "rbf": lambda: RBF(gamma=0.4),
    "rbf-auto": lambda: RBF(gamma="auto"),  # runs split at the warm-up's re-estimates
    "laplacian": lambda: Laplacian(gamma=0.3),
    "poly": lambda: Polynomial(degree=2, scale=0.2, offset=1.0),
    "linear": lambda: Linear(),
    "scaled-rbf": lambda: Scaled(RBF(gamma=0.4), 2.0),
}
#: Every budget (30 vectors) the per-event path takes.
POLICIES = {
    "unbounded": lambda: None,
    "oldest": lambda: RemoveOldest(30),
    "random": lambda: RemoveRandom(30, seed=3),
    "forgetron": lambda: Forgetron(30),
    "projectron": lambda: Projectron(30),
    "merge": lambda: Merge(30),
}
LEARNERS = {
    "perceptron": lambda k, b: KernelPerceptron(kernel=k, budget=b),
    "margin": lambda k, b: MarginPerceptron(kernel=k, budget=b, margin=0.5),
    "ranker": lambda k, b: OnlineRanker(kernel=k, ranks=(0, 1, 2, 3, 4), budget=b),
    "svr": lambda k, b: OnlineSVR(kernel=k, budget=b),
    "novelty": lambda k, b: KernelNovelty(kernel=k, budget=b),
    "adatron": lambda k, b: KernelAdatron(kernel=k, budget=b, C=1.0, resweeps=0),
}
#: the stream's classes per learner (3: a third class appears inside a block)
CLASSES = {"perceptron": 3, "margin": 2, "ranker": 5, "svr": 2, "novelty": 2, "adatron": 3}
BLOCKS = [(0, 90), (90, 230), (230, 400)]
CASES = [
    (learner, kernel, policy)
    for learner in sorted(LEARNERS)
    for kernel in sorted(KERNELS)
    for policy in sorted(POLICIES)
    if not (policy == "merge" and kernel not in ("rbf", "rbf-auto"))  # Merge: RBF only
]


def _declined(*_args, **_kwargs):
    """A block pass that does not apply."""
    return None


@pytest.fixture
def no_block_pass(monkeypatch):
    """Every compiled block pass of ``learn_many`` declines (nothing changed), so runs go
    to the per-event core, then to the NumPy rows."""
    for name in ("perceptron_run", "rows_plan", "plan"):
        monkeypatch.setattr(fastpass, name, _declined)
    monkeypatch.setattr(fastpass, "block_pass_applies", lambda *a, **k: False)
    monkeypatch.setattr(perceptron_module, "margin_run", _declined)
    monkeypatch.setattr(perceptron_module, "merge_run", _declined)


def _data(learner: str) -> tuple[pd.DataFrame, list]:
    X, y = _stream(BLOCKS[-1][1], CLASSES[learner])
    if learner == "svr":  # a real target, off-centre
        y = (5.0 + np.sin(2 * X["a"]) + X["b"] * X["c"]).tolist()
    return X, y


def _learn(model, X: pd.DataFrame, y: list) -> list:
    """``learn_many`` per block (``learn_predict_many`` for the perceptrons: its
    prequential predictions), then the answers on a probe."""
    probe = X.iloc[::23]
    said = []
    for a, b in BLOCKS:
        if isinstance(model, KernelPerceptron):
            said.extend(model.learn_predict_many(X.iloc[a:b], y[a:b]))
        elif isinstance(model, KernelNovelty):
            model.learn_many(X.iloc[a:b])
        else:
            model.learn_many(X.iloc[a:b], y[a:b])
    if isinstance(model, KernelNovelty):
        said.extend(model.score_many(probe).tolist())
    else:
        said.extend(model.predict_many(probe).tolist())
    return said


def _numpy(make, X: pd.DataFrame, y: list):
    """The oracle: the same blocks on the NumPy path (``accel.core = None``)."""
    core, accel.core = accel.core, None
    try:
        model = make()
        return model, _learn(model, X, y)
    finally:
        accel.core = core


def _same(fast, slow) -> None:
    """The same support set, counters, policy state and learner state."""
    a, b = fast.support_, slow.support_
    assert a.n == b.n and a.next_id == b.next_id
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_allclose(a.X, b.X, rtol=1e-9, atol=1e-12)  # Merge builds rows
    # the Forgetron's shrink solves a quadratic that cancels (tests/test_grid_paths.py)
    rtol = 1e-7 if type(fast._policy) is Forgetron else 1e-9
    np.testing.assert_allclose(a.coef, b.coef, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(a.kdiag, b.kdiag, rtol=1e-12)
    assert fast.n_learned == slow.n_learned
    for name in ("n_mistakes", "n_updates", "classes_", "_y_n"):
        assert getattr(fast, name, None) == getattr(slow, name, None), name
    for name in ("_b", "_y_mean", "_y_m2", "_cc"):
        if hasattr(fast, name):
            np.testing.assert_allclose(getattr(fast, name), getattr(slow, name), rtol=1e-9)
    if isinstance(fast, OnlineSVR):
        np.testing.assert_array_equal(fast._targets.align(a.ids), slow._targets.align(b.ids))
    pf, ps = fast._policy.state(), slow._policy.state()
    assert pf.keys() == ps.keys()
    for key in pf:  # remove-random's generator exactly; Q, Projectron's inverse to rounding
        if isinstance(pf[key], (float, np.ndarray)):
            np.testing.assert_allclose(pf[key], ps[key], rtol=1e-7, atol=1e-9)
        else:
            assert pf[key] == ps[key]


def _close(said_fast: list, said_slow: list) -> None:
    if said_fast and isinstance(said_fast[0], float):  # scores, the SVR's predictions
        np.testing.assert_allclose(said_fast, said_slow, rtol=1e-9, atol=1e-9)
    else:
        assert said_fast == said_slow


@pytest.mark.parametrize(("learner", "kernel", "policy"), CASES)
def test_learn_many_through_the_event_core_equals_numpy(learner, kernel, policy, no_block_pass):
    X, y = _data(learner)

    def make():
        return LEARNERS[learner](KERNELS[kernel](), POLICIES[policy]())

    fastpass.COUNTS.clear()
    fast = make()
    said = _learn(fast, X, y)
    took = fastpass.COUNTS["event_rows"]
    slow, said_slow = _numpy(make, X, y)
    _close(said, said_slow)
    _same(fast, slow)
    if policy in ("oldest", "random", "forgetron"):
        assert fast.n_support == 30  # the budget filled and turned over
    assert took > len(y) // 2, "the per-event core should have learned most rows"
    assert fastpass.COUNTS["compiled"] >= took  # the grid's compiled share sees them


@pytest.fixture(params=[False, True], ids=["tile2x4", "tile4x4"])
def look_ahead_from_one(request):
    """The look-ahead from a set of one vector on, through the two-by-four tile or the
    four-by-four one (skipped where the machine lacks AVX-512)."""
    old = _event.lookahead_settings(min_set=1, min_set_wide=1, wide=request.param)
    try:
        if _event.lookahead_settings()["wide"] != request.param:
            pytest.skip("this machine has no AVX-512: no four-by-four tile")
        yield request.param
    finally:
        _event.lookahead_settings(**old)


LOOK_AHEAD_BUDGETS = {
    "unbounded": lambda: None,
    "oldest": lambda: RemoveOldest(333),
    "forgetron": lambda: Forgetron(334),
    "random": lambda: RemoveRandom(335, seed=1),
    "smallest": lambda: RemoveSmallest(336),
    "merge": lambda: Merge(337),
}


@pytest.mark.parametrize("width", [2, 5, 7, 8, 50])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize(
    "learner, budget",
    [("adatron", b) for b in sorted(LOOK_AHEAD_BUDGETS)] + [("svr", "merge")],
)
def test_the_look_ahead_rows_have_learn_ones_bits(
    learner, kernel, width, budget, look_ahead_from_one
):
    """The adatron's and the SVR's ``learn_rows`` take four rows' dots against the set in
    one pass (``sk_dots_rows4``, with either tile; from 256 or 1,024 vectors on, from 1
    here; the SVR's ``learn_many`` takes ``learn_rows`` under a full Merge, its other
    budgets the untracked pass), each row adding those of the vectors the group's earlier
    rows inserted and taking afresh those of the vectors they replaced (Merge's merged
    vector among them): the same model, bit for bit, as ``learn_one`` row by row, with
    groups straddling blocks of 97 rows and, under a budget, the set filling (budgets of
    every remainder mod 4) and turning over. The adatron's full Forgetron takes the
    leaving columns from a second pass over the set's four oldest vectors with the
    four-by-four tile, its fused pass with the other. Every row width's tail (``width``
    mod 4) is taken; rows of fewer than 4 features, and the Laplacian's (distances), take
    no look-ahead; Merge takes the plain RBF kernel alone."""
    if budget == "merge" and kernel not in ("rbf", "rbf-auto"):
        pytest.skip("Merge takes the plain RBF kernel alone")
    rng = np.random.default_rng(width)
    X = pd.DataFrame(rng.normal(size=(700, width)), columns=[f"x{j}" for j in range(width)])
    if learner == "adatron":
        y = rng.integers(0, 2, 700).astype(bool).tolist()  # random labels: most rows join
    else:
        y = (3.0 * rng.normal(size=700)).tolist()  # noise: most rows leave the tube

    def make():
        return LEARNERS[learner](KERNELS[kernel](), LOOK_AHEAD_BUDGETS[budget]())

    many, one = make(), make()
    for a in range(0, 700, 97):
        many.learn_many(X.iloc[a : a + 97], y[a : a + 97])
    for x, t in zip(X.to_dict(orient="records"), y):
        one.learn_one(x, t)
    a, b = many.support_, one.support_
    assert a.n == b.n > 300 and a.next_id == b.next_id
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.coef, b.coef)
    ev = many._event
    if many.budget is not None:
        assert a.next_id > many.budget.budget + 100  # filled, then turned over
        pm, po = many._policy.state(), one._policy.state()
        assert pm.keys() == po.keys()
        for key in pm:  # remove-random's generator, the Forgetron's Q: the same bits
            np.testing.assert_array_equal(pm[key], po[key])
        if budget == "merge":
            assert ev.merges > 100
    if kernel == "laplacian" or width < 4:
        assert ev.lookahead_rows == ev.lookahead_columns == 0
    elif learner == "adatron" and budget == "forgetron" and not look_ahead_from_one:
        assert ev.lookahead_rows > 80  # (the rows that fill it; then the fused pass)
        assert ev.lookahead_columns == 0 and ev.fused_columns > 150
    elif learner == "svr":  # (under Merge, once the set is full: before, a block pass)
        assert ev.lookahead_rows > 250 and ev.lookahead_columns == 0
    else:  # (rbf-auto: the warm-up's 200 rows aside)
        assert ev.lookahead_rows > 400
        if budget == "forgetron":  # the leaving columns too
            # (but for the last rows of each block of 97, fewer than four: no group)
            assert ev.lookahead_columns > 150 and ev.fused_columns <= 8 * 3
        else:
            assert ev.lookahead_columns == 0
    assert one._event.lookahead_rows == 0


@pytest.mark.parametrize("learner", ["adatron", "svr"])
def test_the_look_ahead_leaves_the_projectron_alone(learner, look_ahead_from_one):
    """The Projectron keeps its own projection: it takes no look-ahead (the user guide
    says so), and the model is ``learn_one``'s."""
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(400, 5)), columns=[f"x{j}" for j in range(5)])
    if learner == "adatron":
        y = rng.integers(0, 2, 400).astype(bool).tolist()
    else:
        y = (3.0 * rng.normal(size=400)).tolist()
    many = LEARNERS[learner](RBF(gamma=0.4), Projectron(40))
    one = LEARNERS[learner](RBF(gamma=0.4), Projectron(40))
    many.learn_many(X, y)
    for x, t in zip(X.to_dict(orient="records"), y):
        one.learn_one(x, t)
    assert many._event.lookahead_rows == 0 and many.support_.n == one.support_.n > 20
    np.testing.assert_array_equal(many.support_.ids, one.support_.ids)
    np.testing.assert_array_equal(many.support_.X, one.support_.X)


def test_the_docs_state_the_look_ahead_gate():
    """The user guide and ``KernelAdatron``'s docstring say from which set size the
    look-ahead runs with either tile: the gates' values."""
    gate = _event.lookahead_settings()
    assert (gate["min_set_wide"], gate["min_set"]) == (256, 1024)
    said = (
        f"from {gate['min_set_wide']:,} support vectors on ({gate['min_set']:,} on a machine "
        "without AVX-512), it takes four rows' dot products"
    )
    guide = " ".join(
        (Path(__file__).resolve().parents[1] / "docs" / "user-guide.md").read_text().split()
    )
    assert said in guide
    assert said in " ".join(KernelAdatron.__doc__.split())


def test_learn_rows_stops_at_a_new_class_and_resumes_after_it(no_block_pass):
    """One block whose classes appear at rows 0, 3 and 301 (``_stream(400, 3)``): the core
    stops at each, that row takes the NumPy path (a new column included), the core goes on
    after it; the same model and predictions as NumPy's."""
    X, y = _stream(400, 3)
    assert [y.index(c) for c in (1, 0, 2)] == [0, 3, 301]

    def make():
        return KernelPerceptron(kernel=RBF(0.4), budget=RemoveOldest(30))

    def learn(model):
        return model.learn_predict_many(X, y)

    fast = make()
    fastpass.COUNTS.clear()
    said = learn(fast)
    took = fastpass.COUNTS["event_rows"]
    assert len(y) - 8 <= took <= len(y) - 3  # (and where the buffers grew)
    assert fast.classes_ == [1, 0, 2] and fast.support_.n_outputs == 3
    core, accel.core = accel.core, None
    try:
        slow = make()
        said_slow = learn(slow)
    finally:
        accel.core = core
    assert said == said_slow
    _same(fast, slow)


def test_a_core_declining_row_after_row_hands_the_run_back(no_block_pass):
    """A core that takes the learner but declines every row: after ``_EVENT_STALLS`` rows
    on the NumPy path the rest of the run goes there too; the same model as NumPy's."""
    calls = []

    class Declining:
        def applies(self, model):
            return True

        def learn_rows(self, model, rows, targets, out=None):
            calls.append(rows.shape[0])
            return 0

    X, y = _stream(100, 2)
    fast = KernelPerceptron(kernel=RBF(0.4), budget=30)
    fast._event = Declining()
    fast.learn_many(X, y)
    assert calls == [100 - j for j in range(base._EVENT_STALLS + 1)]
    core, accel.core = accel.core, None
    try:
        slow = KernelPerceptron(kernel=RBF(0.4), budget=30)
        slow.learn_many(X, y)
    finally:
        accel.core = core
    _same(fast, slow)


def test_learn_rows_declines_what_learn_declines_before_changing_anything():
    """Rows of the wrong type or width, a non-finite value and an unknown label: nothing
    learned, nothing changed."""
    model = KernelPerceptron(kernel=RBF(0.4), budget=30)
    X, y = _stream(400, 2)
    model.learn_many(X[:300], y[:300])  # the budget full: room for every row
    assert model.n_support == 30
    before = pickle.dumps(model.state())
    event, Q, y = model._event, np.ascontiguousarray(X[300:], dtype=np.float64), y[300:]
    assert event.learn_rows(model, Q.astype(np.float32), y) == 0
    assert event.learn_rows(model, Q[:, :3].copy(), y) == 0
    assert event.learn_rows(model, np.asfortranarray(Q), y) == 0
    bad = Q.copy()
    bad[0, 1] = np.nan
    assert event.learn_rows(model, bad, y) == 0
    assert event.learn_rows(model, Q, ["new"] + y[1:]) == 0
    assert pickle.dumps(model.state()) == before
    said: list = []
    assert event.learn_rows(model, Q[:5], y[:5], said) == 5 and len(said) == 5
    with pytest.raises(ValueError, match="folding"):  # a prediction needs a settled gamma
        event.learn_rows(model, Q[:5], y[:5], [], True)
