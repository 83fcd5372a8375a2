"""Consolidation's guard: an unconsolidated copy learns beside the consolidated learner and the
one that erred less over the last N labelled events serves (``streamk.consolidation.guard``).

Oracles: the two lineages run by hand (a plain ``Consolidated(..., guard=0)`` and the bare
learner, fed the same events) with the serving rule written plainly (a deque of the last N
loss differences, ``math.fsum``, a tie keeps the one serving); the uninterrupted run for
restores; the bare learner's and the unguarded wrapper's own prequential scores for the
accuracy the guard promises (docs/operations.md, Consolidation's guard).
"""

from __future__ import annotations

import collections
import copy
import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from river import datasets, metrics
from river.datasets import synth
from sealed import sealed

from streamk import snapshot
from streamk.consolidation import Consolidated
from streamk.consolidation.guard import MAX_GUARD, Guard
from streamk.engine import Engine, EngineConfig
from streamk.engine.runner import consolidated
from streamk.errors import ConfigError, SnapshotError
from streamk.learners import KernelAdatron, KernelPerceptron, MarginPerceptron, OnlineSVR
from streamk.merge import merge_snapshots
from streamk.sources.iterable import IterableSource

BANANAS = list(itertools.islice(datasets.Bananas(), 2400))
HYPER = list(synth.Hyperplane(seed=42, n_features=50).take(3000))
PARAMS = {"every": 170, "window_size": 150}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


#: the engine's configuration of PARAMS (``streamk.engine.runner.consolidated``)
CONFIG = {
    "consolidate_every": 170,
    "consolidate_window": 150,
    "consolidate_mode": "sync",
    "consolidate_guard": 500,
}


def friedman(n: int = 1500) -> list[tuple[dict, float]]:
    return list(synth.Friedman(seed=7).take(n))


def plain_guard(make, params: dict, size: int, data: list) -> tuple:
    """The guard written plainly: what it serves before each event, the lineage serving after
    each event, the two lineages at the end and the last ``size`` loss differences."""
    regression = isinstance(make(), OnlineSVR)

    def loss(said, y):
        return abs(said - y) if regression else float(said != y)

    cons, online = Consolidated(make(), guard=0, **params), make()
    diffs: collections.deque = collections.deque(maxlen=size)
    serving, said, lineage = "consolidated", [], []
    for x, y in data:
        a, b = cons.predict_one(x), online.predict_one(x)
        said.append(a if serving == "consolidated" else b)
        cons.learn_one(x, y)
        online.learn_one(x, y)
        diffs.append(loss(a, y) - loss(b, y))
        total = math.fsum(diffs)
        serving = "online" if total > 0 else "consolidated" if total < 0 else serving
        lineage.append(serving)
    return said, lineage, cons, online, diffs


def served_and_lineage(model, data: list) -> tuple[list, list]:
    said, lineage = [], []
    for x, y in data:
        said.append(model.predict_one(x))
        model.learn_one(x, y)
        lineage.append(model.serving)
    return said, lineage


