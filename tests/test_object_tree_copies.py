"""A tree model depends only on the trees it learned, not on what the caller does with its
lists afterwards.

A parser may hand out one list per event and reuse it for the next (``buf.clear();
buf.extend(tree)``). The support set keeps a frozen copy of each tree (nested tuples), so
the model, its scores and its snapshot are those of the same stream given as fresh
lists: that model is the oracle. A snapshot round trip keeps the frozen form and the
decisions, and learning on after it stays identical.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np
import pytest

from streamk import (
    AllSubtree,
    CoRootedSubtree,
    KernelNovelty,
    KernelPerceptron,
    OnlineSVR,
    RemoveOldest,
)
from streamk.kernels import Normalized
from streamk.kernels.trees import freeze_tree
from streamk.learners.objects import ObjectSupportSet
from streamk.snapshot import dumps, loads

TREES = [["a", ["b"], ["c"]], ["a", ["b"]], ["q", ["r"], ["s"]], ["a", ["c"], ["b"]]]
PROBES = [["a", ["b"], ["c"]], ["a", ["c"]], ["q", ["r"]], ["z"]]


def _random_tree(rng: random.Random, depth: int) -> list:
    node: list = [rng.choice("abc")]
    if depth > 1:
        node += [_random_tree(rng, depth - 1) for _ in range(rng.randrange(3))]
    return node


def _learn(model: Any, x: Any, i: int) -> None:
    if isinstance(model, KernelNovelty):
        model.learn_one(x)
    elif isinstance(model, OnlineSVR):
        model.learn_one(x, float(i % 3))
    else:
        model.learn_one(x, i % 2 == 0)


def _score(model: Any, x: Any) -> float:
    if isinstance(model, KernelNovelty):
        return model.score_one(x)
    return float(model.support_.dual_decision([x])[0, 0])


MAKERS = {
    "novelty": lambda: KernelNovelty(kernel=AllSubtree()),
    "novelty-budget": lambda: KernelNovelty(kernel=Normalized(AllSubtree()), budget=3),
    "perceptron": lambda: KernelPerceptron(kernel=AllSubtree()),
    "svr": lambda: OnlineSVR(kernel=CoRootedSubtree(labelled=False), budget=RemoveOldest(3)),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_reused_list_does_not_change_the_model(name):
    reused, oracle = MAKERS[name](), MAKERS[name]()
    buf: list = []
    for i, t in enumerate(TREES):
        buf.clear()
        buf.extend(copy.deepcopy(t))  # one list object per event, refilled
        _learn(reused, buf, i)
        buf[1:] = [["mutated", ["x"]]]  # and edited again after learn_one
        buf[0] = "gone"
        _learn(oracle, copy.deepcopy(t), i)
    assert reused.support_.X == oracle.support_.X
    assert all(isinstance(t, tuple) for t in reused.support_.X)
    assert np.array_equal(reused.support_.coef, oracle.support_.coef)
    assert np.array_equal(reused.support_.kdiag, oracle.support_.kdiag)
    assert [_score(reused, p) for p in PROBES] == [_score(oracle, p) for p in PROBES]
    if isinstance(reused, KernelNovelty):
        assert reused.threshold_ == oracle.threshold_
    assert dumps(reused, created_at=0.0) == dumps(oracle, created_at=0.0)


def test_the_support_set_holds_a_copy_in_append_and_replace():
    S = ObjectSupportSet(AllSubtree())
    a, b = ["a", ["b", ["c"]]], ["x", ["y"]]
    S.append(S.kernel.check_object(a), [1.0])  # the learners' path: validate, then store
    a[1][1][0] = "changed"
    a.append(["more"])
    assert S.X == [("a", ("b", ("c",)))]
    S.replace(0, S.kernel.check_object(b), [2.0])
    b[0] = "changed"
    assert S.X == [("x", ("y",))]


def test_freeze_tree_is_the_same_tree_as_nested_tuples():
    rng = random.Random(5)
    for _ in range(50):
        t = _random_tree(rng, 5)
        frozen = freeze_tree(t)

        def thaw(node: Any) -> list:  # the oracle: the plain recursive conversion back
            return [node[0], *(thaw(c) for c in node[1:])]

        assert thaw(frozen) == t
        assert AllSubtree()(frozen, t) == AllSubtree()(t, t)
        assert freeze_tree(frozen) == frozen


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_snapshot_round_trip_keeps_frozen_trees_and_continues_identically(name):
    rng = random.Random(11)
    stream = [_random_tree(rng, 4) for _ in range(60)]
    live = MAKERS[name]()
    for i, t in enumerate(stream[:40]):
        _learn(live, t, i)
    back = loads(dumps(live)).model
    assert back.support_.X == live.support_.X
    assert all(isinstance(t, tuple) for t in back.support_.X)
    probes = stream[40:]
    assert [_score(back, p) for p in probes] == [_score(live, p) for p in probes]
    assert [back.predict_one(p) for p in probes] == [live.predict_one(p) for p in probes]
    for i, t in enumerate(stream[40:], start=40):
        _learn(live, t, i)
        _learn(back, t, i)
    assert dumps(back, created_at=0.0) == dumps(live, created_at=0.0)
