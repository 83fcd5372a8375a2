"""Real streamk learners through a snapshot: identical predictions, identical future learning."""

from __future__ import annotations

import itertools

import pytest
from river import datasets

from streamk import budget
from streamk.learners import adatron, perceptron
from streamk.snapshot import SnapshotStore, dumps, loads


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
    cls = getattr(budget, policy)
    _continue_identically(lambda: perceptron.KernelPerceptron(budget=cls(30, **POLICIES[policy])))


def test_kernel_adatron_round_trip():
    _continue_identically(adatron.KernelAdatron)


def test_margin_perceptron_with_a_projectron_round_trip():
    from streamk import MarginPerceptron, Projectron

    _continue_identically(lambda: MarginPerceptron(budget=Projectron(40)))


def test_online_svr_round_trip():
    from streamk import OnlineSVR, RemoveOldest

    rows = list(datasets.TrumpApproval().take(400))
    model = OnlineSVR(budget=RemoveOldest(60))
    for x, y in rows[:250]:
        model.learn_one(x, y)
    loaded = loads(dumps(model)).model
    for x, y in rows[250:320]:
        model.learn_one(x, y)
        loaded.learn_one(x, y)
    for x, _ in rows[250:]:
        assert loaded.predict_one(x) == model.predict_one(x)


def test_online_ranker_round_trip_keeps_its_thresholds():
    import numpy as np

    from streamk import OnlineRanker

    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 3))
    ranks = np.digitize(X @ [1.0, -0.5, 0.3], [-0.8, 0.0, 0.8]) + 1
    model = OnlineRanker(ranks=(1, 2, 3, 4))
    for row, r in zip(X[:200], ranks[:200]):
        model.learn_one(dict(enumerate(row)), int(r))
    loaded = loads(dumps(model)).model
    np.testing.assert_array_equal(loaded.thresholds_, model.thresholds_)
    for row, r in zip(X[200:250], ranks[200:250]):
        model.learn_one(dict(enumerate(row)), int(r))
        loaded.learn_one(dict(enumerate(row)), int(r))
    for row in X[200:]:
        x = dict(enumerate(row))
        assert loaded.predict_one(x) == model.predict_one(x)
        assert loaded.score_one(x) == model.score_one(x)


def test_kernel_novelty_round_trip():
    from streamk import KernelNovelty, RemoveOldest

    rows = list(datasets.Phishing().take(300))
    model = KernelNovelty(budget=RemoveOldest(50))
    for x, _ in rows[:200]:
        model.learn_one(x)
    loaded = loads(dumps(model)).model
    for x, _ in rows[200:250]:
        model.learn_one(x)
        loaded.learn_one(x)
    for x, _ in rows[200:]:
        assert loaded.score_one(x) == pytest.approx(model.score_one(x), abs=1e-12)
