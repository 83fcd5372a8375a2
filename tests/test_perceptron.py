"""KernelPerceptron against the book's algorithm written plainly (Alg. 7.52, CF 7.12)."""

from __future__ import annotations

import itertools
import math
from collections import deque

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import datasets

from streamk import RBF, Constant, KernelPerceptron, Linear, Polynomial, RemoveOldest, Sum
from streamk.errors import InvalidInput
from streamk.learners.base import AUTO_WINDOW


def rbf(gamma):
    return lambda a, b: math.exp(
        -gamma * sum((a.get(k, 0.0) - b.get(k, 0.0)) ** 2 for k in set(a) | set(b))
    )


def linear(a, b):
    return sum(v * b.get(k, 0.0) for k, v in a.items())


def plain_perceptron(stream, k, budget=None):
    """CF 7.12 with sgn(0) = +1, optionally keeping only the newest `budget` updates.

    Binary labels are +1/-1. Returns the predictions made before each update and the
    final support set as (x, y) pairs.
    """
    support = deque()
    predictions = []
    for x, y in stream:
        f = sum(yi * k(xi, x) for xi, yi in support)
        y_hat = 1 if f >= 0 else -1
        predictions.append(y_hat)
        if y_hat != y:
            if budget is not None and len(support) == budget:
                support.popleft()
            support.append((dict(x), y))
    return predictions, support


def plain_one_vs_rest(stream, k, classes):
    """One perceptron per class on one shared support set, as the docstring promises.

    A support entry stores the coefficient of every class column (0 where that column
    made no mistake).
    """
    support = []
    predictions = []
    for x, y in stream:
        f = {c: sum(coef[c] * k(xi, x) for xi, coef in support) for c in classes}
        predictions.append(max(classes, key=lambda c: (f[c], -classes.index(c))))
        coef = {}
        for c in classes:
            t = 1 if y == c else -1
            if (1 if f[c] >= 0 else -1) != t:
                coef[c] = t
        if coef:
            support.append((dict(x), {c: coef.get(c, 0) for c in classes}))
    return predictions, support


