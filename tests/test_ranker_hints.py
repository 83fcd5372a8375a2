"""The ranker in the float32 hint pass (``fastpass.perceptron_run`` with ``ranks`` and
``thresholds``: ``streamk._core._hint_pass``'s ranker mode) against its untracked pass
(``fastpass.ranker_rows``, each row's float64 kernel row; itself held to ``learn_one`` on
the NumPy path by ``tests/test_grid_paths.py``).

A rank the hint makes certain needs no float64 row; every other row is decided afresh as
the per-event path decides it. The two passes must leave the same set, coefficients and
thresholds to the bit, row after row, whatever the policy, the width and the share of rows
decided afresh.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from streamk import RBF, Forgetron, OnlineRanker, RemoveOldest, RemoveRandom, accel
from streamk.learners import fastpass

needs_core = pytest.mark.skipif(accel.core is None, reason="needs the compiled core")

POLICIES = {
    "unbounded": lambda: None,
    "oldest": lambda: RemoveOldest(60),
    "random": lambda: RemoveRandom(60, seed=4),
    "forgetron": lambda: Forgetron(60),
}


def _rows(n: int, width: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, width)) * rng.uniform(0.5, 2.0, size=width)
    score = np.sin(X[:, 0]) + X[:, -1] * X[:, 0] + 0.3 * rng.standard_normal(n)
    ranks = np.digitize(score, np.quantile(score, [0.2, 0.4, 0.6, 0.8])).astype(np.int64)
    return X, ranks


def _model(policy: str, gamma: float) -> OnlineRanker:
    return OnlineRanker(kernel=RBF(gamma=gamma), ranks=(0, 1, 2, 3, 4), budget=POLICIES[policy]())


def _state(model: OnlineRanker) -> tuple:
    s = model.support_
    return (
        s.n,
        s.next_id,
        s._ids[: s.n].tolist(),
        s._X[: s.n].tobytes(),
        s._coef[: s.n].tobytes(),
        np.asarray(model._b).tobytes(),
        repr(model._policy.state()),
    )


def _hinted(model: OnlineRanker, Q: np.ndarray, ranks: np.ndarray) -> tuple[int, int] | None:
    model._b = np.ascontiguousarray(model._b, dtype=np.float64)
    T, codes = np.zeros((Q.shape[0], 1)), np.empty(Q.shape[0], dtype=np.int64)
    return fastpass.perceptron_run(
        model.support_, model._policy, Q, T, codes, 0.0, ranks=ranks, thresholds=model._b
    )


def _rows_pass(model: OnlineRanker, Q: np.ndarray, ranks: np.ndarray) -> int:
    model._b = np.ascontiguousarray(model._b, dtype=np.float64)
    q_sq = accel.sqnorms(Q)
    how = fastpass.rows_plan(model.support_, model._policy, q_sq)
    assert how is not None
    return fastpass.ranker_rows(model.support_, Q, q_sq, ranks, model._b, how)


@needs_core
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("width", [2, 9, 50])
@pytest.mark.parametrize("gamma", [0.05, 3.0])
def test_hint_pass_is_the_untracked_pass_to_the_bit(policy: str, width: int, gamma: float) -> None:
    """Blocks of 130 rows, one model each way; ``gamma = 3`` leaves most kernel values near
    0, so f sits on the thresholds it starts from (0) and many rows are decided afresh."""
    X, ranks = _rows(650, width, 7 + width)
    hinted, plain = _model(policy, gamma / width), _model(policy, gamma / width)
    fresh = mistakes = 0
    for a in range(0, 650, 130):
        Q = np.ascontiguousarray(X[a : a + 130])
        done = _hinted(hinted, Q, ranks[a : a + 130])
        assert done is not None
        mistakes += done[0]
        fresh += done[1]
        assert done[0] == _rows_pass(plain, Q, ranks[a : a + 130])
        assert _state(hinted) == _state(plain)
    assert mistakes > 100  # the thresholds moved and the set turned over
    if policy != "unbounded":
        assert hinted.support_.n == 60
    assert fresh < 650  # most ranks came from the hints


@needs_core
def test_rows_on_the_thresholds_are_decided_afresh() -> None:
    """With a narrow kernel (most kernel values between rows far below 1e-6), f is within the
    hints' bound of the thresholds' starting value 0: the hint cannot tell which side, so
    the row is decided afresh, and the result is still the plain pass's."""
    X, ranks = _rows(200, 3, 3)
    X *= 0.5  # (norms small enough for the hints' bound at this width)
    hinted, plain = _model("oldest", 20.0), _model("oldest", 20.0)
    done = _hinted(hinted, np.ascontiguousarray(X), ranks)
    assert done is not None and done[1] >= 10
    _rows_pass(plain, np.ascontiguousarray(X), ranks)
    assert _state(hinted) == _state(plain)


@needs_core
@pytest.mark.parametrize("policy", ["random", "unbounded"])
def test_learn_many_takes_the_hint_pass_and_matches_learn_one(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From ``HINTS_FROM`` vectors on (here lowered to 50, so the set of 60 takes it)."""
    import pandas as pd

    from streamk.learners import ranking

    monkeypatch.setattr(ranking, "HINTS_FROM", 50)
    X, ranks = _rows(900, 6, 21)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(6)])
    many, one = _model(policy, 0.2), _model(policy, 0.2)
    fastpass.COUNTS.clear()
    for a in range(0, 900, 150):
        many.learn_many(frame.iloc[a : a + 150], pd.Series(ranks[a : a + 150].tolist()))
    assert 0 < fastpass.COUNTS["hints"] < 900  # not the first blocks: a set below 50
    for x, r in zip(frame.to_dict("records"), ranks.tolist()):
        one.learn_one(x, r)
    assert _state(many) == _state(one)
    assert many.n_mistakes == one.n_mistakes


@needs_core
def test_the_pass_refuses_bad_ranks_before_changing_anything() -> None:
    X, ranks = _rows(50, 3, 1)
    model = _model("oldest", 0.3)
    before = copy.deepcopy(_state(model))
    bad = ranks.copy()
    bad[10] = 5  # one past the four thresholds
    with pytest.raises(ValueError, match="rank index"):
        _hinted(model, np.ascontiguousarray(X), bad)
    assert _state(model) == before


def test_the_user_guide_states_the_hint_gate() -> None:
    """docs/user-guide.md says from how many vectors the ranker takes the hint pass: the
    number ``ranking.HINTS_FROM`` holds (fails when either moves alone)."""
    import re
    from pathlib import Path

    from streamk.learners import ranking

    text = " ".join((Path(__file__).parents[1] / "docs" / "user-guide.md").read_text().split())
    found = re.search(r"takes the same pass once its set holds ([\d,]+) vectors", text)
    assert found is not None
    assert int(found.group(1).replace(",", "")) == ranking.HINTS_FROM
