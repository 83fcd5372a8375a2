"""The novelty detector's centre statistics under a budget, with no kept Gram matrix.

``KernelNovelty`` carries ``r = K(S, S) w`` and ``cc = w' K(S, S) w`` through every eviction
by computing the leaving vector's kernel column on the fly: the NumPy path
(``KernelNovelty._follow_swap``), the compiled block passes (``_core.step_pass``) and the
per-event path (``_event.pyx``); through the Projectron's projections and removals in O(n)
(``_follow_projectron``: ``K P k = k``) and through Merge's merges with three kernel
columns (``_follow_merge``), on the NumPy path and the per-event path. The oracle here is
independent of all of them: ``r``, ``cc`` and the score ``||phi(x) - phi_S||^2`` recomputed
from scratch with the kernel's Gram matrix of the final support set. The kernels and
policies are those of ``tests/test_grid_paths.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamk import KernelNovelty, RemoveOldest, RemoveRandom, accel
from streamk.budget import Forgetron, Merge, Projectron
from streamk.learners import fastpass
from tests.test_grid_paths import GRAM_KERNELS, KERNELS, POLICIES, _stream

pytestmark = pytest.mark.skipif(accel.core is None, reason="the compiled core is not built")

#: how a stream is learned: the per-event path, OneRow (learn_one without it), learn_many
#: untracked and tracked, and the NumPy path (the core switched off)
PATHS = ["event", "one", "rows", "tracked", "numpy"]
#: policies whose swaps every path follows (the others may leave r stale for a recomputation)
SWAPS = {"oldest", "random", "forgetron", "smallest"}
#: policies whose every change every path follows, not by swapping one vector for the new one
FOLLOWED = {"projectron", "merge"}


def _learn(model: KernelNovelty, path: str, X: pd.DataFrame, monkeypatch) -> None:
    """Learn the rows of ``X`` in order along ``path``."""
    if path in ("rows", "tracked"):
        with monkeypatch.context() as m:
            if path == "tracked":
                m.setattr(fastpass, "rows_plan", lambda *args, **kwargs: None)
            model.learn_many(X)
        return
    rows = X.to_dict(orient="records")
    if path == "one":
        model._event = None
    core = accel.core
    if path == "numpy":
        accel.core = None
    try:
        for x in rows:
            model.learn_one(x)
    finally:
        accel.core = core


def _exact(model: KernelNovelty) -> tuple[np.ndarray, float]:
    """``K(S, S) w`` and ``w' K(S, S) w`` from scratch with the kernel."""
    S = model.support_
    w = S.coef[:, 0]
    K = S.kernel.gram(S.X, S.X)
    return K @ w, float(w @ K @ w)


def _brute_score(model: KernelNovelty, x: dict) -> float:
    """``||phi(x) - phi_S||^2`` with ``phi_S = sum_i w_i phi(x_i) / W``, term by term."""
    S = model.support_
    q = np.array([[x[name] for name in model._features.names]])
    w = S.coef[:, 0]
    W = w.sum()
    kxs = S.kernel.gram(q, S.X)[0]
    return max(
        float(
            S.kernel.gram(q, q)[0, 0] - 2.0 / W * (kxs @ w) + w @ S.kernel.gram(S.X, S.X) @ w / W**2
        ),
        0.0,
    )


def _check_centre(model: KernelNovelty, rtol: float = 1e-9) -> None:
    """The learner's statistics, when current, equal the exact ones."""
    if model._r is None:
        return
    r, cc = _exact(model)
    scale = np.abs(r).max(initial=1.0)
    np.testing.assert_allclose(model._r, r, rtol=rtol, atol=rtol * scale)
    assert model._cc == pytest.approx(cc, rel=rtol, abs=rtol * scale * model.n_support)


def _expects_follow(kernel: str, policy: str, path: str) -> bool:
    """Whether ``r`` must still be current right after learning (no read in between)."""
    if kernel == "rbf-auto":  # (its kernel moves during the warm-up)
        return False
    if policy in FOLLOWED:  # the per-event core or the NumPy path, never a block pass
        return True
    if policy not in SWAPS:
        return policy == "unbounded"
    # a Gram-matrix kernel's block pass cannot compute the leaving column: stale
    return not (kernel in GRAM_KERNELS and path in ("rows", "tracked"))


