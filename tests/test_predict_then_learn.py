"""``learn_one`` right after ``predict_one`` of the same event takes the kernel row (or the
float32 hints) the prediction computed (``EventPass._keep_pre`` in
``streamk/learners/_event.pyx``): test-then-train, as river's ``progressive_val_score``
runs it, computes each event's row once.

It may do so only for the same row, to the bit, and only while nothing has changed the
model since. Each scenario below runs the same calls on a learner with the compiled path
and on one without it (the NumPy path, the oracle): the same answers and the same model
after, and the pass's counters say whether the learn took the prediction's row: not
after the dict changed in place, for another event, after a second prediction or a
``learn_many``, nor a second time; but after an equal dict, or a copy of the model that
learned in between.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_event_hints import hints
from test_eventpass import (
    _ask,
    _learn,
    assert_merge_same,
    assert_same_model,
    assert_same_support,
    assert_same_value_model,
    stream,
    value_stream,
)

from streamk import (
    RBF,
    Forgetron,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    MarginPerceptron,
    Merge,
    OnlineRanker,
    OnlineSVR,
    RemoveOldest,
)
from streamk.learners import eventpass

pytestmark = pytest.mark.skipif(
    not eventpass.available(), reason="the compiled per-event path is not built here"
)

LEARNERS: dict[str, tuple[Callable[[Any], Any], tuple | None]] = {
    "perceptron": (lambda b: KernelPerceptron(kernel=RBF(0.3), budget=b), (False, True)),
    "margin, three classes": (
        lambda b: MarginPerceptron(kernel=RBF(0.3), budget=b, margin=0.5),
        ("a", "b", "c"),
    ),
    "ranker": (lambda b: OnlineRanker(kernel=RBF(0.3), ranks=(0, 1, 2, 3), budget=b), (0, 1, 2, 3)),
    "adatron": (lambda b: KernelAdatron(kernel=RBF(0.3), budget=b, resweeps=0), (False, True)),
    "svr": (lambda b: OnlineSVR(kernel=RBF(0.3), budget=b), None),
    "novelty": (lambda b: KernelNovelty(kernel=RBF(0.3), budget=b), None),
}
POLICIES = {
    "oldest": lambda: RemoveOldest(30),
    "forgetron": lambda: Forgetron(30),  # its leaving column then comes in a pass of its own
    "merge": lambda: Merge(30),  # its search takes the dots the prediction left
}


def _reused(model: Any) -> int:
    return model._event.rows_reused + model._event.hints_reused


def _block(events: list[tuple[dict, Any]]) -> tuple[pd.DataFrame, Any]:
    X = pd.DataFrame([x for x, _ in events])
    return X, pd.Series([y for _, y in events], dtype=object)


# Each scenario: calls on one model (x, y: an event; x2, y2: another; more: a few others);
# what it returned; and how many of its learns may take a prediction's row.
def same(m, x, y, x2, y2, more):
    return [_ask(m, x), _learn(m, x, y)], 1


def equal_dict(m, x, y, x2, y2, more):  # another dict with the same values: the same row
    return [_ask(m, x), _learn(m, dict(x), y)], 1


def changed_in_place(m, x, y, x2, y2, more):
    said = _ask(m, x)
    x["x0"] += 0.25
    return [said, _learn(m, x, y)], 0


def another_event(m, x, y, x2, y2, more):
    return [_ask(m, x), _learn(m, x2, y2)], 0


def two_predictions(m, x, y, x2, y2, more):  # the second replaces the first
    return [_ask(m, x), _ask(m, x2), _learn(m, x, y), _learn(m, x2, y2)], 0


def learned_twice(m, x, y, x2, y2, more):  # one prediction serves one learn
    return [_ask(m, x), _learn(m, x, y), _learn(m, x, y)], 1


def learn_many_between(m, x, y, x2, y2, more):
    said = _ask(m, x)
    X, Y = _block(more)
    if isinstance(m, KernelNovelty):
        m.learn_many(X)
    else:
        m.learn_many(X, Y.astype(float) if isinstance(m, OnlineSVR) else Y)
    return [said, _learn(m, x, y)], 0


def other_model_between(m, x, y, x2, y2, more):
    """A copy learns the other event in between: the original's prediction still
    serves (its set did not change), the copy's own pass none."""
    said = _ask(m, x)
    twin = copy.deepcopy(m)
    _learn(twin, x2, y2)
    return [said, _learn(m, x, y), _learn(twin, x, y)], 1


SCENARIOS = [
    same,
    equal_dict,
    changed_in_place,
    another_event,
    two_predictions,
    learned_twice,
    learn_many_between,
    other_model_between,
]


def _answers_equal(a: list, b: list) -> None:
    assert len(a) == len(b)
    for u, v in zip(a, b):
        if isinstance(u, float) and isinstance(v, float):
            np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-9)
        else:
            assert u == v


def _assert_models(fast: Any, slow: Any, policy: str) -> None:
    """The same model: to the bit, but to rounding where the NumPy path sums in another
    order (the Forgetron's shrink, Merge's new rows, the adatron's step), as in
    ``tests/test_eventpass.py``."""
    exact = policy != "forgetron" and not isinstance(fast, KernelAdatron)
    if policy == "merge":
        assert_merge_same(fast, slow)
    elif isinstance(fast, KernelAdatron):  # (test_adatron_agrees_with_numpy_...'s checks)
        assert_same_support(fast, slow, exact=False)
        assert fast.n_updates == slow.n_updates and fast.classes_ == slow.classes_
        ids = fast.support_.ids
        np.testing.assert_array_equal(fast._cls.align(ids), slow._cls.align(ids))
        for x, _ in stream(40, 4, 99):
            np.testing.assert_allclose(
                fast.decision_function_one(x), slow.decision_function_one(x), rtol=1e-9, atol=1e-9
            )
    elif isinstance(fast, (OnlineSVR, KernelNovelty)):
        assert_same_value_model(fast, slow, exact=exact)
    else:
        assert_same_model(fast, slow, exact=exact)


