"""The hint pass's bound as the pass keeps it (``perceptron_hint_pass``, ``_core.pyx``).

``learn_many`` decides a row from its float32 hint ``H`` only where ``|H - f| <= E_r``
makes the decision certain, with ``E_r`` kept up to date through every change the pass
makes to the set: a row joining, a vector leaving, the Forgetron's shrink, Merge's merge,
and the hints computed a group of rows at a time against the set as it is then. A bound
kept too small rarely changes a model on random data (few rows fall within it of a
decision), so these tests hold every row's hints and bound, as the pass traced them
(``trace``), to the exact decision values of the set at that row: a twin model learning the
same rows with ``learn_one`` (the same model, to the bit) gives the set, and ``math.fsum``
of kernel values from the differences gives ``f``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from streamk import (
    RBF,
    Forgetron,
    KernelPerceptron,
    MarginPerceptron,
    Merge,
    OnlineRanker,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    accel,
)
from streamk.learners import ranking

pytestmark = pytest.mark.skipif(accel.core is None, reason="needs the compiled core")

POLICIES = {
    "none": lambda: None,
    "oldest": lambda: RemoveOldest(70),
    "random": lambda: RemoveRandom(70, seed=3),
    "smallest": lambda: RemoveSmallest(70),
    "forgetron": lambda: Forgetron(70),
    "merge": lambda: Merge(70),
}

LEARNERS = {
    "perceptron": lambda b, g: KernelPerceptron(kernel=RBF(gamma=g), budget=b),
    "margin": lambda b, g: MarginPerceptron(kernel=RBF(gamma=g), budget=b),
    "ranker": lambda b, g: OnlineRanker(kernel=RBF(gamma=g), ranks=(0, 1, 2), budget=b),
}


def _stream(n: int, width: int, classes: int, seed: int) -> tuple[list[dict], list]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, width)) * rng.uniform(0.5, 2.0, size=width)
    score = np.sin(2 * X[:, 0]) + X[:, -1] * X[:, 0] + 0.3 * rng.standard_normal(n)
    cuts = np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1])
    y = np.digitize(score, cuts)
    rows = [{f"f{k}": float(v) for k, v in enumerate(r)} for r in X]
    return rows, [int(t) for t in y]


def _exact_f(support, x: np.ndarray, gamma: float) -> np.ndarray:
    """f_c(x) for every column c of the set's coefficients: kernel values from the
    differences, summed with fsum."""
    S, coef = support.X, support.coef
    if S.shape[0] == 0:
        return np.zeros(coef.shape[1])
    w = S.shape[1]
    q = np.zeros(w)
    q[: min(w, x.shape[0])] = x[:w]
    k = np.exp(-gamma * ((S - q) ** 2).sum(axis=1))
    return np.array([math.fsum(k * coef[:, c]) for c in range(coef.shape[1])])


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("learner", sorted(LEARNERS))
@pytest.mark.parametrize(("width", "classes"), [(3, 2), (20, 3)])
def test_every_rows_hints_are_within_the_bound_the_pass_kept(
    learner: str, policy: str, width: int, classes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if learner == "ranker" and policy == "merge":
        pytest.skip("the ranker's learn_many takes Merge through the per-event core")
    gamma = 0.6 / width
    rows, labels = _stream(900, width, classes, width + classes)
    traces: list[tuple[np.ndarray, np.ndarray]] = []
    original = accel.core.perceptron_hint_pass

    def traced(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        Q, T = args[0], args[7]
        trace = np.full((Q.shape[0], T.shape[1] + 1), np.nan)
        out = original(*args, trace=trace, **kwargs)
        traces.append((np.array(Q), trace))
        return out

    monkeypatch.setattr(accel.core, "perceptron_hint_pass", traced)
    monkeypatch.setattr(ranking, "HINTS_FROM", 0)  # the ranker's blocks all take the hints
    many = LEARNERS[learner](POLICIES[policy](), gamma)
    twin = LEARNERS[learner](POLICIES[policy](), gamma)
    for label in sorted(set(labels)):  # every label known before the blocks
        first = rows[labels.index(label)]
        many.learn_one(first, label)
        twin.learn_one(first, label)
    frame = pd.DataFrame(rows)
    for i in range(0, len(rows), 300):
        many.learn_many(frame.iloc[i : i + 300], pd.Series(labels[i : i + 300], dtype=object))
    where = {tuple(np.asarray(list(x.values()))): i for i, x in enumerate(rows)}
    decided: dict[int, np.ndarray] = {}
    for Q, trace in traces:
        for q, t in zip(Q, trace):
            if not np.isnan(t[-1]):  # (a pass that declined traced no row)
                decided[where[tuple(q)]] = t
    assert len(decided) >= 400  # most rows went through the hint pass
    worst = 0.0
    for i, (x, label) in enumerate(zip(rows, labels)):
        if i in decided:
            f = _exact_f(twin.support_, np.asarray(list(x.values())), gamma)
            hints, bound = decided[i][:-1], decided[i][-1]
            assert hints.shape == f.shape
            assert np.all(np.abs(hints - f) <= bound), (i, hints - f, bound)
            worst = max(worst, float(np.max(np.abs(hints - f)) / bound))
        twin.learn_one(x, label)
    assert worst > 0.0  # the hints are float32: not exact
    assert twin.support_.n == many.support_.n
    assert twin.support_.coef.tobytes() == many.support_.coef.tobytes()
    assert repr(twin._policy.state()) == repr(many._policy.state())


def test_the_user_guide_states_the_hint_group() -> None:
    """docs/user-guide.md says how many rows' hints the pass computes at once: the number
    the core's ``HINT_ROWS`` holds (fails when either moves alone)."""
    import re
    from pathlib import Path

    text = " ".join((Path(__file__).parents[1] / "docs" / "user-guide.md").read_text().split())
    found = re.search(r"The hints are computed (\d+) rows at a time", text)
    assert found is not None
    assert int(found.group(1)) == accel.core.HINT_GROUP
    assert re.search(rf"changes the hints of at most {found.group(1)} rows", text)
