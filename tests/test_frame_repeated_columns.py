"""A DataFrame whose column names repeat is refused, not read as one of its columns
(session 26).

``learn_many`` on a frame with two columns named ``a`` kept the second and dropped the
first in silence (``support_.X`` held one feature), and behind on-line standardisation
(``StandardScaledClassifier``) each row became a dict, where pandas keeps one of the two
with only a ``UserWarning``. Now every block method refuses such a frame with
``InvalidInput`` naming the columns, before anything is learned. Oracle: the same model
never given the frame.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamk import KernelAdatron, KernelNovelty, KernelPerceptron, MarginPerceptron, OnlineSVR
from streamk.errors import InvalidInput
from streamk.learners.scaling import StandardScaledClassifier, StandardScaledRegressor

LEARNERS = {
    "perceptron": (lambda: KernelPerceptron(budget=30), "clf"),
    "margin": (lambda: MarginPerceptron(budget=30), "clf"),
    "adatron": (lambda: KernelAdatron(C=1.0, budget=30), "clf"),
    "adatron-resweep": (lambda: KernelAdatron(C=1.0, resweeps=1, budget=30), "clf"),
    "svr": (lambda: OnlineSVR(budget=30), "reg"),
    "novelty": (lambda: KernelNovelty(budget=60), "none"),
    "scaled-clf": (lambda: StandardScaledClassifier(KernelPerceptron(budget=30)), "clf"),
    "scaled-reg": (lambda: StandardScaledRegressor(OnlineSVR(budget=30)), "reg"),
}


def _frame(n: int, seed: int, columns: list[str]) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(columns)))
    return pd.DataFrame(X, columns=columns), pd.Series(X[:, 0] * X[:, 1])


def _target(task: str, y: pd.Series) -> pd.Series | None:
    return None if task == "none" else (y > 0) if task == "clf" else y


def _learn(model, task: str, X: pd.DataFrame, y: pd.Series) -> None:
    if task == "none":
        model.learn_many(X)
    else:
        model.learn_many(X, _target(task, y))


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_a_frame_with_repeated_columns_is_refused_and_changes_nothing(name):
    make, task = LEARNERS[name]
    model, oracle = make(), make()
    good, y = _frame(120, 1, ["a", "b", "c"])
    bad, y_bad = _frame(40, 2, ["a", "b", "a"])
    for m in (model, oracle):
        _learn(m, task, good[:60], y[:60])
    calls = [lambda: _learn(model, task, bad, y_bad), lambda: model.predict_many(bad)]
    if task != "none":
        calls.append(lambda: model.learn_predict_many(bad, _target(task, y_bad)))
    for call in calls:
        with pytest.raises(InvalidInput, match=r"repeated column names \['a'\]"):
            call()
    for m in (model, oracle):
        _learn(m, task, good[60:], y[60:])
    probe, _ = _frame(50, 3, ["a", "b", "c"])
    assert model.predict_many(probe).tolist() == oracle.predict_many(probe).tolist()