def _run_scenario(scenario, fast: Any, slow: Any, events: list) -> tuple[int, int]:
    """Test-then-train on the first 120 events (a full set, turned over), then
    ``scenario`` on both models (``slow`` switched to the NumPy path here): the same
    answers. Returns the learns the scenario lets take a prediction's row, and how many
    did on ``fast``."""
    slow._event = None  # the NumPy path only
    for m in (fast, slow):
        for x, y in events[:120]:
            _ask(m, x)
            _learn(m, x, y)
    before = _reused(fast)
    runs = []
    for m in (fast, slow):
        (x, y), (x2, y2) = events[120], events[121]
        runs.append(scenario(m, dict(x), y, dict(x2), y2, events[122:140]))
    (said_fast, expected), (said_slow, _) = runs
    _answers_equal(said_fast, said_slow)
    return expected, _reused(fast) - before


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_a_learn_takes_the_predictions_row_only_when_it_is_still_right(learner, policy, scenario):
    """Every learner on the per-event path, under a removal, the Forgetron (whose leaving
    column a reused row lacks) and Merge (whose search takes the prediction's dots)."""
    make, classes = LEARNERS[learner]
    events = stream(160, 4, 3, classes) if classes else value_stream(160, 4, 3)
    fast, slow = make(POLICIES[policy]()), make(POLICIES[policy]())
    expected, reused = _run_scenario(scenario, fast, slow, events)
    _assert_models(fast, slow, policy)
    assert fast.support_.n == 30  # the scenario ran on a full set
    assert reused == expected


HINTED = {
    "perceptron": lambda b: KernelPerceptron(kernel=RBF(0.025), budget=b),
    "margin, three classes": lambda b: MarginPerceptron(kernel=RBF(0.025), budget=b),
    "ranker": lambda b: OnlineRanker(kernel=RBF(0.025), ranks=(0, 1, 2, 3), budget=b),
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", ["oldest", "forgetron"])
@pytest.mark.parametrize("learner", sorted(HINTED))
def test_a_learn_takes_the_predictions_hints_only_when_they_are_still_right(
    learner, policy, scenario
):
    """The same scenarios where the float32 hints decide most predictions (20 features, a
    wide kernel, the hints' gate lowered to the set's 30 vectors): a learn then takes the
    hints and their bound, not a float64 row (the Forgetron's shrink then computes the
    one kernel value it reads from the event's row)."""
    events = stream(160, 20, 4, LEARNERS[learner][1])
    fast, slow = HINTED[learner](POLICIES[policy]()), HINTED[learner](POLICIES[policy]())
    with hints(True, min_width=1, min_set=1):
        expected, reused = _run_scenario(scenario, fast, slow, events)
    assert fast._event.hints_reused > 40  # the hints decided, and the learns took them
    assert_same_model(fast, slow, exact=policy != "forgetron")
    assert reused == expected


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("learner", ["perceptron", "margin, three classes", "adatron"])
def test_probabilities_then_learn_take_one_row(learner, policy):
    """``predict_proba_one`` (river's ``progressive_val_score`` asks it for ROC AUC or log
    loss) and ``decision_function_one`` run compiled too and leave their row for the learn
    that follows: the same probabilities and margins as the NumPy path (to rounding: the
    compiled margins sum in another order, ``math.tanh`` / ``exp`` stand for NumPy's), the
    same model after, and one row an event."""
    make, classes = LEARNERS[learner]
    events = stream(200, 4, 8, classes)
    fast, slow = make(POLICIES[policy]()), make(POLICIES[policy]())
    slow._event = None
    for i, (x, y) in enumerate(events):
        if i % 2:
            np.testing.assert_allclose(
                fast.decision_function_one(x), slow.decision_function_one(x), rtol=1e-9, atol=1e-12
            )
        else:
            p_fast, p_slow = fast.predict_proba_one(x), slow.predict_proba_one(x)
            assert p_fast.keys() == p_slow.keys()
            np.testing.assert_allclose(list(p_fast.values()), list(p_slow.values()), rtol=1e-9)
        fast.learn_one(x, y)
        slow.learn_one(x, y)
    _assert_models(fast, slow, policy)
    assert fast._event.rows_reused > len(events) - 2 * len(classes) - 5  # (a new class: none)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_the_rankers_score_then_learn_take_one_row(policy):
    """The ranker's ``score_one`` runs compiled and leaves its row for the learn: the
    same scores (to rounding) and model as the NumPy path."""
    make, ranks = LEARNERS["ranker"]
    events = stream(200, 4, 9, ranks)
    fast, slow = make(POLICIES[policy]()), make(POLICIES[policy]())
    slow._event = None
    for x, y in events:
        np.testing.assert_allclose(fast.score_one(x), slow.score_one(x), rtol=1e-9, atol=1e-12)
        fast.learn_one(x, y)
        slow.learn_one(x, y)
    _assert_models(fast, slow, policy)
    assert fast._event.rows_reused > len(events) - 5
