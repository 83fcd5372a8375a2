"""The perceptron's ``gamma="auto"`` warm-up in one call (``KernelPerceptron._warm_runs``,
``streamk._core.perceptron_warm_pass``) against the same runs one at a time.

The oracle is today's run-by-run loop of ``learn_many`` (``_warm_runs`` declined): the
warm-up path must leave the same model to the bit, coefficients, policy state and all,
and so the same predictions. ``tests/test_learn_many_warmup.py`` compares both with
``learn_one``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from model_state import model_state

from streamk import RBF, Forgetron, KernelPerceptron, RemoveOldest, RemoveRandom, accel
from streamk.learners import fastpass
from streamk.learners.budgeted import MarginPerceptron
from streamk.learners.perceptron import KernelPerceptron as _KP

needs_core = pytest.mark.skipif(accel.core is None, reason="needs the compiled core")

POLICIES = {
    "unbounded": lambda: None,
    "oldest-30": lambda: RemoveOldest(30),
    "oldest-200": lambda: RemoveOldest(200),
    "random-30": lambda: RemoveRandom(30, seed=5),  # fills in the warm-up: stops early
    "random-200": lambda: RemoveRandom(200, seed=5),
    "forgetron-30": lambda: Forgetron(30),
    "forgetron-200": lambda: Forgetron(200),
}


def _stream(
    n: int, width: int, seed: int, classes: int = 2, native: bool = False
) -> tuple[pd.DataFrame, pd.Series]:
    """``native``: labels in a bool (two classes) or int64 (three) Series, which
    ``learn_many`` compares as whole columns; else an object Series (bools or strings)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, width)) * rng.uniform(0.5, 3.0, size=width)
    score = np.sin(2 * X[:, 0]) + X[:, -1] * X[:, 0] + 0.3 * rng.standard_normal(n)
    if classes == 2:
        y = (score > 0).tolist()
    else:  # a third class appears a few rows in, as a one-vs-rest model's columns grow
        codes = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).tolist()
        y = codes if native else [f"c{c}" for c in codes]
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(width)])
    return frame, pd.Series(y, dtype=None if native else object)


def _learn(model: KernelPerceptron, X: pd.DataFrame, y: pd.Series, size: int) -> None:
    for i in range(0, len(y), size):
        model.learn_many(X.iloc[i : i + size], y.iloc[i : i + size])


def _state(model: KernelPerceptron) -> dict:
    """Everything the model is, as bytes and plain values (exact comparison)."""
    return {**model_state(model), "n_mistakes": model.n_mistakes}


LEARNERS = {
    "perceptron": lambda budget: KernelPerceptron(kernel=RBF(gamma="auto"), budget=budget),
    "margin": lambda budget: MarginPerceptron(kernel=RBF(gamma="auto"), budget=budget),
}


@needs_core
@pytest.mark.parametrize("learner", ["perceptron", "margin"])
@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("size", [500, 61, 3])
@pytest.mark.parametrize("native", [False, True], ids=["object-labels", "native-labels"])
def test_warm_runs_leave_the_model_of_the_run_by_run_loop(
    policy: str,
    size: int,
    classes: int,
    learner: str,
    native: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = []
    warm = _KP._warm_runs

    def spy(self, rows, labels, start, pre, *values):
        end, again = warm(self, rows, labels, start, pre, *values)
        taken.append(end - start)
        return end, again

    for seed in range(12 if classes == 2 and learner == "perceptron" else 4):
        X, y = _stream(420, 1 + seed % 4, seed, classes, native)
        fast = LEARNERS[learner](POLICIES[policy]())
        monkeypatch.setattr(_KP, "_warm_runs", spy)
        _learn(fast, X, y, size)
        slow = LEARNERS[learner](POLICIES[policy]())
        monkeypatch.setattr(_KP, "_warm_runs", lambda self, rows, labels, i, *_: (i, False))
        _learn(slow, X, y, size)
        assert _state(fast) == _state(slow)
        probe = X.iloc[:50].to_dict("records")
        assert [fast.predict_one(x) for x in probe] == [slow.predict_one(x) for x in probe]
    assert sum(taken) > 0  # the warm-up path ran


def _buffers(n_rows: int, width: int, cap: int, outputs: int, seed: int):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(n_rows, width))
    if outputs == 1:
        T = np.where(rng.random((n_rows, 1)) < 0.5, -1.0, 1.0)
    else:  # one-vs-rest targets
        T = np.where(np.eye(outputs)[rng.integers(outputs, size=n_rows)] > 0, 1.0, -1.0)
    support = (
        np.zeros((cap, width)),
        np.zeros(cap),
        np.zeros((cap, outputs)),
        np.zeros(cap),
        np.zeros(cap, dtype=np.int64),
    )
    return Q, accel.sqnorms(Q), T, support


