"""dumps/loads end to end with a real (test-only) learner, the envelope and the allow-list."""

from __future__ import annotations

import hashlib

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk.errors import SnapshotError
from streamk.snapshot import (
    CLASSES,
    CorruptSnapshot,
    Snapshot,
    class_name_of,
    dumps,
    loads,
    register_class,
    resolve_class,
    seal,
    verify_bytes,
)


class ToyPerceptron:
    """Budgeted RBF kernel perceptron, written plainly, with genuine state()/from_state()."""

    def __init__(self, gamma: float = 0.5, budget: int = 20):
        self.gamma = gamma
        self.budget = budget
        self.X = np.zeros((0, 2))
        self.alpha = np.zeros(0)
        self.n_mistakes = 0

    def decision(self, x: np.ndarray) -> float:
        k = np.exp(-self.gamma * ((self.X - x) ** 2).sum(axis=1))
        return float(k @ self.alpha)

    def predict_one(self, x: np.ndarray) -> int:
        return 1 if self.decision(x) >= 0 else -1

    def learn_one(self, x: np.ndarray, y: int) -> None:
        if y * self.decision(x) <= 0:
            self.n_mistakes += 1
            self.X = np.vstack([self.X, x])[-self.budget :]
            self.alpha = np.append(self.alpha, y)[-self.budget :]

    def state(self) -> dict:
        return {
            "params": {"gamma": self.gamma, "budget": self.budget, "kernel": {"name": "rbf"}},
            "X": self.X,
            "alpha": self.alpha,
            "n_mistakes": self.n_mistakes,
        }

    @classmethod
    def from_state(cls, state: dict) -> ToyPerceptron:
        model = cls(**{k: state["params"][k] for k in ("gamma", "budget")})
        X, alpha = state["X"], state["alpha"]
        if X.ndim != 2 or alpha.shape != (X.shape[0],):
            raise ValueError(f"X {X.shape} and alpha {alpha.shape} do not match")
        model.X, model.alpha, model.n_mistakes = X, alpha, int(state["n_mistakes"])
        return model


register_class("ToyPerceptronFormat", f"{__name__}:ToyPerceptron")


