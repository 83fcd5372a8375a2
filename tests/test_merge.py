"""Merging workers' models (streamk.merge): exactness before compression, accuracy, budgets.

Oracles: each worker's own decision function evaluated on probe points and combined by hand
(``sum_i w_i f_i``); the novelty centre's distance written out from the kernel; the pooled
``gamma="auto"`` width from NumPy's variance of the concatenated warm-up rows; accuracy of the
workers and of one model learned on the whole stream, in the same test.
"""

from __future__ import annotations

import copy
import itertools
import math
import warnings

import numpy as np
import pytest
from river import datasets
from river.datasets import synth

from streamk import snapshot
from streamk.budget import Projectron, RemoveOldest
from streamk.errors import MergeError
from streamk.kernels import RBF, Laplacian
from streamk.learners import (
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    MarginPerceptron,
    OnlineRanker,
    OnlineSVR,
)
from streamk.merge import merge_models, merge_snapshots, snapshot_sources, union_state

BANANAS = list(datasets.Bananas())
RNG = np.random.default_rng(7)
PROBES = [{"1": float(a), "2": float(b)} for a, b in RNG.normal(0, 1.2, size=(60, 2))]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def split(data, k):
    """Round-robin partition of a stream over ``k`` workers."""
    return [data[i::k] for i in range(k)]


def train(model, data):
    for x, y in data:
        model.learn_one(x, y)
    return model


