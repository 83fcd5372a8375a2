"""Snapshots of string and tree models: round trips, and hostile support objects.

A round trip must give back the same support objects and the same decision values on
fresh inputs; a validly checksummed snapshot whose support strings or trees break the
schema or the limits (over-long string, over-deep or over-large tree, wrong types,
invalid UTF-8, a symbol outside a Mismatch alphabet) must fail ``loads`` with a clear
``SnapshotError`` naming the limit, before anything is rebuilt.
"""

from __future__ import annotations

import random

import msgpack
import numpy as np
import pytest

from streamk import (
    AllSubtree,
    CoRootedSubtree,
    GapWeightedSubsequences,
    KernelAdatron,
    KernelPerceptron,
    Mismatch,
    Normalized,
    OnlineSVR,
    RemoveOldest,
    Spectrum,
)
from streamk.errors import SnapshotError
from streamk.kernels.trees import freeze_tree
from streamk.snapshot import Limits, dumps, loads, seal
from streamk.snapshot.limits import CorruptSnapshot, SnapshotOverLimit


def random_tree(rng: random.Random, depth: int) -> list:
    node: list = [rng.choice("abc")]
    if depth > 1:
        node += [random_tree(rng, depth - 1) for _ in range(rng.randrange(3))]
    return node


def chain(depth: int) -> list:
    """A path-shaped tree ``[0, [1, [2, ...]]]`` of ``depth`` levels, built without recursion."""
    root = node = [0]
    for i in range(1, depth):
        child = [i]
        node.append(child)
        node = child
    return root


def trained(kernel, xs, ys, model=None):
    model = model or KernelPerceptron(kernel=kernel, budget=RemoveOldest(15))
    for x, y in zip(xs, ys):
        model.learn_one(x, y)
    return model


def strings(n: int, seed: int, alphabet: str = "acgt") -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randrange(4, 30))) for _ in range(n)]


@pytest.mark.parametrize(
    "kernel",
    [Spectrum(3), Normalized(Spectrum(2)), Mismatch(3, 1, "acgt"), GapWeightedSubsequences(2, 0.5)],
    ids=["spectrum", "normalized", "mismatch", "gap-weighted"],
)
def test_string_models_round_trip_with_equal_decisions(kernel):
    xs = strings(50, seed=1)
    ys = [("gat" in s) for s in xs]
    model = trained(kernel, xs[:35], ys[:35])
    assert len(model.support_) > 2
    back = loads(dumps(model)).model
    assert back.support_.X == model.support_.X
    assert np.array_equal(back.support_.coef, model.support_.coef)
    for s in xs[35:]:
        np.testing.assert_allclose(
            back.support_.decision_one(s), model.support_.decision_one(s), rtol=1e-12, atol=1e-12
        )
        assert back.predict_one(s) == model.predict_one(s)


@pytest.mark.parametrize("kernel", [AllSubtree(), CoRootedSubtree()], ids=["all", "co-rooted"])
def test_tree_models_round_trip_with_equal_decisions(kernel):
    rng = random.Random(3)
    xs = [random_tree(rng, 4) for _ in range(40)]
    ys = [len(t) % 2 == 0 for t in xs]
    model = trained(kernel, xs[:30], ys[:30])
    back = loads(dumps(model)).model
    assert back.support_.X == model.support_.X
    for t in xs[30:]:
        np.testing.assert_allclose(
            back.support_.decision_one(t), model.support_.decision_one(t), rtol=1e-12
        )


def test_a_tree_as_deep_as_the_kernel_allows_round_trips():
    # nested 64 levels deep the body would pass the codec's max_depth=64; flat, it does not nest
    model = trained(AllSubtree(), [chain(64), chain(3)], [False, True])
    assert freeze_tree(chain(64)) in model.support_.X  # the set keeps a frozen copy
    back = loads(dumps(model)).model
    assert back.support_.X == model.support_.X


def test_regressor_and_adatron_on_strings_round_trip():
    xs = strings(30, seed=2)
    svr = OnlineSVR(kernel=Spectrum(2), budget=20)
    ada = KernelAdatron(kernel=Spectrum(2), budget=20)
    for s in xs[:20]:
        svr.learn_one(s, float(s.count("a")))
        ada.learn_one(s, "a" in s[:3])
    for model in (svr, ada):
        back = loads(dumps(model)).model
        assert [back.predict_one(s) for s in xs[20:]] == [model.predict_one(s) for s in xs[20:]]


# -- hostile snapshots ------------------------------------------------------------------------


def _model_bytes(kernel=None, xs=None) -> bytes:
    kernel = kernel or Spectrum(2)
    xs = xs or ["acgt", "ttga", "gatc"]
    return dumps(trained(kernel, xs, [False, True, False]), created_at=0.0)


def _reseal(data: bytes, mutate) -> bytes:
    """The snapshot with its support ``X`` map changed by ``mutate``, checksummed anew."""
    outer = msgpack.unpackb(data, raw=False)
    body = msgpack.unpackb(outer["body"], raw=False)
    mutate(body["model"]["state"]["support"])
    return seal(msgpack.packb(body, use_bin_type=True))


def _set_items(items):
    def mutate(support):
        n = len(items)
        support["X"]["items"] = items
        coef = np.zeros((n, 1))
        support["coef"] = {"__nd__": True, "dtype": "<f8", "shape": [n, 1], "data": coef.tobytes()}
        ids = np.arange(n, dtype=np.int64)
        support["ids"] = {"__nd__": True, "dtype": "<i8", "shape": [n], "data": ids.tobytes()}

    return mutate


