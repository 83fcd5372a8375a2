"""A block standardised in one compiled pass is the per-event standardisation, to the bit.

Oracle: :class:`FeatureStandardizer`'s per-event code (``transform_one``, then ``learned``
and ``commit``), which ``tests/test_scaling.py`` holds equal to river's ``StandardScaler``;
for the wrapped learners, the same wrapper fed one event at a time (``predict_one`` then
``learn_one``), and river's ``StandardScaler() | learner`` pipeline.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pandas as pd
import pytest
from river import preprocessing

from streamk import (
    Forgetron,
    KernelAdatron,
    KernelPerceptron,
    MarginPerceptron,
    Merge,
    OnlineRanker,
    OnlineSVR,
    Projectron,
    RemoveOldest,
    RemoveSmallest,
)
from streamk.accel import core
from streamk.errors import InvalidInput
from streamk.learners.scaling import standard_scaled
from streamk.learners.standardizer import FeatureStandardizer, block_values

needs_core = pytest.mark.skipif(
    core is None or not hasattr(core, "standardize_rows"), reason="compiled core not built"
)


def _values(seed: int, m: int = 400) -> pd.DataFrame:
    """Columns of very different scales, a constant one, an integer and a boolean one, a
    feature that appears late and one with gaps (NaN: absent)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "tiny": rng.normal(0, 1e-7, m),
            "huge": rng.normal(3e8, 1e6, m),
            "const": np.full(m, 2.5),
            "count": rng.integers(-5, 50, m),
            "flag": rng.random(m) < 0.3,
            "plain": rng.normal(size=m),
        }
    )
    late = rng.normal(4, 2, m)
    late[: m // 3] = np.nan
    gaps = rng.normal(size=m)
    gaps[rng.random(m) < 0.2] = np.nan
    frame["late"], frame["gaps"] = late, gaps
    return frame


def _per_event(scaler: FeatureStandardizer, frame: pd.DataFrame, learn: bool):
    """The oracle: each row's dicts as ``transform_one`` / ``learned`` make them."""
    said, learned = [], []
    for x in frame.to_dict(orient="records"):
        x = {k: v for k, v in x.items() if v == v}
        said.append(scaler.transform_one(x))
        if learn:
            updates, z = scaler.learned(x)
            scaler.commit(updates)
            learned.append(z)
    return said, learned


def _state(model) -> bytes:
    """The model's plain-data state (the scaler's statistics and the learner), as bytes."""
    return pickle.dumps(model.state())


def _events(block, which: np.ndarray) -> list[dict]:
    """The rows of ``which`` (a block's ``said`` or ``learned``) as feature dicts, an
    absent feature left out."""
    return [
        {k: v for k, v, gap in zip(block.names, row, miss) if not gap}
        for row, miss in zip(which.tolist(), block.absent.tolist())
    ]


def _bits(a: dict) -> dict:
    return {k: float(v).hex() for k, v in a.items()}


@needs_core
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("warm", [0, 57])
def test_the_compiled_pass_is_the_per_event_code_to_the_bit(seed, warm):
    frame = _values(seed)
    oracle, ours = FeatureStandardizer(), FeatureStandardizer()
    _per_event(oracle, frame[:warm], True)  # statistics that do not start empty
    _per_event(ours, frame[:warm], True)
    said, learned = _per_event(oracle, frame[warm:], True)
    block = ours.block(*block_values(frame[warm:]), learn=True)
    assert [_bits(z) for z in _events(block, block.said)] == [_bits(z) for z in said]
    assert [_bits(z) for z in _events(block, block.learned)] == [_bits(z) for z in learned]
    ours.commit_block(block)
    assert ours.state() == oracle.state()  # keys in the order met, counts, means, variances
    # a refused row part-way: the statistics of the rows before it
    part, again = FeatureStandardizer(), FeatureStandardizer()
    _per_event(part, frame[:warm], True)
    _per_event(again, frame[: warm + 123], True)
    block = part.block(*block_values(frame[warm:]), learn=True)
    part.commit_block(block, 123)
    assert part.state() == again.state()


@needs_core
def test_predicting_a_block_does_not_move_the_statistics():
    frame = _values(3)
    oracle, ours = FeatureStandardizer(), FeatureStandardizer()
    for s in (oracle, ours):
        _per_event(s, frame[:200], True)
    said, _ = _per_event(oracle, frame[200:], False)
    block = ours.block(*block_values(frame[200:]), learn=False)
    assert block.learned is None
    assert [_bits(z) for z in _events(block, block.said)] == [_bits(z) for z in said]
    assert ours.state() == oracle.state()


def test_blocks_the_per_event_path_must_judge_are_left_to_it():
    assert block_values([{"a": 1.0}]) is None  # a list of dicts
    assert block_values(pd.DataFrame({"a": [1.0, math.inf]})) is None
    assert block_values(pd.DataFrame({"a": ["x", "y"]})) is None
    assert block_values(pd.DataFrame([[1.0, 2.0]], columns=["a", "a"])) is None
    assert block_values(np.array([["x"]], dtype=object)) is None
    names, values = block_values(np.array([[1, 2], [3, 4]]))
    assert names == [0, 1] and values.dtype == np.float64
    names, values = block_values(pd.DataFrame({"a": [1.0, None], "b": [True, False]}))
    assert names == ["a", "b"] and np.isnan(values[1, 0]) and values[0, 1] == 1.0


LEARNERS = {
    "perceptron": (lambda: KernelPerceptron(budget=RemoveOldest(60)), "class"),
    "margin-forgetron": (lambda: MarginPerceptron(budget=Forgetron(60)), "class"),
    "adatron": (lambda: KernelAdatron(budget=70), "class"),
    "perceptron-projectron": (lambda: KernelPerceptron(budget=Projectron(50)), "class"),
    "margin-merge": (lambda: MarginPerceptron(budget=Merge(50)), "class"),
    "svr": (lambda: OnlineSVR(budget=60), "value"),
    "svr-smallest": (lambda: OnlineSVR(budget=RemoveSmallest(60)), "value"),
    "ranker": (lambda: OnlineRanker(budget=60), "rank"),
}


def _labels(frame: pd.DataFrame, kind: str, seed: int) -> list:
    rng = np.random.default_rng(seed)
    signal = frame["plain"].to_numpy() + np.nan_to_num(frame["gaps"].to_numpy())
    if kind == "class":
        return [bool(v) for v in signal + rng.normal(0, 0.3, len(frame)) > 0]
    if kind == "rank":
        return [int(v) for v in np.digitize(signal, [-0.7, 0.0, 0.7])]
    return [float(v) for v in 3 * signal + rng.normal(0, 0.1, len(frame))]


def _one_by_one(model, frame: pd.DataFrame, ys: list) -> list:
    out = []
    for x, y in zip(frame.to_dict(orient="records"), ys):
        x = {k: v for k, v in x.items() if v == v}
        out.append(model.predict_one(x))
        model.learn_one(x, y)
    return out


def _same_support(fast, slow) -> None:
    """The same vectors and ids, rows and coefficients to rounding."""
    sf, ss = fast.model.support_, slow.model.support_
    assert sf.n == ss.n
    np.testing.assert_array_equal(sf.ids, ss.ids)
    np.testing.assert_allclose(sf.X, ss.X, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sf.coef, ss.coef, rtol=1e-7, atol=1e-12)


@needs_core
@pytest.mark.parametrize("name", list(LEARNERS))
@pytest.mark.parametrize("form", ["frame", "array", "gaps"])
def test_a_scaled_learners_blocks_are_its_events(name, form):
    """``array`` (the engine's blocks of vectors) and ``frame``: every event has every
    feature, in the index's order, so one at a time takes the compiled core as the block
    does: the same bits. ``gaps``: a feature absent from some events and one that appears
    mid-stream; one at a time, such an event takes the NumPy path (its keys are not the
    index's), which agrees with the compiled core to rounding."""
    make, kind = LEARNERS[name]
    frame = _values(7, 900)
    if form != "gaps":
        frame = frame.drop(columns=["late", "gaps"]).astype(float)
    if form == "array":
        frame.columns = range(frame.shape[1])
    ys = _labels(frame.rename(columns={5: "plain"}).assign(gaps=0.0), kind, 7)
    oracle, ours, many = (standard_scaled(make()) for _ in range(3))
    expected = _one_by_one(oracle, frame, ys)
    got = []
    for start in range(0, len(frame), 250):
        part = frame[start : start + 250]
        X = part.to_numpy() if form == "array" else part
        got += ours.learn_predict_many(X, ys[start : start + 250])
        many.learn_many(X, ys[start : start + 250])
    assert ours.scaler_.state() == oracle.scaler_.state()
    assert many.scaler_.state() == oracle.scaler_.state()
    assert many.model.state()["features"] == oracle.model.state()["features"]  # as met
    if form == "gaps":
        assert got == (pytest.approx(expected, rel=1e-9) if kind == "value" else expected)
        _same_support(ours, oracle)
    else:
        assert got == expected
        assert _state(ours) == _state(oracle)  # the statistics and the learner, to the bit
    # predict_many: the learner's own predict_many of the rows transform_one makes
    probe = frame[:300]
    dicts = [{k: v for k, v in x.items() if v == v} for x in probe.to_dict(orient="records")]
    said = oracle.model.predict_many(pd.DataFrame([oracle.scaler_.transform_one(x) for x in dicts]))
    got = ours.predict_many(probe.to_numpy() if form == "array" else probe)
    assert got.tolist() == (said.tolist() if form != "gaps" else pytest.approx(said.tolist()))


@needs_core
def test_the_block_path_predicts_as_rivers_pipeline():
    frame = _values(11, 700).drop(columns=["late", "gaps"])
    ys = _labels(frame.assign(gaps=0.0), "class", 11)
    pipe = preprocessing.StandardScaler() | KernelPerceptron(budget=RemoveOldest(80))
    expected = []
    for x, y in zip(frame.to_dict(orient="records"), ys):
        expected.append(pipe.predict_one(x))
        pipe.learn_one(x, y)
    ours = standard_scaled(KernelPerceptron(budget=RemoveOldest(80)))
    got = []
    for start in range(0, len(frame), 128):
        got += ours.learn_predict_many(frame[start : start + 128], ys[start : start + 128])
    assert got == expected


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize("bad", ["label", "infinity", "overflow", "overflow last"])
def test_a_bad_row_mid_block_stops_there_as_one_at_a_time(bad):
    """A bad label, an infinity, or a finite value whose square would make the variance
    infinite (every later value of the feature NaN, every later event refused), in the
    block's middle or as its last row (where no later row shows it)."""
    frame = _values(5, 300).drop(columns=["late", "gaps"]).astype(float)
    ys = _labels(frame.assign(gaps=0.0), "class", 5)
    at = 299 if bad == "overflow last" else 140
    if bad == "label":
        ys[at] = [1]
    else:
        frame.loc[at, "plain"] = math.inf if bad == "infinity" else 1e200
    oracle = standard_scaled(KernelPerceptron(budget=60))
    with pytest.raises(InvalidInput):
        _one_by_one(oracle, frame, ys)
    ours = standard_scaled(KernelPerceptron(budget=60))
    with pytest.raises(InvalidInput):
        ours.learn_predict_many(frame, ys)
    assert ours.n_learned == oracle.n_learned == at
    assert _state(ours) == _state(oracle)
    assert all(math.isfinite(v) for v in ours.scaler_.vars.values())


@needs_core
def test_learn_rows_takes_said_rows_only_where_they_mean_something():
    from streamk import KernelNovelty

    model = KernelPerceptron(kernel=None, budget=10)
    model.learn_one({"a": 1.0}, True)
    rows = np.ones((2, 1))
    with pytest.raises(ValueError, match="needs out"):
        model._event.learn_rows(model, rows, [True, False], None, said_rows=rows)
    with pytest.raises(ValueError, match="shape"):
        model._event.learn_rows(model, rows, [True, False], [], said_rows=np.ones((3, 1)))
    novelty = KernelNovelty()
    with pytest.raises(ValueError, match="labelled learners and the SVR"):
        novelty._event.learn_rows(novelty, rows, None, [], said_rows=rows)


def test_the_guides_table_is_the_rendering_of_the_committed_json():
    import json

    from benchmarks import scaled

    committed = json.loads((scaled.RESULTS / "scaled.json").read_text())
    text = scaled.GUIDE.read_text()
    block = text.split(scaled.START, 1)[1].split(scaled.END, 1)[0].strip()
    assert block == scaled.render(committed["rows"])


@pytest.mark.parametrize("name", ["svr", "margin-forgetron", "adatron", "ranker"])
def test_a_feature_new_mid_block_is_learned_where_one_at_a_time_learns_it(name):
    """A bare learner's ``learn_predict_many`` on a frame whose column ``late`` is absent
    (NaN) until row 300, mid-block: the index grows at that row, as one event at a time
    grows it, not at the block's first row (the kernel values of the rows between would
    be computed at another width): the same predictions and model, to the bit."""
    make, kind = LEARNERS[name]
    frame = _values(9, 700).drop(columns=["gaps"])
    frame = (frame - frame.mean()) / frame.std()  # (the learners see raw values here)
    ys = _labels(frame.assign(gaps=0.0), kind, 9)
    oracle, ours = make(), make()
    expected = _one_by_one(oracle, frame, ys)
    got = []
    for start in range(0, len(frame), 250):
        got += ours.learn_predict_many(frame[start : start + 250], ys[start : start + 250])
    assert got == expected
    assert _state(ours) == _state(oracle)
