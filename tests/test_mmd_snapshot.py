"""MMDDrift in snapshots: a restored detector flags exactly where the uninterrupted one does.

The oracle is the uninterrupted run: a restart must change nothing. Each test also checks
that the uninterrupted run does flag drift, so a detector restored empty (or not at all)
would fail it. Hostile states are refused before anything is allocated.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from streamk.consolidation import Consolidated
from streamk.errors import SnapshotError
from streamk.kernels import RBF
from streamk.kernels.measures import MMD_STATE_LIMITS, MMDDrift
from streamk.learners import KernelPerceptron
from streamk.snapshot import SnapshotStore
from streamk.snapshot.codec import decode_state, encode_state


def shifted_stream(n: int = 1000, at: int = 500, seed: int = 0) -> list[tuple[dict, bool]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X[at:] += 3.0
    y = X[:, 0] + X[:, 1] > np.where(np.arange(n) < at, 0.0, 6.0)
    return [({"a": float(a), "b": float(b)}, bool(t)) for (a, b), t in zip(X, y)]


STREAM = shifted_stream()


def flags(detector: MMDDrift, values, stops=(), restore=None) -> list[tuple[int, float, bool]]:
    """``(position, MMD statistic, drift?)`` of every test ``detector`` makes on ``values``;
    at each of ``stops`` it is restored first."""
    restore = restore or (lambda d: MMDDrift.from_state(d.state()))
    found = []
    for i, v in enumerate(values):
        if i in stops:
            detector = restore(detector)
        tests = detector.n_tests
        detector.update(v)
        if detector.n_tests != tests:
            found.append((i, detector.statistic_, detector.drift_detected))
    return found


@pytest.mark.parametrize("stops", [(1,), (99, 100, 101), (150, 333, 601), (250, 251, 899)])
def test_a_restored_detector_flags_where_the_uninterrupted_one_does(stops):
    values = [x for x, _ in STREAM]
    expected = flags(MMDDrift(window_size=100, alpha=0.001), values)
    drifts = [i for i, _, drift in expected if drift]
    assert drifts and all(i >= 500 for i in drifts)  # it detects the shift, after it

    def through_msgpack(d):
        return MMDDrift.from_state(decode_state(encode_state(d.state())))

    assert flags(MMDDrift(window_size=100, alpha=0.001), values, stops) == expected
    got = flags(MMDDrift(window_size=100, alpha=0.001), values, stops, through_msgpack)
    assert got == expected


def test_a_restored_error_rate_detector_keeps_its_exact_test():
    rng = np.random.default_rng(4)
    errors = np.r_[rng.random(600) < 0.1, rng.random(600) < 0.4].astype(float).tolist()
    expected = flags(MMDDrift(window_size=200, alpha=0.01), errors)
    assert any(drift for *_, drift in expected)
    assert flags(MMDDrift(window_size=200, alpha=0.01), errors, (123, 777)) == expected


def _consolidated() -> Consolidated:
    det = MMDDrift(window_size=100, alpha=0.001)
    model = KernelPerceptron(kernel=RBF(gamma=0.5), budget=100)
    return Consolidated(model, every=None, on_drift=det)


def test_a_consolidated_model_with_mmd_drift_is_snapshotted_whole(tmp_path):
    """Through a real file store: the detector is kept (no fallback to the learner alone),
    and the restored model consolidates at the same events and predicts alike."""
    whole = _consolidated()
    for x, y in STREAM:
        whole.learn_one(x, y)
    assert whole.n_consolidations >= 1

    store = SnapshotStore(tmp_path)
    model = _consolidated()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "saving its learner only" fallback
        for i, (x, y) in enumerate(STREAM):
            if i in (250, 560, 777):
                path = store.save(model, "model", offsets={"t": {0: i}})
                model = store.load(path).model
                assert isinstance(model.consolidator_.on_drift, MMDDrift)
            model.learn_one(x, y)
    assert model.n_consolidations == whole.n_consolidations
    xs = [x for x, _ in shifted_stream(200, at=0, seed=9)]
    assert [model.predict_one(x) for x in xs] == [whole.predict_one(x) for x in xs]


def _state_after(n: int) -> dict:
    d = MMDDrift(window_size=20)
    for x, _ in STREAM[:n]:
        d.update(x)
    return decode_state(encode_state(d.state()))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["params"].update(window_size=MMD_STATE_LIMITS["window_size"] + 2),
         "exceeds"),
        (lambda s: s.update(cur=np.zeros((1, MMD_STATE_LIMITS["width"] + 1))), "limits"),
        (lambda s: s.update(ref=np.zeros((19, 2))), "ref"),
        (lambda s: s.update(order=np.arange(10) + 5), "permutation"),
        (lambda s: s.update(cur_widths=[99] * len(s["cur_widths"])), "cur_widths"),
        (lambda s: s.update(h=np.zeros(7)), "h value"),
        (lambda s: s.update(rng={"state": "x"}), "rng"),
        (lambda s: s.update(kernel={"name": "Os.system"}), "unknown kernel"),
        (lambda s: s.update(n_tests=-1), "n_tests"),
        (lambda s: s.update(last=[0, "1", 2]), "last"),
    ],
)  # fmt: skip
def test_a_hostile_state_is_refused_with_a_named_reason(edit, message):
    state = _state_after(33)  # a reference window and a current one in progress
    MMDDrift.from_state(state)  # the untouched state loads
    edit(state)
    with pytest.raises(SnapshotError, match=message):
        MMDDrift.from_state(state)
