"""An event whose kernel values would overflow is refused, not stored (session 25).

Before: one event ``{"a": 1e60}`` under ``Polynomial(3)`` joined the support set with
``k(x, x) = inf``; every later snapshot was refused ("kdiag must be finite"), so the engine
stopped at its next checkpoint, and again after every restart (it re-learned the event). An
adatron under ``Linear()`` given ``{"a": 1e-160}`` stepped by ``1 / k(x, x)`` to an infinite
coefficient. Now a row whose ``k(x, x)`` would lie outside :data:`VALUE_RANGE` (and is not
0) is refused with ``InvalidInput`` (a dead letter on a stream), and the model is as
without it.

Oracles: the window's edges against the kernel's own NumPy ``diag``; the model against the
same learner fed only the events the window admits (decided here from ``diag``, not from
the code under test); the snapshot loader's own checks.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from streamk import (
    RBF,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    Laplacian,
    Linear,
    MarginPerceptron,
    Normalized,
    OnlineRanker,
    OnlineSVR,
    Polynomial,
    Product,
    Scaled,
    Sum,
    accel,
    snapshot,
)
from streamk.errors import InvalidInput
from streamk.kernels import VALUE_RANGE, sqnorm_window

KERNELS = {
    "linear": Linear,
    "poly3": lambda: Polynomial(degree=3),
    "poly2-offset0": lambda: Polynomial(degree=2, scale=0.5, offset=0.0),
    "sum": lambda: Sum(RBF(0.5), Polynomial(degree=3)),
    "product": lambda: Product(Linear(), Laplacian(0.5)),
    "normalized": lambda: Normalized(Polynomial(degree=4)),
    "scaled": lambda: Scaled(Linear(), 3.0),
    "rbf": lambda: RBF(0.5),
}


def _diag(kernel, sq: float) -> float:
    """``k(x, x)`` of a one-feature row of squared norm ``sq``, by the kernel's NumPy diag
    (the inner kernel's for a normalised one: the values its division starts from)."""
    inner = kernel.kernel if isinstance(kernel, Normalized) else kernel
    with np.errstate(over="ignore"):
        return float(inner.diag(np.array([[math.sqrt(sq)]]))[0])


def _admitted(kernel, x: dict) -> bool:
    sq = math.fsum(v * v for v in x.values())
    return sq == 0.0 or VALUE_RANGE[0] <= _diag(kernel, sq) <= VALUE_RANGE[1]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_window_edges_are_where_the_kernels_diag_leaves_the_range(name):
    kernel = KERNELS[name]()
    lo, hi = sqnorm_window(kernel)
    low, high = VALUE_RANGE
    if math.isinf(hi):
        assert _diag(kernel, 1e300) <= high
    else:
        assert _diag(kernel, hi * (1 - 1e-6)) <= high < _diag(kernel, hi * (1 + 1e-6))
    if lo == 0.0:
        assert _diag(kernel, 1e-320) >= low
    else:
        assert _diag(kernel, lo * (1 - 1e-6)) < low <= _diag(kernel, lo * (1 + 1e-6))


def test_closed_forms():
    lo, hi = sqnorm_window(Polynomial(degree=3, scale=2.0, offset=1.0))
    assert lo == 0.0 and hi == pytest.approx((1e150 ** (1 / 3) - 1.0) / 2.0, rel=1e-8)
    lo, hi = sqnorm_window(Linear())
    assert (lo, hi) == (pytest.approx(1e-150, rel=1e-8), pytest.approx(1e150, rel=1e-8))
    assert sqnorm_window(RBF()) == (0.0, math.inf)


LEARNERS = {
    "perceptron": (KernelPerceptron, "class"),
    "margin": (MarginPerceptron, "class"),
    "adatron": (KernelAdatron, "class"),
    "adatron-resweep": (lambda **kw: KernelAdatron(resweeps=1, **kw), "class"),
    "svr": (OnlineSVR, "value"),
    "ranker": (OnlineRanker, "value"),
    "novelty": (KernelNovelty, None),
}
HOSTILE = [1e-300, 1e-160, 1e-80, 1e40, 1e60, 1e100, -1e140, 1e200, 1e300]


def _stream(n: int, seed: int) -> list[tuple[dict, object]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        if i % 9 == 4:
            x = {"a": float(rng.choice(HOSTILE)), "b": float(rng.choice([0.0, *HOSTILE]))}
        else:
            x = {"a": float(rng.normal()), "b": float(rng.normal())}
        out.append((x, x["a"] + x["b"] > 0 if i % 3 else bool(rng.integers(2))))
    return out


def _learn(model, task, x, y) -> None:
    if task is None:
        model.learn_one(x)
    else:
        model.learn_one(x, y if task == "class" else float(y) + 0.1 * x["a"] % 1.0)


def _probe(model, task, x):
    return model.score_one(x) if task is None else model.predict_one(x)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("budget", [None, 30])
@pytest.mark.parametrize("kname", ["linear", "poly3", "poly2-offset0", "sum", "normalized"])
@pytest.mark.parametrize("lname", sorted(LEARNERS))
def test_refused_rows_leave_the_model_as_without_them(lname, kname, budget, compiled, monkeypatch):
    if not compiled:
        monkeypatch.setattr(accel, "core", None)
    elif accel.core is None:
        pytest.skip("no compiled core")
    make, task = LEARNERS[lname]
    model, oracle = make(kernel=KERNELS[kname](), budget=budget), None
    oracle = make(kernel=KERNELS[kname](), budget=budget)
    kernel = KERNELS[kname]()
    refused = 0
    for x, y in _stream(240, seed=len(lname) + len(kname)):
        ok = _admitted(kernel, x)
        try:
            _learn(model, task, x, y)
        except InvalidInput as exc:
            assert not ok, f"{x} was refused but is inside the range: {exc}"
            assert "out of this kernel's range" in str(exc) or "overflows" in str(exc)
            refused += 1
            continue
        assert ok, f"{x} was learned but its k(x, x) is outside {VALUE_RANGE}"
        _learn(oracle, task, x, y)
    assert refused > 0
    restored = snapshot.loads(snapshot.dumps(model)).model  # dumps refuses what cannot load
    for x, _ in _stream(30, seed=99)[::2]:
        if _admitted(kernel, x):
            got = _probe(model, task, x)
            assert got == _probe(oracle, task, x) == _probe(restored, task, x)
            if isinstance(got, float):
                assert math.isfinite(got)


@pytest.mark.parametrize("kname", ["linear", "poly3", "product"])
def test_a_block_with_a_row_out_of_range_is_refused_whole_naming_it(kname):
    model = KernelPerceptron(kernel=KERNELS[kname]())
    rows = [{"a": 0.5, "b": -1.0}, {"a": 1e100, "b": 1.0}, {"a": -0.3, "b": 0.2}]
    for X in (pd.DataFrame(rows), pd.DataFrame(rows).to_numpy()):
        with pytest.raises(InvalidInput, match="row 1's squared norm is 1e\\+200"):
            model.learn_many(X, pd.Series([True, False, True]))
    assert model.n_support == 0 and model.n_learned == 0


def test_bounded_kernels_take_any_finite_row():
    model = KernelPerceptron(kernel=RBF(0.5))
    model.learn_one({"a": 1e150, "b": 1e-300}, True)
    model.learn_one({"a": 0.1, "b": 0.0}, False)
    assert model.n_learned == 2


def test_the_engine_dead_letters_the_rows_and_restarts(tmp_path):
    rng = np.random.default_rng(3)
    with open(tmp_path / "log.jsonl", "w") as f:
        for i in range(1200):
            a, b = rng.normal(size=2)
            x, y = {"a": float(a), "b": float(b)}, int(a + b > 0)
            if 500 <= i < 504:  # both labels: one of them is a mistake, which appends
                x, y = {"a": 1e60, "b": 1.0}, i % 2
            f.write(json.dumps({"x": x, "y": y}) + "\n")
    args = [sys.executable, "-m", "streamk.cli", "replay", "log.jsonl", "--kernel", "poly:3",
            "--scale", "none", "--snapshot-dir", "s", "--snapshot-every", "300",
            "--dead-letter-dir", "dead", "--quiet", "--json"]  # fmt: skip
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]  # it stopped with exit 2 before
    out = json.loads(done.stdout)
    assert (out["learned"], out["dead_lettered"]) == (1196, 4)
    letters = (tmp_path / "dead" / "dead-letters.jsonl").read_text().splitlines()
    assert [json.loads(s)["offset"] for s in letters] == [500, 501, 502, 503]
    assert all("out of this kernel's range" in json.loads(s)["reason"] for s in letters)
    again = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["learned"] == 0  # resumed at the end: nothing twice
