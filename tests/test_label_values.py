"""Labels compared as whole columns (``labels.label_values``, ``LabelCoder.codes``) against
looking each label up, the oracle: the same targets, the same first unknown label, the same
``KeyError``, and the same learned model from a bool/int Series as from an object one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamk import RBF, KernelPerceptron, RemoveOldest
from streamk.learners.labels import LabelCoder, label_values

CLASS_SETS = {
    "bools": [True, False],
    "false-first": [False, True],
    "ints": [0, 1],
    "signed": [-1, 1],
    "one-class": [1],
    "three-ints": [2, 0, 1],
    "float": [0.5, 1.0],
    "big-int": [2**60, 0],  # an int64 value near it may round onto a float: declined
    "nan": [float("nan"), 1.0],  # found by identity in a dict, never by ==: declined
    "strings": ["a", "b"],
}

VALUES = {
    "bool": lambda rng: rng.random(40) > 0.5,
    "int64": lambda rng: rng.integers(-1, 4, 40),
    "float64": lambda rng: rng.integers(-1, 3, 40) * 0.5,
    "big-int64": lambda rng: np.array([2**60, 2**60 + 1, 0] * 13 + [1], dtype=np.int64),
}


def _coder(classes: list) -> LabelCoder:
    coder = LabelCoder()
    for c in classes:
        coder.add(c)
    return coder


def _lookup(coder: LabelCoder, labels: list):
    try:
        return coder.target_matrix(labels)
    except KeyError as exc:
        return ("KeyError", exc.args)


def _columns(coder: LabelCoder, labels: list, values: np.ndarray):
    try:
        return coder.target_matrix(labels, values)
    except KeyError as exc:
        return ("KeyError", exc.args)


@pytest.mark.parametrize("kind", sorted(VALUES))
@pytest.mark.parametrize("classes", sorted(CLASS_SETS))
def test_codes_agree_with_looking_each_label_up(classes: str, kind: str) -> None:
    for seed in range(5):
        values = VALUES[kind](np.random.default_rng(seed))
        labels = values.tolist()
        coder = _coder(CLASS_SETS[classes])
        slow, fast = _lookup(coder, labels), _columns(coder, labels, values)
        if isinstance(slow, tuple):
            assert fast == slow
        else:
            assert isinstance(fast, np.ndarray) and fast.dtype == slow.dtype
            assert fast.tobytes() == slow.tobytes() and fast.shape == slow.shape
        for start in (0, 7, 39, 40):
            known = set(coder.classes)
            first = next((j for j in range(start, 40) if labels[j] not in known), 40)
            assert coder.first_unknown(labels, start, values) == first
            assert coder.first_unknown(labels, start) == first


def test_codes_decline_where_numpy_and_the_dict_could_differ() -> None:
    values = np.array([0.5, 1.0])
    assert _coder([True, False]).codes(values) is not None
    assert _coder([float("nan"), 1.0]).codes(values) is None
    assert _coder([2**60, 0]).codes(values) is None
    assert _coder([0.5, 1.0]).codes(np.array([1, 0])) is None  # int64 against floats
    assert _coder(["a", "b"]).codes(values) is None
    assert LabelCoder().codes(values) is None


def test_label_values_takes_only_exact_dtypes() -> None:
    assert label_values(pd.Series([True, False])).dtype == np.bool_
    assert label_values(np.array([1, 2])).dtype == np.int64
    assert label_values(pd.Series([0.5, 1.0])).dtype == np.float64
    assert label_values(np.array([0.5], dtype=np.float32)) is None  # 0.1f == 0.1 in NumPy
    assert label_values(np.array([1], dtype=np.int8)) is None
    assert label_values(pd.Series(["a", "b"])) is None
    assert label_values(pd.Series([True, None])) is None  # object
    nullable = pd.Series([True, False], dtype="boolean")
    assert label_values(nullable).tolist() == nullable.tolist()  # no NA: plain bools
    assert label_values(pd.Series([True, None], dtype="boolean")) is None
    assert label_values([True, False]) is None
    assert label_values(np.zeros((2, 2), dtype=bool)) is None


def _stream(n: int, seed: int, classes: int) -> tuple[pd.DataFrame, list]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5]
    score = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(n)
    if classes == 2:
        return pd.DataFrame(X, columns=["a", "b", "c"]), (score > 0).tolist()
    cuts = np.quantile(score, [0.3, 0.6, 0.8])
    return pd.DataFrame(X, columns=["a", "b", "c"]), np.digitize(score, cuts).tolist()


def _state(model: KernelPerceptron) -> tuple:
    s = model.support_
    return (
        s.n,
        s._ids[: s.n].tolist(),
        s._X[: s.n].tobytes(),
        s._coef[: s.n].tobytes(),
        model.kernel_.gamma,
        model.n_mistakes,
        model.n_learned,
        model.classes_ if hasattr(model, "classes_") else None,
    )


@pytest.mark.parametrize("classes", [2, 4])
@pytest.mark.parametrize("size", [500, 37])
@pytest.mark.parametrize("method", ["learn_many", "learn_predict_many"])
def test_native_labels_learn_the_model_object_labels_do(
    classes: int, size: int, method: str
) -> None:
    X, y = _stream(900, classes, classes)
    native, boxed = pd.Series(y), pd.Series(y, dtype=object)
    assert label_values(native) is not None and label_values(boxed) is None
    models, said = [], []
    for labels in (native, boxed):
        model = KernelPerceptron(kernel=RBF(gamma="auto"), budget=RemoveOldest(60))
        out = []
        for i in range(0, len(y), size):
            got = getattr(model, method)(X.iloc[i : i + size], labels.iloc[i : i + size])
            out.extend(got or [])
        models.append(model)
        said.append(out)
    assert _state(models[0]) == _state(models[1])
    assert said[0] == said[1]
    probe = X.iloc[:80].to_dict("records")
    assert [models[0].predict_one(x) for x in probe] == [models[1].predict_one(x) for x in probe]
