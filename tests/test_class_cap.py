"""A classifier refuses the class a snapshot could not hold (session 24's limits audit).

The snapshot reader refuses a model with more than ``max_outputs`` coefficient columns
(one per class), while a classifier took every new label: past that count each snapshot
it wrote could not be read back. The class past the reader's limit is now refused
(``InvalidInput``; a dead letter on a stream), the model unchanged. Checked at a small
limit: the reader with ``max_outputs = 5`` loads the 5-class model the cap lets through.
"""

from __future__ import annotations

import dataclasses

import pytest

from streamk import KernelPerceptron, RemoveOldest
from streamk.errors import InvalidInput, SnapshotError
from streamk.learners import classifier
from streamk.snapshot import dumps, loads
from streamk.snapshot.limits import DEFAULT_LIMITS


def test_the_cap_is_the_readers_limit():
    assert classifier.MAX_CLASSES == DEFAULT_LIMITS.max_outputs


def test_the_class_past_the_cap_is_refused_and_the_model_still_loads(monkeypatch):
    monkeypatch.setattr(classifier, "MAX_CLASSES", 5)
    model = KernelPerceptron(budget=RemoveOldest(50))
    for i in range(40):
        model.learn_one({"a": float(i % 5), "b": 1.0}, f"c{i % 5}")
    data = dumps(model)
    probe = [{"a": a / 3, "b": 1.0} for a in range(15)]
    before = [model.predict_proba_one(x) for x in probe]
    with pytest.raises(InvalidInput, match="would be class 6, above the 5 a snapshot can hold"):
        model.learn_one({"a": 9.0, "b": 1.0}, "c5")
    assert model.classes_ == [f"c{i}" for i in range(5)]
    assert [model.predict_proba_one(x) for x in probe] == before  # unchanged
    reader = dataclasses.replace(DEFAULT_LIMITS, max_outputs=5)
    assert loads(data, reader).model.classes_ == model.classes_  # what the cap lets through
    monkeypatch.setattr(classifier, "MAX_CLASSES", 6)  # one more: the reader refuses it
    model.learn_one({"a": 9.0, "b": 1.0}, "c5")
    with pytest.raises(SnapshotError):
        loads(dumps(model), reader)
