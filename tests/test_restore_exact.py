"""A learner dumped and loaded anywhere continues bit for bit like the uninterrupted one.

The product promise (docs/operations.md; the exactly-once rule of the design) is that a
model restored from a snapshot continues exactly as if it had never stopped. Under the
compiled paths that needs more than ``f``: which path an event takes (the compiled
per-event core, or the NumPy fallback that rounds differently in the last bits) depends on
state such as the support set's buffer capacity and the largest squared norm it ever
held. Each case learns one stream ``learn_one`` by ``learn_one``, once without
interruption and once dumped to snapshot bytes and loaded back at many stop points; the
two must give identical predictions and identical snapshot bytes at the end.

The learners, kernels and policies are those of ``tests/test_grid_paths.py``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import pandas as pd
import pytest
from peak_memory import traced_peak

from streamk import RBF, KernelAdatron, KernelNovelty, OnlineSVR, RemoveOldest, accel, snapshot
from streamk.errors import SnapshotError
from streamk.learners import eventpass
from streamk.snapshot import CorruptSnapshot
from streamk.snapshot.codec import to_plain
from tests.test_grid_paths import GRAM_KERNELS, KERNELS, LEARNERS, POLICIES, _stream

pytestmark = pytest.mark.skipif(
    accel.core is None or not eventpass.available(), reason="the compiled paths are not built"
)

N = 600
#: restore points: irregular, so some land on a full buffer (n == capacity) and most don't
STOPS = frozenset(range(23, N, 29))

_LEARNERS: dict[str, Callable[[Any, Any], Any]] = {
    **LEARNERS,
    "svr": lambda k, b: OnlineSVR(kernel=k, C=1.0, budget=b),
    "svr-auto": lambda k, b: OnlineSVR(kernel=k, budget=b),
    "novelty": lambda k, b: KernelNovelty(kernel=k, budget=b),
    "adatron": lambda k, b: KernelAdatron(kernel=k, resweeps=0, budget=b),
    # resweeps keep K(S, S): the set's kept kernel values must come back as they were
    "svr-resweep": lambda k, b: OnlineSVR(kernel=k, C=1.0, resweeps=1, budget=b),
    "adatron-resweep": lambda k, b: KernelAdatron(kernel=k, resweeps=1, budget=b),
}
_CLASSES = {"ranker": 5, "perceptron": 3, "margin": 2}
#: vector kernels the compiled per-event core computes, and one through a Gram fallback
_KERNELS = ("rbf", "rbf-auto", "laplacian", "poly", "linear", "scaled-laplacian", "sum")


def _events(learner: str) -> tuple[list[dict], list[Any]]:
    """The grid's stream: its labels, or a real target far from 0 for the regressors."""
    X, y = _stream(N, _CLASSES.get(learner, 2))
    if learner.startswith("svr"):
        v = X.to_numpy()
        noise = np.random.default_rng(1).standard_normal(N)
        y = (5.0 + 2.0 * np.sin(2 * v[:, 0]) + v[:, 1] * v[:, 2] + 0.3 * noise).tolist()
    return X.to_dict(orient="records"), y


def _learn(model: Any, x: dict, y: Any) -> None:
    if isinstance(model, KernelNovelty):
        model.learn_one(x)
    else:
        model.learn_one(x, y)


def _run(make: Callable[[], Any], xs: list[dict], ys: list[Any], stops: frozenset) -> Any:
    """Learn the stream, dumping to bytes and loading back before each event in ``stops``."""
    model = make()
    for i, (x, y) in enumerate(zip(xs, ys)):
        if i in stops:
            model = snapshot.loads(snapshot.dumps(model)).model
        _learn(model, x, y)
    return model


def _outputs(model: Any, probe: list[dict]) -> list:
    """What the model says on ``probe``: the SVR's values, the novelty detector's and the
    ranker's scores with their predictions, the classifiers' probabilities."""
    if isinstance(model, OnlineSVR):
        return [model.predict_one(x) for x in probe]
    if isinstance(model, KernelNovelty) or hasattr(model, "thresholds_"):
        return [(model.score_one(x), model.predict_one(x)) for x in probe]
    return [model.predict_proba_one(x) for x in probe]


CASES = [
    (learner, kernel, policy)
    for learner in sorted(_LEARNERS)
    for kernel in _KERNELS
    for policy in sorted(POLICIES)
    if policy != "merge" or kernel.startswith("rbf")  # Merge takes an RBF kernel only
    if not (kernel in GRAM_KERNELS and policy in ("projectron", "smallest"))  # slow, no core
]


