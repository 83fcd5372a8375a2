"""Per-support-vector values: OnlineSVR's targets and KernelAdatron's class indices, bounded
by the budget, and each the value of the event that put its row in the set (on every path:
NumPy, compiled learn_one, learn_many)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamk import KernelAdatron, OnlineSVR, Projectron, RemoveOldest, RemoveRandom, accel


def _stream(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n)


def _learn(model, X: np.ndarray, y: np.ndarray, how: str) -> None:
    if how == "many":
        for s in range(0, len(y), 250):
            model.learn_many(pd.DataFrame(X[s : s + 250]), pd.Series(y[s : s + 250]))
    else:
        for row, t in zip(X, y):
            model.learn_one(dict(enumerate(row.tolist())), t.item())


@pytest.fixture(params=["numpy", "compiled"])
def path(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(accel, "core", None)
    elif accel.core is None:
        pytest.skip("the compiled core is not built")
    return request.param


def _classes(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three classes, overlapping: most events violate the margin and join the set."""
    X, y = _stream(n, seed)
    return X, np.digitize(y, [-0.5, 0.5]).astype(np.int64)


#: learner -> (model under a policy, its stream, its store, the stored value of a label)
LEARNERS = {
    "svr targets": (
        lambda policy: OnlineSVR(budget=policy, resweeps=0),
        _stream,
        lambda model: model._targets,
        lambda model, y: y,
    ),
    "adatron classes": (  # resweeps=0 never aligns its store: it grew one entry per update
        lambda policy: KernelAdatron(budget=policy),
        _classes,
        lambda model: model._cls,
        lambda model, y: model.classes_.index(y),
    ),
}


@pytest.mark.parametrize("learner", sorted(LEARNERS))
@pytest.mark.parametrize("how", ["one", "many"])
@pytest.mark.parametrize("policy", [lambda: RemoveOldest(20), lambda: RemoveRandom(20, seed=1)])
def test_the_store_stays_within_the_budget(path, learner, how, policy):
    make, stream, store, _ = LEARNERS[learner]
    X, y = stream(3_000)
    model = make(policy())
    _learn(model, X, y, how)
    assert model.n_updates > 1_000  # most events joined: the store saw them all
    data, n = store(model), model.n_support
    assert len(data.pending) <= n + 64, len(data.pending)
    assert data.ids.shape[0] <= (2 * n + 8) + (n + 64), data.ids.shape[0]  # stored + pending


@pytest.mark.parametrize("learner", sorted(LEARNERS))
@pytest.mark.parametrize("how", ["one", "many"])
@pytest.mark.parametrize("policy", [lambda: Projectron(30), lambda: RemoveOldest(30)])
def test_each_support_vector_keeps_the_value_of_the_event_that_added_it(path, learner, how, policy):
    make, stream, store, value = LEARNERS[learner]
    X, y = stream(1_500, seed=2)
    model = make(policy())
    _learn(model, X, y, how)
    by_row = {row.tobytes(): t for row, t in zip(X, y)}
    S = model.support_
    stored = store(model).align(S.ids)[:, 0]
    rows = [np.ascontiguousarray(S.X[i]).tobytes() for i in range(S.n)]
    np.testing.assert_array_equal(stored, [value(model, by_row[r]) for r in rows])


def test_pruning_between_a_rows_insertion_and_its_record_leaves_one_entry_for_it():
    """The SVR prunes its store right after inserting a row and before recording the row's
    target (folding the compiled path's pending targets): the new id is live but not yet
    stored, and must not get a NaN entry that would shadow the value recorded next."""
    from streamk.learners._slotdata import SlotData

    data = SlotData(1)
    data.extend(np.arange(30), np.arange(30.0))
    live = np.array([27, 28, 29, 30])  # 30: just inserted, its target not recorded yet
    data.prune(live)
    data.extend(np.array([30]), np.array([30.0]))
    np.testing.assert_array_equal(data.align(live)[:, 0], [27.0, 28.0, 29.0, 30.0])


def test_added_values_fold_in_order_before_any_read():
    """``add`` only appends to ``pending``; every reader folds first, in insertion order."""
    from streamk.learners._slotdata import SlotData

    data = SlotData(1)
    data.extend(np.arange(3), np.arange(3.0))
    data.add(3, 30.0)
    data.add(4, 40.0)
    data.extend(np.array([5]), np.array([50.0]))
    np.testing.assert_array_equal(data.ids, [0, 1, 2, 3, 4, 5])
    data.add(6, 60.0)
    np.testing.assert_array_equal(data.align(np.array([2, 6]))[:, 0], [2.0, 60.0])
    data.add(7, 70.0)
    assert data.state() == [[2.0], [60.0], [70.0]]
