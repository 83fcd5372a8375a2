"""The SVR's, the ranker's and novelty's ``gamma="auto"`` warm-up in one go (``_warm_runs``:
``fastpass.svr_runs`` / ``ranker_runs`` / ``novelty_runs`` over ``fastpass.untracked_runs``)
against the same runs one at a time.

The oracle is the run-by-run loop of ``learn_many`` (``_warm_runs`` declined), which plans,
reserves and peeks its draws again for each run, and ``learn_one`` event by event: the
warm-up path must leave the same model to the bit, coefficients, thresholds, running
statistics and policy state, and so the same predictions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from model_state import model_state

from streamk import RBF, Forgetron, RemoveOldest, RemoveRandom, accel
from streamk.learners import KernelNovelty, OnlineRanker, OnlineSVR
from streamk.learners.novelty import KernelNovelty as _Novelty
from streamk.learners.ranking import OnlineRanker as _Ranker
from streamk.learners.svr import OnlineSVR as _SVR

CLASSES = {"svr": _SVR, "ranker": _Ranker, "novelty": _Novelty}

needs_core = pytest.mark.skipif(accel.core is None, reason="needs the compiled core")

POLICIES = {
    "unbounded": lambda: None,
    "oldest-30": lambda: RemoveOldest(30),
    "oldest-300": lambda: RemoveOldest(300),
    "random-30": lambda: RemoveRandom(30, seed=5),  # fills within the warm-up
    "random-300": lambda: RemoveRandom(300, seed=5),
    "forgetron-30": lambda: Forgetron(30),
    "forgetron-300": lambda: Forgetron(300),
}

LEARNERS = {
    "svr": lambda budget: OnlineSVR(kernel=RBF(gamma="auto"), budget=budget),
    "ranker": lambda budget: OnlineRanker(
        kernel=RBF(gamma="auto"), ranks=(0, 1, 2, 3, 4), budget=budget
    ),
    "novelty": lambda budget: KernelNovelty(kernel=RBF(gamma="auto"), budget=budget),
}


def _stream(learner: str, n: int, width: int, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, width)) * rng.uniform(0.5, 3.0, size=width)
    y = np.sin(2 * X[:, 0]) + X[:, -1] * X[:, 0] + 0.3 * rng.standard_normal(n)
    if learner == "ranker":  # five ranks at the quintiles
        y = np.digitize(y, np.quantile(y, [0.2, 0.4, 0.6, 0.8]))
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(width)]), pd.Series(y)


def _state(model) -> dict:  # noqa: ANN001
    """Everything the model is, as bytes and plain values (exact comparison): the shared
    fields and the learner's own statistics."""
    if isinstance(model, _SVR):
        own = (model._y_n, model._y_mean, model._y_m2, model.n_updates)
    elif isinstance(model, _Ranker):
        own = (np.asarray(model._b).tobytes(), model.n_mistakes)
    else:  # the centre's statistics (r stale through a warm-up: the kernel moves)
        own = (model._r is None, model._cc, model._r_updates)
    return {**model_state(model), "own": own}


def _learn_many(model, X: pd.DataFrame, y: pd.Series, size: int) -> None:  # noqa: ANN001
    for i in range(0, len(y), size):
        if isinstance(model, _Novelty):
            model.learn_many(X.iloc[i : i + size])
        else:
            model.learn_many(X.iloc[i : i + size], y.iloc[i : i + size])


def _learn_one(model, x: dict, t: float) -> None:  # noqa: ANN001
    if isinstance(model, _Novelty):
        model.learn_one(x)
    else:
        model.learn_one(x, t)


@needs_core
@pytest.mark.parametrize("learner", sorted(LEARNERS))
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("size", [500, 61, 3])
def test_warm_runs_leave_the_model_of_the_run_by_run_loop(
    learner: str, policy: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = CLASSES[learner]
    warm = cls._warm_runs
    taken = []

    def spy(self, *args):  # noqa: ANN001, ANN002, ANN202
        end = warm(self, *args)
        taken.append(end)
        return end

    for seed in range(4):
        X, y = _stream(learner, 420, 1 + seed % 4, seed)
        fast = LEARNERS[learner](POLICIES[policy]())
        monkeypatch.setattr(cls, "_warm_runs", spy)
        _learn_many(fast, X, y, size)
        slow = LEARNERS[learner](POLICIES[policy]())
        monkeypatch.setattr(cls, "_warm_runs", lambda self, *args: 0)
        _learn_many(slow, X, y, size)
        assert _state(fast) == _state(slow)
        probe = X.iloc[:50].to_dict("records")
        say = "score_one" if learner == "novelty" else "predict_one"
        assert [getattr(fast, say)(x) for x in probe] == [getattr(slow, say)(x) for x in probe]
    assert sum(taken) > 0  # the warm-up path ran


@needs_core
@pytest.mark.parametrize("learner", sorted(LEARNERS))
@pytest.mark.parametrize("policy", ["unbounded", "oldest-30", "random-30", "forgetron-30"])
def test_warm_runs_are_learn_one(learner: str, policy: str) -> None:
    X, y = _stream(learner, 300, 3, 11)
    many = LEARNERS[learner](POLICIES[policy]())
    _learn_many(many, X, y, 250)
    one = LEARNERS[learner](POLICIES[policy]())
    for x, t in zip(X.to_dict("records"), y.tolist()):
        _learn_one(one, x, t)
    assert _state(many) == _state(one)  # the coefficients and the policy's state too


@needs_core
def test_warm_runs_decline_before_changing_anything() -> None:
    """A policy no untracked pass takes (here Merge's, which needs the per-event core): the
    warm-up path returns 0 with the model untouched, and the runs go one at a time."""
    from streamk import Merge

    X, y = _stream("svr", 120, 2, 3)
    model = OnlineSVR(kernel=RBF(gamma="auto"), budget=Merge(20))
    rows = model._block(X, grow=True)
    before = (model._scale.n, model.support_.n, model.n_learned)
    assert model._warm_runs(rows, y.tolist()) == 0
    assert (model._scale.n, model.support_.n, model.n_learned) == before
