"""The per-event float32 hints (``EventPass._hint`` in ``streamk/learners/_event.pyx``)
against the float64 per-event path they stand in for (the same path with the hints
switched off by ``_event.hint_settings``; itself held to the NumPy path by
``tests/test_eventpass.py`` and ``tests/test_grid_paths.py``).

A hint only ever decides an event whose decision its error bound makes certain, so the
two paths must give the same predictions and leave the same set, coefficients, ids,
thresholds, counters and policy state to the bit, event after event: for the perceptron,
the margin perceptron (binary and one-vs-rest) and the ranker, under no budget,
remove-oldest, remove-random, remove-smallest and the Forgetron, at 9 and 50 features, with
a wide kernel (most hints certain) and a narrow one (the float32 kernel values underflow: most hints
uncertain), and with ``learn_many``, a restore and a copy between the events (the mirror
must then be rebuilt). The gate is lowered here so that small sets use the hints too.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from model_state import model_state

from streamk import (
    RBF,
    Forgetron,
    KernelPerceptron,
    MarginPerceptron,
    OnlineRanker,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
)
from streamk.learners import eventpass

_event = eventpass._event
pytestmark = pytest.mark.skipif(_event is None, reason="needs the compiled per-event path")

BUDGET = 40
POLICIES: dict[str, Callable[[], Any]] = {
    "unbounded": lambda: None,
    "oldest": lambda: RemoveOldest(BUDGET),
    "random": lambda: RemoveRandom(BUDGET, seed=3),
    "forgetron": lambda: Forgetron(BUDGET),
    "smallest": lambda: RemoveSmallest(BUDGET),
}
LEARNERS = ["perceptron", "margin", "margin-ovr", "ranker"]


@contextmanager
def hints(enabled: bool, **gate: Any) -> Iterator[None]:
    """The hints switched on or off (and the gate set) inside the block only."""
    old = _event.hint_settings(enabled=enabled, **gate)
    try:
        yield
    finally:
        _event.hint_settings(*old)


def events(n: int, width: int, learner: str, seed: int) -> list[tuple[dict, Any]]:
    """Standard normal rows; a binary label, three classes, or five ranks from a
    non-linear score."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, width)) * rng.uniform(0.8, 1.2, size=width)
    score = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, -1] + 0.2 * rng.standard_normal(n)
    if learner == "ranker":
        y = np.digitize(score, np.quantile(score, [0.2, 0.4, 0.6, 0.8])).tolist()
    elif learner == "margin-ovr":
        y = np.array(["a", "b", "c"])[np.digitize(score, np.quantile(score, [0.33, 0.66]))]
        y = y.tolist()
    else:
        y = (score > 0).tolist()
    names = [f"f{j}" for j in range(width)]
    return [(dict(zip(names, row)), label) for row, label in zip(X.tolist(), y)]


def make(learner: str, policy: str, gamma: float | str) -> Any:
    kernel, budget = RBF(gamma=gamma), POLICIES[policy]()
    if learner == "perceptron":
        return KernelPerceptron(kernel=kernel, budget=budget)
    if learner == "ranker":
        return OnlineRanker(kernel=kernel, ranks=(0, 1, 2, 3, 4), budget=budget)
    return MarginPerceptron(kernel=kernel, budget=budget)


def gammas(width: int) -> dict[str, float | str]:
    """A wide kernel (squared distances ~2 width: k ~ e^-1), a narrow one (k ~ e^-100,
    below float32's range: the hints are ~1e-38, the bound keeps them from deciding), and
    ``gamma="auto"``, whose width moves during the first 200 events (the mirror's rows do
    not: it is kept across those moves)."""
    return {"wide": 0.5 / width, "narrow": 50.0 / width, "auto": "auto"}


def state(model: Any) -> dict[str, Any]:
    """Everything the two paths must agree on, to the bit: :func:`model_state` (the set,
    the width estimate, the counters, the policy), the mistakes and the ranker's
    thresholds."""
    out = model_state(model)
    out["mistakes"] = model.n_mistakes
    if isinstance(model, OnlineRanker):
        out["b"] = np.asarray(model._b).tobytes()
    return out


def step(model: Any, oracle: Any, x: dict, y: Any) -> None:
    """predict_one then learn_one on both, the oracle with the hints off; the same
    prediction and the same model after."""
    with hints(False):
        said = oracle.predict_one(x)
        oracle.learn_one(x, y)
    with hints(True):
        got = model.predict_one(x)
        model.learn_one(x, y)
    assert got == said
    assert state(model) == state(oracle)


def block(rows: list[tuple[dict, Any]]) -> tuple[pd.DataFrame, list[Any]]:
    return pd.DataFrame([x for x, _ in rows]), [y for _, y in rows]


GATE = {"min_width": 1, "min_set": 1}