@pytest.mark.parametrize(("learner", "kernel", "policy"), CASES)
def test_restored_anywhere_continues_bit_for_bit(learner, kernel, policy):
    def make():
        return _LEARNERS[learner](KERNELS[kernel](), POLICIES[policy][0]())

    xs, ys = _events(learner)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = _run(make, xs, ys, frozenset())
        restored = _run(make, xs, ys, STOPS)
    probe = xs[::23]
    assert _outputs(restored, probe) == _outputs(whole, probe)
    S, W = restored.support_, whole.support_
    np.testing.assert_array_equal(S.ids, W.ids)
    np.testing.assert_array_equal(S.coef, W.coef)
    np.testing.assert_array_equal(S.sqnorm, W.sqnorm)  # recomputed on load, kept in the run
    np.testing.assert_array_equal(S.kdiag, W.kdiag)
    assert snapshot.dumps(restored, created_at=0.0) == snapshot.dumps(whole, created_at=0.0)


@pytest.mark.parametrize(("learner", "kernel", "policy"), CASES)
def test_restored_between_blocks_learn_many_continues_bit_for_bit(learner, kernel, policy):
    """The same with ``learn_many`` in blocks of 97 rows, restored before every block (the
    block passes keep and read the same state)."""

    def run(restore: bool) -> Any:
        model = _LEARNERS[learner](KERNELS[kernel](), POLICIES[policy][0]())
        for a in range(0, N, 97):
            if restore and a:
                model = snapshot.loads(snapshot.dumps(model)).model
            if isinstance(model, KernelNovelty):
                model.learn_many(X.iloc[a : a + 97])
            else:
                model.learn_many(X.iloc[a : a + 97], y.iloc[a : a + 97])
        return model

    xs, ys = _events(learner)
    X, y = pd.DataFrame(xs), pd.Series(ys)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole, restored = run(False), run(True)
    probe = xs[::23]
    assert _outputs(restored, probe) == _outputs(whole, probe)
    assert snapshot.dumps(restored, created_at=0.0) == snapshot.dumps(whole, created_at=0.0)


@pytest.mark.parametrize("learner", ["perceptron", "svr", "novelty"])
def test_a_far_row_evicted_before_the_restore_still_decides_the_kernel_formula(learner):
    """RBF rows far from the origin make ``||a||^2 + ||b||^2 - 2ab`` inexact, so every path
    computes such kernel values from exact distances instead; the set remembers the largest
    squared norm it ever held (a bound never lowered), and so must a restored set, even
    once those rows are gone: otherwise it switches formula and rounds differently."""

    def make():
        return _LEARNERS[learner](RBF(gamma=0.4), RemoveOldest(40))

    xs, ys = _events(learner)
    far = [{k: v + 300.0 for k, v in x.items()} for x in xs[:6]]  # ||x||^2 near 3.6e5
    a, b = sorted(set(ys))[:2] if learner != "svr" else (20.0, -10.0)  # far targets: updates
    xs, ys = far + xs, [a, b] * 3 + ys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = _run(make, xs, ys, frozenset())
        restored = _run(make, xs, ys, frozenset(range(100, len(xs), 50)))
    assert whole.support_.ids.min() >= len(far)  # the far rows were evicted long before
    assert not whole.support_.kernel.expansion_exact(whole.support_._sq_max)
    probe = xs[len(far) :: 23]
    assert _outputs(restored, probe) == _outputs(whole, probe)
    assert snapshot.dumps(restored, created_at=0.0) == snapshot.dumps(whole, created_at=0.0)


# -- the buffers map in the snapshot -----------------------------------------------------------
def _trained(resweeps: int = 0) -> OnlineSVR:
    model = OnlineSVR(C=1.0, resweeps=resweeps, budget=RemoveOldest(40))
    xs, ys = _events("svr")
    for x, y in zip(xs[:100], ys[:100]):
        model.learn_one(x, y)
    return model


def _edited(model: Any, edit: Callable[[dict], None]) -> bytes:
    """``model``'s snapshot with its support state edited, sealed again."""
    outer = msgpack.unpackb(snapshot.dumps(model), raw=False)
    body = msgpack.unpackb(outer["body"], raw=False, strict_map_key=False)
    edit(body["model"]["state"]["support"])
    return snapshot.seal(msgpack.packb(body, use_bin_type=True))


def _set(**values: Any) -> Callable[[dict], None]:
    def edit(support: dict) -> None:
        support["buffers"].update(values)

    return edit


