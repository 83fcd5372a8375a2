"""The compiled resweeps (streamk/learners/_dual.pyx) against the NumPy path.

The oracle is the NumPy path (``streamk.accel.core`` switched off, as ``STREAMK_NO_ACCEL=1``
does) learning the same stream one event at a time with ``learn_one``. The compiled
learner, with ``learn_one`` or ``learn_many``, must make the same predictions and end with
the same support set (ids, rows, coefficients to rounding), over budget policies ×
kernels × binary / multiclass for the adatron's grid, and over its constants (norm,
``C``, resweeps). :data:`streamk.learners.dualpass.COUNTS` says the compiled pass ran.
"""

from __future__ import annotations

import copy
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from model_state import assert_policy_states_close

from streamk import accel
from streamk.kernels import RBF, Spectrum
from streamk.learners import KernelAdatron, OnlineSVR, dualpass
from tests.test_grid_paths import GRAM_KERNELS, KERNELS, POLICIES, _stream

pytestmark = pytest.mark.skipif(
    not dualpass.available(), reason="the compiled resweeps are not built here"
)

ROOT = Path(__file__).resolve().parents[1]
#: Events per classifier stream: ``_stream``'s third class arrives at row 300, inside the
#: second block.
N = 420
BLOCKS = [(0, 140), (140, N)]
SVR_BLOCKS = [(0, 120), (120, 300)]


def _learn(model, X: pd.DataFrame, y: list, how: str, probe: pd.DataFrame) -> list:
    """Learn ``X, y`` by ``how`` ("one" or "many" in :data:`BLOCKS`); probe after each block."""
    rows = X.to_dict(orient="records")
    preds = []
    for a, b in BLOCKS:
        if how == "many":
            model.learn_many(X.iloc[a:b], y[a:b])
        else:
            for x, label in zip(rows[a:b], y[a:b]):
                model.learn_one(x, label)
        preds.append(model.predict_many(probe).tolist())
    return preds


def _numpy(make, X: pd.DataFrame, y: list, probe: pd.DataFrame):
    """The oracle: the NumPy path, ``learn_one``; returns the model and its predictions."""
    core, accel.core = accel.core, None
    try:
        model = make()
        preds = _learn(model, X, y, "one", probe)
    finally:
        accel.core = core
    return model, preds


def _compiled(make, X: pd.DataFrame, y: list, how: str, probe: pd.DataFrame):
    """The compiled path; returns the model, its predictions and how many resweeps ran compiled
    (by :mod:`~streamk.learners.dualpass` or inside the per-event core's call)."""
    dualpass.COUNTS.clear()
    model = make()
    preds = _learn(model, X, y, how, probe)
    in_core = model._event.resweep_events if model._event is not None else 0
    return model, preds, dualpass.COUNTS["compiled"] + in_core


def _same_support(fast, slow) -> None:
    sf, ss = fast.support_, slow.support_
    assert sf.n == ss.n and sf.next_id == ss.next_id
    assert fast.n_updates == slow.n_updates
    np.testing.assert_array_equal(sf.ids, ss.ids)
    np.testing.assert_allclose(sf.X, ss.X, rtol=1e-9, atol=1e-12)  # Merge builds rows
    np.testing.assert_allclose(sf.coef, ss.coef, rtol=1e-9, atol=1e-12)
    assert_policy_states_close(fast, slow)


def _check(make, X, y, how: str, expect_compiled: bool = True) -> None:
    probe = X.iloc[::23]
    fast, fast_preds, took = _compiled(make, X, y, how, probe)
    slow, slow_preds = _numpy(make, X, y, probe)
    assert fast_preds == slow_preds
    _same_support(fast, slow)
    assert fast.support_.n_outputs == (1 if len(set(y)) == 2 else len(set(y)))
    if expect_compiled:
        assert took > 0, "the compiled resweep did not run"
    else:
        assert took == 0, "the compiled resweep ran where it must not"


ADATRON_GRID = [
    (kernel, policy, classes)
    for kernel in sorted(KERNELS)
    for policy in sorted(POLICIES)
    for classes in (2, 3)
    if not (policy == "merge" and not kernel.startswith("rbf"))  # Merge takes RBF only
    if not (classes == 3 and kernel in GRAM_KERNELS and policy in ("projectron", "merge"))
]


