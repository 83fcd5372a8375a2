"""Tuple class labels come back from a snapshot as tuples, and the model stays usable.

Before: a snapshot writes a tuple as a list, ``LabelCoder.from_state`` kept the list,
and the restored model raised ``TypeError: unhashable type: 'list'`` in ``predict_one``,
``predict_proba_one`` and ``learn_one`` (audit s24/limits, F6). The oracle is the model
that was never snapshotted: the restored one must predict what it predicts, give the
same probabilities, and go on learning to the same state.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk import KernelAdatron, KernelPerceptron, RemoveOldest, snapshot
from streamk.learners.labels import LabelCoder

LEARNERS = {
    "perceptron": lambda: KernelPerceptron(budget=RemoveOldest(40)),
    "adatron": lambda: KernelAdatron(budget=RemoveOldest(40)),
}

#: (name, classes): binary with a tuple, one-vs-rest with nested tuples and a mix of kinds.
CLASS_SETS = {
    "binary": [(1, 2), ("a", (3, 4))],
    "nested": [(1, 2), ("a", (3, (4, "b"))), ((), True), ((1.0, None), -5), "plain", 7],
}


def _stream(n: int, classes: list, seed: int) -> list[tuple[dict, object]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    # the class follows the angle of x, so the model has something to learn
    sector = ((np.arctan2(X[:, 1], X[:, 0]) + np.pi) / (2 * np.pi) * len(classes)).astype(int)
    return [
        ({"a": a, "b": b}, classes[min(int(s), len(classes) - 1)])
        for (a, b), s in zip(X.tolist(), sector)
    ]


@pytest.mark.parametrize("classes", list(CLASS_SETS.values()), ids=list(CLASS_SETS))
@pytest.mark.parametrize("learner", list(LEARNERS))
def test_tuple_labels_survive_a_snapshot(learner, classes):
    model = LEARNERS[learner]()
    for x, y in _stream(200, classes, seed=0):
        model.learn_one(x, y)
    restored = snapshot.loads(snapshot.dumps(model)).model

    assert restored.classes_ == model.classes_
    for got, want in zip(restored.classes_, model.classes_):
        assert type(got) is type(want)
    probe = [x for x, _ in _stream(60, classes, seed=1)]
    for x in probe:
        assert restored.predict_one(x) == model.predict_one(x)
        assert restored.predict_proba_one(x) == model.predict_proba_one(x)
    later = _stream(100, classes, seed=2)
    for x, y in later:
        model.learn_one(x, y)
        restored.learn_one(x, y)
    assert restored.classes_ == model.classes_
    for x in probe:
        assert restored.predict_one(x) == model.predict_one(x)
    assert snapshot.encode_state(restored.state()) == snapshot.encode_state(model.state())


def test_label_coder_from_state_restores_tuples_at_any_depth():
    """The coder alone, from the plain data a snapshot holds (tuples written as lists)."""
    state = {"classes": [[1, [2, [3]]], "x", [], [[["deep"]]]], "signs": []}
    coder = LabelCoder.from_state(state)
    assert coder.classes == [(1, (2, (3,))), "x", (), ((("deep",),),)]
    assert all(isinstance(c, tuple) for i, c in enumerate(coder.classes) if i != 1)
    assert {c: i for i, c in enumerate(coder.classes)}  # every class hashable