def random_stream(n, d, seed, labels=(-1, 1)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    score = np.sin(X @ w) + 0.3 * rng.normal(size=n)
    if len(labels) == 2:
        y = [labels[1] if s > 0 else labels[0] for s in score]
    else:
        cuts = np.quantile(score, np.linspace(0, 1, len(labels) + 1)[1:-1])
        y = [labels[int(np.searchsorted(cuts, s))] for s in score]
    return [({f"f{j}": float(v) for j, v in enumerate(row)}, lab) for row, lab in zip(X, y)]


def test_book_hand_oracle_sign_convention():
    # algorithms.md §9.2 item 7: x1=(1,0),y=+1; x2=(0,1),y=-1 -> one update, alpha = (0, 1).
    model = KernelPerceptron(kernel=Linear())
    model.learn_one({"a": 1.0, "b": 0.0}, 1)
    assert model.n_support == 0  # f = 0 -> +1, correct: no update
    model.learn_one({"a": 0.0, "b": 1.0}, -1)
    assert model.n_support == 1 and model.n_mistakes == 1
    np.testing.assert_array_equal(model.support_.X, [[0.0, 1.0]])
    np.testing.assert_array_equal(model.support_.coef, [[-1.0]])


@pytest.mark.parametrize("budget", [None, 7])
@pytest.mark.parametrize("kernel,k", [(RBF(0.5), rbf(0.5)), (Linear(), linear)])
def test_binary_matches_plain_algorithm(kernel, k, budget):
    stream = random_stream(300, 3, seed=1)
    expected, support = plain_perceptron(stream, k, budget)
    model = KernelPerceptron(kernel=kernel, budget=budget)
    got = []
    for x, y in stream:
        got.append(model.predict_one(x) if model.classes_ else 1)
        model.learn_one(x, y)
    assert got[1:] == expected[1:]
    assert model.n_support == len(support)
    # Same support vectors with the same signed coefficients (the set is order-free).
    mine = sorted(
        (tuple(r), c)
        for r, c in zip(model.support_.X.round(12).tolist(), model.support_.coef[:, 0].tolist())
    )
    theirs = sorted((tuple(round(x[f"f{j}"], 12) for j in range(3)), float(y)) for x, y in support)
    assert mine == theirs


def test_multiclass_matches_plain_one_vs_rest():
    classes = ["a", "b", "c", "d"]
    stream = random_stream(250, 3, seed=2, labels=classes)
    # Order classes by first appearance, as the model does.
    seen = list(dict.fromkeys(y for _, y in stream))
    model = KernelPerceptron(kernel=RBF(0.7))
    # Feed the first example of each class first so both see all classes from the start
    # (the model's binary -> one-vs-rest transition is tested separately).
    firsts = [next(e for e in stream if e[1] == c) for c in seen]
    for _, y in firsts:
        model._add_label(y)
    expected, support = plain_one_vs_rest(stream, rbf(0.7), seen)
    got = []
    for x, y in stream:
        got.append(model.predict_one(x))
        model.learn_one(x, y)
    assert got == expected
    assert model.n_support == len(support)


def test_binary_to_multiclass_keeps_the_binary_function():
    model = KernelPerceptron(kernel=RBF(1.0))
    stream = random_stream(60, 2, seed=3, labels=("no", "yes"))
    for x, y in stream:
        model.learn_one(x, y)
    x0 = stream[0][0]
    f_binary = model.decision_function_one(x0)[0]
    model._add_label("maybe")
    f = model.decision_function_one(x0)
    pos = model._labels.signs.index(1)
    assert f[pos] == pytest.approx(f_binary) and f[1 - pos] == pytest.approx(-f_binary)
    assert f[2] == 0.0


def test_labels_true_and_one_are_positive_whatever_comes_first():
    for first, second in [(False, True), (True, False), (0, 1), (1, -1), ("x", True)]:
        model = KernelPerceptron(kernel=Linear())
        model.learn_one({"a": 1.0}, first)
        model.learn_one({"a": -1.0}, second)
        positive = [c for c in model.classes_ if c in (True, 1)] or [first]
        assert model._labels.classes[model._labels.signs.index(1)] == positive[0]


def test_predict_proba_sums_to_one_and_agrees_with_predict_one():
    stream = random_stream(200, 2, seed=4, labels=(0, 1, 2))
    model = KernelPerceptron(kernel=RBF(1.0))
    for x, y in stream[:150]:
        model.learn_one(x, y)
    for x, _ in stream[150:]:
        p = model.predict_proba_one(x)
        assert math.isclose(sum(p.values()), 1.0) and all(0 <= v <= 1 for v in p.values())
        assert max(p, key=p.get) == model.predict_one(x)


def test_before_learning_predicts_nothing():
    model = KernelPerceptron()
    assert model.predict_one({"a": 1.0}) is None
    assert model.predict_proba_one({"a": 1.0}) == {}


def test_gamma_auto_freezes_after_the_warm_up_window():
    stream = random_stream(AUTO_WINDOW + 100, 3, seed=5)
    model = KernelPerceptron()
    for x, y in stream:
        model.learn_one(x, y)
    X = np.array([[x[f"f{j}"] for j in range(3)] for x, _ in stream[:AUTO_WINDOW]])
    assert model.kernel_.gamma == pytest.approx(2.0 / X.var(axis=0).sum(), rel=1e-9)
    assert model.kernel is None  # the user's parameter is left as given


def test_gamma_auto_is_re_estimated_at_the_documented_counts():
    """After each of the first ten rows, then every tenth up to AUTO_WINDOW; each value is
    2 / sum Var over the rows seen so far (numpy's variance as the oracle)."""
    stream = random_stream(AUTO_WINDOW + 30, 3, seed=8)
    X = np.array([[x[f"f{j}"] for j in range(3)] for x, _ in stream])
    model = KernelPerceptron()
    changed_at = []
    gamma = model.kernel_.gamma  # 1.0 until the variance is positive
    for n, (x, y) in enumerate(stream, start=1):
        model.learn_one(x, y)
        if model.kernel_.gamma != gamma:
            gamma = model.kernel_.gamma
            changed_at.append(n)
            assert gamma == pytest.approx(2.0 / X[:n].var(axis=0).sum(), rel=1e-9)
    expected = [n for n in range(1, AUTO_WINDOW + 1) if n <= 10 or n % 10 == 0]
    assert changed_at == expected[1:]  # after one row the variance is 0: gamma stays 1.0


def test_novikoff_mistake_bound_on_separable_data():
    """Thm 7.53: updates <= R^2 / gamma^2 for data with a no-bias margin gamma."""
    rng = np.random.default_rng(6)
    w = np.array([1.0, -2.0, 0.5])
    X = rng.normal(size=(2000, 3))
    margins = X @ w / np.linalg.norm(w)
    keep = np.abs(margins) > 0.2
    X, y = X[keep], np.where(margins[keep] > 0, 1, -1)
    R = np.linalg.norm(X, axis=1).max()
    model = KernelPerceptron(kernel=Linear())
    for _ in range(3):  # several passes: the bound holds for the total
        for row, label in zip(X, y):
            model.learn_one(dict(enumerate(row)), int(label))
    assert model.n_mistakes <= (R / 0.2) ** 2


# -- learn_many exactness -------------------------------------------------------------------


def learn_both(stream, block_sizes, **params):
    one, many = KernelPerceptron(**params), KernelPerceptron(**params)
    for x, y in stream:
        one.learn_one(x, y)
    i = 0
    for size in itertools.cycle(block_sizes):
        if i >= len(stream):
            break
        chunk = stream[i : i + size]
        many.learn_many(pd.DataFrame([x for x, _ in chunk]), pd.Series([y for _, y in chunk]))
        i += size
    return one, many


def assert_same_model(one, many, queries):
    assert one.n_support == many.n_support and one.n_mistakes == many.n_mistakes
    assert one.classes_ == many.classes_
    for x in queries:
        np.testing.assert_allclose(
            many.decision_function_one(x), one.decision_function_one(x), rtol=1e-9, atol=1e-9
        )


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    blocks=st.lists(st.integers(1, 60), min_size=1, max_size=5),
    budget=st.sampled_from([None, 5, 20]),
    n_classes=st.sampled_from([2, 3, 5]),
)
def test_learn_many_equals_learn_one(seed, blocks, budget, n_classes):
    labels = tuple(range(n_classes)) if n_classes > 2 else (False, True)
    stream = random_stream(150, 3, seed=seed, labels=labels)
    one, many = learn_both(stream, blocks, kernel=RBF(0.8), budget=budget)
    assert_same_model(one, many, [x for x, _ in stream[:20]])


