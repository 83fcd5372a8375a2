"""``snapshot.dumps`` refuses a learner state the loader would refuse for its values.

A learner whose coefficients or cached kernel values overflowed was written snapshot after
snapshot, and each failed to load (``StateError: support.coef must be finite``): the
engine's retained snapshots were all unusable and the model was lost at the restart. Oracle:
the loader's own rule (the learner's ``from_state`` refuses the same state).
"""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
from river import datasets

from streamk.consolidation import Consolidated
from streamk.errors import SnapshotError
from streamk.kernels import Linear, Polynomial
from streamk.learners import KernelPerceptron, OnlineSVR
from streamk.snapshot import dumps, loads


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _infinite_coefficient() -> OnlineSVR:
    """No box, no tube, no offset: alpha = y / k(x, x) = 1e150 / 1e-300 overflows."""
    model = OnlineSVR(kernel=Linear(), C=math.inf, epsilon=0.0, offset=0.0)
    model.learn_one({"a": 1e-150}, 1e150)
    assert not math.isfinite(float(model.support_.coef[0, 0]))
    return model


def _infinite_kernel_diagonal() -> KernelPerceptron:
    """Features of 1e60 are accepted, but (x.x + 1)^3 overflows in the cached k(x, x)."""
    model = KernelPerceptron(kernel=Polynomial(degree=3), budget=50)
    for x, y in itertools.islice(datasets.Bananas(), 100):
        model.learn_one({k: v * 1e60 for k, v in x.items()}, y)
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
    model.learn_one({"a": 1e-150}, 1e150)
    with pytest.raises(SnapshotError, match="'(model|guard.shadow).support'"):
        dumps(model)


def test_a_finite_state_is_written_and_loads():
    model = KernelPerceptron(kernel=Polynomial(degree=3), budget=50)
    events = list(itertools.islice(datasets.Bananas(), 100))
    for x, y in events:
        model.learn_one(x, y)
    back = loads(dumps(model, created_at=0.0)).model
    assert [back.predict_one(x) for x, _ in events] == [model.predict_one(x) for x, _ in events]
