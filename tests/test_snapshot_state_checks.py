"""Hostile learner states: refused with a SnapshotError naming the key, never restored.

Audit s23 (t15, t16, t17): a forged snapshot body with a valid checksum, or a state given
straight to ``from_state``, restored a model with non-finite support rows or coefficients
(an OnlineSVR then predicted nan/inf), duplicate or missing feature names, a negative
``n_learned`` or ``next_id`` and duplicate ids; missing or mistyped keys raised bare
KeyError/TypeError/AttributeError, and ``next_id=10**30`` an OverflowError. The oracle is
what a learner writes (docs/snapshot-format.md): each edit below makes a state no learner
writes, and the one that keeps within those rules (feature names beyond the rows' width)
must still load.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from river import datasets
from sealed import sealed

from streamk import (
    FeatureIndex,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    OnlineRanker,
    OnlineSVR,
    Projectron,
    SupportSet,
)
from streamk.errors import SnapshotError
from streamk.snapshot import loads

ROWS = list(itertools.islice(datasets.Phishing(), 120))


def _trained() -> dict[str, Any]:
    models = {
        "KernelPerceptron": KernelPerceptron(budget=Projectron(30)),
        "OnlineSVR": OnlineSVR(budget=30),
        "OnlineRanker": OnlineRanker(ranks=(1, 2, 3), budget=30),
        "KernelNovelty": KernelNovelty(budget=30),
        "KernelAdatron": KernelAdatron(budget=30),
    }
    for x, y in ROWS:
        models["KernelPerceptron"].learn_one(x, y)
        models["OnlineSVR"].learn_one(x, float(y))
        models["OnlineRanker"].learn_one(x, 1 + int(y) + int(x["https"] > 0.5))
        models["KernelNovelty"].learn_one(x)
        models["KernelAdatron"].learn_one(x, y)
    return models


MODELS = _trained()


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """An edit setting ``state[a][b]...`` (path ``a.b``) to ``value``."""

    def edit(state: dict) -> None:
        *head, last = path.split(".")
        for key in head:
            state = state[key]
        state[last] = value(state[last]) if callable(value) else value

    return edit


def _first(value: float) -> Callable[[np.ndarray], np.ndarray]:
    def put(a: np.ndarray) -> np.ndarray:
        a = a.copy()
        a.flat[0] = value
        return a

    return put


def _drop(key: str) -> Callable[[dict], None]:
    return lambda state: state.pop(key)


#: (edit, the key the message must name, a word of what is wrong)
HOSTILE: dict[str, tuple[Callable[[dict], None], str, str]] = {
    "X NaN": (_set("support.X", _first(np.nan)), "'support.X'", "finite"),
    "X inf": (_set("support.X", _first(np.inf)), "'support.X'", "finite"),
    "coef inf": (_set("support.coef", _first(np.inf)), "'support.coef'", "finite"),
    "coef NaN": (_set("support.coef", _first(np.nan)), "'support.coef'", "finite"),
    "ids duplicated": (_set("support.ids", np.zeros_like), "'support.ids'", "twice"),
    "ids negative": (_set("support.ids", lambda a: a - a.max() - 1), "'support.ids'", "[0, 2**63)"),
    "ids floats": (_set("support.ids", lambda a: a.astype(float)), "'support.ids'", "integers"),
    "next_id -1": (_set("support.next_id", -1), "'support.next_id'", "above every id"),
    "next_id at an id": (
        _set("support.next_id", 0),  # ids go up to next_id - 1: 0 is below most
        "'support.next_id'",
        "above every id",
    ),
    "next_id 10**30": (_set("support.next_id", 10**30), "'support.next_id'", "2**63"),
    "next_id str": (_set("support.next_id", "7"), "'support.next_id'", "must be an int"),
    "keep_gram str": (_set("support.keep_gram", "yes"), "'support.keep_gram'", "bool"),
    "support missing X": (lambda s: s["support"].pop("X"), "'support' is missing 'X'", ""),
    "support a list": (_set("support", []), "'support' must be a map", ""),
    "kernel garbage": (_set("support.kernel", {"name": "os.system"}), "'support.kernel'", ""),
    "n_learned -5": (_set("n_learned", -5), "'n_learned'", "[0, 2**63)"),
    "n_learned str": (_set("n_learned", "x"), "'n_learned'", "must be an int"),
    "n_learned bool": (_set("n_learned", True), "'n_learned'", "must be an int"),
    "features str": (_set("features", "abc"), "'features'", "must be a list"),
    "features duplicated": (_set("features", lambda f: [f[0]] * len(f)), "'features'", "twice"),
    "features 1 and True": (_set("features", lambda f: [1, True, *f[2:]]), "'features'", "twice"),
    "features too few": (_set("features", lambda f: f[:1]), "'features'", "needs its name"),
    "feature unhashable": (_set("features", lambda f: [{"a": 1}, *f[1:]]), "'features[0]'", ""),
    "params a str": (_set("params", "x"), "'params'", "map"),
    "params bad kernel": (_set("params.kernel", 5), "'params'", "Kernel"),
    "scale a str": (_set("scale", "x"), "'scale'", "invalid"),
    "policy garbage": (_set("policy", "x"), "'policy'", "invalid"),
    "no params": (_drop("params"), "missing 'params'", ""),
    "no features": (_drop("features"), "missing 'features'", ""),
    "no support": (_drop("support"), "missing 'support'", ""),
    "no scale": (_drop("scale"), "missing 'scale'", ""),
    "no policy": (_drop("policy"), "missing 'policy'", ""),
    "no n_learned": (_drop("n_learned"), "missing 'n_learned'", ""),
}


def _hostile(name: str, case: str) -> tuple[dict, str, str]:
    edit, key, word = HOSTILE[case]
    state = copy.deepcopy(MODELS[name].state())
    edit(state)
    return state, key, word


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("case", list(HOSTILE))
def test_from_state_refuses_a_hostile_state_naming_the_key(name, case):
    state, key, word = _hostile(name, case)
    with pytest.raises(SnapshotError) as info:
        type(MODELS[name]).from_state(state)
    message = str(info.value)
    assert key in message and word in message, message


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("case", ["X NaN", "coef inf", "ids duplicated", "next_id -1",
                                  "n_learned -5", "features duplicated", "features too few",
                                  "features str"])  # fmt: skip
def test_a_forged_snapshot_with_a_valid_checksum_is_refused_on_load(name, case):
    state, key, _ = _hostile(name, case)
    with pytest.raises(SnapshotError, match="from_state rejected") as info:
        loads(sealed(state, name))
    assert key in str(info.value)


def test_a_restored_svr_never_predicts_nan_from_a_forged_state():
    """The audit's symptom: loads accepted it, then every prediction was nan or inf."""
    for case in ("X NaN", "coef inf"):
        state, _, _ = _hostile("OnlineSVR", case)
        with pytest.raises(SnapshotError):
            loads(sealed(state, "OnlineSVR"))