def test_a_restored_set_has_the_original_buffers():
    model = _trained()
    S = model.support_
    R = snapshot.loads(snapshot.dumps(model)).model.support_
    assert S.n < S.capacity  # the case a tight restore got wrong
    assert (R.capacity, R._X.shape[1], R._sq_max) == (S.capacity, S._X.shape[1], S._sq_max)
    assert R.state()["buffers"] == S.state()["buffers"]


def test_a_snapshot_without_buffers_loads_with_the_tightest_ones():
    """Snapshots written before the map existed: the buffers of that time (the rows held)."""
    model = _trained()
    S = model.support_
    R = snapshot.loads(_edited(model, lambda s: s.pop("buffers"))).model.support_
    assert (R.capacity, R._X.shape[1]) == (S.n, S.width)
    assert R._sq_max == S.sqnorm.max()
    np.testing.assert_array_equal(R.coef, S.coef)


def test_buffers_smaller_than_the_rows_are_raised_to_them():
    model = _trained()
    S = model.support_
    R = snapshot.loads(_edited(model, _set(rows=1, cols=0, sq_max=0.0))).model.support_
    assert (R.capacity, R._X.shape[1]) == (S.n, S.width)
    assert R._sq_max == S.sqnorm.max()  # a bound never below the rows held


HOSTILE_BUFFERS = {
    "rows over max_support": (_set(rows=1 << 40), "max_support"),
    "cols over max_features": (_set(cols=1 << 40), "max_features"),
    "rows negative": (_set(rows=-1), "rows"),
    "rows a bool": (_set(rows=True), "rows"),
    "cols a string": (_set(cols="8"), "cols"),
    "not a map": (lambda s: s.update(buffers=[64, 4, 1.0]), "buffers"),
    "an unknown key": (_set(extra=1), "buffers"),
    "sq_max not finite": (_set(sq_max=float("nan")), "sq_max"),
    "sq_max negative": (_set(sq_max=-1.0), "sq_max"),
    "sq_max a string": (_set(sq_max="1"), "sq_max"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_BUFFERS))
def test_hostile_buffers_are_refused_before_allocating(name):
    edit, match = HOSTILE_BUFFERS[name]
    data = _edited(_trained(), edit)
    with traced_peak() as peak, pytest.raises(SnapshotError, match=match):
        snapshot.loads(data)
    assert peak.bytes < 64 << 20


def test_a_kept_gram_matrix_counts_the_declared_capacity():
    """``from_state`` allocates ``K(S, S)`` for every row of capacity: 2**16 rows of it are
    64 GiB, refused from the declared count (a few bytes in the snapshot)."""
    model = _trained(resweeps=1)
    assert model.support_.keep_gram
    with pytest.raises(CorruptSnapshot, match="max_implied_bytes"):
        snapshot.loads(_edited(model, _set(rows=1 << 16)))


def _cache(**values: Any) -> Callable[[dict], None]:
    def edit(support: dict) -> None:
        support["cache"].update({k: to_plain(v) for k, v in values.items()})

    return edit


HOSTILE_CACHE = {
    "gram not finite": (_cache(gram=np.full((40, 40), np.nan)), "gram"),
    "gram of another shape": (_cache(gram=np.zeros((39, 40))), "gram"),
    "kdiag of another shape": (_cache(kdiag=np.ones(41)), "kdiag"),
    "kdiag not float64": (_cache(kdiag=np.ones(40, dtype=np.float32)), "kdiag"),
    "not a map": (lambda s: s.update(cache=[1, 2]), "cache"),
    "no kdiag": (lambda s: s["cache"].pop("kdiag"), "cache"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CACHE))
def test_a_hostile_cache_is_refused(name):
    edit, match = HOSTILE_CACHE[name]
    model = _trained(resweeps=1)
    assert model.support_.n == 40
    with pytest.raises(SnapshotError, match=match):
        snapshot.loads(_edited(model, edit))


def test_a_cache_of_other_rows_is_computed_afresh():
    """Consolidation, merging and adoption rebuild a set from other rows out of a state:
    a cache whose ids are not the rows' is not used."""
    model = _trained(resweeps=1)
    S = model.support_
    ids = S.ids[::-1].copy()
    edit = _cache(ids=ids, kdiag=np.full(S.n, 7.0), gram=np.full((S.n, S.n), 7.0))
    R = snapshot.loads(_edited(model, edit)).model.support_
    np.testing.assert_array_equal(R.kdiag, S.kernel.diag(S.X))
    np.testing.assert_array_equal(R.gram_matrix, S.kernel.gram(S.X, S.X))