@pytest.mark.parametrize("width", [9, 50])
@pytest.mark.parametrize("kernel", ["wide", "narrow", "auto"])
@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("learner", LEARNERS)
def test_hints_change_nothing_event_by_event(learner, policy, kernel, width):
    """Event by event, with learn_many, a restore and a copy in between."""
    data = events(330, width, learner, seed=width + len(policy))
    gamma = gammas(width)[kernel]
    model, oracle = make(learner, policy, gamma), make(learner, policy, gamma)
    with hints(True, **GATE):
        for x, y in data[:120]:
            step(model, oracle, x, y)
        for m in (model, oracle):  # learn_many moves the set: the mirror is rebuilt
            m.learn_many(*block(data[120:180]))
        for x, y in data[180:230]:
            step(model, oracle, x, y)
        restored = type(model).from_state(pickle.loads(pickle.dumps(model.state())))
        for x, y in data[230:280]:  # a restored model has its own (new) mirror
            step(restored, oracle, x, y)
        twin, oracle2 = copy.deepcopy(restored), copy.deepcopy(oracle)
        for x, y in data[280:]:  # a copy, and the original after it, each in step
            step(twin, oracle2, x, y)
            step(restored, oracle, x, y)
    decided = restored._event.hints_certain + model._event.hints_certain
    afresh = restored._event.hints_fresh + model._event.hints_fresh
    if kernel != "narrow":
        assert decided > 4 * afresh  # the hints did decide: the comparison is not vacuous
    else:
        assert afresh > decided  # mostly the float64 row, as the bound says


@pytest.mark.parametrize("learner", LEARNERS)
def test_the_comparison_sees_hints_trusted_without_their_bound(learner):
    """With the bound taken as 0 every hint decides; under a kernel narrower still (k ~
    e^-400: every float32 value is the clamped e^-87) the hints are sums of ~1e-38 and
    the predictions or models part: the event-by-event comparison above fails."""
    data = events(200, 9, learner, seed=1)
    gamma = 200.0 / 9
    model, oracle = make(learner, "oldest", gamma), make(learner, "oldest", gamma)
    with hints(True, tol_scale=0.0, **GATE), pytest.raises(AssertionError):
        for x, y in data:
            step(model, oracle, x, y)


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("learner", LEARNERS)
def test_hints_against_the_numpy_path(learner, policy):
    """The NumPy path (the oracle of the compiled one) and the hinted per-event path: the
    same predictions event by event, the same set (the coefficients to rounding: the
    Forgetron's shrink), thresholds and mistakes."""
    data = events(260, 20, learner, seed=5)
    fast, slow = make(learner, policy, "auto"), make(learner, policy, "auto")
    slow._event = None
    with hints(True, **GATE):
        for x, y in data:
            assert fast.predict_one(x) == slow.predict_one(x)
            fast.learn_one(x, y)
            slow.learn_one(x, y)
    assert fast._event.hints_certain > 100
    a, b = fast.support_, slow.support_
    assert a.n == b.n and a._ids[: a.n].tolist() == b._ids[: b.n].tolist()
    np.testing.assert_array_equal(a._X[: a.n], b._X[: b.n])
    np.testing.assert_allclose(a._coef[: a.n], b._coef[: b.n], rtol=1e-9, atol=1e-12)
    assert fast.n_mistakes == slow.n_mistakes
    if learner == "ranker":
        np.testing.assert_array_equal(fast._b, slow._b)


@pytest.mark.parametrize("learner", ["perceptron", "margin-ovr", "ranker"])
def test_learn_rows_predictions_and_models_match(learner):
    """``learn_rows`` with the predictions ``learn_predict_many`` takes: the same said
    labels and the same model with the hints as without."""
    data = events(260, 20, learner, seed=9)
    gamma = gammas(20)["wide"]
    models = {}
    for on in (True, False):
        m = make(learner, "forgetron", gamma)
        with hints(on, **GATE):
            for x, y in data[:60]:
                m.learn_one(x, y)
            rows = np.array([list(x.values()) for x, _ in data[60:]])
            out: list[Any] = []
            done = m._event.learn_rows(m, rows, [y for _, y in data[60:]], out)
        models[on] = (done, out, state(m))
    assert models[True] == models[False]
    assert models[True][0] == 200


def test_the_gate_is_the_documented_one():
    """8 features and 96 vectors (the module docstrings and the user guide say so): below
    either the hints
    are not used, past both they are."""
    assert _event.hint_settings()[1:] == (8, 96, 1.0)
    guide = (Path(__file__).resolve().parents[1] / "docs" / "user-guide.md").read_text()
    for text in (_event.__doc__, eventpass.__doc__, guide):
        assert "at least 8 features and the set at least 96 vectors" in " ".join(text.split())
    for width, used in ((7, False), (8, True)):
        model = make("margin", "unbounded", 0.5 / width)
        data = events(200, width, "margin", seed=2)
        for x, y in data:
            model.learn_one(x, y)
            if model.support_.n < 96:
                assert model._event.hints_certain + model._event.hints_fresh == 0
        assert (model._event.hints_certain > 0) == used


@pytest.mark.parametrize("policy", ["oldest", "forgetron"])
def test_a_new_feature_rebuilds_the_mirror(policy):
    """Events gain a feature half-way (the NumPy path widens the set): the mirror, built
    for the narrower rows, is rebuilt at the new width."""
    narrow, wide = events(150, 20, "margin", seed=6), events(150, 21, "margin", seed=7)
    model, oracle = make("margin", policy, 0.03), make("margin", policy, 0.03)
    with hints(True, **GATE):
        for x, y in narrow + wide:
            step(model, oracle, x, y)
    assert model._event.hint_builds >= 2 and model._event.hints_certain > 100
