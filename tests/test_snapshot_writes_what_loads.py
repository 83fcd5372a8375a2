"""``snapshot.dumps`` refuses a learner state the loader would refuse for its values.

A learner whose coefficients or cached kernel values overflowed was written snapshot after
snapshot, and each failed to load (``StateError: support.coef must be finite``): the
engine's retained snapshots were all unusable and the model was lost at the restart. Oracle:
the loader's own rule (the learner's ``from_state`` refuses the same state).

The inputs that overflowed (``{"a": 1e-150}`` under ``Linear()``, features of 1e60 under
``Polynomial(3)``) are now refused by the learners themselves
(``tests/test_kernel_value_range.py``), so the overflow is written into the buffers here
(a fault no input provokes any more); the writer's check stays as the last line.
"""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
from river import datasets

from streamk.consolidation import Consolidated
from streamk.errors import InvalidInput, SnapshotError
from streamk.kernels import Linear, Polynomial
from streamk.learners import KernelPerceptron, OnlineSVR
from streamk.snapshot import dumps, loads


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _infinite_coefficient() -> OnlineSVR:
    """No box, no tube, no offset: alpha = y / k(x, x) = 1e150 / 1e-300 overflowed."""
    model = OnlineSVR(kernel=Linear(), C=math.inf, epsilon=0.0, offset=0.0)
    with pytest.raises(InvalidInput, match="out of this kernel's range"):
        model.learn_one({"a": 1e-150}, 1e150)
    model.learn_one({"a": 1.0}, 2.0)
    model.support_._coef[0, 0] = math.inf
    return model


def _infinite_kernel_diagonal() -> KernelPerceptron:
    """Features of 1e60 were accepted, and (x.x + 1)^3 overflowed in the cached k(x, x)."""
    model = KernelPerceptron(kernel=Polynomial(degree=3), budget=50)
    for x, y in itertools.islice(datasets.Bananas(), 100):
        model.learn_one(x, y)
    model.support_._kdiag[0] = math.inf
    return model


@pytest.mark.parametrize(
    "make, key",
    [(_infinite_coefficient, "support.coef"), (_infinite_kernel_diagonal, "cache.kdiag")],
)
def test_a_state_the_loader_refuses_is_not_written(make, key):
    model = make()
    with pytest.raises(SnapshotError, match=key.rpartition(".")[2]):  # what loads would say
        type(model).from_state(model.state())
    with pytest.raises(SnapshotError, match="would not load") as refused:
        dumps(model)
    assert key in str(refused.value) and "'support'" in str(refused.value)


def test_the_key_path_names_the_wrapped_learner_and_the_guard_shadow():
    inner = OnlineSVR(kernel=Linear(), C=math.inf, epsilon=0.0, offset=0.0)
    model = Consolidated(inner, every=1000, guard=10)
    model.learn_one({"a": 1.0}, 2.0)
    model.model.support_._coef[0, 0] = math.inf
    with pytest.raises(SnapshotError, match="'(model|guard.shadow).support'"):
        dumps(model)


def test_a_finite_state_is_written_and_loads():
    model = KernelPerceptron(kernel=Polynomial(degree=3), budget=50)
    events = list(itertools.islice(datasets.Bananas(), 100))
    for x, y in events:
        model.learn_one(x, y)
    back = loads(dumps(model, created_at=0.0)).model
    assert [back.predict_one(x) for x, _ in events] == [model.predict_one(x) for x, _ in events]