@needs_core
@pytest.mark.parametrize("outputs", [1, 3])
@pytest.mark.parametrize("pcode", ["RemoveOldest", "Forgetron", "Unbounded"])
def test_warm_pass_is_the_hint_pass_run_after_run(pcode: str, outputs: int) -> None:
    """Runs of many lengths sharing one set of buffers, and a stop: the last gamma is so
    large that the pass declines that run."""
    Q, q_sq, T, support = _buffers(90, 3, 90, outputs, seed=3)
    budget = 0 if pcode == "Unbounded" else 20
    bounds = [0, 1, 2, 5, 13, 40, 70, 90]
    gammas = [0.9, 0.7, 0.5, 0.45, 0.4, 0.41, 1e12]
    code = accel.core.POLICY_CODES[pcode]
    one = [b.copy() for b in support]
    codes_one = np.full(90, -7, dtype=np.int64)
    n, next_id, mistakes, fresh, runs, sq_max = 0, 0, 0, 0, 0, 0.0
    pstate_one = np.array([0.0, 0.0, 0.0])
    for r, gamma in enumerate(gammas):
        a, b = bounds[r], bounds[r + 1]
        done = accel.core.perceptron_hint_pass(
            Q[a:b], q_sq[a:b], *one, T[a:b], n, budget, next_id, gamma,
            codes_one[a:b], fastpass.HINT_LIMIT, 0.0, code, None, pstate_one,
        )  # fmt: skip
        if done is None:
            break
        n, next_id, m, sq, f = done
        mistakes, fresh, runs = mistakes + m, fresh + f, runs + 1
        sq_max = max(sq_max, sq) if m else sq_max
    assert 0 < runs < len(gammas)
    many = [b.copy() for b in support]
    codes_many = np.full(90, -7, dtype=np.int64)
    pstate_many = np.array([0.0, 0.0, 0.0])
    got = accel.core.perceptron_warm_pass(
        Q, q_sq, *many, T, 0, budget, 0, np.array(gammas), np.array(bounds),
        codes_many, fastpass.HINT_LIMIT, 0.0, code, None, pstate_many,
    )  # fmt: skip
    assert got == (runs, n, next_id, mistakes, sq_max, fresh)
    assert sq_max > 0.0
    assert all(x.tobytes() == y.tobytes() for x, y in zip(one, many))
    assert codes_one.tolist() == codes_many.tolist()
    assert pstate_one[1:].tolist() == pstate_many[1:].tolist()


@needs_core
@pytest.mark.parametrize("policy", ["oldest-30", "random-200", "forgetron-30"])
def test_warm_runs_with_features_that_appear_later(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks narrower than the estimate at first: the general fold, then the compiled one."""
    X, y = _stream(300, 4, seed=11)

    def learn(model: KernelPerceptron) -> KernelPerceptron:
        for i in range(0, len(y), 23):
            cols = list(X.columns[:2]) if i < 60 else list(X.columns)
            model.learn_many(X.iloc[i : i + 23][cols], y.iloc[i : i + 23])
        return model

    fast = learn(KernelPerceptron(kernel=RBF(gamma="auto"), budget=POLICIES[policy]()))
    monkeypatch.setattr(_KP, "_warm_runs", lambda self, rows, labels, i, *_: (i, False))
    slow = learn(KernelPerceptron(kernel=RBF(gamma="auto"), budget=POLICIES[policy]()))
    assert _state(fast) == _state(slow)


@needs_core
def test_warm_pass_refuses_before_any_run() -> None:
    """Targets too short for the last run, or buffers without room: nothing is learned."""
    Q, q_sq, T, support = _buffers(30, 2, 30, 1, seed=2)
    bounds, gammas = np.array([0, 1, 2, 30]), np.array([0.5, 0.5, 0.5])
    for T_, cap in ((T[:29], 30), (T, 29)):
        bufs = [b[:cap].copy() for b in support]
        with pytest.raises(ValueError):
            accel.core.perceptron_warm_pass(
                Q, q_sq, *bufs, T_, 0, 0, 0, gammas, bounds, np.zeros(30, dtype=np.int64),
                fastpass.HINT_LIMIT,
            )  # fmt: skip
        assert all(not b.any() for b in bufs)


@pytest.mark.parametrize("learner", ["perceptron", "margin"])
@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("policy", ["unbounded", "oldest-30", "forgetron-30"])
def test_a_new_class_into_an_empty_set_is_learn_one(
    policy: str, classes: int, learner: str
) -> None:
    """``learn_many``'s first rows, one-row blocks (``_learn_first`` where the set is empty
    and the class new) against ``learn_one``: the same model to the bit."""
    for seed in range(6):
        X, y = _stream(12, 2, seed, classes)
        many = LEARNERS[learner](POLICIES[policy]())
        one = LEARNERS[learner](POLICIES[policy]())
        for i, x in enumerate(X.to_dict("records")):
            many.learn_many(X.iloc[i : i + 1], y.iloc[i : i + 1])
            one.learn_one(x, y.iloc[i])
            assert _state(many) == _state(one)
            assert many.classes_ == one.classes_