CASES = [(k, p) for k in sorted(KERNELS) for p in sorted(POLICIES)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("kernel", "policy"), CASES)
def test_centre_statistics_equal_a_recomputation_from_scratch(kernel, policy, path, monkeypatch):
    """Chunks of a stream that fills a 40-vector set and turns it over ~13 times: after
    each, ``r`` and ``cc`` (when current) equal the exact ones, ``r`` is still current
    where the path follows swaps, the score equals the brute-force distance, and no
    Gram matrix is kept."""
    if policy == "merge" and not kernel.startswith("rbf"):
        pytest.skip("Merge takes an RBF kernel only (ConfigError otherwise)")
    X, _ = _stream(600, 2, seed=5)
    probe = X.iloc[7].to_dict()
    model = KernelNovelty(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())
    for a in range(0, 600, 100):
        _learn(model, path, X.iloc[a : a + 100], monkeypatch)
        if a:  # the statistics were read after the previous chunk
            assert (model._r is not None) or not _expects_follow(kernel, policy, path)
        _check_centre(model)
        assert model.score_one(probe) == pytest.approx(
            _brute_score(model, probe), rel=1e-9, abs=1e-9
        )
        _check_centre(model)
        assert model.support_._G is None
    if policy in SWAPS:  # filled, then turned over many times
        assert model.support_.n == 40 and model.support_.next_id == 600


@pytest.mark.parametrize("path", ["event", "one", "rows", "tracked"])
@pytest.mark.parametrize("policy", ["oldest", "random", "forgetron"])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly", "linear", "scaled-laplacian"])
def test_compiled_paths_carry_the_numpy_paths_statistics(kernel, policy, path, monkeypatch):
    """Event for event the same ``r`` and ``cc`` as the NumPy path, read between chunks."""
    X, _ = _stream(500, 2, seed=6)
    probe = X.iloc[3].to_dict()
    models = {
        p: KernelNovelty(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())
        for p in (path, "numpy")
    }
    for p, m in models.items():  # fill the set, then compute r and cc exactly
        _learn(m, p, X.iloc[:40], monkeypatch)
        m.score_one(probe)
    for a in range(40, 500, 46):
        for p, m in models.items():
            _learn(m, p, X.iloc[a : a + 46], monkeypatch)
        fast, slow = models[path], models["numpy"]
        assert fast._r is not None and slow._r is not None
        assert fast._r_updates == slow._r_updates == a + 6
        rtol = 1e-7 if policy == "forgetron" else 1e-9  # (its shrink cancels: see test_grid_paths)
        np.testing.assert_allclose(fast._r, slow._r, rtol=rtol, atol=1e-12)
        assert fast._cc == pytest.approx(slow._cc, rel=rtol)
        assert fast.score_one(probe) == pytest.approx(slow.score_one(probe), rel=rtol, abs=1e-12)
    assert models[path]._r_updates == 460


def _no_numpy_inserts(model: KernelNovelty, monkeypatch) -> None:
    """From here on a NumPy insertion fails the test: the compiled core takes every event."""

    def fail(*args):
        raise AssertionError("the NumPy path inserted a row")

    monkeypatch.setattr(model, "_insert", fail)


FOLLOWED_CASES = [(k, "projectron") for k in ("rbf", "laplacian", "poly", "linear")] + [
    ("scaled-laplacian", "projectron"),
    ("rbf", "merge"),
]


@pytest.mark.parametrize("path", ["event", "rows"])
@pytest.mark.parametrize(("kernel", "policy"), FOLLOWED_CASES)
def test_the_compiled_core_follows_the_projectron_and_merge_as_numpy_does(
    kernel, policy, path, monkeypatch
):
    """Event for event the per-event core (``learn_one``, and ``learn_many``'s loop over it)
    carries the NumPy path's ``r``, ``cc``, count of followed changes and score through the
    Projectron's projections and removals and Merge's merges, with no NumPy insertion
    once the set is filled."""
    X, _ = _stream(500, 2, seed=6)
    probe = X.iloc[3].to_dict()
    models = {
        p: KernelNovelty(kernel=KERNELS[kernel](), budget=POLICIES[policy][0]())
        for p in (path, "numpy")
    }
    for p, m in models.items():  # fill the set, then compute r and cc exactly (the score
        _learn(m, p, X.iloc[:40], monkeypatch)  # reads them only while sum(w) > 0)
        m._stats()
    fast, slow = models[path], models["numpy"]
    with monkeypatch.context() as mp:
        _no_numpy_inserts(fast, mp)
        for a in range(40, 500, 46):
            for p, m in models.items():
                _learn(m, p, X.iloc[a : a + 46], monkeypatch)
            assert fast._r is not None and slow._r is not None
            assert fast._r_updates == slow._r_updates > 0
            np.testing.assert_array_equal(fast.support_.ids, slow.support_.ids)
            np.testing.assert_allclose(fast._r, slow._r, rtol=1e-9, atol=1e-12)
            assert fast._cc == pytest.approx(slow._cc, rel=1e-9)
            assert fast.score_one(probe) == pytest.approx(slow.score_one(probe), rel=1e-9)
    if policy == "merge":
        assert fast._event.merges > 0