@pytest.mark.parametrize("name", list(MODELS))
def test_states_learners_write_still_load_alike(name):
    """Controls: the unedited state, more feature names than the rows are wide (features
    met after the last support vector), and ids out of order all load and predict alike."""
    model = MODELS[name]
    state = copy.deepcopy(model.state())
    state["features"] = [*state["features"], "met later"]
    order = np.arange(len(state["support"]["ids"]))[::-1]
    probe = [x for x, _ in ROWS[:20]]
    same = loads(sealed(copy.deepcopy(model.state()), name)).model
    wider = type(model).from_state(state)  # a zero column more: equal up to rounding
    for x in probe:
        assert same.predict_one(x) == model.predict_one(x)
        assert wider.predict_one(x) == pytest.approx(model.predict_one(x), rel=1e-12)
    zeros = copy.deepcopy(model.state())  # an all-zero column beyond the names (consolidation)
    X = zeros["support"]["X"]
    zeros["support"]["X"] = np.hstack([X, np.zeros((X.shape[0], 1))])
    zeros["support"].pop("buffers")
    padded = type(model).from_state(zeros)
    for x in probe:
        assert padded.predict_one(x) == pytest.approx(model.predict_one(x), rel=1e-12)
    sup = copy.deepcopy(model.state())["support"]
    sup = {**sup, "ids": sup["ids"][order], "X": sup["X"][order], "coef": sup["coef"][order]}
    sup.pop("cache")
    assert SupportSet.from_state(sup).n == len(order)


def test_support_and_feature_states_alone_raise_snapshot_errors():
    """The parts' own ``from_state``, called directly, name the key too."""
    sup = MODELS["OnlineSVR"].state()["support"]
    with pytest.raises(SnapshotError, match="'support.next_id'"):
        SupportSet.from_state({**sup, "next_id": 10**30})
    with pytest.raises(SnapshotError, match="'support' is missing 'ids'"):
        SupportSet.from_state({k: v for k, v in sup.items() if k != "ids"})
    with pytest.raises(SnapshotError, match="'features' names 'a' twice"):
        FeatureIndex.from_state(["a", "b", "a"])
    assert FeatureIndex.from_state(["a", ["t", 1]]).names == ["a", ("t", 1)]


def test_an_object_support_state_alone_is_checked_as_a_vector_one():
    """``ObjectSupportSet.from_state`` (strings, trees), called directly, skipped the
    support checks the learner ran before it: they are the set's own now."""
    from streamk import KernelPerceptron, Spectrum
    from streamk.learners.objects import ObjectSupportSet

    model = KernelPerceptron(kernel=Spectrum(2), budget=10)
    for s, y in [("abab", True), ("zzzz", False), ("abzz", True), ("zzab", False)]:
        model.learn_one(s, y)
    sup = copy.deepcopy(model.state()["support"])
    assert len(sup["ids"]) >= 2
    with pytest.raises(SnapshotError, match="'support.ids' holds an id twice"):
        ObjectSupportSet.from_state({**sup, "ids": [sup["ids"][0]] * len(sup["ids"])})
    with pytest.raises(SnapshotError, match="'support.next_id'"):
        ObjectSupportSet.from_state({**sup, "next_id": -1})
    assert ObjectSupportSet.from_state(sup).n == len(sup["ids"])
