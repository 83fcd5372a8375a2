"""``learn_many``'s block plumbing against ``learn_one``: the ``gamma="auto"`` warm-up and
DataFrame blocks.

``learn_many`` folds the warm-up rows into the scale estimate with the compiled Welford
step and shares one target matrix and one set of squared norms among a block's runs; the
oracle is ``learn_one`` event by event, which folds each row with
:meth:`~streamk.kernels.ScaleEstimator.update`. The estimate, the resolved width and the
support set must agree to the bit after every block.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamk import RBF, Forgetron, KernelPerceptron, RemoveOldest, RemoveRandom, accel
from streamk.errors import InvalidInput
from streamk.learners.features import FeatureIndex

POLICIES = {
    "unbounded": lambda: None,
    "oldest": lambda: RemoveOldest(30),
    "random": lambda: RemoveRandom(30, seed=5),
    "forgetron": lambda: Forgetron(30),
}


def _stream(n: int, width: int, seed: int = 1) -> tuple[pd.DataFrame, list[bool]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, width)) * np.arange(1, width + 1)
    y = (np.sin(X[:, 0]) + X[:, -1] * 0.3 + 0.3 * rng.standard_normal(n) > 0).tolist()
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(width)]), y


def _same_model(a: KernelPerceptron, b: KernelPerceptron) -> None:
    """Scale estimate, width, support rows, ids, coefficients and the policy's state
    equal to the bit (the Forgetron's shrink sums ``f(x_r)`` in the same order per event
    and in a block)."""
    assert a._scale.n == b._scale.n
    assert a._scale.mean.tobytes() == b._scale.mean.tobytes()
    assert a._scale._m2.tobytes() == b._scale._m2.tobytes()
    assert a.kernel_.gamma == b.kernel_.gamma
    sa, sb = a.support_, b.support_
    assert sa.n == sb.n
    assert sa._ids[: sa.n].tolist() == sb._ids[: sb.n].tolist()
    assert sa._X[: sa.n].tobytes() == sb._X[: sb.n].tobytes()
    assert sa._coef[: sa.n].tobytes() == sb._coef[: sb.n].tobytes()
    assert repr(a._policy.state()) == repr(b._policy.state())
    assert (a.n_mistakes, a.n_learned) == (b.n_mistakes, b.n_learned)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("size", [1, 7, 137, 500])
def test_warmup_blocks_match_learn_one(policy: str, size: int) -> None:
    X, y = _stream(600, 3)
    many = KernelPerceptron(kernel=RBF(gamma="auto"), budget=POLICIES[policy]())
    one = KernelPerceptron(kernel=RBF(gamma="auto"), budget=POLICIES[policy]())
    rows = X.to_dict("records")
    for i in range(0, len(y), size):
        many.learn_many(X.iloc[i : i + size], pd.Series(y[i : i + size], dtype=object))
        for x, t in zip(rows[i : i + size], y[i : i + size]):
            one.learn_one(x, t)
        _same_model(many, one)


def test_warmup_with_features_that_appear_later() -> None:
    """A block wider than the estimate so far takes the padding fold, then the compiled one."""
    X, y = _stream(300, 4)
    many = KernelPerceptron(kernel=RBF(gamma="auto"), budget=RemoveOldest(30))
    one = KernelPerceptron(kernel=RBF(gamma="auto"), budget=RemoveOldest(30))
    for i in range(0, len(y), 9):
        cols = list(X.columns[:2]) if i < 45 else list(X.columns)
        block = X.iloc[i : i + 9][cols]
        many.learn_many(block, y[i : i + 9])
        for x, t in zip(block.to_dict("records"), y[i : i + 9]):
            one.learn_one(x, t)
        _same_model(many, one)


def test_learn_predict_many_in_the_warmup_matches_prequential() -> None:
    X, y = _stream(400, 2, seed=4)
    many = KernelPerceptron(kernel=RBF(gamma="auto"), budget=RemoveRandom(25, seed=2))
    one = KernelPerceptron(kernel=RBF(gamma="auto"), budget=RemoveRandom(25, seed=2))
    got = []
    for i in range(0, len(y), 50):
        got += many.learn_predict_many(X.iloc[i : i + 50], y[i : i + 50])
    want = []
    for x, t in zip(X.to_dict("records"), y):
        want.append(one.predict_one(x))
        one.learn_one(x, t)
    assert got == want
    _same_model(many, one)


def test_warmup_without_the_compiled_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the core switched off the warm-up folds through ``update``: the same model."""
    X, y = _stream(260, 3)
    ref = KernelPerceptron(kernel=RBF(gamma="auto"), budget=RemoveOldest(30))
    for i in range(0, len(y), 37):
        ref.learn_many(X.iloc[i : i + 37], y[i : i + 37])
    monkeypatch.setattr(accel, "core", None)
    plain = KernelPerceptron(kernel=RBF(gamma="auto"), budget=RemoveOldest(30))
    for i in range(0, len(y), 37):
        plain.learn_many(X.iloc[i : i + 37], y[i : i + 37])
    assert plain._scale.mean.tobytes() == ref._scale.mean.tobytes()
    assert plain._scale._m2.tobytes() == ref._scale._m2.tobytes()
    assert plain.kernel_.gamma == ref.kernel_.gamma


# -- DataFrame blocks ---------------------------------------------------------------------------
def test_frame_rows_are_fresh_arrays() -> None:
    """Rows never share memory with the frame or the caller's array."""
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]})
    index = FeatureIndex()
    rows = index.rows(frame, grow=True)
    rows[0, 0] = 99.0
    assert frame["a"].tolist() == [1.0, 2.0]
    again = index.rows(frame, grow=True)  # the cached column numbers
    assert again.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    out = FeatureIndex().rows(A, grow=True)
    assert not np.shares_memory(out, A)


def test_frame_rows_nan_reorder_and_infinity() -> None:
    index = FeatureIndex()
    first = pd.DataFrame({"a": [1.0, np.nan], "b": [2.0, 3.0]})
    assert index.rows(first, grow=True).tolist() == [[1.0, 2.0], [0.0, 3.0]]
    swapped = pd.DataFrame({"b": [5.0], "a": [6.0]})
    assert index.rows(swapped, grow=True).tolist() == [[6.0, 5.0]]
    wider = pd.DataFrame({"a": [1.0], "c": [7.0]})
    assert index.rows(wider, grow=False).tolist() == [[1.0, 0.0, 7.0]]
    assert index.names == ["a", "b"]
    assert index.rows(first, grow=True).tolist() == [[1.0, 2.0], [0.0, 3.0]]
    with pytest.raises(InvalidInput):
        index.rows(pd.DataFrame({"a": [np.inf], "b": [1.0]}), grow=True)


def test_frame_blocks_of_one_frame_share_columns_but_a_new_index_is_read_again() -> None:
    frame = pd.DataFrame(np.arange(12.0).reshape(4, 3), columns=["x", "y", "z"])
    index = FeatureIndex()
    assert index.rows(frame.iloc[:2], grow=True).tolist() == frame.iloc[:2].values.tolist()
    renamed = frame.rename(columns={"x": "z", "z": "x"})  # same names, another order
    assert index.rows(renamed.iloc[2:], grow=True).tolist() == [[8.0, 7.0, 6.0], [11.0, 10.0, 9.0]]