@pytest.mark.parametrize("path", ["event", "rows"])
def test_the_core_makes_room_for_a_projectron_that_mostly_projects(path, monkeypatch):
    """The support buffers full while the Projectron projects nearly every row: the core
    grows them itself (the NumPy path would, but only on an append) and keeps every row."""
    X, _ = _stream(600, 2, seed=12)
    model = KernelNovelty(kernel=KERNELS["rbf"](), budget=Projectron(500))
    _learn(model, path, X.iloc[:1], monkeypatch)
    with monkeypatch.context() as mp:
        _no_numpy_inserts(model, mp)
        _learn(model, path, X.iloc[1:], monkeypatch)
    S = model.support_
    assert S.next_id < 300 and S.capacity >= S.n  # projected mostly; nothing declined


EVERY_EVENT = [(k, p) for p in ("projectron", "forgetron") for k in ("rbf", "laplacian", "sum")]
EVERY_EVENT += [("poly", "projectron"), ("rbf", "merge")]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("kernel", "policy"), EVERY_EVENT)
def test_every_event_leaves_the_exact_centre(kernel, policy, path, monkeypatch):
    """Each event learned alone along ``path`` with nothing read in between, over a stream
    that turns a 20-vector set over about ten times: after every one ``r`` is still
    current where the path follows the policy, and ``r`` and ``cc`` equal ``K(S, S) w`` and
    ``w' K(S, S) w`` from scratch."""
    make = {"projectron": Projectron, "merge": Merge, "forgetron": Forgetron}[policy]
    X, _ = _stream(240, 2, seed=11)
    model = KernelNovelty(kernel=KERNELS[kernel](), budget=make(20))
    _learn(model, path, X.iloc[:20], monkeypatch)
    model._stats()  # r computed exactly
    follows = _expects_follow(kernel, policy, path)
    for i in range(20, 240):
        _learn(model, path, X.iloc[i : i + 1], monkeypatch)
        assert model._r is not None or not follows
        _check_centre(model)
    assert model._r_updates > 100 or not follows


@pytest.mark.parametrize("path", ["event", "one", "rows", "numpy"])
@pytest.mark.parametrize("policy", ["projectron", "merge"])
def test_followed_projections_and_merges_count_towards_the_exact_recomputation(
    policy, path, monkeypatch
):
    """Every projection, Projectron removal or merge ``r`` follows counts towards
    ``_EXACT_EVERY`` (a growth does not); the first one past it leaves ``r`` stale, and the
    next read recomputes it and restarts the count."""
    X, _ = _stream(200, 2, seed=7)
    model = KernelNovelty(kernel=KERNELS["rbf"](), budget=POLICIES[policy][0]())
    model._EXACT_EVERY = 25
    _learn(model, path, X.iloc[:10], monkeypatch)
    model._stats()
    S = model.support_
    count = drops = 0
    for i in range(10, 200):
        n0 = S.n
        _learn(model, path, X.iloc[i : i + 1], monkeypatch)
        if S.n == n0 + 1:  # grew: followed, not counted
            assert model._r is not None and model._r_updates == count
        elif count == 25:
            assert model._r is None
            model._stats()
            assert model._r is not None and model._r_updates == 0
            count, drops = 0, drops + 1
        else:
            count += 1
            assert model._r is not None and model._r_updates == count
        _check_centre(model)
    assert drops >= 2


