"""The per-event core's Projectron leaves its pass over ``P`` to the next ``d = P k``.

A removal's downdate and growth of ``P = K(S, S)^-1`` is one rank-two pass over ``P`` (a
growth alone a rank-one pass); the per-event core (streamk/learners/_event.pyx) does only the
O(n) moves at once and leaves the pass, in the policy's ``_pend``, for the next event's
``d = P k`` to make in its own pass (issue #16: one pass over ``P`` per event instead of two).
Whatever else reads ``P`` first applies it (``Projectron._settle``: one compiled pass, or
NumPy). Checked here: ``P`` read at a pending point is a fresh inverse of the Gram matrix (an
independent oracle); settling after every event, compiled or in NumPy, gives the fused pass's
bits; a model pickled with a pass pending learns on alike; a block through the Projectron's
own compiled run takes the settled ``P``; and the model is the NumPy path's, event for event.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from streamk import MarginPerceptron, OnlineSVR
from streamk.budget import Projectron, compiled
from streamk.kernels import RBF
from streamk.learners import eventpass

pytestmark = pytest.mark.skipif(
    not eventpass.available(), reason="the compiled per-event path is not built here"
)


def _events(n: int, seed: int = 0) -> list[tuple[dict, float]]:
    """A noisy non-linear regression stream in four features (the budget turns over)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 4))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(n)
    return [(dict(zip("abcd", row)), float(t)) for row, t in zip(X.tolist(), y.tolist())]


def _svr() -> OnlineSVR:
    return OnlineSVR(kernel=RBF(gamma=0.7), budget=Projectron(15, eta=0.01))


def _margin() -> MarginPerceptron:
    return MarginPerceptron(kernel=RBF(gamma=0.7), budget=Projectron(15, eta=0.01))


def _learn(model, x: dict, y: float) -> None:
    model.learn_one(x, y if isinstance(model, OnlineSVR) else y > 0)


def _fresh_inverse_error(model) -> float:
    """``||P - K(S, S)^-1|| / ||K(S, S)^-1||`` with ``P`` as Python reads it."""
    support = model.support_
    fresh = np.linalg.inv(support.kernel_block(support.X))
    return float(np.linalg.norm(model._policy.inverse_gram - fresh) / np.linalg.norm(fresh))


def _bits(model) -> list[bytes]:
    support = model.support_
    arrays = (support.ids, support.coef, support.X, model._policy.inverse_gram)
    return [np.ascontiguousarray(a).tobytes() for a in arrays]


@pytest.mark.parametrize("make", [_svr, _margin])
def test_p_read_while_a_pass_is_pending_is_the_inverse_gram(make):
    model = make()
    checked = grown = 0
    for t, (x, y) in enumerate(_events(600)):
        _learn(model, x, y)
        policy, n = model._policy, model.support_.n
        if policy._pend_m < 0 or (t % 7 and t > 40):
            continue
        grown += n < policy.budget  # a growth's pass pending (no removal yet)
        assert policy._pend_m == n - 1  # the rows below the new vector's
        raw = np.tril(policy._P[:n, :n])
        assert _fresh_inverse_error(model) < 1e-8  # settled before it is read
        assert policy._pend_m == -1
        assert not np.array_equal(np.tril(policy._P[:n, :n]), raw)  # the pass was pending
        checked += 1
    assert checked > 20 and grown > 5


@pytest.mark.parametrize("where", ["compiled", "numpy"])
@pytest.mark.parametrize("make", [_svr, _margin])
def test_settling_gives_the_fused_pass_bits(make, where, monkeypatch):
    """One model settles ``P`` after every event (``Projectron._settle``: its compiled pass,
    or its NumPy lines), the other leaves each pass to the next ``d = P k``: the same bits,
    so the roundings are one."""
    if where == "numpy":
        monkeypatch.delattr(compiled.policies, "projectron_settle", raising=False)
    fused, settled = make(), make()
    pending = 0
    for x, y in _events(500, seed=1):
        _learn(fused, x, y)
        _learn(settled, x, y)
        pending += settled._policy._pend_m >= 0
        settled._policy._settle()
    assert pending > 100 and fused.support_.next_id > 100  # removals, each left pending
    assert _bits(fused) == _bits(settled)


def test_a_model_pickled_with_a_pass_pending_learns_on_alike():
    events = _events(700, seed=2)
    model = _svr()
    for x, y in events[:400]:
        _learn(model, x, y)
    assert model._policy._pend_m >= 0
    copy = pickle.loads(pickle.dumps(model))
    for x, y in events[400:]:
        _learn(model, x, y)
        _learn(copy, x, y)
    assert _bits(model) == _bits(copy)
    assert _fresh_inverse_error(copy) < 1e-8


@pytest.mark.parametrize("make", [_svr, _margin])
def test_the_deferred_pass_follows_the_numpy_path(make):
    """Test-then-train against the NumPy path (the per-event core off): the same predictions
    and the same set, coefficients and ``P`` to rounding."""
    fast, slow = make(), make()
    slow._event = None
    preds_fast, preds_slow = [], []
    for x, y in _events(600, seed=3):
        preds_fast.append(fast.predict_one(x))
        preds_slow.append(slow.predict_one(x))
        _learn(fast, x, y)
        _learn(slow, x, y)
    if isinstance(fast, OnlineSVR):
        np.testing.assert_allclose(preds_fast, preds_slow, rtol=1e-9, atol=1e-9)
    else:
        assert preds_fast == preds_slow
    a, b = fast.support_, slow.support_
    assert a.ids.tolist() == b.ids.tolist() and a.next_id > 100
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        fast._policy.inverse_gram, slow._policy.inverse_gram, rtol=1e-9, atol=1e-9
    )


def test_a_block_run_after_a_pending_pass_takes_the_settled_p():
    """Events one at a time (a pass left pending), then blocks through the Projectron's own
    compiled run (``margin_run``, which settles ``P`` first), then events again: the model
    the NumPy path learns one event at a time."""
    events = _events(900, seed=4)
    X = pd.DataFrame([x for x, _ in events])
    y = [t > 0 for _, t in events]
    mixed, slow = _margin(), _margin()
    slow._event = None
    for x, label in zip(events[:300], y[:300]):
        mixed.learn_one(x[0], label)
    assert mixed._policy._pend_m >= 0
    mixed.learn_many(X.iloc[300:600], y[300:600])
    for x, label in zip(events[600:], y[600:]):
        mixed.learn_one(x[0], label)
    for (x, _), label in zip(events, y):
        slow.learn_one(x, label)
    a, b = mixed.support_, slow.support_
    assert a.ids.tolist() == b.ids.tolist() and a.next_id > 100
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-9, atol=1e-9)
    assert _fresh_inverse_error(mixed) < 1e-8