def test_the_flat_form_is_what_a_snapshot_stores():
    def preorder(tree):
        out = [tree[0], len(tree) - 1]
        for child in tree[1:]:
            out += preorder(child)
        return out

    trees = [["a", ["b"], ["c", ["d"]]], ["x", ["y"]], ["a", ["b"]]]
    model = trained(AllSubtree(), trees, [False, True, False])
    body = msgpack.unpackb(msgpack.unpackb(dumps(model), raw=False)["body"], raw=False)
    X = body["model"]["state"]["support"]["X"]
    assert X["__objects__"] == 1
    assert ["a", 2, "b", 0, "c", 1, "d", 0] in X["items"]
    assert X["items"] == [preorder(t) for t in model.support_.X]


@pytest.mark.parametrize(
    "items, error, words",
    [
        (["a" * 10_001], SnapshotOverLimit, "max_text_len"),
        ([[0, 1] * 64 + [0, 0]], SnapshotOverLimit, "max_tree_depth"),
        ([["a", 0] * 5_001], SnapshotOverLimit, "max_tree_nodes"),
        ([["a", 1 << 40]], SnapshotOverLimit, "max_tree_nodes"),
        ([3.5], CorruptSnapshot, "str or a flat tree"),
        ([{"a": 1}], CorruptSnapshot, "str or a flat tree"),
        ([None], CorruptSnapshot, "str or a flat tree"),
        ([["a", ["b"]]], CorruptSnapshot, "arity"),  # the nested form is not accepted
        ([["a", -1]], CorruptSnapshot, "arity"),
        ([["a", True]], CorruptSnapshot, "arity"),
        ([[1.5, 0]], CorruptSnapshot, "label"),
        ([[True, 0]], CorruptSnapshot, "label"),
        ([["a", 0, "b", 0]], CorruptSnapshot, "after its root"),
        ([["a", 2, "b", 0]], CorruptSnapshot, "ends before"),
        ([["a", 0, "b"]], CorruptSnapshot, "pairs"),
        ([[]], CorruptSnapshot, "str or a flat tree"),
    ],
)
def test_hostile_support_objects_fail_with_a_clear_error(items, error, words):
    bad = _reseal(_model_bytes(), _set_items(items))
    with pytest.raises(error, match=words):
        loads(bad)


@pytest.mark.parametrize(
    "X, words",
    [
        (["acgt", "ttga", "gatc"], "must be the map"),  # raw list, no schema tag
        ({"__objects__": 2, "items": []}, "schema"),
        ({"__objects__": 1, "items": "acgt"}, "items must be a list"),
        ({"__objects__": 1, "items": [], "extra": 1}, "must be the map"),
    ],
)
def test_an_x_without_the_schema_fails(X, words):
    def mutate(support):
        support["X"] = X

    with pytest.raises(CorruptSnapshot, match=words):
        loads(_reseal(_model_bytes(), mutate))


def test_invalid_utf8_in_a_support_string_fails_in_the_decoder():
    good = _model_bytes(xs=["QQQQQQ", "ttga", "gatc"])
    outer = msgpack.unpackb(good, raw=False)
    body = outer["body"].replace(b"QQQQQQ", b"\xc3\x28QQQQ")
    assert body != outer["body"]
    with pytest.raises(CorruptSnapshot, match="msgpack decoding failed"):
        loads(seal(body))


def test_a_symbol_outside_the_mismatch_alphabet_is_refused_on_rebuild():
    data = _model_bytes(Mismatch(2, 1, "acgt"), ["acgt", "ttga", "gatc"])

    def mutate(support):
        support["X"]["items"] = ["acgz"] * len(support["X"]["items"])

    with pytest.raises(SnapshotError, match="alphabet"):
        loads(_reseal(data, mutate))


def test_tighter_limits_are_enforced_on_both_sides():
    model = trained(Spectrum(2), ["acgtacgtac", "tt", "ga"], [False, True, False])
    assert "acgtacgtac" in model.support_.X
    limits = Limits(max_text_len=5)
    with pytest.raises(SnapshotError, match="max_text_len"):
        dumps(model, limits=limits)
    with pytest.raises(SnapshotOverLimit, match="max_text_len"):
        loads(dumps(model), limits)
    deep = trained(AllSubtree(), [chain(10), chain(2)], [False, True])
    assert freeze_tree(chain(10)) in deep.support_.X
    with pytest.raises(SnapshotOverLimit, match="max_tree_depth"):
        loads(dumps(deep), Limits(max_tree_depth=9))
    assert loads(dumps(deep), Limits(max_tree_depth=10)).model.support_.X == deep.support_.X


def test_implied_bytes_of_a_mismatch_model_count_its_neighbourhood():
    # a (5, 2) mismatch map over 20 symbols reaches ~3,000 leaves per position
    kernel = Mismatch(5, 2, "abcdefghijklmnopqrst")
    model = trained(kernel, ["abcdefgh", "ijklmnop"], [False, True])
    assert "abcdefgh" in model.support_.X
    data = dumps(model)
    assert loads(data).model.support_.X == model.support_.X
    with pytest.raises(SnapshotOverLimit, match="max_implied_bytes"):
        loads(data, Limits(max_implied_bytes=1 << 20))
