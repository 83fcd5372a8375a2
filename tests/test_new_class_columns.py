"""A new class adds one zero coefficient column, not a product with ``[I | 0]``.

Before: every new class in one-vs-rest built ``[I | 0]`` (C x (C + 1)) and replaced the
coefficients by ``coef @ M``: O(capacity C^2) per new class, 87-386 ms at 2,000-3,500
classes, and an engine fed ever-new labels fell to 3.5 events/s (audit s24/limits, F5).

The oracle is the old code path, kept here verbatim: ``_add_label`` applying the matrix
``LabelCoder.add`` returns (itself checked against hand-written matrices). The models
fed the same stream with new classes arriving (in ``learn_one`` and in blocks, from a
binary start and from a generic one) must hold the same coefficients, bit for bit, and
predict the same.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from streamk import (
    KernelAdatron,
    KernelPerceptron,
    MarginPerceptron,
    Projectron,
    RemoveOldest,
    Spectrum,
)
from streamk.learners.classifier import KernelClassifier
from streamk.learners.labels import LabelCoder, check_label
from streamk.learners.support import SupportSet

LEARNERS: dict[str, Callable[[], KernelClassifier]] = {
    "perceptron": lambda: KernelPerceptron(budget=RemoveOldest(30)),
    "margin": lambda: MarginPerceptron(budget=RemoveOldest(30)),
    "projectron": lambda: KernelPerceptron(budget=Projectron(budget=30, eta=0.1)),
    "adatron": lambda: KernelAdatron(budget=RemoveOldest(30)),
}


def _old_add_label(self: KernelClassifier, y: object) -> None:
    """``KernelClassifier._add_label`` before the change: always the matrix product."""
    check_label(y)
    remap = self._labels.add(y)
    if remap is not None:
        self._support.remap_outputs(remap)


def _stream(n: int, first: tuple[object, object], seed: int = 0) -> list[tuple[dict, object]]:
    """Events whose labels start with the pair ``first``, then new classes arrive among
    known ones (a new one about every fifth event)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    labels: list[object] = []
    classes = list(first)
    for i in range(n):
        if i < 20:
            labels.append(first[int(X[i, 0] > 0)])
        elif rng.random() < 0.2:
            classes.append(f"c{len(classes)}")
            labels.append(classes[-1])
        else:
            labels.append(classes[int(rng.integers(len(classes)))])
    return [(dict(zip("abc", row)), label) for row, label in zip(X.tolist(), labels)]


def _feed(model: KernelClassifier, data: list, mode: str) -> list:
    preds = []
    if mode == "one":
        for x, y in data:
            preds.append(model.predict_one(x))
            model.learn_one(x, y)
        return preds
    for start in range(0, len(data), 37):
        part = data[start : start + 37]
        X = pd.DataFrame([x for x, _ in part])
        preds.extend(model.learn_predict_many(X, pd.Series([y for _, y in part])))
    return preds


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


def _run_both(make, data, mode, monkeypatch):
    new = make()
    new_preds = _feed(new, data, mode)
    with monkeypatch.context() as m:
        m.setattr(KernelClassifier, "_add_label", _old_add_label)
        old = make()
        old_preds = _feed(old, data, mode)
    return new, new_preds, old, old_preds


@pytest.mark.parametrize("mode", ["one", "block"])
@pytest.mark.parametrize("first", [(True, False), ("u", "v"), ("u", False), ("u", True)], ids=repr)
@pytest.mark.parametrize("learner", list(LEARNERS))
def test_new_classes_learn_what_the_matrix_product_learned(learner, first, mode, monkeypatch):
    data = _stream(300, first)
    new, new_preds, old, old_preds = _run_both(LEARNERS[learner], data, mode, monkeypatch)
    assert new.classes_ == old.classes_
    assert len(new.classes_) > 30  # many classes arrived, one-vs-rest from the third
    assert new_preds == old_preds
    assert _bits(new._support.coef) == _bits(old._support.coef)
    assert _bits(new._support.X) == _bits(old._support.X)
    probe = [x for x, _ in _stream(50, first, seed=1)]
    for x in probe:
        assert new.predict_one(x) == old.predict_one(x)
        assert _bits(new.decision_function_one(x)) == _bits(old.decision_function_one(x))


