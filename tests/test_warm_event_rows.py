"""``learn_many``'s ``gamma="auto"`` warm-up through the compiled per-event core in one go
(``KernelLearner._warm_event_rows``: ``EventPass.learn_rows`` with ``fold``, each row folded
into the estimate there as ``learn_one`` folds it) against the same block split into runs,
each folded ahead and learned run by run (``_warm_event_rows`` declined), and against
``learn_one``. The learners and policies that take the per-event core in ``learn_many``:
the adatron under every policy, the others under Merge and the Projectron (the
perceptrons' warm-up too, whose hint pass takes neither).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from model_state import model_state

from streamk import (
    RBF,
    Constant,
    Forgetron,
    Merge,
    Projectron,
    RemoveOldest,
    RemoveSmallest,
    Sum,
    accel,
)
from streamk.learners import (
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    MarginPerceptron,
    OnlineRanker,
    OnlineSVR,
)
from streamk.learners.base import KernelLearner

needs_core = pytest.mark.skipif(accel.core is None, reason="needs the compiled core")

POLICIES = {
    "merge-25": lambda: Merge(25),
    "merge-300": lambda: Merge(300),
    "projectron-25": lambda: Projectron(25),
    "oldest-25": lambda: RemoveOldest(25),
    "forgetron-25": lambda: Forgetron(25),
}

LEARNERS = {
    "adatron": lambda b: KernelAdatron(kernel=RBF(gamma="auto"), budget=b),
    "svr": lambda b: OnlineSVR(kernel=RBF(gamma="auto"), budget=b),
    "ranker": lambda b: OnlineRanker(kernel=RBF(gamma="auto"), ranks=(0, 1, 2), budget=b),
    "novelty": lambda b: KernelNovelty(kernel=RBF(gamma="auto"), budget=b),
    "perceptron": lambda b: KernelPerceptron(kernel=RBF(gamma="auto"), budget=b),
    "margin": lambda b: MarginPerceptron(kernel=RBF(gamma="auto"), budget=b),
    # a combined kernel: no block pass at all, the per-event core runs its program
    "perceptron-sum": lambda b: KernelPerceptron(
        kernel=Sum(RBF(gamma="auto"), Constant(1.0)), budget=b
    ),
}

#: (learner, policy) pairs whose learn_many warm-up takes the per-event core (the
#: perceptrons' under Merge only once the set is full: until then the unbounded set's
#: hint pass, see test_the_perceptrons_learn_many_under_merge_is_the_per_event_core)
CASES = (
    [("adatron", p) for p in sorted(POLICIES)]
    + [
        (name, p)
        for name in ("svr", "ranker", "novelty")
        for p in ("merge-25", "merge-300", "projectron-25")
    ]
    + [(name, p) for name in ("perceptron", "margin") for p in ("merge-25", "projectron-25")]
    + [("perceptron-sum", p) for p in ("oldest-25", "forgetron-25")]
)


def _stream(learner: str, n: int, width: int, seed: int) -> tuple[pd.DataFrame, list]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, width)) * rng.uniform(0.5, 3.0, size=width)
    score = np.sin(2 * X[:, 0]) + X[:, -1] * X[:, 0] + 0.3 * rng.standard_normal(n)
    if learner == "svr":
        y = score.tolist()
    elif learner == "ranker":
        y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).tolist()
    else:  # the classifiers' labels: a third class first seen 40 rows in (handed back)
        y = np.where(score > 0, "a", "b").astype(object)
        y[40::7] = "c"
        y = y.tolist()
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(width)]), y


def _learn_many(model, X: pd.DataFrame, y: list, size: int) -> None:  # noqa: ANN001
    for i in range(0, len(y), size):
        if isinstance(model, KernelNovelty):
            model.learn_many(X.iloc[i : i + size])
        else:
            model.learn_many(X.iloc[i : i + size], pd.Series(y[i : i + size], dtype=object))


def _state(model, fields: tuple[str, ...] | None = None) -> dict:  # noqa: ANN001
    """:func:`model_state`, or the ``fields`` of it."""
    state = model_state(model)
    return state if fields is None else {key: state[key] for key in fields}


@needs_core
@pytest.mark.parametrize(("learner", "policy"), CASES)
@pytest.mark.parametrize("size", [500, 37])
def test_warm_event_rows_leave_the_model_of_the_run_by_run_loop(
    learner: str, policy: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm = KernelLearner._warm_event_rows
    taken = []

    def spy(self, rows, items, step):  # noqa: ANN001, ANN202
        end = warm(self, rows, items, step)
        taken.append(end)
        return end

    for seed in range(3):
        X, y = _stream(learner, 330, 1 + seed % 3, seed)
        monkeypatch.setattr(KernelLearner, "_warm_event_rows", spy)
        fast = LEARNERS[learner](POLICIES[policy]())
        _learn_many(fast, X, y, size)
        monkeypatch.setattr(KernelLearner, "_warm_event_rows", lambda self, rows, items, step: 0)
        slow = LEARNERS[learner](POLICIES[policy]())
        _learn_many(slow, X, y, size)
        assert _state(fast) == _state(slow)
        probe = X.iloc[:40].to_dict("records")
        if isinstance(fast, KernelNovelty):
            assert [fast.score_one(x) for x in probe] == [slow.score_one(x) for x in probe]
        else:
            assert [fast.predict_one(x) for x in probe] == [slow.predict_one(x) for x in probe]
    assert sum(taken) > 0  # the warm-up went through the core


@needs_core
@pytest.mark.parametrize(("learner", "policy"), CASES)
def test_warm_event_rows_are_learn_one(learner: str, policy: str) -> None:
    X, y = _stream(learner, 260, 2, 9)
    many = LEARNERS[learner](POLICIES[policy]())
    _learn_many(many, X, y, 260)
    one = LEARNERS[learner](POLICIES[policy]())
    for x, t in zip(X.to_dict("records"), y):
        if isinstance(one, KernelNovelty):
            one.learn_one(x)
        else:
            one.learn_one(x, t)
    rows = ("scale", "gamma", "n", "next_id", "ids", "X")  # the estimate, width and rows
    assert _state(many, rows) == _state(one, rows)
    n = many.support_.n
    np.testing.assert_allclose(many.support_._coef[:n], one.support_._coef[:n], rtol=1e-9)
    assert many.n_learned == one.n_learned


@needs_core
@pytest.mark.parametrize("learner", ["perceptron", "margin", "eager"])
@pytest.mark.parametrize("policy", ["merge", "smallest"])
@pytest.mark.parametrize("size", [350, 45])
def test_the_perceptrons_learn_many_under_merge_is_the_per_event_core(
    learner: str, policy: str, size: int
) -> None:
    """Under Merge, the rows of a set that cannot fill within them go through the
    unbounded set's hint pass (a fill run, or ``KernelLearner._until_full``'s chunks: no
    update can reach the budget, so the same model), and once it is full through the hint
    pass with Merge's search and merge (``MERGE_CODE``: the kernel rows from the dots, as
    ``learn_one``'s), not the run of ``compiled.merge_run`` (from the distances); the
    warm-up's rows on a full set through ``EventPass.learn_rows``; RemoveSmallest's rows
    through the block passes throughout. Each leaves ``learn_one``'s model to the bit, the
    fill falling inside a block or at its edge."""
    from streamk.learners import fastpass

    make = {"merge": lambda: Merge(45), "smallest": lambda: RemoveSmallest(45)}[policy]
    learners = {  # "eager": a margin so wide that every row updates, and a fixed width
        **LEARNERS,  # (no warm-up): the first chunk fills the set at its last row
        "eager": lambda b: MarginPerceptron(kernel=RBF(gamma=0.5), budget=b, margin=50.0),
    }
    X, y = _stream("margin", 700, 3, 5)
    many, one = learners[learner](make()), learners[learner](make())
    if learner == "eager":  # two classes, known before the block (its run then starts
        y = ["a" if t == "c" else t for t in y]  # at the block's first row)
        first = X.iloc[[y.index("a"), y.index("b")]].to_dict("records")
        for model in (many, one):
            model.learn_one(first[0], "a")
            model.learn_one(first[1], "b")
    fastpass.COUNTS.clear()
    _learn_many(many, X, y, size)
    core = fastpass.COUNTS["event_rows"]
    passes = fastpass.COUNTS["compiled"] - core  # rows of the block passes
    for x, t in zip(X.to_dict("records"), y):
        one.learn_one(x, t)
    assert _state(many) == _state(one)
    assert passes + core >= 690  # (a new class's rows aside)
    if policy == "merge":  # the block passes, which merged
        assert passes >= 540 and fastpass.COUNTS["merges"] >= 100
    else:  # RemoveSmallest has block passes of its own
        assert core == 0


@needs_core
@pytest.mark.parametrize("learner", ["perceptron", "margin"])
@pytest.mark.parametrize(("budget", "size"), [(60, 500), (60, 97), (150, 500), (40, 64)])
@pytest.mark.parametrize("classes", [2, 3])
def test_merges_in_the_hint_pass_are_learn_ones(
    learner: str, budget: int, size: int, classes: int
) -> None:
    """Under Merge, ``learn_many``'s hint pass appends each update's row and, once that
    fills the set past its budget, merges two vectors (``MERGE_CODE``), filling and full
    alike: ``learn_one``'s model to the bit, one merge wherever ``learn_one`` made one, and
    ``learn_predict_many`` says what ``predict_one`` said before each ``learn_one``; the fill
    inside a block, two or three classes, a fixed width (no warm-up, so the pass takes
    every block)."""
    from streamk.learners import fastpass

    make = {
        "perceptron": lambda: KernelPerceptron(kernel=RBF(gamma=0.3), budget=Merge(budget)),
        "margin": lambda: MarginPerceptron(kernel=RBF(gamma=0.3), budget=Merge(budget)),
    }[learner]
    X, y = _stream("margin", 900, 3, 11)
    if classes == 2:
        y = ["a" if t == "c" else t for t in y]
    many, predicting, one = make(), make(), make()
    for label in sorted(set(y)):  # every class known before the blocks (a new class's
        x = X.iloc[[y.index(label)]].to_dict("records")[0]  # row takes the tracked path)
        for model in (many, predicting, one):
            model.learn_one(x, label)
    fastpass.COUNTS.clear()
    _learn_many(many, X, y, size)
    merged, hinted = fastpass.COUNTS["merges"], fastpass.COUNTS["hints"]
    said = []
    for i in range(0, len(y), size):
        said += predicting.learn_predict_many(
            X.iloc[i : i + size], pd.Series(y[i : i + size], dtype=object)
        )
    expected, merges = [], 0  # a merge: an update that finds the set full
    for x, t in zip(X.to_dict("records"), y):
        expected.append(one.predict_one(x))
        full, before = one.n_support == budget, one.n_mistakes
        one.learn_one(x, t)
        merges += full and one.n_mistakes > before
    assert merges > 0 and hinted == len(y)
    assert merged == merges
    assert _state(many) == _state(one)
    assert _state(predicting) == _state(one)
    assert said == expected


@needs_core
@pytest.mark.parametrize("seed", range(12))
def test_merge_in_the_hint_pass_on_random_settings(seed: int) -> None:
    """Merge's hint pass on random settings: budgets down to 2, one to twenty features (a
    feature that first appears halfway on some), narrow and wide kernels, blocks of 1 to
    120 rows, two or three classes, the perceptron with margin or without: ``learn_one``'s
    model to the bit, with merges made in the pass."""
    from streamk.learners import fastpass

    rng = np.random.default_rng(seed)
    budget, width = int(rng.choice([2, 3, 5, 17])), int(rng.choice([1, 2, 9, 20]))
    X = rng.normal(size=(400, width)) * 2
    y = np.where(np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=400) > 0, "a", "b").tolist()
    if seed % 3 == 0:
        y = ["c" if i % 5 == 0 else t for i, t in enumerate(y)]
    events = [{f"f{k}": X[i, k] for k in range(width)} for i in range(400)]
    if seed % 4 == 1 and width > 1:  # the last feature first seen at event 200
        for x in events[:200]:
            del x[f"f{width - 1}"]
    learner = KernelPerceptron if seed % 2 else MarginPerceptron
    gamma = float(rng.choice([0.05, 0.5, 3.0]))
    many, one = (learner(kernel=RBF(gamma=gamma), budget=Merge(budget)) for _ in range(2))
    for label in sorted(set(y)):  # every class known before the blocks
        for model in (many, one):
            model.learn_one(events[y.index(label)], label)
    fastpass.COUNTS.clear()
    i = 0
    while i < 400:
        size = int(rng.integers(1, 121))
        many.learn_many(
            pd.DataFrame(events[i : i + size]), pd.Series(y[i : i + size], dtype=object)
        )
        i += size
    for x, t in zip(events, y):
        one.learn_one(x, t)
    assert fastpass.COUNTS["merges"] > 0
    assert _state(many) == _state(one)


@needs_core
@pytest.mark.parametrize(
    ("learner", "policy"),
    [
        ("svr", "merge-25"),
        ("svr", "projectron-25"),
        ("adatron", "oldest-25"),
        ("novelty", "merge-25"),
        ("margin", "merge-25"),
    ],
)
@pytest.mark.parametrize("at", [125, 163])
def test_a_row_the_numpy_path_finishes_mid_run_sees_the_counters_held(
    learner: str, policy: str, at: int
) -> None:
    """``EventPass.learn_rows`` holds the learner's counters (rows learned, updates,
    mistakes, the SVR's target statistics) in C while it runs and writes them back when
    it returns. A row the core folds and then cannot learn (a norm so large that the RBF's
    expansion may be inexact) is finished on the NumPy path in the middle of the run; that
    path reads the statistics, so they are written back first. ``learn_one``'s model and
    counters to the bit, for that row at 125 or 163 (between two re-estimates of the
    width)."""
    from streamk.learners import fastpass

    X, y = _stream(learner, 190, 2, 4)
    X.iloc[at] = [3.0e3, -2.0e3]  # sq * gamma > 1e5: the expansion is not trusted
    many, one = LEARNERS[learner](POLICIES[policy]()), LEARNERS[learner](POLICIES[policy]())
    fastpass.COUNTS.clear()
    _learn_many(many, X, y, 190)
    assert fastpass.COUNTS["event_rows"] >= 120  # the core took the rows before it
    for x, t in zip(X.to_dict("records"), y):
        if isinstance(one, KernelNovelty):
            one.learn_one(x)
        else:
            one.learn_one(x, t)
    assert _state(many) == _state(one)
    counters = ("n_learned", "n_updates", "n_mistakes", "_y_n", "_y_mean", "_y_m2")
    assert {c: getattr(many, c, None) for c in counters} == {
        c: getattr(one, c, None) for c in counters
    }