@pytest.mark.parametrize(("kernel", "policy", "classes"), ADATRON_GRID)
def test_adatron_compiled_equals_numpy_over_policies_and_kernels(kernel, policy, classes):
    """Every policy × kernel, binary and with a third class arriving mid-stream, learn_many,
    with one resweep per event (the compiled resweep under test)."""
    X, y = _stream(N, classes)

    def make():
        return KernelAdatron(KERNELS[kernel](), C=1.0, resweeps=1, budget=POLICIES[policy][0]())

    _check(make, X, y, "many")


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("norm", [1, 2])
@pytest.mark.parametrize("C", [0.5, math.inf])
@pytest.mark.parametrize("resweeps", [0, 1, 3])
@pytest.mark.parametrize("how", ["one", "many"])
def test_adatron_compiled_equals_numpy_over_its_constants(classes, norm, C, resweeps, how):
    """norm 1 / 2 × C finite / inf × resweeps 0 / 1 / 3, binary and multiclass, under
    remove-oldest (the budget turns over) and learn_one / learn_many."""
    X, y = _stream(N, classes, seed=1)

    def make():
        return KernelAdatron(RBF(gamma=0.5), C=C, norm=norm, resweeps=resweeps, budget=40)

    _check(make, X, y, how, expect_compiled=resweeps > 0)


def _regression(n: int, seed: int = 0) -> tuple[pd.DataFrame, list]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.2 * rng.standard_normal(n)
    return pd.DataFrame(X, columns=["a", "b", "c"]), y.tolist()


def _learn_svr(model, X: pd.DataFrame, y: list, how: str) -> np.ndarray:
    rows = X.to_dict(orient="records")
    if how == "many":
        for a, b in SVR_BLOCKS:
            model.learn_many(X.iloc[a:b], y[a:b])
    else:
        for x, target in zip(rows, y):
            model.learn_one(x, target)
    return model.predict_many(X.iloc[::17]).to_numpy()


SVR_GRID = [
    (kernel, policy)
    for kernel in ("rbf", "laplacian", "poly", "sum")
    for policy in ("unbounded", "oldest", "random", "forgetron", "projectron")
]


@pytest.mark.parametrize(("kernel", "policy"), SVR_GRID)
@pytest.mark.parametrize("resweeps", [1, 3])
@pytest.mark.parametrize("how", ["one", "many"])
def test_svr_compiled_resweep_equals_numpy(kernel, policy, resweeps, how):
    """The SVR's resweep (CF 7.14), compiled against NumPy, with its scale-aware defaults."""
    X, y = _regression(300)

    def make():
        return OnlineSVR(KERNELS[kernel](), resweeps=resweeps, budget=POLICIES[policy][0]())

    dualpass.COUNTS.clear()
    fast = make()
    got = _learn_svr(fast, X, y, how)
    assert dualpass.COUNTS["compiled"] > 0
    core, accel.core = accel.core, None
    try:
        slow = make()
        want = _learn_svr(slow, X, y, "one")
    finally:
        accel.core = core
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    sf, ss = fast.support_, slow.support_
    np.testing.assert_array_equal(sf.ids, ss.ids)
    np.testing.assert_allclose(sf.coef, ss.coef, rtol=1e-9, atol=1e-12)
    assert fast.n_updates == slow.n_updates


def test_passes_give_the_numpy_loop_bit_for_bit():
    """With only the resweep switched (kernel rows computed alike), the compiled passes give
    the NumPy loop's coefficients exactly: the same operations in the same order. (The
    per-event core is off in both: its resweeps compute ``G @ coef`` themselves, to rounding;
    tests/test_event_resweeps.py holds them to this path.)"""
    X, y = _stream(N, 3, seed=2)
    rows = X.to_dict(orient="records")
    models = []
    for compiled in (True, False):
        saved = dualpass._dual
        if not compiled:
            dualpass._dual = None
        try:
            model = KernelAdatron(RBF(gamma=0.5), C=2.0, norm=2, resweeps=2, budget=50)
            model._event = None
            for x, label in zip(rows, y):
                model.learn_one(x, label)
        finally:
            dualpass._dual = saved
        models.append(model)
    fast, slow = models
    np.testing.assert_array_equal(fast.support_.ids, slow.support_.ids)
    np.testing.assert_array_equal(fast.support_.coef, slow.support_.coef)


