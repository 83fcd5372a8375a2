"""A refused string or tree changes nothing, whatever kernel combination refuses it.

A ``Sum`` or ``Product`` of object kernels refuses an event if any part refuses it
(``Mismatch``'s alphabet, a tree kernel's shape check). Every part checks the event
before a learner or a support set changes, and the support set's own ``append`` and
``replace`` compute all that can raise before they store anything. The oracle is a model
that never saw the refused event: after a refusal the model must equal it, in its
snapshot bytes and its predictions. A string kernel plus a tree kernel, which no event
can satisfy, is refused when it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from streamk import (
    AllSubtree,
    CoRootedSubtree,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    MarginPerceptron,
    Mismatch,
    Normalized,
    OnlineRanker,
    OnlineSVR,
    Product,
    Spectrum,
    Sum,
)
from streamk.errors import ConfigError, InvalidInput
from streamk.kernels import Constant, kernel_from_spec
from streamk.learners.objects import ObjectSupportSet, validate_object
from streamk.snapshot import dumps

MIXED = Sum(Spectrum(2), Mismatch(3, 1, "acgt"))
BAD = "acNNgt"  # Spectrum takes it, Mismatch over "acgt" does not
GOOD = ["acgtac", "ttgcaa", "gattaca", "acgt", "ggatcc", "tacgta"]

LEARNERS: dict[str, tuple[Callable[[Any], Any], Callable[[int], Any]]] = {
    "perceptron": (lambda k: KernelPerceptron(kernel=k), lambda i: i % 2 == 0),
    "margin": (lambda k: MarginPerceptron(kernel=k), lambda i: i % 2 == 0),
    "adatron": (lambda k: KernelAdatron(kernel=k), lambda i: i % 2 == 0),
    "svr": (lambda k: OnlineSVR(kernel=k), lambda i: float(i)),
    "ranker": (lambda k: OnlineRanker(kernel=k, ranks=[1, 2, 3]), lambda i: 1 + i % 3),
    "novelty": (lambda k: KernelNovelty(kernel=k), None),
}


def _learn(model: Any, x: Any, label: Callable[[int], Any] | None, i: int) -> None:
    if label is None:
        model.learn_one(x)
    else:
        model.learn_one(x, label(i))


@pytest.mark.parametrize("name", sorted(LEARNERS))
@pytest.mark.parametrize("kernel", [MIXED, Product(Mismatch(3, 1, "acgt"), Spectrum(2))], ids=repr)
def test_a_refused_first_event_leaves_the_model_as_if_never_seen(name, kernel):
    make, label = LEARNERS[name]
    model, oracle = make(kernel), make(kernel)
    empty = _snapshot_of(model.support_)
    for attempt in range(3):  # the same refusal again and again changes nothing either
        with pytest.raises(InvalidInput, match="Mismatch"):
            _learn(model, BAD, label, attempt)
        _assert_same(_snapshot_of(model.support_), empty)
        assert model.n_learned == 0
    for i, s in enumerate(GOOD):
        _learn(model, s, label, i)
        _learn(oracle, s, label, i)
    assert model.support_.X == oracle.support_.X
    assert np.array_equal(model.support_.coef, oracle.support_.coef)
    assert dumps(model, created_at=0.0) == dumps(oracle, created_at=0.0)
    probe = "acgtttgca"
    assert model.predict_one(probe) == oracle.predict_one(probe)


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_a_refused_event_is_refused_by_predict_too(name):
    make, label = LEARNERS[name]
    model = make(MIXED)
    for i, s in enumerate(GOOD):
        _learn(model, s, label, i)
    assert model.support_.n
    before = _snapshot_of(model.support_)
    with pytest.raises(InvalidInput, match="Mismatch"):
        model.predict_one(BAD)
    _assert_same(_snapshot_of(model.support_), before)


def test_validate_object_asks_every_part_of_a_combination():
    nested = Sum(Normalized(Spectrum(2)), Product(Constant(1.0), Mismatch(3, 1, "acgt")))
    with pytest.raises(InvalidInput, match="Mismatch"):
        validate_object(nested, BAD)
    assert validate_object(nested, b"acgt") == "acgt"  # normalised, then checked by both
    with pytest.raises(InvalidInput, match="non-empty list"):
        validate_object(Sum(CoRootedSubtree(), AllSubtree(labelled=False)), ["a", "b"])


def _snapshot_of(S: ObjectSupportSet) -> tuple:
    return (
        S.n,
        list(S.X),
        S.coef.copy(),
        S.kdiag.copy(),
        S.ids.copy(),
        S.next_id,
        S.rows_version,
        S.version,
        None if S._primal is None else dict(S._primal.index),
        None if S._primal is None else S._primal.W.copy(),
        None if S._G is None else S.gram_matrix.copy(),
    )


def _assert_same(a: tuple, b: tuple) -> None:
    assert len(a) == len(b)
    for u, v in zip(a, b):
        if isinstance(u, np.ndarray):
            assert np.array_equal(u, v)
        else:
            assert u == v


@pytest.mark.parametrize("keep_gram", [False, True])
@pytest.mark.parametrize(
    "kernel",
    [MIXED, Mismatch(3, 1, "acgt"), Normalized(Mismatch(3, 1, "acgt"))],
    ids=repr,
)
def test_support_set_append_and_replace_are_atomic(kernel, keep_gram):
    S = ObjectSupportSet(kernel, keep_gram=keep_gram)
    before = _snapshot_of(S)
    with pytest.raises(InvalidInput):
        S.append(BAD, [1.0])  # the first entry: no kernel row is computed before it
    _assert_same(_snapshot_of(S), before)
    for s in GOOD[:3]:
        S.append(s, [0.5])
    before = _snapshot_of(S)
    with pytest.raises(InvalidInput):
        S.replace(1, BAD, [2.0], new_id=True)
    _assert_same(_snapshot_of(S), before)
    S.replace(1, GOOD[4], [2.0])  # still usable, and what a fresh set would hold
    fresh = ObjectSupportSet(kernel, keep_gram=keep_gram)
    for s, c in zip([GOOD[0], GOOD[4], GOOD[2]], [0.5, 2.0, 0.5]):
        fresh.append(s, [c])
    assert S.X == fresh.X
    assert np.array_equal(S.coef, fresh.coef) and np.array_equal(S.kdiag, fresh.kdiag)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Sum(Spectrum(2), CoRootedSubtree()),
        lambda: Product(AllSubtree(), Spectrum(2)),
        lambda: Sum(Normalized(Spectrum(2)), Product(Constant(1.0), AllSubtree())),
        lambda: kernel_from_spec(
            {"name": "Sum", "kernels": [{"name": "Spectrum", "p": 2}, {"name": "AllSubtree"}]}
        ),
    ],
    ids=["sum", "product", "nested", "spec"],
)
def test_a_string_kernel_and_a_tree_kernel_are_refused_together(make):
    with pytest.raises(ConfigError, match="either a str or a tree"):
        make()


def test_kernels_of_one_kind_still_combine():
    assert Sum(Spectrum(2), Mismatch(3, 1, "acgt")).object_kind == "strings"
    assert Sum(CoRootedSubtree(), Normalized(AllSubtree())).object_kind == "trees"
    assert Sum(Spectrum(2), Constant(1.0)).object_kind == "strings"
    assert Constant(1.0).object_kind is None