@pytest.mark.parametrize("learner", [KernelPerceptron, KernelAdatron])
def test_string_kernel_new_classes_match_the_matrix_product(learner, monkeypatch):
    """The object support set (string kernels, with its primal weights) likewise: the
    same predictions and margins. Bit for bit for the perceptron; the adatron's zero
    coefficients may keep a ``-0.0`` sign that the product made ``+0.0`` (the object
    support's ``add_outputs`` copies them as they are), so its values are compared."""
    rng = np.random.default_rng(3)
    words = ["".join(rng.choice(list("abcd"), size=6)) for _ in range(120)]
    data = [(w, f"k{int(rng.integers(i // 10 + 1))}") for i, w in enumerate(words)]

    def feed(model):
        preds = []
        for w, y in data:
            preds.append(model.predict_one(w))
            model.learn_one(w, y)
        return preds

    def make():
        return learner(kernel=Spectrum(2), budget=RemoveOldest(25))

    new = make()
    new_preds = feed(new)
    with monkeypatch.context() as m:
        m.setattr(KernelClassifier, "_add_label", _old_add_label)
        old = make()
        old_preds = feed(old)
    assert len(new.classes_) > 5 and new.classes_ == old.classes_
    assert new_preds == old_preds
    np.testing.assert_array_equal(new._support.coef, old._support.coef)
    for w in words[:40]:
        assert new.predict_one(w) == old.predict_one(w)
        f_new, f_old = new.decision_function_one(w), old.decision_function_one(w)
        np.testing.assert_array_equal(f_new, f_old)
        if learner is KernelPerceptron:
            assert _bits(f_new) == _bits(f_old)
            assert _bits(new._support.coef) == _bits(old._support.coef)


def test_a_new_class_in_one_vs_rest_multiplies_by_no_large_matrix(monkeypatch):
    """The cost itself, by structure (no timing): past the binary -> one-vs-rest switch
    (a 1 x 3 matrix), a new class appends a column and never multiplies by ``[I | 0]``."""
    shapes: list[tuple[int, ...]] = []
    appended: list[int] = []
    real_remap, real_add = SupportSet.remap_outputs, SupportSet.add_outputs

    def remap(self, M):
        shapes.append(np.shape(M))
        real_remap(self, M)

    def add(self, count=1):
        appended.append(count)
        real_add(self, count)

    monkeypatch.setattr(SupportSet, "remap_outputs", remap)
    monkeypatch.setattr(SupportSet, "add_outputs", add)
    model = KernelPerceptron(budget=RemoveOldest(30))
    for x, y in _stream(300, (True, False)):
        model.learn_one(x, y)
    n = len(model.classes_)
    assert shapes == [(1, 3)]
    assert appended == [1] * (n - 3)
    assert model._support.coef.shape[1] == n


def test_label_coder_add_gives_the_old_matrices():
    """``add`` (the dense oracle's matrices) still returns what it did: the sign flip,
    the binary -> one-vs-rest row, then ``[I | 0]``; ``register`` gives the same changes."""
    coder = LabelCoder()
    assert coder.add("u") is None
    flip = coder.add(True)  # a known positive label after a generic one took +1
    np.testing.assert_array_equal(flip, [[-1.0]])
    np.testing.assert_array_equal(coder.add("w"), [[-1.0, 1.0, 0.0]])
    for c in range(3, 7):
        expected = np.zeros((c, c + 1))
        expected[np.arange(c), np.arange(c)] = 1.0
        np.testing.assert_array_equal(coder.add(f"n{c}"), expected)
    assert coder.add("w") is None
    assert coder.classes == ["u", True, "w", "n3", "n4", "n5", "n6"]
    other = LabelCoder()
    changes = [other.register(c) for c in ["u", True, "w", "n3", "n4", "w"]]
    assert changes[0] is None and changes[-1] is None and changes[3:5] == [1, 1]
    np.testing.assert_array_equal(changes[1], [[-1.0]])
    np.testing.assert_array_equal(changes[2], [[-1.0, 1.0, 0.0]])