def test_strings_and_switched_off_core_take_the_numpy_loop():
    """Support sets of strings, and a run with the core switched off, decline before any
    change and the NumPy loop runs (and learns)."""
    dualpass.COUNTS.clear()
    model = KernelAdatron(Spectrum(2), C=1.0, budget=10)
    for text, label in [("abab", 1), ("baba", 1), ("cdcd", 0), ("dcdc", 0)] * 5:
        model.learn_one({"text": text}, label)
    assert dualpass.COUNTS["compiled"] == 0 and model.n_support > 0
    core, accel.core = accel.core, None
    try:
        assert not dualpass.available()
        model = KernelAdatron(RBF(gamma=0.5), budget=10)
        X, y = _stream(50, 2)
        model.learn_many(X, y)
    finally:
        accel.core = core
    assert dualpass.COUNTS["compiled"] == 0 and model.n_support > 0


@pytest.mark.parametrize("policy", ["unbounded", "projectron", "merge", "random"])
@pytest.mark.parametrize("classes", [2, 3])
def test_slot_cache_changes_nothing(policy, classes):
    """Each slot's class and the age order are reused while the set's rows stay put, and
    extended where the event only appended its vector (``_appended_slot``: an unbounded or
    filling set); after every event they are what aligning the classes afresh and sorting
    the ids give, and a model that aligns them afresh at every event ends identical (the
    Projectron's projections add no vector, so they must leave no class behind for the next
    id). With one resweep an event: ``resweeps=0`` reads neither. The NumPy path's cache: the
    per-event core (which keeps its own, tests/test_event_resweeps.py) is off in both."""
    X, y = _stream(N, classes, seed=3)
    rows = X.to_dict(orient="records")
    models = [
        KernelAdatron(RBF(gamma=0.5), C=1.0, resweeps=1, budget=POLICIES[policy][0]())
        for _ in range(2)
    ]
    cached, fresh = models
    cached._event = fresh._event = None
    appended, slots, extend = [], cached._slots, cached._appended_slot

    def checked():  # what each resweep takes, against a copy of the classes aligned afresh
        cls, by_age = slots()
        ids = cached._support.ids
        np.testing.assert_array_equal(cls, copy.deepcopy(cached._cls).align(ids)[:, 0])
        np.testing.assert_array_equal(by_age, np.argsort(ids, kind="stable"))
        return cls, by_age

    cached._slots = checked
    cached._appended_slot = lambda *a: appended.append(extend(*a)) or appended[-1]
    for x, label in zip(rows, y):
        cached.learn_one(x, label)
        fresh._slots_cache = None
        fresh.learn_one(x, label)
    assert cached.n_updates > cached.n_support  # vectors left or were projected away
    assert sum(a is not None for a in appended) > (30 if policy == "unbounded" else 0)
    np.testing.assert_array_equal(cached.support_.ids, fresh.support_.ids)
    np.testing.assert_array_equal(cached.support_.coef, fresh.support_.coef)
    assert cached.state()["sv_class"] == fresh.state()["sv_class"]


def test_without_the_core_the_numpy_loop_runs():
    """``STREAMK_NO_ACCEL=1``: the extension is not loaded and both learners still learn."""
    code = """
import numpy as np
from streamk.learners import KernelAdatron, OnlineSVR, dualpass
assert not dualpass.available()
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 2))
a, s = KernelAdatron(C=1.0, budget=30), OnlineSVR(budget=30)
for r in X:
    x = {"a": r[0], "b": r[1]}
    a.learn_one(x, bool(r[0] * r[1] > 0))
    s.learn_one(x, float(r[0] * r[1]))
print(a.n_support, s.n_support > 0, dualpass.COUNTS["compiled"])
"""
    env = {**os.environ, "STREAMK_NO_ACCEL": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["30", "True", "0"]