def test_learn_many_equals_learn_one_through_the_auto_gamma_warm_up():
    stream = random_stream(AUTO_WINDOW + 300, 2, seed=9, labels=("a", "b", "c"))
    one, many = learn_both(stream, [97], budget=RemoveOldest(40))
    assert one.kernel_ == many.kernel_
    assert_same_model(one, many, [x for x, _ in stream[:20]])


def test_learn_many_with_emerging_features_and_a_bias_kernel():
    stream = random_stream(200, 4, seed=10)
    # Features appear over time: the first half of the stream has only two of them.
    stream = [
        ({k: v for k, v in x.items() if i > 100 or k in ("f0", "f1")}, y)
        for i, (x, y) in enumerate(stream)
    ]
    one, many = learn_both(stream, [33, 7], kernel=Sum(Polynomial(2), Constant(1.0)))
    assert_same_model(one, many, [x for x, _ in stream[150:170]])


def test_learn_many_accepts_numpy_and_rejects_length_mismatch():
    model = KernelPerceptron(kernel=Linear())
    model.learn_many(np.array([[1.0, 2.0], [-1.0, 0.5]]), [1, -1])
    assert model.n_learned == 2
    with pytest.raises(InvalidInput, match="labels"):
        model.learn_many(np.array([[1.0, 2.0]]), [1, -1])


def test_predict_many_matches_predict_one():
    stream = random_stream(200, 3, seed=11, labels=("x", "y", "z"))
    model = KernelPerceptron(kernel=RBF(0.5), budget=50)
    for x, y in stream[:150]:
        model.learn_one(x, y)
    X = pd.DataFrame([x for x, _ in stream[150:]])
    assert model.predict_many(X).tolist() == [model.predict_one(x) for x, _ in stream[150:]]
    P = model.predict_proba_many(X)
    for i, (x, _) in enumerate(stream[150:]):
        one = model.predict_proba_one(x)
        assert all(math.isclose(P.iloc[i][c], p) for c, p in one.items())


def test_bad_input_raises_invalid_input_and_leaves_the_model_untouched():
    model = KernelPerceptron(kernel=Linear())
    model.learn_one({"a": 1.0}, True)
    before = model.state()
    for x, y in [({"a": float("nan")}, True), ({"a": "blue"}, False), ({"a": 1.0}, None)]:
        with pytest.raises(InvalidInput):
            model.learn_one(x, y)
    after = model.state()
    assert after["n_learned"] == before["n_learned"]
    np.testing.assert_array_equal(after["support"]["X"], before["support"]["X"])


