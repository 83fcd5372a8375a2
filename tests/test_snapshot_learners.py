"""Real streamk learners through a snapshot: identical predictions, identical future learning."""

from __future__ import annotations

import itertools

import pytest
from river import datasets

from streamk.snapshot import SnapshotStore, dumps, loads

perceptron = pytest.importorskip("streamk.learners.perceptron")


def split(dataset, n_train: int, n_test: int):
    rows = list(itertools.islice(dataset, n_train + n_test))
    return rows[:n_train], rows[n_train:]


CASES = {
    "phishing-binary": (lambda: datasets.Phishing(), 600, 200, {}),
    "phishing-budget": (lambda: datasets.Phishing(), 600, 200, {"budget": 50}),
    "imagesegments-multiclass": (lambda: datasets.ImageSegments().take(300), 200, 100, {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_perceptron_round_trip(case, tmp_path):
    make, n_train, n_test, params = CASES[case]
    train, test = split(make(), n_train, n_test)
    model = perceptron.KernelPerceptron(**params)
    for x, y in train:
        model.learn_one(x, y)
    snap = loads(dumps(model, offsets={case: {0: n_train}}, seq=1))
    loaded = snap.model
    assert type(loaded) is perceptron.KernelPerceptron and snap.class_name == "KernelPerceptron"
    for x, _ in test:
        assert loaded.predict_one(x) == model.predict_one(x)
        assert loaded.predict_proba_one(x) == model.predict_proba_one(x)
    # The restored learner must also *continue* exactly as the original would.
    for x, y in test[: n_test // 2]:
        model.learn_one(x, y)
        loaded.learn_one(x, y)
    for x, _ in test[n_test // 2 :]:
        assert loaded.predict_proba_one(x) == model.predict_proba_one(x)
    # And through the file store.
    store = SnapshotStore(tmp_path)
    store.save(model, "m", offsets={case: {0: n_train + n_test // 2}})
    again = store.latest("m")
    assert again.offsets == {case: {0: n_train + n_test // 2}}
    for x, _ in test:
        assert again.model.predict_proba_one(x) == model.predict_proba_one(x)


def test_untrained_kernel_perceptron_round_trips():
    model = perceptron.KernelPerceptron()
    loaded = loads(dumps(model)).model
    x = {"a": 1.0, "b": 2.0}
    assert loaded.predict_proba_one(x) == model.predict_proba_one(x)


POLICIES = {
    "RemoveOldest": {},
    "RemoveRandom": {"seed": 1},
    "RemoveSmallest": {},
    "Forgetron": {},
    "Projectron": {},
    "Merge": {},
}


def _continue_identically(make, n_train: int = 400, n_more: int = 150, n_test: int = 150):
    rows = list(itertools.islice(datasets.Phishing(), n_train + n_more + n_test))
    model = make()
    for x, y in rows[:n_train]:
        model.learn_one(x, y)
    loaded = loads(dumps(model)).model
    for x, y in rows[n_train : n_train + n_more]:  # budget policies (and their RNGs) at work
        model.learn_one(x, y)
        loaded.learn_one(x, y)
    for x, _ in rows[n_train:]:
        assert loaded.predict_proba_one(x) == model.predict_proba_one(x)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_kernel_perceptron_with_each_budget_policy(policy):
    budget = pytest.importorskip("streamk.budget")
    if not hasattr(budget, policy):
        pytest.skip(f"streamk.budget.{policy} is not in this checkout")
    cls = getattr(budget, policy)
    _continue_identically(lambda: perceptron.KernelPerceptron(budget=cls(30, **POLICIES[policy])))


def test_kernel_adatron_round_trip():
    adatron = pytest.importorskip("streamk.learners.adatron")
    _continue_identically(adatron.KernelAdatron)
