"""The compiled SVR and novelty passes against the NumPy path, over policies × kernels.

The oracle is the NumPy path (``streamk.accel.core`` switched off, as ``STREAMK_NO_ACCEL=1``
does) learning the same stream one event at a time with ``learn_one``. The compiled
``learn_many`` must make the same predictions (scores, threshold) after every block and end
with the same support set (rows, ids, coefficients to rounding), the same per-vector
targets, running target statistics, kept Gram matrix and policy state.
:data:`streamk.learners.fastpass.COUNTS` says which path a combination took. The kernels
and policies are those of ``tests/test_grid_paths.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from model_state import assert_policy_states_close

from streamk import KernelNovelty, OnlineSVR, accel
from streamk.budget import Forgetron
from streamk.learners import fastpass
from tests.test_grid_paths import (
    GRAM_KERNELS,
    KERNELS,
    POLICIES,
    PROGRAM_KERNELS,
    _stream,
    event_core_takes,
)

pytestmark = pytest.mark.skipif(accel.core is None, reason="the compiled core is not built")

BLOCKS = [(0, 250), (250, 520), (520, 900)]
CASES = [(kernel, policy) for kernel in sorted(KERNELS) for policy in sorted(POLICIES)]


def _regression(n: int, seed: int = 0) -> tuple[pd.DataFrame, list[float]]:
    """The grid's stream with a real-valued target far from 0 (so the offset matters)."""
    X, _ = _stream(n, 2, seed)
    rng = np.random.default_rng(seed + 1)
    v = X.to_numpy()
    y = 5.0 + 2.0 * np.sin(2 * v[:, 0]) + v[:, 1] * v[:, 2] + 0.3 * rng.standard_normal(n)
    return X, y.tolist()


def _expect_compiled(kernel: str, policy: str) -> bool:
    if policy == "merge" and not kernel.startswith("rbf"):
        pytest.skip("Merge takes an RBF kernel only (ConfigError otherwise)")
    compiled = POLICIES[policy][1] and kernel not in PROGRAM_KERNELS  # (the per-event core's)
    return compiled and not (policy == "forgetron" and kernel in GRAM_KERNELS)


def _numpy_run(learn, blocks, observe) -> list:
    """``learn(a, b)`` per block with the NumPy path only; ``observe()`` after each."""
    core, accel.core = accel.core, None
    try:
        seen = []
        for a, b in blocks:
            learn(a, b)
            seen.append(observe())
        return seen
    finally:
        accel.core = core