def trained(n: int = 200, seed: int = 0) -> tuple[ToyPerceptron, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    model = ToyPerceptron()
    for xi, yi in zip(X[: n // 2], y[: n // 2], strict=True):
        model.learn_one(xi, int(yi))
    return model, X[n // 2 :]


def test_round_trip_gives_identical_predictions_and_metadata():
    model, held_out = trained()
    data = dumps(
        model,
        offsets={"events": {0: 1042, 3: 7}, "replay": {0: 0}},
        seq=12,
        metrics={"accuracy": 0.875, "n": 100},
        created_at=1_700_000_000.25,
        run="nightly",
        tags=["a", "b"],
    )
    snap = loads(data)
    assert isinstance(snap, Snapshot) and isinstance(snap.model, ToyPerceptron)
    assert [snap.model.decision(x) for x in held_out] == [model.decision(x) for x in held_out]
    assert snap.model.n_mistakes == model.n_mistakes
    assert snap.offsets == {"events": {0: 1042, 3: 7}, "replay": {0: 0}}
    assert (snap.seq, snap.created_at) == (12, 1_700_000_000.25)
    assert snap.metrics == {"accuracy": 0.875, "n": 100}
    assert snap.meta == {"run": "nightly", "tags": ["a", "b"]}
    assert snap.class_name == "ToyPerceptronFormat"
    assert snap.size == len(data) and snap.version == 1 and snap.writer.startswith("streamk ")
    assert snap.state["params"] == {"gamma": 0.5, "budget": 20, "kernel": {"name": "rbf"}}


def test_envelope_layout_and_checksum_scope():
    model, _ = trained(20)
    data = dumps(model, created_at=0.0)
    outer = msgpack.unpackb(data)
    assert set(outer) == {"format", "version", "body", "sha256"}
    assert (outer["format"], outer["version"]) == ("streamk.snapshot", 1)
    assert outer["sha256"] == hashlib.sha256(outer["body"]).hexdigest()
    assert loads(data).checksum == outer["sha256"]
    body = msgpack.unpackb(outer["body"])
    assert set(body) == {"model", "stream", "seq", "created_at", "metrics", "meta", "writer"}
    assert body["model"]["class"] == "ToyPerceptronFormat"


def test_dumps_is_deterministic_given_created_at():
    model, _ = trained(50)
    assert dumps(model, seq=1, created_at=5.0) == dumps(model, seq=1, created_at=5.0)


def test_created_at_defaults_to_now():
    import time

    before = time.time()
    snap = loads(dumps(trained(10)[0]))
    assert before <= snap.created_at <= time.time()


def test_unknown_fields_are_ignored_for_forward_compatibility():
    model, _ = trained(20)
    outer = msgpack.unpackb(dumps(model))
    body = msgpack.unpackb(outer["body"])
    body["future_field"] = {"x": 1}
    sealed = msgpack.unpackb(seal(msgpack.packb(body)))
    sealed["also_new"] = "ignored"
    assert loads(msgpack.packb(sealed)).model.n_mistakes == model.n_mistakes


def test_newer_version_is_refused_with_an_upgrade_hint():
    outer = msgpack.unpackb(dumps(trained(10)[0]))
    outer["version"] = 2
    with pytest.raises(SnapshotError, match="upgrade streamk") as info:
        loads(msgpack.packb(outer))
    assert not isinstance(info.value, CorruptSnapshot)


def test_build_false_skips_the_class():
    outer = msgpack.unpackb(dumps(trained(10)[0]))
    body = msgpack.unpackb(outer["body"])
    body["model"]["class"] = "NobodyKnowsMe"
    snap = loads(seal(msgpack.packb(body)), build=False)
    assert snap.model is None and snap.class_name == "NobodyKnowsMe"
    with pytest.raises(SnapshotError, match="not in the allow-list"):
        loads(seal(msgpack.packb(body)))


def test_from_state_errors_are_wrapped():
    model, _ = trained(40)
    model.alpha = model.alpha[:-1]  # inconsistent with X: from_state raises ValueError
    with pytest.raises(SnapshotError, match="from_state rejected") as info:
        loads(dumps(model))
    assert isinstance(info.value.__cause__, ValueError)


def test_verify_bytes():
    data = dumps(trained(10)[0])
    assert verify_bytes(data) == (True, "ok")
    ok, reason = verify_bytes(data[:-1])
    assert not ok and reason


# -- allow-list ------------------------------------------------------------------------


def test_learners_are_preregistered_by_path():
    assert CLASSES["KernelPerceptron"] == "streamk.learners.perceptron:KernelPerceptron"
    for name in ("KernelAdatron", "OnlineSVR", "OnlineRanker", "KernelNovelty"):
        assert name in CLASSES


def test_unregistered_class_cannot_be_dumped():
    class Local(ToyPerceptron):
        pass

    with pytest.raises(SnapshotError, match="register_class"):
        dumps(Local())
    assert class_name_of(ToyPerceptron()) == "ToyPerceptronFormat"


def test_missing_module_fails_only_on_load_with_a_clear_message():
    register_class("GhostLearner", "streamk.learners.ghost_does_not_exist:Ghost")
    with pytest.raises(SnapshotError, match="cannot be imported"):
        resolve_class("GhostLearner")


def test_register_class_validates_and_refuses_silent_repointing():
    with pytest.raises(SnapshotError):
        register_class("bad name", "x:y")
    with pytest.raises(SnapshotError):
        register_class("Ok", "os; import x")
    with pytest.raises(SnapshotError, match="already registered"):
        register_class("ToyPerceptronFormat", "os:path")
    register_class("ToyPerceptronFormat", f"{__name__}:ToyPerceptron")  # same path: no-op


def test_registered_non_class_is_refused():
    register_class("NotAClass", "os.path:join")
    with pytest.raises(SnapshotError, match="not a class"):
        resolve_class("NotAClass")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"seq": -1}, "seq"),
        ({"seq": 2**63}, "seq"),
        ({"seq": True}, "seq"),
        ({"offsets": {"t": {-1: 0}}}, "partition"),
        ({"offsets": {"t": {0: -5}}}, "offset"),
        ({"offsets": {"": {0: 1}}}, "source"),
        ({"offsets": {"t": [1]}}, "source"),
        ({"metrics": {"a": "high"}}, "metric"),
        ({"metrics": {"a": True}}, "metric"),
        ({"created_at": float("nan")}, "created_at"),
        ({"created_at": -1.0}, "created_at"),
        ({"note": {1, 2}}, "not plain"),
    ],
)
def test_dumps_validates_arguments(kwargs, message):
    with pytest.raises(SnapshotError, match=message):
        dumps(trained(10)[0], **kwargs)