def ranks_of(data):
    return [(x, 1 + min(2, max(0, int((x["1"] + 2.5) // 1.7)))) for x, _ in data]


def regression_of(data):
    return [(x, math.sin(x["1"]) + 0.3 * x["2"]) for x, _ in data]


def decision(model, x):
    """The worker's own real-valued output: margins, regression value, ranking score."""
    if isinstance(model, OnlineSVR):
        return np.array([model.predict_one(x)])
    if isinstance(model, OnlineRanker):
        return np.array([model.score_one(x)])
    return np.asarray(model.decision_function_one(x), dtype=np.float64)


def novelty_oracle(models, weights, x):
    """``||phi(x) - sum_i w_i c_i||^2`` with ``c_i = sum_j a_ij phi(x_ij) / sum_j a_ij``."""
    kern = models[0].kernel_
    rows, coefs = [], []
    for m, w in zip(models, weights):
        S = m.support_
        names = m._features.names
        X = np.array([[dict(zip(names, r)).get(k, 0.0) for k in ("1", "2")] for r in S.X])
        rows.append(X)
        coefs.append(w * S.coef[:, 0] / S.coef[:, 0].sum())
    X, a = np.vstack(rows), np.concatenate(coefs)
    q = np.array([[x["1"], x["2"]]])
    return float(kern.gram(q, q)[0, 0] - 2 * kern.gram(q, X)[0] @ a + a @ kern.gram(X, X) @ a)


LEARNERS = {
    "perceptron": (lambda b: KernelPerceptron(kernel=RBF(1.0), budget=b), None),
    "margin": (lambda b: MarginPerceptron(kernel=RBF(1.0), budget=b, margin=1.0), None),
    "adatron": (lambda b: KernelAdatron(kernel=RBF(1.0), C=1.0, budget=b), None),
    "svr": (lambda b: OnlineSVR(kernel=RBF(1.0), epsilon=0.1, C=1.0, budget=b), regression_of),
    "ranker": (lambda b: OnlineRanker(kernel=RBF(1.0), ranks=(1, 2, 3), budget=b), ranks_of),
}


def workers(kind, budget, k=3, n=900, feature_orders=False):
    make, relabel = LEARNERS[kind]
    data = BANANAS[:n] if relabel is None else relabel(BANANAS[:n])
    out = []
    for i, part in enumerate(split(data, k)):
        if feature_orders and i % 2:  # a worker that met the features in the other order
            part = [(dict(reversed(list(x.items()))), y) for x, y in part]
        out.append(train(make(budget), part))
    return out


# -- identity -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(LEARNERS))
def test_merging_one_model_gives_the_same_function(kind):
    (model,) = workers(kind, 100, k=1, n=600)
    merged = merge_models([model])
    assert type(merged) is type(model) and merged is not model
    for x in PROBES:
        np.testing.assert_allclose(decision(merged, x), decision(model, x), rtol=1e-12, atol=1e-12)
        if kind != "svr":
            assert merged.predict_one(x) == model.predict_one(x)


@pytest.mark.parametrize("kind", sorted(LEARNERS))
def test_merging_copies_with_equal_weights_gives_the_same_function(kind):
    (model,) = workers(kind, 100, k=1, n=600)
    assert model.n_support > 40  # three copies would exceed the budget without deduplication
    merged = merge_models([model, copy.deepcopy(model), copy.deepcopy(model)], weights=[1, 1, 1])
    assert merged.n_support == model.n_support
    for x in PROBES:
        np.testing.assert_allclose(decision(merged, x), decision(model, x), rtol=1e-9, atol=1e-12)
        if kind != "svr":
            assert merged.predict_one(x) == model.predict_one(x)


def test_merging_copies_of_a_novelty_detector_gives_the_same_scores():
    model = KernelNovelty(kernel=RBF(1.0), budget=150)
    for x, _ in BANANAS[:400]:
        model.learn_one(x)
    merged = merge_models([model, copy.deepcopy(model)])
    assert math.isclose(merged.threshold_, model.threshold_, rel_tol=1e-9)
    for x in PROBES:
        assert math.isclose(merged.score_one(x), model.score_one(x), rel_tol=1e-9, abs_tol=1e-12)


# -- the weighted sum, before compression ---------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(LEARNERS))
@pytest.mark.parametrize("weights", [None, [0.5, 0.2, 0.3]])
def test_union_is_the_weighted_sum_of_the_workers_functions(kind, weights):
    ws = workers(kind, None, n=700, feature_orders=True)
    w = np.array([m.n_learned for m in ws] if weights is None else weights, dtype=float)
    w /= w.sum()
    merged = merge_models(ws, weights=weights)  # unbudgeted: nothing is compressed
    assert merged.n_support == sum(m.n_support for m in ws)
    assert merged.n_learned == sum(m.n_learned for m in ws)
    for x in PROBES:
        expected = sum(wi * decision(m, x) for wi, m in zip(w, ws))
        np.testing.assert_allclose(decision(merged, x), expected, rtol=1e-10, atol=1e-12)
    if kind == "ranker":  # thresholds: sum_i w_i b_i, so each decision is the averaged one
        b = sum(wi * m.thresholds_ for wi, m in zip(w, ws))
        np.testing.assert_allclose(merged.thresholds_, b)
        for x in PROBES:
            f = sum(wi * m.score_one(x) for wi, m in zip(w, ws))
            assert merged.predict_one(x) == (1, 2, 3)[int(np.sum(b <= f))]


def test_union_of_budgeted_workers_is_exact_before_compression():
    ws = workers("perceptron", 40)
    assert [m.n_support for m in ws] == [40, 40, 40]
    u = union_state(ws, None, "pool")
    assert u.n_rows == 120
    union = KernelPerceptron.from_state(u.state)
    for x in PROBES:
        expected = sum(wi * m.decision_function_one(x) for wi, m in zip(u.weights, ws))
        np.testing.assert_allclose(union.decision_function_one(x), expected, rtol=1e-10)


def test_classes_met_in_other_orders_and_missing_classes_are_aligned():
    """Binary workers whose first class differs (opposite signs), and a worker that never saw
    a third class: oracle is each worker's function lifted by hand to one-vs-rest columns."""
    names = {True: "pos", False: "neg"}
    data = [(x, names[y]) for x, y in BANANAS[:900]]
    a = train(KernelPerceptron(kernel=RBF(1.0)), data[0::3])  # first label decides the sign
    b = train(
        KernelPerceptron(kernel=RBF(1.0)), [d for d in data[1::3] if d[1] == "pos"][:1] + data[1::3]
    )
    c_data = [(x, "far" if x["1"] > 1.5 else y) for x, y in data[2::3]]
    c = train(KernelPerceptron(kernel=RBF(1.0)), c_data)
    assert a.classes_[0] != b.classes_[0] and "far" in c.classes_
    merged = merge_models([a, b, c], weights=[1, 1, 1])
    classes = merged.classes_
    assert sorted(classes) == ["far", "neg", "pos"]

    def lifted(m, x):
        f = m.decision_function_one(x)
        if len(m.classes_) > 2:
            return np.array([f[m.classes_.index(k)] for k in classes])
        pos = m._labels.classes[m._labels.signs.index(1)]
        return np.array(
            [f[0] if k == pos else (-f[0] if k in m.classes_ else 0.0) for k in classes]
        )

    for x in PROBES:
        expected = sum(lifted(m, x) for m in (a, b, c)) / 3
        np.testing.assert_allclose(
            merged.decision_function_one(x), expected, rtol=1e-10, atol=1e-12
        )

    binary = merge_models([a, b], weights=[1, 1])  # opposite signs, no third class
    pos = binary._labels.classes[binary._labels.signs.index(1)]

    def towards(m, x):
        f = m.decision_function_one(x)[0]
        return f if m._labels.classes[m._labels.signs.index(1)] == pos else -f

    for x in PROBES:
        expected = (towards(a, x) + towards(b, x)) / 2
        assert math.isclose(
            binary.decision_function_one(x)[0], expected, rel_tol=1e-10, abs_tol=1e-12
        )


@pytest.mark.parametrize("weights", [None, [3.0, 1.0]])
def test_novelty_centre_is_the_weighted_mean_of_the_workers_centres(weights):
    ws = []
    for part in split(BANANAS[:600], 2):
        m = KernelNovelty(kernel=RBF(1.0))
        for x, _ in part[: 200 + 50 * len(ws)]:  # unequal shares
            m.learn_one(x)
        ws.append(m)
    w = np.array([m.n_learned for m in ws] if weights is None else weights, dtype=float)
    w /= w.sum()
    merged = merge_models(ws, weights=weights)
    for x in PROBES:
        assert math.isclose(
            merged.score_one(x), novelty_oracle(ws, w, x), rel_tol=1e-9, abs_tol=1e-9
        )
    if weights is None:  # default weights, unbudgeted workers: the union of every event
        assert merged.support_.coef[:, 0].tolist() == [1.0] * merged.n_support


# -- gamma="auto" ---------------------------------------------------------------------------------
def test_auto_gamma_resolved_differently_is_pooled_or_refused():
    ws = [train(KernelPerceptron(budget=100), part) for part in split(BANANAS[:1500], 3)]
    gammas = [m.kernel_.gamma for m in ws]
    assert len(set(gammas)) == 3
    warm = np.vstack(
        [[[x["1"], x["2"]] for x, _ in part[:200]] for part in split(BANANAS[:1500], 3)]
    )
    merged = merge_models(ws)
    assert math.isclose(merged.kernel_.gamma, 2.0 / warm.var(axis=0).sum(), rel_tol=1e-12)
    with pytest.raises(MergeError, match="gamma='auto' differently"):
        merge_models(ws, gamma="strict")


# -- errors ---------------------------------------------------------------------------------------
def test_mismatches_are_refused_with_the_cause():
    p = train(KernelPerceptron(kernel=RBF(1.0), budget=50), BANANAS[:200])
    with pytest.raises(MergeError, match="only models of one learner class"):
        merge_models([p, train(MarginPerceptron(kernel=RBF(1.0), budget=50), BANANAS[:200])])
    with pytest.raises(MergeError, match="kernel="):
        merge_models([p, train(KernelPerceptron(kernel=RBF(2.0), budget=50), BANANAS[:200])])
    with pytest.raises(MergeError, match="kernel="):
        merge_models([p, train(KernelPerceptron(kernel=Laplacian(1.0), budget=50), BANANAS[:200])])
    with pytest.raises(MergeError, match="budget="):
        merge_models([p, train(KernelPerceptron(kernel=RBF(1.0), budget=60), BANANAS[:200])])
    r1, r2 = (
        OnlineRanker(kernel=RBF(1.0), ranks=(1, 2, 3)),
        OnlineRanker(kernel=RBF(1.0), ranks=(1, 2)),
    )
    with pytest.raises(MergeError, match="ranks="):
        merge_models([r1, r2])
    with pytest.raises(MergeError, match="weights"):
        merge_models([p, p], weights=[1.0, -1.0])
    with pytest.raises(MergeError, match="exceeds the learner's own budget"):
        merge_models([p], budget=51)
    with pytest.raises(MergeError, match="at least one model"):
        merge_models([])
    with pytest.raises(MergeError, match="compress"):
        merge_models([p], compress="zip")


# -- compression and learning on ------------------------------------------------------------------
@pytest.mark.parametrize("method", ["project", "solve", "policy"])
@pytest.mark.parametrize("kind", ["perceptron", "adatron", "svr"])
def test_budget_is_respected_after_compression_and_the_model_keeps_learning(kind, method):
    ws = workers(kind, 80)
    merged = merge_models(ws, budget=60, compress=method)
    assert merged.n_support <= 60
    make, relabel = LEARNERS[kind]
    more = BANANAS[900:1300] if relabel is None else relabel(BANANAS[900:1300])
    train(merged, more)
    assert merged.n_support <= 80  # its own policy's budget from then on
    assert merged.n_learned == 900 + 400
    restored = snapshot.loads(snapshot.dumps(merged)).model
    for x in PROBES[:10]:
        assert restored.predict_one(x) == merged.predict_one(x)


def test_a_merged_perceptron_learns_by_the_perceptron_rule():
    """After a merge, a mistake adds ``y k(x, .)`` to the function (Alg. 7.52), nothing else."""
    merged = merge_models(workers("perceptron", None, n=600))
    x, y = next((x, y) for x, y in BANANAS[600:] if merged.predict_one(x) != y)
    before = [merged.decision_function_one(q)[0] for q in PROBES]
    merged.learn_one(x, y)
    sign = merged._labels.signs[merged.classes_.index(y)]
    q = np.array([[p["1"], p["2"]] for p in PROBES])
    expected = np.array(before) + sign * RBF(1.0).gram(q, np.array([[x["1"], x["2"]]]))[:, 0]
    np.testing.assert_allclose([merged.decision_function_one(p)[0] for p in PROBES], expected)


def test_a_merged_model_learns_a_block_as_it_learns_one_by_one():
    """``learn_many`` (compiled pass, tracked kernel block) equals ``learn_one`` after a merge."""
    merged = merge_models(workers("perceptron", 60))
    twin = copy.deepcopy(merged)
    block = BANANAS[900:1400]
    import pandas as pd

    merged.learn_many(pd.DataFrame([x for x, _ in block]), pd.Series([y for _, y in block]))
    train(twin, block)
    assert merged.n_support == twin.n_support <= 60
    for x in PROBES:
        np.testing.assert_allclose(
            merged.decision_function_one(x), twin.decision_function_one(x), rtol=1e-9, atol=1e-12
        )


def test_solve_compression_needs_labelled_support_rows():
    ws = workers("ranker", 50)
    with pytest.raises(MergeError, match="compress='solve'"):
        merge_models(ws, budget=40, compress="solve")
    assert merge_models(ws, budget=40).n_support <= 40  # the projection works for any learner


def test_projection_keeps_the_novelty_detectors_total_weight():
    ws = []
    for part in split(BANANAS[:900], 3):
        m = KernelNovelty(kernel=RBF(1.0), budget=RemoveOldest(100))
        for x, _ in part:
            m.learn_one(x)
        ws.append(m)
    merged = merge_models(ws)
    assert merged.n_support <= 100
    assert math.isclose(merged.support_.coef[:, 0].sum(), 300.0, rel_tol=1e-9)
    union = KernelNovelty.from_state(union_state(ws, None, "pool").state)
    err = max(abs(merged.score_one(x) - union.score_one(x)) for x in PROBES)
    assert err < 0.05  # the projected centre is close to the union's (scores are ~0.1-1.4)


# -- accuracy (measured numbers in docs/operations.md, "Merging models") --------------------------
def accuracy(model, test):
    return float(np.mean([model.predict_one(x) == y for x, y in test]))


def scale_out(data, n_test, make, k=3):
    train_, test = data[:-n_test], data[-n_test:]
    ws = [train(make(), part) for part in split(train_, k)]
    one = train(make(), train_)
    merged = merge_models(ws)
    return [accuracy(w, test) for w in ws], accuracy(one, test), accuracy(merged, test), merged


HYPERPLANE = list(
    synth.Hyperplane(
        seed=1, n_features=20, n_drift_features=5, mag_change=0.001, noise_percentage=0.05
    ).take(6000)
)


@pytest.mark.parametrize(
    "name, data, n_test",
    [("bananas", BANANAS, 1000), ("hyperplane20", HYPERPLANE, 1500)],
)
def test_merged_model_beats_each_worker_and_matches_one_model(name, data, n_test):
    """Measured (KernelPerceptron, budget 200, 3 round-robin workers, default compression):
    Bananas 0.863 merged vs best worker 0.817 and one model 0.839; hyperplane 0.828 vs 0.801
    and 0.789. Asserted: merged >= best worker and >= one model - 1 point, both held by >= 2
    points here (and in all 18 repeats of benchmarks.scale_out for this learner)."""
    workers_acc, single, merged_acc, merged = scale_out(
        data, n_test, lambda: KernelPerceptron(budget=200)
    )
    assert merged.n_support <= 200
    assert merged_acc >= max(workers_acc), (name, workers_acc, single, merged_acc)
    assert merged_acc >= single - 0.01, (name, workers_acc, single, merged_acc)


# -- provenance -----------------------------------------------------------------------------------
def test_snapshot_sources_name_the_worker_snapshots_and_travel_as_metadata():
    ws = workers("perceptron", 50)
    snaps = {
        f"worker-{i}": snapshot.loads(
            snapshot.dumps(m, offsets={"events": {i: 100 + i, i + 3: 7}}, seq=10 + i)
        )
        for i, m in enumerate(ws)
    }
    result = merge_snapshots(snaps)
    assert result.n_union <= 150 and result.model.n_support <= 50
    assert result.method == "solve"  # compress="auto" for a KernelPerceptron
    assert [s["name"] for s in result.sources] == ["worker-0", "worker-1", "worker-2"]
    assert result.sources[1]["seq"] == 11
    assert result.sources[2]["offsets"] == {"events": {"2": 102, "5": 7}}
    assert result.sources[0]["checksum"] == snaps["worker-0"].checksum
    assert result.sources[0]["n_learned"] == ws[0].n_learned
    back = snapshot.loads(snapshot.dumps(result.model, seq=1, sources=result.sources))
    assert back.meta["sources"] == result.sources
    assert snapshot_sources(list(snaps.items())) == result.sources


def test_snapshot_of_a_merged_projectron_round_trips():
    ws = [
        train(MarginPerceptron(kernel=RBF(1.0), budget=Projectron(40)), part)
        for part in split(BANANAS[:900], 3)
    ]
    merged = merge_models(ws)
    assert merged.n_support <= 40
    back = snapshot.loads(snapshot.dumps(merged)).model
    for x in itertools.islice(PROBES, 20):
        np.testing.assert_allclose(back.decision_function_one(x), merged.decision_function_one(x))


# -- the docs ----------------------------------------------------------------------------------
def test_operations_guide_merge_example_runs():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text()
    section = text.split("### Merging models", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert blocks
    namespace: dict = {}
    for code in blocks:
        exec(compile(code, "operations.md", "exec"), namespace)
    assert namespace["merged"].n_support <= 200 and namespace["merged"].n_learned == 3001
