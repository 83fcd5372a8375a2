"""A class label a snapshot cannot hold is refused by ``learn_one``; every other kind of
label round-trips through a snapshot.

Before: ``learn_one`` accepted ``2**70`` or ``1+2j`` as a new class, and from then on
every ``snapshot.dumps`` of the model failed, for good (audit s24/limits, F7). The
oracles: for a refused label, the same learner with the new check switched off takes it
and then cannot be snapshotted (or is not given back the same class); "nothing changed"
is a twin fed only the good events; for an accepted label, the model the snapshot
restores holds an equal class of the same type and predicts as the original.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from streamk import KernelAdatron, KernelPerceptron, RemoveOldest, snapshot
from streamk.errors import InvalidInput, SnapshotError
from streamk.learners import labels as labels_module
from streamk.learners.scaling import StandardScaledClassifier


def _nested(depth: int) -> tuple:
    label: object = "core"
    for _ in range(depth):
        label = (label,)
    return label  # type: ignore[return-value]


REFUSED = {
    "int 2**70": 2**70,
    "int -2**63-1": -(2**63) - 1,
    "int 2**64": 2**64,
    "complex": 1 + 2j,
    "numpy complex": np.complex128(1 + 2j),
    "frozenset": frozenset({1, 2}),
    "tuple with a huge int": ("a", 2**70),
    "tuple with a complex": (1, 1j),
    "tuple with a NaN": (1, float("nan")),
    "str over max_str_len": "x" * ((1 << 20) + 1),
    "str with a lone surrogate": "a\udc80",
    "tuple nested 62 deep": _nested(62),
}

#: label -> the type the restored class must have (a NumPy scalar comes back a Python one)
ACCEPTED = {
    "str": ("class-é✓", str),
    "empty str": ("", str),
    "str of 1 MiB": ("y" * (1 << 20), str),
    "int": (12345, int),
    "int 2**63-1": (2**63 - 1, int),
    "int -2**63": (-(2**63), int),
    "int 2**64-1": (2**64 - 1, int),
    "numpy int": (np.int64(-7), int),
    "numpy uint64 max": (np.uint64(2**64 - 1), int),
    "whole float": (3.0, float),
    "big whole float": (1e300, float),
    "bytes": (b"\x00\xff", bytes),
    "tuple": (("a", 1), tuple),
    "nested tuple": ((1, ("b", (True, 2.0, b"z"))), tuple),
    "tuple with None": ((None, "n"), tuple),
    "empty tuple": ((), tuple),
    "tuple nested 20 deep": (_nested(20), tuple),
}

LEARNERS = {
    "perceptron": lambda: KernelPerceptron(budget=RemoveOldest(30)),
    "adatron": lambda: KernelAdatron(budget=RemoveOldest(30)),
}


def _stream(n: int, seed: int = 0) -> list[tuple[dict, bool]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return [({"a": a, "b": b}, bool(a * b > 0)) for a, b in X.tolist()]


def _state(model) -> bytes:
    return pickle.dumps(model.state())


def _taken_without_the_check(learner: str, label, monkeypatch) -> str:
    """What happens to ``label`` with the snapshot check switched off: the audit's case."""
    with monkeypatch.context() as m:
        m.setattr(labels_module, "check_snapshottable", lambda label: None)
        model = LEARNERS[learner]()
        for x, y in _stream(30):
            model.learn_one(x, y)
        model.learn_one({"a": 0.1, "b": 0.2}, label)
    try:
        restored = snapshot.loads(snapshot.dumps(model)).model
    except SnapshotError:
        return "no snapshot"
    same = labels_module.label_from_plain(restored.classes_[-1]) == label
    return "same class" if same else "another class"


@pytest.mark.parametrize("label", list(REFUSED.values()), ids=list(REFUSED))
@pytest.mark.parametrize("learner", list(LEARNERS))
def test_a_label_no_snapshot_holds_is_refused_and_changes_nothing(learner, label, monkeypatch):
    assert _taken_without_the_check(learner, label, monkeypatch) != "same class"
    data = _stream(120)
    model, clean = LEARNERS[learner](), LEARNERS[learner]()
    for i, (x, y) in enumerate(data):
        if i in (1, 60):  # with one class known, and with both
            before = _state(model)
            with pytest.raises(InvalidInput, match="class label"):
                model.learn_one(x, label)
            assert _state(model) == before
        model.learn_one(x, y)
        clean.learn_one(x, y)
    assert _state(model) == _state(clean)
    restored = snapshot.loads(snapshot.dumps(model)).model
    assert restored.classes_ == clean.classes_


@pytest.mark.parametrize("label", [2**70, 1 + 2j, ("t", 2**64)], ids=repr)
def test_a_block_with_such_a_label_is_refused_whole(label):
    data = _stream(80)
    X = pd.DataFrame([x for x, _ in data])
    y = [lab for _, lab in data]
    model, clean = LEARNERS["perceptron"](), LEARNERS["perceptron"]()
    model.learn_many(X[:40], pd.Series(y[:40]))
    clean.learn_many(X[:40], pd.Series(y[:40]))
    bad = pd.Series(y[40:60] + [label] + y[61:], dtype=object)
    for method in ("learn_many", "learn_predict_many"):
        with pytest.raises(InvalidInput, match="class label"):
            getattr(model, method)(X[40:].reset_index(drop=True), bad)
    assert _state(model) == _state(clean)
    snapshot.dumps(model)


@pytest.mark.parametrize("case", list(ACCEPTED), ids=list(ACCEPTED))
@pytest.mark.parametrize("learner", list(LEARNERS))
def test_every_accepted_kind_of_label_round_trips(learner, case):
    label, kind = ACCEPTED[case]
    model = LEARNERS[learner]()
    data = _stream(150)
    for i, (x, y) in enumerate(data):
        model.learn_one(x, label if i % 7 == 3 else y)
    assert any(c == label for c in model.classes_)

    restored = snapshot.loads(snapshot.dumps(model)).model
    assert restored.classes_ == model.classes_
    for got, was in zip(restored.classes_, model.classes_):  # the booleans stay booleans
        assert type(got) is (kind if was is label else type(was))
        assert hash(got) == hash(was)
    probe = [x for x, _ in _stream(40, seed=1)]
    for x in probe:
        assert restored.predict_one(x) == model.predict_one(x)
    restored.learn_one(probe[0], label)  # the restored class is the same class
    assert restored.classes_ == model.classes_


def test_nesting_is_bounded_with_room_for_the_state_around_the_label():
    """A label may nest as deep as ``LABEL_LIMITS.max_depth`` (half the reader's), so it
    still fits where a wrapper puts the model's state; one level more is refused, even
    though a bare learner's snapshot would hold it (the wrapper's would not, near 64)."""
    depth = labels_module.LABEL_LIMITS.max_depth
    assert depth == snapshot.DEFAULT_LIMITS.max_depth // 2
    model = StandardScaledClassifier(KernelPerceptron(budget=RemoveOldest(30)))
    for i, (x, y) in enumerate(_stream(60)):
        model.learn_one(x, _nested(depth) if i % 5 == 0 else y)
    restored = snapshot.loads(snapshot.dumps(model)).model
    probe = [x for x, _ in _stream(20, seed=1)]
    assert [restored.predict_one(x) for x in probe] == [model.predict_one(x) for x in probe]
    assert _nested(depth) in restored.model.classes_
    with pytest.raises(InvalidInput, match="class label"):
        model.learn_one(probe[0], _nested(depth + 1))
