"""Finite feature values too large for the kernels are refused, never learned.

A value whose square overflows (|x| above about 1.3e154), or an int beyond any float, was
learned: its kernel values were NaN or 0 against everything, during the ``gamma="auto"``
warm-up it made the width 0 (the next events raised ``ConfigError``: 15 good events lost
in a row), and behind on-line standardisation it made the variance infinite, then NaN
(every later event of the stream refused). Oracle: the same learner fed the good events
only.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pandas as pd
import pytest

from streamk import KernelAdatron, KernelNovelty, KernelPerceptron, OnlineRanker, OnlineSVR
from streamk.errors import InvalidInput
from streamk.learners.features import FeatureIndex
from streamk.learners.scaling import standard_scaled

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered")

HUGE = [{"a": 1e200, "b": 0.5}, {"a": -3e160, "b": 0.5}, {"a": 10**400, "b": 0.5}]
LEARNERS = {
    "perceptron": lambda: KernelPerceptron(budget=60),
    "adatron": lambda: KernelAdatron(budget=60),
    "svr": lambda: OnlineSVR(budget=60),
    "ranker": lambda: OnlineRanker(budget=60),
    "novelty": lambda: KernelNovelty(budget=60),
    "scaled perceptron": lambda: standard_scaled(KernelPerceptron(budget=60)),
}


def _events(learner: str, n: int = 320) -> list[tuple[dict, object]]:
    rng = np.random.default_rng(2)
    out = []
    for a, b in rng.normal(size=(n, 2)).tolist():
        score = a * b + 0.3 * a
        label = score if learner == "svr" else (int(score > 0) + int(score > 1))
        out.append(
            (
                {"a": a, "b": b},
                score > 0 if "perceptron" in learner or learner == "adatron" else label,
            )
        )
    return out


def _learn(model, x, y, learner):
    if learner == "novelty":
        model.learn_one(x)
    else:
        model.learn_one(x, y)


@pytest.mark.parametrize("learner", list(LEARNERS))
@pytest.mark.parametrize("at", [40, 250], ids=["warm-up", "after"])
def test_a_huge_value_is_refused_and_changes_nothing(learner, at):
    ours, clean = LEARNERS[learner](), LEARNERS[learner]()
    events = _events(learner)
    for i, (x, y) in enumerate(events):
        if i == at:
            for huge in HUGE:
                before = pickle.dumps(ours.state())
                with pytest.raises(InvalidInput):
                    _learn(ours, huge, y, learner)
                assert pickle.dumps(ours.state()) == before
        _learn(ours, x, y, learner)
        _learn(clean, x, y, learner)
    assert pickle.dumps(ours.state()) == pickle.dumps(clean.state())
    with pytest.raises(InvalidInput):
        ours.predict_one(HUGE[0] if learner != "scaled perceptron" else {"a": 1e300, "b": 0.5})


@pytest.mark.parametrize("learner", ["perceptron", "svr", "novelty"])
def test_a_block_with_a_huge_value_is_refused_whole(learner):
    model = LEARNERS[learner]()
    events = _events(learner)
    for x, y in events[:250]:
        _learn(model, x, y, learner)
    before = pickle.dumps(model.state())
    for huge in HUGE:
        block = pd.DataFrame([x for x, _ in events[250:260]] + [huge], dtype=object)
        ys = [y for _, y in events[250:260]] + [events[0][1]]
        with pytest.raises(InvalidInput):
            model.learn_many(block) if learner == "novelty" else model.learn_many(block, ys)
        assert pickle.dumps(model.state()) == before
    X = np.array([[1e200, 0.5], [0.1, 0.2]])
    with pytest.raises(InvalidInput, match="too large"):
        FeatureIndex().rows(X, grow=True)


def test_the_engine_dead_letters_only_the_huge_events_in_the_warm_up():
    """An iterable source's events are not decoded: the learner judges them. Before, a
    1e200 at event 30 set ``gamma="auto"`` to 0 and the next events were refused too."""
    from streamk.engine import Engine, EngineConfig
    from streamk.sources.iterable import IterableSource

    events = _events("perceptron", 400)
    bad = {30: (HUGE[0], True), 31: (HUGE[2], False), 300: (HUGE[1], True)}
    fed = [bad.get(i, event) for i, event in enumerate(events)]
    engine = Engine(
        IterableSource(fed, name="huge"),
        lambda: KernelPerceptron(budget=60),
        config=EngineConfig(max_records=50),
    )
    result = engine.run()
    assert result.learned == len(events) - len(bad)
    assert engine.metrics.get("events_dead_lettered") == len(bad)
    clean = KernelPerceptron(budget=60)
    for i, (x, y) in enumerate(events):
        if i not in bad:
            clean.learn_one(x, y)
    assert math.isfinite(engine.model.kernel_.gamma) and engine.model.kernel_.gamma > 0
    assert pickle.dumps(engine.model.state()) == pickle.dumps(clean.state())


@pytest.mark.parametrize("target", [1e200, -1e151, 10**400])
def test_the_svr_refuses_a_target_too_large_for_its_statistics(target):
    """Before: a target of 1e200 made the targets' running variance infinite, so
    ``epsilon`` and ``C`` (``"auto"``) were infinite and the offset 1.7e197 from then on:
    every later prediction was garbage. Oracle: the SVR fed the good events only."""
    from streamk.learners import svr

    events = _events("svr")
    ours, clean = OnlineSVR(budget=60), OnlineSVR(budget=60)
    for i, (x, y) in enumerate(events):
        if i in (5, 150):
            before = pickle.dumps(ours.state())
            with pytest.raises(InvalidInput, match="too large"):
                ours.learn_one(x, target)
            block = pd.DataFrame([x for x, _ in events[i : i + 4]])
            ys = pd.Series([y for _, y in events[i : i + 3]] + [target], dtype=object)
            for method in (ours.learn_many, ours.learn_predict_many):
                with pytest.raises(InvalidInput, match="too large"):
                    method(block, ys)
            assert pickle.dumps(ours.state()) == before
        ours.learn_one(x, y)
        clean.learn_one(x, y)
    assert pickle.dumps(ours.state()) == pickle.dumps(clean.state())
    assert math.isfinite(ours.epsilon_) and math.isfinite(ours.offset_)
    if ours._event is not None:  # the compiled per-event path declines what _target refuses
        from streamk.learners import _event

        assert _event.target_limit() == svr.TARGET_LIMIT