def _same_support(fast, slow) -> None:
    sf, ss = fast.support_, slow.support_
    assert sf.n == ss.n and sf.next_id == ss.next_id
    np.testing.assert_array_equal(sf.ids, ss.ids)
    np.testing.assert_allclose(sf.X, ss.X, rtol=1e-9, atol=1e-12)
    # the Forgetron's shrink solves a quadratic that cancels (see tests/test_grid_paths.py)
    rtol = 1e-7 if type(fast._policy) is Forgetron else 1e-9
    np.testing.assert_allclose(sf.coef, ss.coef, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(sf.kdiag, ss.kdiag, rtol=1e-12)
    assert (sf._G is None) == (ss._G is None)
    if sf._G is not None:
        np.testing.assert_allclose(sf.gram_matrix, ss.gram_matrix, rtol=1e-9, atol=1e-12)
    assert_policy_states_close(fast, slow)


# -- the on-line SVR ---------------------------------------------------------------------------
SVR_RULES = {
    "auto": {},
    "fixed-inf": {"epsilon": 0.1, "C": math.inf, "offset": 0.0},
    "fixed-box": {"epsilon": 0.3, "C": 0.5, "offset": 4.0},
}


def _svr_case(kernel: str, policy: str, rule: str, many_blocks=BLOCKS):
    """Compiled learn_many against NumPy learn_one; returns whether the pass ran."""
    X, y = _regression(900)
    probe = X.iloc[::37]
    params = SVR_RULES[rule]
    fast = OnlineSVR(kernel=KERNELS[kernel](), budget=POLICIES[policy][0](), **params)
    fastpass.COUNTS.clear()
    got = []
    for a, b in many_blocks:
        fast.learn_many(X.iloc[a:b], y[a:b])
        got.append(fast.predict_many(probe).tolist())
    took = fastpass.COUNTS["compiled"]
    slow = OnlineSVR(kernel=KERNELS[kernel](), budget=POLICIES[policy][0](), **params)
    rows = X.to_dict(orient="records")

    def learn(a, b):
        for x, t in zip(rows[a:b], y[a:b]):
            slow.learn_one(x, t)

    want = _numpy_run(learn, many_blocks, lambda: slow.predict_many(probe).tolist())
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    _same_support(fast, slow)
    assert fast.n_updates == slow.n_updates and fast.n_learned == slow.n_learned
    assert (fast._y_n, fast._y_mean, fast._y_m2) == (slow._y_n, slow._y_mean, slow._y_m2)
    # the stores may hold evicted rows' entries until they are pruned: compare the live ones
    np.testing.assert_array_equal(
        fast._targets.align(fast.support_.ids), slow._targets.align(slow.support_.ids)
    )
    return took


@pytest.fixture(params=["untracked", "tracked"])
def path(request, monkeypatch):
    """Which compiled pass the C kernels take: untracked (the learners' choice) or, with
    :func:`~streamk.learners.fastpass.rows_plan` declining, the tracked block's."""
    if request.param == "tracked":
        monkeypatch.setattr(fastpass, "rows_plan", lambda *args, **kwargs: None)
    return request.param


def _check_path(kernel: str, policy: str, took: int, path: str) -> None:
    """A combination with a block pass took it (the tracked one for a Gram-matrix kernel,
    else the fixture's); one without took the per-event core if it applies; others none."""
    block = _expect_compiled(kernel, policy)
    assert (took > 0) == (block or event_core_takes(kernel, policy)), (
        "a compiled combination must take a compiled path, others not"
    )
    if block:
        expected = "tracked" if kernel in GRAM_KERNELS else path
        assert fastpass.COUNTS[expected] == fastpass.COUNTS["compiled"] > 0
    elif took:  # (Merge and RemoveSmallest: the untracked pass until the set could fill)
        assert fastpass.COUNTS["event_rows"] + fastpass.COUNTS["untracked"] == took


@pytest.mark.parametrize(("kernel", "policy"), CASES)
def test_svr_compiled_learn_many_equals_numpy_learn_one(kernel, policy, path):
    if path == "tracked" and kernel in GRAM_KERNELS:
        pytest.skip("Gram-matrix kernels always take the tracked pass")
    _expect_compiled(kernel, policy)  # (skips Merge with another kernel than the RBF)
    took = _svr_case(kernel, policy, "auto")
    _check_path(kernel, policy, took, path)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly", "linear"])
def test_untracked_novelty_rows_under_a_full_forgetron_read_the_set_once(kernel):
    """``step_pass``'s untracked novelty rows that carry ``r`` and meet a full Forgetron
    take their kernel row and the leaving vector's column (which ``_insert``'s shrink
    reads) in one pass: as many as the events the NumPy path's ``learn_one`` meets with 40
    vectors held and ``r`` current (scoring between blocks makes it so). The SVR's rows,
    which may not join, take the leaving column only when they do."""
    X, y = _regression(900)
    rows = X.to_dict(orient="records")
    probe = rows[5]
    slow = KernelNovelty(kernel=KERNELS[kernel](), budget=Forgetron(40))
    met = []

    def learn(a, b):
        for x in rows[a:b]:
            met.append(slow.support_.n == 40 and slow._r is not None)
            slow.learn_one(x)

    want = _numpy_run(learn, BLOCKS, lambda: slow.score_one(probe))
    fast = KernelNovelty(kernel=KERNELS[kernel](), budget=Forgetron(40))
    fastpass.COUNTS.clear()
    before, got = accel.core.fused_columns(), []
    for a, b in BLOCKS:
        fast.learn_many(X.iloc[a:b])
        got.append(fast.score_one(probe))
    assert fastpass.COUNTS["untracked"] == fastpass.COUNTS["compiled"] > 0
    assert sum(met) > 500
    assert accel.core.fused_columns() - before == sum(met)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    _same_support(fast, slow)
    svr = OnlineSVR(kernel=KERNELS[kernel](), budget=Forgetron(40))
    fastpass.COUNTS.clear()
    before = accel.core.fused_columns()
    svr.learn_many(X, y)
    assert fastpass.COUNTS["untracked"] == fastpass.COUNTS["compiled"] > 0
    assert svr.support_.n == 40 and accel.core.fused_columns() == before


@pytest.mark.parametrize("rule", ["fixed-inf", "fixed-box"])
@pytest.mark.parametrize("policy", ["unbounded", "oldest", "random", "forgetron"])
@pytest.mark.parametrize("kernel", ["rbf", "poly", "sum"])
def test_svr_compiled_fixed_rules(kernel, policy, rule):
    """A fixed ε, box and offset (``C = inf``: the PA variant) take the same pass (a
    combination, the per-event core)."""
    took = _svr_case(kernel, policy, rule)
    assert (took > 0) == (_expect_compiled(kernel, policy) or event_core_takes(kernel, policy))


def test_svr_with_resweeps_declines():
    """``resweeps > 0`` has no compiled pass: learn_many and learn_one fall back, same model
    as the NumPy path's."""
    X, y = _regression(300)
    fast = OnlineSVR(kernel=KERNELS["rbf"](), budget=POLICIES["oldest"][0](), resweeps=1)
    slow = OnlineSVR(kernel=KERNELS["rbf"](), budget=POLICIES["oldest"][0](), resweeps=1)
    rows = X.to_dict(orient="records")
    fastpass.COUNTS.clear()
    fast.learn_many(X.iloc[:200], y[:200])
    for x, t in zip(rows[200:], y[200:]):
        fast.learn_one(x, t)
    assert fastpass.COUNTS["compiled"] == fastpass.COUNTS["one"] == 0
    _numpy_run(lambda a, b: [slow.learn_one(x, t) for x, t in zip(rows, y)], [(0, 0)], list)
    _same_support(fast, slow)


# -- the novelty detector ----------------------------------------------------------------------
@pytest.mark.parametrize(("kernel", "policy"), CASES)
def test_novelty_compiled_learn_many_equals_numpy_learn_one(kernel, policy, path):
    if path == "tracked" and kernel in GRAM_KERNELS:
        pytest.skip("Gram-matrix kernels always take the tracked pass")
    _expect_compiled(kernel, policy)  # (skips Merge with another kernel than the RBF)
    X, _ = _stream(900, 2)
    probe = X.iloc[::37]
    one = probe.to_dict(orient="records")[3]

    def observe(model):
        return model.score_many(probe).tolist() + [model.threshold_, model.score_one(one)]

    fast = KernelNovelty(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())
    fastpass.COUNTS.clear()
    got = []
    for a, b in BLOCKS:
        fast.learn_many(X.iloc[a:b])
        got.append(observe(fast))
    took = fastpass.COUNTS["compiled"]
    slow = KernelNovelty(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())
    rows = X.to_dict(orient="records")

    def learn(a, b):
        for x in rows[a:b]:
            slow.learn_one(x)

    want = _numpy_run(learn, BLOCKS, lambda: observe(slow))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    _same_support(fast, slow)
    assert fast.n_learned == slow.n_learned
    assert (fast._r is None) == (slow._r is None)
    if fast._r is not None:
        np.testing.assert_allclose(fast._r, slow._r, rtol=1e-9)
        assert fast._cc == pytest.approx(slow._cc, rel=1e-9)
    _check_path(kernel, policy, took, path)


def test_novelty_keeps_its_centre_statistics_current():
    """Unbounded, scored between blocks: the pass carries ``r`` and ``cc`` forward (no
    recomputation) and they equal the NumPy path's, which updates them row by row."""
    X, _ = _stream(600, 2)
    fast = KernelNovelty(kernel=KERNELS["laplacian"]())
    slow = KernelNovelty(kernel=KERNELS["laplacian"]())
    fast.learn_many(X.iloc[:200])
    fast.score_one({"a": 0.0})  # computes r and cc
    fast.learn_many(X.iloc[200:])
    assert fast._r is not None and fast._r.shape == (600,)
    rows = X.to_dict(orient="records")
    _numpy_run(lambda a, b: [slow.learn_one(x) for x in rows[a:b]], [(0, 200)], lambda: None)
    slow.score_one({"a": 0.0})
    _numpy_run(lambda a, b: [slow.learn_one(x) for x in rows[a:b]], [(200, 600)], lambda: None)
    np.testing.assert_allclose(fast._r, slow._r, rtol=1e-9)
    assert fast._cc == pytest.approx(slow._cc, rel=1e-12)


# -- learn_one ---------------------------------------------------------------------------------
def _prequential(model, X: pd.DataFrame, y: list | None, probe: pd.DataFrame) -> list:
    """Test-then-train one event at a time; the probe's scores at the end."""
    out = []
    for i, x in enumerate(X.to_dict(orient="records")):
        if y is None:
            out.append(model.score_one(x))
            model.learn_one(x)
        else:
            out.append(model.predict_one(x))
            model.learn_one(x, y[i])
    scores = model.predict_many(probe) if y is not None else model.score_many(probe)
    return out + list(scores)


@pytest.mark.parametrize(("kernel", "policy"), CASES)
@pytest.mark.parametrize("learner", ["svr", "novelty"])
def test_compiled_learn_one_equals_numpy_learn_one(learner, kernel, policy):
    """``learn_one`` through :class:`~streamk.learners.fastpass.OneRow` (kernels computed
    in C) against the NumPy ``learn_one``, test-then-train: the same predictions or scores
    before every event, the same model after."""
    compiled = _expect_compiled(kernel, policy) and kernel not in GRAM_KERNELS
    if learner == "svr":
        X, y = _regression(400)
        make = OnlineSVR
    else:
        (X, _), y = _stream(400, 2), None
        make = KernelNovelty
    probe = X.iloc[::29]
    fast = make(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())
    fast._event = None  # OneRow itself: the whole-event path is tests/test_eventpass.py's
    fastpass.COUNTS.clear()
    got = _prequential(fast, X, y, probe)
    took = fastpass.COUNTS["one"]
    slow = make(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())
    want = _numpy_run(lambda a, b: None, [(0, 0)], lambda: _prequential(slow, X, y, probe))[0]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    _same_support(fast, slow)
    assert fast.n_learned == slow.n_learned
    if learner == "svr":
        assert fast.n_updates == slow.n_updates
        assert (fast._y_n, fast._y_mean, fast._y_m2) == (slow._y_n, slow._y_mean, slow._y_m2)
        # the stores may hold evicted rows' entries until they are pruned: compare the live ones
        np.testing.assert_array_equal(
            fast._targets.align(fast.support_.ids), slow._targets.align(slow.support_.ids)
        )
    else:
        assert fast.threshold_ == pytest.approx(slow.threshold_, rel=1e-9)
    if not compiled:
        assert took == 0
    elif learner == "svr" and policy == "random":  # declines on the full set (see OneRow)
        assert 40 <= took < 400
    else:
        assert took == 400