@pytest.mark.parametrize("path", PATHS)
def test_the_forgetrons_shrink_scales_the_statistics(path, monkeypatch):
    """Small vectors under a linear kernel: the leaving vector's margin is below 1/2, so
    the Forgetron shrinks every weight (``phi < 1``) and ``r`` and ``cc`` must follow it."""
    rng = np.random.default_rng(10)
    X = pd.DataFrame(rng.normal(scale=0.1, size=(600, 3)), columns=["a", "b", "c"])
    models = {
        p: KernelNovelty(kernel=KERNELS["linear"](), budget=Forgetron(40)) for p in {path, "numpy"}
    }
    for p, m in models.items():
        _learn(m, p, X.iloc[:40], monkeypatch)
        m.score_one({})
    for a in range(40, 600, 80):
        for p, m in models.items():
            _learn(m, p, X.iloc[a : a + 80], monkeypatch)
        fast, slow = models[path], models["numpy"]
        assert fast._r is not None and fast._r_updates == a + 40
        _check_centre(fast)
        np.testing.assert_allclose(fast._r, slow._r, rtol=1e-7, atol=1e-12)
    assert models[path].support_.coef.min() < 0.5  # shrunk, more than once


@pytest.mark.parametrize("path", PATHS)
def test_r_is_dropped_for_an_exact_recomputation_every_so_many_removals(path, monkeypatch):
    """``_EXACT_EVERY`` bounds the rounding drift: the removal after that many followed
    ones leaves ``r`` stale, and the next read recomputes it and restarts the count."""
    X, _ = _stream(200, 2, seed=7)
    model = KernelNovelty(kernel=KERNELS["rbf"](), budget=RemoveRandom(40, seed=1))
    model._EXACT_EVERY = 25
    _learn(model, path, X.iloc[:40], monkeypatch)
    model.score_one({})  # r computed exactly
    assert model._r is not None and model._r_updates == 0
    _learn(model, path, X.iloc[40:65], monkeypatch)
    assert model._r is not None and model._r_updates == 25
    _check_centre(model)
    _learn(model, path, X.iloc[65:66], monkeypatch)
    assert model._r is None
    model.score_one({})
    assert model._r is not None and model._r_updates == 0
    _learn(model, path, X.iloc[66:80], monkeypatch)
    assert model._r_updates == 14
    _check_centre(model)


@pytest.mark.parametrize(
    ("path", "events"), [("rows", 200_000), ("event", 100_000), ("numpy", 20_000)]
)
@pytest.mark.parametrize("policy", [RemoveRandom, RemoveOldest, Forgetron, Projectron, Merge])
def test_no_drift_over_a_long_stream(path, events, policy, monkeypatch):
    """Hundreds of thousands of swaps (projections, merges) at B = 50, never recomputed
    (``_EXACT_EVERY`` switched off): ``r`` and ``cc`` stay within 1e-9 of a fresh exact
    recomputation (for the Projectron also while its ``P`` is updated, never rebuilt)."""
    rng = np.random.default_rng(8)
    X = pd.DataFrame(rng.normal(size=(events, 3)), columns=["a", "b", "c"])
    model = KernelNovelty(kernel=KERNELS["rbf"](), budget=policy(50))
    model._EXACT_EVERY = 1 << 62
    _learn(model, path, X.iloc[:50], monkeypatch)
    model.score_one({})
    n0 = model.n_support
    for a in range(50, events, 25_000):
        _learn(model, path, X.iloc[a : a + 25_000], monkeypatch)
        assert model._r is not None
        _check_centre(model)
    assert model._r_updates == events - 50 - (model.n_support - n0)  # all but growths


def test_a_snapshot_saved_with_a_gram_matrix_loads_without_it():
    """A state from when the detector kept ``K(S, S)`` (``keep_gram``) still loads; the
    restored learner drops the matrix and goes on as one that never had it."""
    X, _ = _stream(300, 2, seed=9)
    rows = X.to_dict(orient="records")
    model = KernelNovelty(kernel=KERNELS["rbf"](), budget=RemoveOldest(40))
    for x in rows[:200]:
        model.learn_one(x)
    state = model.state()
    state["support"]["keep_gram"] = True
    old = KernelNovelty.from_state(state)
    new = KernelNovelty.from_state(model.state())
    assert old.support_._G is None and not old.support_.keep_gram
    for x in rows[200:]:
        for m in (old, new):
            m.score_one(x)
            m.learn_one(x)
    np.testing.assert_allclose(old._r, new._r, rtol=1e-12)
    assert old.score_one(rows[0]) == pytest.approx(new.score_one(rows[0]), rel=1e-12)
    assert old.support_._G is None and not old.state()["support"]["keep_gram"]
