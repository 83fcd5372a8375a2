"""Learners on strings and trees: the object support set, budgets and the Remark 11.55 map.

Oracles: the book's kernel perceptron written plainly with a sliding-window budget and a
spectrum kernel computed from ``Counter``s; and every learner run on the *explicit*
feature map (p-gram counts as a feature dict, ``Linear`` kernel) through the established
vector path, which must give the same model as the string kernel.
"""

from __future__ import annotations

import random
from collections import Counter, deque

import numpy as np
import pandas as pd
import pytest

from streamk import (
    AllSubtree,
    CoRootedSubtree,
    Forgetron,
    GapWeightedSubsequences,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    Linear,
    MarginPerceptron,
    Merge,
    Mismatch,
    Normalized,
    OnlineRanker,
    OnlineSVR,
    Projectron,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    RestrictedGapWeighted,
    Spectrum,
)
from streamk.errors import ConfigError, InvalidInput


def motif_stream(n, seed=0, length=24, alphabet="acgt"):
    """Random strings; the positive ones carry a planted motif (one random mutation)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = i % 2 == 0 if i < 2 else rng.random() < 0.5
        s = [rng.choice(alphabet) for _ in range(length)]
        if y:
            motif = list("gattaca")
            motif[rng.randrange(7)] = rng.choice(alphabet)
            at = rng.randrange(length - 7)
            s[at : at + 7] = motif
        out.append(("".join(s), y))
    return out


def grams(s, p):
    return Counter(s[i : i + p] for i in range(len(s) - p + 1))


def spectrum(s, t, p):
    a, b = grams(s, p), grams(t, p)
    return sum(c * b[u] for u, c in a.items())


def book_perceptron(data, p, budget):
    """Alg. 7.52 with the oldest support string dropped when the window is full."""
    window: deque = deque()
    preds = []
    for s, y in data:
        f = sum((1.0 if yi else -1.0) * spectrum(si, s, p) for si, yi in window)
        pred = f >= 0.0
        preds.append(pred)
        if pred != y:
            if len(window) == budget:
                window.popleft()
            window.append((s, y))
    return preds, sorted(window)


def test_perceptron_on_strings_is_the_book_algorithm():
    data = motif_stream(400, seed=3)
    model = KernelPerceptron(kernel=Spectrum(3), budget=40)
    preds = []
    for s, y in data:
        preds.append(model.predict_one(s))
        model.learn_one(s, y)
    want, window = book_perceptron(data, 3, 40)
    assert preds[2:] == want[2:]  # before both classes are seen streamk predicts the one it knows
    assert model.support_.has_primal  # and it predicted from the Remark 11.55 map
    support = sorted(zip(model.support_.X, (model.support_.coef[:, 0] > 0).tolist()))
    assert support == window


def test_learn_many_and_learn_predict_many_equal_learn_one():
    data = motif_stream(200, seed=4)
    X, y = pd.Series([s for s, _ in data]), pd.Series([t for _, t in data])
    one = KernelPerceptron(kernel=Normalized(Spectrum(3)), budget=30)
    preds = []
    for s, t in data:
        preds.append(one.predict_one(s))
        one.learn_one(s, t)
    many = KernelPerceptron(kernel=Normalized(Spectrum(3)), budget=30)
    assert many.learn_predict_many(X, y) == preds
    assert many.support_.X == one.support_.X
    again = KernelPerceptron(kernel=Normalized(Spectrum(3)), budget=30)
    again.learn_many(X, y)
    assert again.predict_many(X).tolist() == one.predict_many(X).tolist()


# -- the Remark 11.55 weight map equals the dual expansion --------------------------------------

POLICIES = [
    lambda: RemoveOldest(25),
    lambda: RemoveRandom(25, seed=7),
    lambda: RemoveSmallest(25),
    lambda: Forgetron(25),
    lambda: Projectron(25, eta=0.3),
]
TRIE = [Spectrum(3), Normalized(Spectrum(2)), Mismatch(3, 1), RestrictedGapWeighted(3, 1, 0.5)]


@pytest.mark.parametrize("kernel", TRIE, ids=repr)
@pytest.mark.parametrize("make_policy", POLICIES, ids=lambda f: type(f()).__name__)
def test_weight_map_prediction_equals_dual_prediction(kernel, make_policy):
    data = motif_stream(150, seed=5)
    probes = [s for s, _ in motif_stream(12, seed=99)]
    model = KernelPerceptron(kernel=kernel, budget=make_policy())
    for i, (s, y) in enumerate(data):
        model.learn_one(s, "pos" if y else ("neg" if i % 3 else "other"))  # 3 classes
        S = model.support_
        assert S.has_primal and S.n <= 25
        if i % 10 == 9:
            primal, dual = S.decision(probes), S.dual_decision(probes)
            scale = max(1.0, float(np.abs(dual).max()))
            np.testing.assert_allclose(primal, dual, rtol=0, atol=1e-9 * scale)
            for q in probes[:3]:  # K(q, S) from the support's leaf rows, against the kernel
                np.testing.assert_allclose(S.kernel_row(q), kernel.gram([q], S.X)[0], rtol=1e-12)
    assert S.n_outputs == 3
    # leaves of evicted strings are dropped: the map holds only the support's leaves
    leaves = set().union(*(kernel_leaves(kernel, s) for s in S.X))
    assert set(S._primal.index) == leaves


def kernel_leaves(kernel, s):
    base = kernel.kernel if isinstance(kernel, Normalized) else kernel
    return set(base.feature_map(s))


def test_weight_map_follows_coefficient_scaling_and_removal():
    model = KernelPerceptron(kernel=Spectrum(2), budget=None)
    for s, y in motif_stream(60, seed=8):
        model.learn_one(s, y)
    S = model.support_
    probes = [s for s, _ in motif_stream(5, seed=9)]
    for factor in (0.5, 1e-160, 3.0):  # the tiny factor forces the map's rescaling path
        S.scale_coef(factor)
        dual = S.dual_decision(probes)
        np.testing.assert_allclose(S.decision(probes), dual, rtol=1e-9, atol=1e-300)
    while S.n:
        S.remove(0)
    assert S._primal.n_leaves == 0 and not S._primal.W.any()


# -- every learner on strings equals the same learner on the explicit feature map ---

LEARNERS = [
    (KernelPerceptron, {}, "binary"),
    (MarginPerceptron, {"margin": 1.0}, "binary"),
    (KernelAdatron, {}, "binary"),
    (OnlineSVR, {}, "real"),
    (OnlineRanker, {"ranks": (1, 2, 3)}, "rank"),
    (KernelNovelty, {}, None),
]


def target(kind, rng, s):
    if kind == "binary":
        return "gat" in s
    if kind == "real":
        return s.count("a") / 10.0
    if kind == "rank":
        return 1 + min(2, s.count("g") // 3)
    return None


@pytest.mark.parametrize("cls, params, kind", LEARNERS, ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("budget", [RemoveOldest(20), Projectron(20, eta=0.2)], ids=repr)
def test_learner_on_strings_equals_learner_on_explicit_features(cls, params, kind, budget):
    rng = random.Random(1)
    data = [s for s, _ in motif_stream(120, seed=11)]
    strings = cls(kernel=Spectrum(2), budget=budget, **params)
    vectors = cls(kernel=Linear(), budget=budget, **params)
    for s in data:
        y = target(kind, rng, s)
        x = dict(grams(s, 2))
        if kind is None:
            a, b = strings.score_one(s), vectors.score_one(x)
            strings.learn_one(s)
            vectors.learn_one(x)
        else:
            a, b = strings.predict_one(s), vectors.predict_one(x)
            strings.learn_one(s, y)
            vectors.learn_one(x, y)
        assert a == (pytest.approx(b, rel=1e-9, abs=1e-9) if isinstance(b, float) else b)
    assert strings.n_support == vectors.n_support


@pytest.mark.parametrize("cls, params, kind", LEARNERS, ids=lambda v: getattr(v, "__name__", ""))
def test_many_methods_take_a_list_a_series_or_a_one_column_frame(cls, params, kind):
    """What the user guide says the block methods take: a list, a Series or a one-column
    DataFrame of strings. Oracle: the same model's ``predict_one`` / ``predict_proba_one``
    per string, and a twin fed ``learn_one`` (a list's ``index`` method was once taken
    for an index: ``predict_many(list)`` raised TypeError)."""
    rng = random.Random(5)
    data = [(s, target(kind, rng, s)) for s, _ in motif_stream(60, seed=12)]
    texts = [s for s, _ in data]
    one = cls(kernel=Spectrum(2), budget=20, **params)
    for s, y in data[:40]:
        one.learn_one(s) if kind is None else one.learn_one(s, y)
    forms = {
        "list": texts[40:],
        "series": pd.Series(texts[40:]),
        "frame": pd.DataFrame({"text": texts[40:]}),
    }
    for name, X in forms.items():
        if kind is None:
            assert one.score_many(X).tolist() == [one.score_one(s) for s in texts[40:]], name
            continue
        got, want = one.predict_many(X).tolist(), [one.predict_one(s) for s in texts[40:]]
        if kind == "real":  # a block's sums round apart from one row's
            assert np.allclose(got, want, rtol=1e-12, atol=1e-12), name
        else:
            assert got == want, name
        if hasattr(one, "predict_proba_many"):
            got = one.predict_proba_many(X).to_dict("records")
            want = [one.predict_proba_one(s) for s in texts[40:]]
            assert [g.keys() == w.keys() for g, w in zip(got, want)] == [True] * len(want)
            flat = [[g[c], w[c]] for g, w in zip(got, want) for c in w]
            assert np.allclose(*np.array(flat).T, rtol=1e-12, atol=0), name  # block rounding
    ys = [y for _, y in data[:40]]
    many = cls(kernel=Spectrum(2), budget=20, **params)
    if kind is None:
        many.learn_many(pd.DataFrame({"text": texts[:40]}))
    else:
        many.learn_many(pd.DataFrame({"text": texts[:40]}), pd.Series(ys))
    assert many.support_.X == one.support_.X
    assert np.array_equal(many.support_.coef, one.support_.coef)
    with pytest.raises(InvalidInput, match="one-column DataFrame"):
        many.predict_many(pd.DataFrame({"a": texts[:2], "b": texts[:2]}))


# -- trees ----------------------------------------------------------------------------------------


def test_perceptron_on_trees_learns_a_structural_rule():
    rng = random.Random(2)

    def tree(depth):
        if depth == 0 or rng.random() < 0.3:
            return [rng.choice("xy")]
        return [rng.choice("xy"), *(tree(depth - 1) for _ in range(rng.randint(1, 3)))]

    data = [tree(4) for _ in range(300)]
    # negative: root x with two children. A tree sharing no root shape with the support
    # has f = 0, which the perceptron calls positive (sgn(0) = +1; no bias term).
    labels = [not (len(t) == 3 and t[0] == "x") for t in data]
    model = KernelPerceptron(kernel=CoRootedSubtree(), budget=60)
    hits = 0
    for i, (t, y) in enumerate(zip(data, labels)):
        hits += i >= 150 and model.predict_one(t) == y
        model.learn_one(t, y)
    assert hits / 150 > 0.95  # the co-rooted kernel sees root label and out-degree exactly


# -- state, refusals and bad input ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kernel", [Spectrum(3), GapWeightedSubsequences(2, 0.5), AllSubtree()], ids=repr
)
def test_state_round_trip_gives_the_same_predictions(kernel):
    data = motif_stream(80, seed=12)
    if isinstance(kernel, AllSubtree):
        data = [(["r", [s[0]], [s[1], [s[2]]]], y) for s, y in data]
    model = KernelPerceptron(kernel=kernel, budget=RemoveRandom(15, seed=3))
    for x, y in data[:60]:
        model.learn_one(x, y)
    back = KernelPerceptron.from_state(model.state())
    for x, y in data[60:]:
        assert back.predict_one(x) == model.predict_one(x)
        model.learn_one(x, y)
        back.learn_one(x, y)
    assert back.support_.X == model.support_.X


def test_merge_is_refused_for_strings():
    with pytest.raises(ConfigError, match="vector space"):
        KernelPerceptron(kernel=Spectrum(3), budget=Merge(10))


@pytest.mark.parametrize(
    "x, words",
    [
        (42, "needs a str"),
        ({"a": "acgt", "b": "ttt"}, "one-entry dict"),
        (b"\xc3\x28", "UTF-8"),
        ("ac\ud800gt", "UTF-8"),  # a lone surrogate: a str, but a snapshot could not hold it
        ("acgn", "alphabet"),
    ],
)
def test_bad_events_raise_invalid_input_and_leave_the_model_unchanged(x, words):
    model = KernelPerceptron(kernel=Mismatch(3, 1, "acgt"), budget=10)
    model.learn_one("acgtac", True)
    model.learn_one("ttgcaa", False)
    before = (list(model.support_.X), model.support_.coef.copy(), model.n_learned)
    with pytest.raises(InvalidInput, match=words):
        model.learn_one(x, False)
    with pytest.raises(InvalidInput, match=words):
        model.predict_one(x)
    assert model.support_.X == before[0] and model.n_learned == before[2] == 2
    assert np.array_equal(model.support_.coef, before[1])


def test_one_entry_dicts_and_bytes_are_accepted():
    model = KernelPerceptron(kernel=Spectrum(2), budget=10)
    model.learn_one({"text": "hello"}, False)  # f = 0 says True: two mistakes
    model.learn_one("wörld".encode(), False)
    assert model.support_.X == ["hello", "wörld"]


@pytest.mark.parametrize(
    "tree, words",
    [
        (["a", [3.5]], "str or int"),
        # labels a snapshot cannot hold: learned, the model could never be written again
        ([10**30, ["b"]], "64 bits"),
        ([-(2**63) - 1, ["b"]], "64 bits"),
        (["a\ud800", ["b"]], "UTF-8"),
    ],
)
def test_bad_tree_is_invalid_input(tree, words):
    from streamk import snapshot

    model = KernelPerceptron(kernel=AllSubtree(), budget=10)
    model.learn_one([2**63 - 1, ["b"]], False)  # the extremes of the range are labels
    model.learn_one([-(2**63), ["ü"]], True)
    with pytest.raises(InvalidInput, match=words):
        model.learn_one(tree, False)
    assert model.n_learned == 2
    restored = snapshot.loads(snapshot.dumps(model)).model
    assert restored.support_.X == model.support_.X


def test_snapshot_round_trip_keeps_the_support_strings_and_predictions():
    from streamk.snapshot import format as snapshot_format

    data = motif_stream(60, seed=13)
    model = KernelPerceptron(kernel=Normalized(Spectrum(3)), budget=RemoveOldest(12))
    for s, y in data[:40]:
        model.learn_one(s, y)
    back = snapshot_format.loads(snapshot_format.dumps(model)).model
    assert back.support_.X == model.support_.X and back.support_.has_primal
    assert [back.predict_one(s) for s, _ in data[40:]] == [
        model.predict_one(s) for s, _ in data[40:]
    ]


@pytest.mark.parametrize("bad", [123, "a" * 10_001, ["not", "a string"]])
def test_a_state_with_a_bad_support_object_is_refused(bad):
    model = KernelPerceptron(kernel=Spectrum(2), budget=5)
    model.learn_one("ab", False)
    state = model.state()
    state["support"]["X"][0] = bad
    with pytest.raises(InvalidInput):
        KernelPerceptron.from_state(state)