# -- state and river's conventions ----------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [{"budget": 30}, {"kernel": Sum(RBF(0.5), Constant(1.0))}, {"budget": RemoveOldest(10)}],
)
def test_state_round_trip_gives_identical_predictions(params):
    stream = random_stream(300, 3, seed=12, labels=("p", "q", "r"))
    model = KernelPerceptron(**params)
    for x, y in stream[:250]:
        model.learn_one(x, y)
    clone = KernelPerceptron.from_state(model.state())
    for x, y in stream[250:]:
        assert clone.predict_proba_one(x) == model.predict_proba_one(x)
        clone.learn_one(x, y)
        model.learn_one(x, y)
    assert clone.n_support == model.n_support


def test_bananas_accuracy_with_defaults():
    """Prequential accuracy with defaults reaches the tuned-gamma perceptron's (~0.86)."""
    from river import evaluate, metrics

    metric = evaluate.progressive_val_score(
        datasets.Bananas(), KernelPerceptron(), metrics.Accuracy()
    )
    assert metric.get() >= 0.86


@pytest.mark.parametrize("params", list(KernelPerceptron._unit_test_params()))
def test_river_check_estimator(params, river_checks):
    assert river_checks(KernelPerceptron(**params)) > 20


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    block=st.integers(1, 80),
    budget=st.sampled_from([None, 7]),
    n_classes=st.sampled_from([2, 4]),
    auto=st.booleans(),
)
def test_learn_predict_many_gives_the_prequential_predictions_of_learn_one(
    seed, block, budget, n_classes, auto
):
    labels = ("no", "yes") if n_classes == 2 else tuple("abcd")
    stream = random_stream(AUTO_WINDOW + 100 if auto else 150, 3, seed=seed, labels=labels)
    params = {"budget": budget} if auto else {"kernel": RBF(0.8), "budget": budget}
    one, many = KernelPerceptron(**params), KernelPerceptron(**params)
    expected = []
    for x, y in stream:
        expected.append(one.predict_one(x))
        one.learn_one(x, y)
    got = []
    for i in range(0, len(stream), block):
        chunk = stream[i : i + block]
        got += many.learn_predict_many(pd.DataFrame([x for x, _ in chunk]), [y for _, y in chunk])
    assert got == expected
    assert_same_model(one, many, [x for x, _ in stream[:10]])


def test_margin_perceptron_learn_predict_many_matches_learn_one():
    from streamk import MarginPerceptron

    stream = random_stream(120, 2, seed=3)
    one, many = MarginPerceptron(kernel=RBF(1.0)), MarginPerceptron(kernel=RBF(1.0))
    expected = []
    for x, y in stream:
        expected.append(one.predict_one(x))
        one.learn_one(x, y)
    got = many.learn_predict_many(pd.DataFrame([x for x, _ in stream]), [y for _, y in stream])
    assert got == expected and one.n_support == many.n_support


def test_learn_one_rescores_after_a_coefficient_only_change():
    """predict_one's margins are reused by learn_one only while nothing f depends on moved."""
    model = KernelPerceptron(kernel=RBF(gamma=0.5))
    model.learn_one({"a": 0.0}, False)  # f = 0 reads +1: a mistake
    model.learn_one({"a": 3.0}, True)
    x = {"a": 2.9}
    f = model.decision_function_one(x)[0]
    assert f > 0 and model.predict_one(x) is True
    model.support_.scale_coef(-1.0)  # the rows stay, the margin flips
    assert model.decision_function_one(x)[0] == -f
    model.learn_one(x, True)  # now a mistake: x joins the support set
    assert model.n_support == 3 and model.n_mistakes == 3


def test_remove_oldest_recycles_the_oldest_slot_with_a_new_id():
    """The new vector takes the oldest one's slot; ids still order the set by insertion."""
    model = KernelPerceptron(kernel=RBF(gamma=0.5), budget=RemoveOldest(3))
    for i in range(6):  # alternating labels far apart (f = 0 reads +1): every one a mistake
        model.learn_one({"a": 10.0 * i}, i % 2 == 1)
    s = model.support_
    assert model.n_mistakes == 6
    assert sorted(s.ids.tolist()) == [3, 4, 5]
    np.testing.assert_array_equal(s.X[np.argsort(s.ids), 0], [30.0, 40.0, 50.0])