def test_dumps_accepts_numpy_offsets_and_metrics():
    snap = loads(
        dumps(
            trained(10)[0],
            offsets={"t": {np.int32(2): np.int64(9)}},
            metrics={"m": np.float32(0.5)},
        )
    )
    assert snap.offsets == {"t": {2: 9}} and snap.metrics == {"m": 0.5}


class BrokenState(ToyPerceptron):
    def state(self):
        raise RuntimeError("boom")


def test_state_failures_are_wrapped():
    register_class("BrokenToyFormat", f"{__name__}:BrokenState")
    with pytest.raises(SnapshotError, match="state\\(\\) failed"):
        dumps(BrokenState())


@settings(max_examples=100, deadline=None)
@given(
    offsets=st.dictionaries(
        st.text(min_size=1, max_size=12),
        st.dictionaries(st.integers(0, 10**10 - 1), st.integers(0, 2**63 - 1), max_size=4),
        max_size=3,
    ),
    seq=st.integers(0, 2**63 - 1),
    metrics=st.dictionaries(
        st.text(max_size=8).filter(lambda k: k != "__nd__"),
        st.integers(-(2**63), 2**63) | st.floats(),
    ),
    created_at=st.floats(0, 1e12),
)
def test_stream_position_and_metrics_round_trip(offsets, seq, metrics, created_at):
    snap = loads(dumps(ToyPerceptron(), offsets, seq, metrics, created_at=created_at))
    assert (snap.offsets, snap.seq, snap.created_at) == (offsets, seq, created_at)
    assert list(snap.metrics) == list(metrics)
    for key, value in metrics.items():
        assert snap.metrics[key] == value or (
            value != value and snap.metrics[key] != snap.metrics[key]
        )


def _trained(cls_name: str):
    from streamk.learners.novelty import KernelNovelty
    from streamk.learners.perceptron import KernelPerceptron

    rng = np.random.default_rng(1)
    model = KernelNovelty(budget=20) if cls_name == "novelty" else KernelPerceptron()
    for i, (a, b) in enumerate(rng.normal(size=(60, 2))):
        x = {"a": float(a), "b": float(b), "c": float(a * b)}
        model.learn_one(x) if cls_name == "novelty" else model.learn_one(x, "xyz"[i % 3])
    return model


def test_implied_limits_are_checked_against_a_real_state():
    """Each documented count is checked, by hand-computed bounds on a known state."""
    from streamk.snapshot import Limits

    old = _trained("novelty")  # 20 support rows, 3 features
    old._support.keep_gram = True  # as saved while the detector kept K(S, S) under a budget
    novelty = dumps(old)
    snap = loads(novelty)
    assert snap.model.n_support == 20 and snap.state["support"]["keep_gram"]
    rows = snap.state["support"]["buffers"]["rows"]  # from_state allocates the saved capacity
    assert rows >= 20
    gram = 2 * rows * rows * 8  # the documented Gram accounting alone
    with pytest.raises(CorruptSnapshot, match="max_implied_bytes"):
        loads(novelty, Limits(max_implied_bytes=gram - 1))
    loads(novelty, Limits(max_implied_bytes=gram + 10_000))  # buffers and arrays: a few kB
    with pytest.raises(CorruptSnapshot, match="max_support"):
        loads(novelty, Limits(max_support=19, max_features=19))
    with pytest.raises(CorruptSnapshot, match="max_features"):
        loads(novelty, Limits(max_features=2))
    perceptron = dumps(_trained("perceptron"))  # 3 classes: 3 coefficient columns
    with pytest.raises(CorruptSnapshot, match="max_outputs"):
        loads(perceptron, Limits(max_outputs=2))
    loads(perceptron, Limits(max_outputs=3))