CASES = {
    "perceptron-hyperplane50": (lambda: KernelPerceptron(budget=100), HYPER, 200),
    "perceptron-bananas": (lambda: KernelPerceptron(budget=60), BANANAS, 100),
    "margin-bananas": (lambda: MarginPerceptron(budget=60), BANANAS, 100),
    "adatron-hyperplane50": (lambda: KernelAdatron(budget=100), HYPER[:1500], 100),
    "svr-friedman": (lambda: OnlineSVR(budget=60), friedman(), 100),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_guard_serves_the_lineage_the_plain_rule_picks(case):
    make, data, size = CASES[case]
    said, lineage, cons, online, diffs = plain_guard(make, PARAMS, size, data)
    model = Consolidated(make(), guard=size, **PARAMS)
    got_said, got_lineage = served_and_lineage(model, data)
    assert got_lineage == lineage
    assert got_said == said
    assert len(set(lineage)) == 2, "the case must make the guard switch"
    probe = [x for x, _ in data[-200:]]
    # the consolidated lineage is the unguarded wrapper's; the shadow is the bare learner
    assert [model.model.predict_one(x) for x in probe] == [cons.predict_one(x) for x in probe]
    assert model.n_consolidations == cons.n_consolidations > 0
    shadow = model.guard_.shadow
    assert [shadow.predict_one(x) for x in probe] == [online.predict_one(x) for x in probe]
    assert model.guard_.loss_difference() == pytest.approx(math.fsum(diffs) / len(diffs))


def test_learn_predict_many_says_what_the_served_lineage_said():
    make, data, size = CASES["perceptron-bananas"]
    said = plain_guard(make, PARAMS, size, data)[0]
    model = Consolidated(make(), guard=size, **PARAMS)
    out = []
    for i in range(0, len(data), 300):
        block = data[i : i + 300]
        out += model.learn_predict_many([x for x, _ in block], [y for _, y in block])
    assert out == said


def prequential(model, data, metric) -> float:
    for x, y in data:
        metric.update(y, model.predict_one(x))
        model.learn_one(x, y)
    return metric.get()


def test_the_guard_keeps_consolidation_from_lowering_accuracy():
    """Hyperplane, 50 features: an RBF solution needs nearly every window row, so the budget
    cannot hold it and consolidation loses accuracy; the guard serves the on-line lineage."""
    params = {"every": 500, "window_size": 500}
    online = prequential(KernelPerceptron(budget=200), HYPER, metrics.Accuracy())
    plain = prequential(
        Consolidated(KernelPerceptron(budget=200), guard=0, **params), HYPER, metrics.Accuracy()
    )
    guarded = Consolidated(KernelPerceptron(budget=200), guard=500, **params)
    score = prequential(guarded, HYPER, metrics.Accuracy())
    assert plain < online - 0.02  # the harm the guard is for
    assert score >= online - 0.01 and score > plain + 0.02
    assert guarded.serving == "online"


def test_the_guard_keeps_what_consolidation_gains():
    params = {"every": 500, "window_size": 500}
    online = prequential(KernelPerceptron(budget=100), BANANAS, metrics.Accuracy())
    plain = prequential(
        Consolidated(KernelPerceptron(budget=100), guard=0, **params), BANANAS, metrics.Accuracy()
    )
    guarded = Consolidated(KernelPerceptron(budget=100), **params)  # the default guard, 500
    score = prequential(guarded, BANANAS, metrics.Accuracy())
    assert plain > online + 0.01  # consolidation helps here
    assert score >= plain - 0.01
    assert guarded.guard == 500


@pytest.mark.parametrize("case", ["perceptron-bananas", "svr-friedman"])
def test_a_guarded_model_restored_anywhere_predicts_like_the_uninterrupted_one(case):
    make, data, size = CASES[case]
    whole = Consolidated(make(), guard=size, **PARAMS)
    _, lineage = served_and_lineage(whole, data)
    switches = [i + 1 for i in range(len(lineage) - 1) if lineage[i] != lineage[i + 1]]
    stops = sorted({switches[0], switches[0] + 1, switches[-1], len(data) // 3})
    model = Consolidated(make(), guard=size, **PARAMS)
    said, start = [], 0
    for stop in [*stops, len(data)]:
        for x, y in data[start:stop]:
            said.append(model.predict_one(x))
            model.learn_one(x, y)
        model = snapshot.loads(snapshot.dumps(model)).model
        start = stop
    fresh = Consolidated(make(), guard=size, **PARAMS)
    assert said == served_and_lineage(fresh, data)[0]
    assert model.serving == whole.serving
    assert model.state()["guard"]["diffs"].tobytes() == whole.state()["guard"]["diffs"].tobytes()
    probe = [x for x, _ in data[:300]]
    assert [model.predict_one(x) for x in probe] == [whole.predict_one(x) for x in probe]


def test_the_engine_reports_which_lineage_serves_and_restarts_exactly(tmp_path):
    data = HYPER[:2000]
    wrap = consolidated(
        {
            "consolidate_every": 300,
            "consolidate_window": 300,
            "consolidate_mode": "sync",
            "consolidate_guard": 200,
        }
    )
    models = []

    def factory():
        models.append(wrap(KernelPerceptron(budget=100)))
        return models[-1]

    engine = Engine(
        IterableSource(lambda: iter(data), name="hyper"),
        factory,
        config=EngineConfig(snapshot_every=0),
    )
    engine.run()
    model = engine.model
    assert model.serving == "online"
    assert engine.metrics.get("consolidation_serving_online") == 1.0
    assert "streamk_consolidation_serving_online 1" in engine.metrics.render()
    assert engine.metrics.get("support_size") == model.guard_.shadow.n_support
    assert model.guard_.shadow.n_support != model.model.n_support
    oracle = Consolidated(KernelPerceptron(budget=100), every=300, window_size=300, guard=200)
    for x, y in data:
        oracle.learn_one(x, y)
    probe = [x for x, _ in HYPER[2000:2300]]
    assert [model.predict_one(x) for x in probe] == [oracle.predict_one(x) for x in probe]


def test_a_changed_guard_keeps_the_window_and_the_learner_that_served(caplog):
    """A restart under another ``consolidate_guard``: the window, counters and trigger
    state go on, around the learner that served, with a fresh guard; the result predicts
    like a wrapper built by hand from those parts."""
    make, data, size = CASES["perceptron-hyperplane50"]
    model = Consolidated(make(), guard=size, **PARAMS)
    served_and_lineage(model, data[:1500])
    assert model.serving == "online"
    config = {**CONFIG, "consolidate_guard": size}
    restored = snapshot.loads(snapshot.dumps(model)).model
    assert consolidated(config)(restored) is restored and restored.guard_ is not None
    for new_size in (50, 0):
        restored = snapshot.loads(snapshot.dumps(model)).model
        shadow = restored.guard_.shadow
        with caplog.at_level("WARNING"):
            other = consolidated({**config, "consolidate_guard": new_size})(restored)
        assert f"consolidate_guard is {new_size}" in caplog.text
        assert other is restored and other.guard == new_size
        assert other.model is shadow and other.consolidator_.n_seen == 1500
        assert (other.guard_ is None) == (new_size == 0)
        oracle = Consolidated(make(), guard=new_size, **PARAMS)
        oracle.model = copy.deepcopy(model.guard_.shadow)
        oracle.consolidator_ = copy.deepcopy(model.consolidator_)
        if new_size:
            oracle.guard_ = Guard(oracle.model, new_size)
        rest = data[1500:2500]
        assert served_and_lineage(other, rest) == served_and_lineage(oracle, rest)
    off = consolidated({**config, "consolidate_every": 0})(
        snapshot.loads(snapshot.dumps(model)).model
    )
    assert [off.predict_one(x) for x, _ in data[2500:]] == [
        model.guard_.shadow.predict_one(x) for x, _ in data[2500:]
    ]


def test_workers_merge_the_lineage_that_serves():
    make, data, size = CASES["perceptron-hyperplane50"]
    model = Consolidated(make(), guard=size, **PARAMS)
    served_and_lineage(model, data[:1500])
    assert model.serving == "online"
    snap = snapshot.loads(snapshot.dumps(model))
    merged = merge_snapshots({"w0": snap}).model
    shadow = model.guard_.shadow
    probe = [x for x, _ in data[1500:1700]]
    assert [merged.predict_one(x) for x in probe] == [shadow.predict_one(x) for x in probe]
    assert [merged.predict_one(x) for x in probe] != [model.model.predict_one(x) for x in probe]


def test_a_snapshot_from_before_guards_loads_unguarded_and_keeps_its_window():
    """It loads as written (no guard); under the engine's default configuration
    (``consolidate_guard = 500``) its window and counters go on, now guarded."""
    model = Consolidated(KernelPerceptron(budget=60), guard=0, **PARAMS)
    served_and_lineage(model, BANANAS[:400])
    state = model.state()
    del state["guard"]  # what a snapshot written before guards holds
    restored = snapshot.loads(sealed(state)).model
    assert restored.guard == 0 and restored.guard_ is None
    probe = [x for x, _ in BANANAS[400:600]]
    assert [restored.predict_one(x) for x in probe] == [model.predict_one(x) for x in probe]
    upgraded = consolidated(CONFIG)(restored)
    assert upgraded is restored and upgraded.guard == 500
    assert upgraded.consolidator_.n_seen == 400 and upgraded.consolidator_.window.n == 150


def _guarded_state() -> dict:
    model = Consolidated(KernelPerceptron(budget=60), guard=100, **PARAMS)
    served_and_lineage(model, BANANAS[:300])
    return model.state()


HOSTILE = {
    "size-huge": ("size", MAX_GUARD + 1),
    "size-zero": ("size", 0),
    "size-bool": ("size", True),
    "pos-outside": ("pos", 100),
    "n-negative": ("n", -1),
    "diffs-short": ("diffs", np.zeros(99)),
    "diffs-int": ("diffs", np.zeros(100, dtype=np.int64)),
    "diffs-nan": ("diffs", np.full(100, np.nan)),
    "diffs-list": ("diffs", [0.0] * 100),
    "serving-unknown": ("serving", "both"),
    "shadow-other-class": ("shadow_class", "OnlineSVR"),
    "shadow-unknown-class": ("shadow_class", "os.system"),
    "shadow-not-a-map": ("shadow", [1, 2]),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_guard_state_is_refused(name):
    key, value = HOSTILE[name]
    state = _guarded_state()
    state["guard"][key] = value
    with pytest.raises(SnapshotError):
        snapshot.loads(sealed(state))


@pytest.mark.parametrize("size", [-1, 1.5, True, MAX_GUARD + 1, "500"])
def test_a_bad_guard_is_a_config_error(size):
    with pytest.raises(ConfigError, match="guard"):
        Consolidated(KernelPerceptron(budget=60), guard=size, **PARAMS)
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        with pytest.raises(ConfigError):
            Guard(KernelPerceptron(budget=60), size)


def test_every_prediction_method_asks_the_lineage_that_serves():
    make, data, size = CASES["perceptron-hyperplane50"]
    model = Consolidated(make(), guard=size, **PARAMS)
    served_and_lineage(model, data[:1500])
    assert model.serving == "online"
    shadow, probe = model.guard_.shadow, [x for x, _ in data[1500:1700]]
    frame = pd.DataFrame(probe)
    assert model.served_model is shadow
    assert model.predict_many(frame).tolist() == shadow.predict_many(frame).tolist()
    assert model.predict_many(frame).tolist() != model.model.predict_many(frame).tolist()
    assert [model.predict_proba_one(x) for x in probe] == [
        shadow.predict_proba_one(x) for x in probe
    ]
    pd.testing.assert_frame_equal(model.predict_proba_many(frame), shadow.predict_proba_many(frame))


def test_snapshot_show_describes_the_learner_that_serves(tmp_path, capsys):
    import json

    from streamk.cli import main
    from streamk.snapshot import SnapshotStore

    make, data, size = CASES["perceptron-hyperplane50"]
    model = Consolidated(make(), guard=size, **PARAMS)
    served_and_lineage(model, data[:1500])
    assert model.serving == "online"
    assert model.guard_.shadow.n_support != model.model.n_support
    SnapshotStore(tmp_path).save(snapshot.dumps(model, seq=1), "model")
    assert main(["snapshot", "show", str(tmp_path / "model"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["serving"] == "online"
    assert info["support_size"] == model.guard_.shadow.n_support
    assert main(["snapshot", "show", str(tmp_path / "model")]) == 0
    assert "serving     online" in capsys.readouterr().out
