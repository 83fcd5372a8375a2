"""KernelNovelty's budget floor: below it CF 5.3's rule can never flag, and the
constructor says so once.

With ``k(x, x) <= 1`` a score ``||phi(x) - phi_S||^2`` is at most 2 for a non-negative
kernel (4 for one that can be negative), while CF 5.3's threshold is at least
``(2 esterr)^2 = 8 (R^2 / n) (sqrt 2 + sqrt ln(1/delta))^2``. So nothing is flagged while
``n <= 4 (sqrt 2 + sqrt ln(1/delta))^2`` (``2 (...)^2`` for a signed kernel): 50 stored
events for ``delta = 0.01``. The rule itself is unchanged (the book's); the floor is
computed here from that formula, and checked on the one stream where it is tight: ``n``
identical events (largest stored distance 0) then an event far away (score exactly 2).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from streamk import (
    RBF,
    Forgetron,
    KernelNovelty,
    Laplacian,
    Linear,
    Normalized,
    Polynomial,
    Projectron,
    RemoveOldest,
    Spectrum,
)
from streamk.kernels import Cosine, Scaled, SoftMatchingSubsequences, Sum


def floor(delta: float, per_score: float) -> int:
    """The largest ``n`` with ``8 (1 / n) (sqrt 2 + sqrt ln(1/delta))^2 >= per_score``."""
    c2 = (math.sqrt(2.0) + math.sqrt(math.log(1.0 / delta))) ** 2
    return math.floor(8.0 * c2 / per_score)


def caught(make) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        make()
    return [w for w in seen if issubclass(w.category, UserWarning)]


def test_the_floor_values():
    assert floor(0.01, 2.0) == 50 and floor(0.1, 2.0) == 34
    assert floor(0.01, 4.0) == 25 and floor(0.1, 4.0) == 17


@pytest.mark.parametrize(
    "make, delta, per_score",
    [
        (lambda b, d: KernelNovelty(budget=b, delta=d), 0.01, 2.0),
        (lambda b, d: KernelNovelty(budget=b, delta=d), 0.1, 2.0),
        (
            lambda b, d: KernelNovelty(kernel=Laplacian(1.0), budget=RemoveOldest(b), delta=d),
            0.01,
            2.0,
        ),
        (lambda b, d: KernelNovelty(kernel=RBF(0.5), budget=Projectron(b), delta=d), 0.01, 2.0),
        (lambda b, d: KernelNovelty(kernel=RBF(0.5), budget=Forgetron(b), delta=d), 0.05, 2.0),
        (lambda b, d: KernelNovelty(kernel=Normalized(Spectrum(3)), budget=b, delta=d), 0.01, 2.0),
        (lambda b, d: KernelNovelty(kernel=Scaled(RBF(0.5), 0.5), budget=b, delta=d), 0.01, 2.0),
        (lambda b, d: KernelNovelty(kernel=Cosine(), budget=b, delta=d), 0.01, 4.0),
        (
            lambda b, d: KernelNovelty(
                kernel=Normalized(SoftMatchingSubsequences(2, 0.5, "ab", [[1, -0.5], [-0.5, 1]])),
                budget=b,
                delta=d,
            ),
            0.01,
            4.0,
        ),
    ],
    ids=[
        "rbf-auto",
        "rbf-delta-0.1",
        "laplacian",
        "projectron",
        "forgetron",
        "normalized-spectrum",
        "scaled-rbf",
        "cosine",
        "signed-soft-matching",
    ],
)
def test_one_warning_exactly_at_or_below_the_floor(make, delta, per_score):
    last = floor(delta, per_score)
    seen = caught(lambda: make(last, delta))
    assert len(seen) == 1
    message = str(seen[0].message)
    assert "can never flag" in message and f"smallest budget that can flag is {last + 1}" in message
    assert len(caught(lambda: make(2, delta))) == 1
    assert caught(lambda: make(last + 1, delta)) == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: KernelNovelty(),  # unbounded: n grows past any floor
        lambda: KernelNovelty(budget=Projectron(None)),
        lambda: KernelNovelty(kernel=Linear(), budget=5),  # k(x, x) not bounded
        lambda: KernelNovelty(kernel=Polynomial(2), budget=5),
        lambda: KernelNovelty(kernel=Spectrum(3), budget=5),
        lambda: KernelNovelty(kernel=Sum(RBF(1.0), RBF(2.0)), budget=5),  # bound 2
        *(lambda p=p: KernelNovelty(**p) for p in KernelNovelty._unit_test_params()),
    ],
)
def test_no_warning_where_no_floor_applies(make):
    assert caught(make) == []


def cf_5_3_threshold(X: np.ndarray, gamma: float, delta: float) -> float:
    """CF 5.3 written plainly: (max_i ||phi(x_i) - phi_S|| + 2 esterr)^2, RBF kernel."""
    n = X.shape[0]
    K = np.array([[math.exp(-gamma * float(np.sum((a - b) ** 2))) for b in X] for a in X])
    d2 = np.diag(K) - 2.0 * K.mean(axis=1) + K.mean()
    R2 = float(np.diag(K).max())
    esterr = math.sqrt(2.0 * R2 / n) * (math.sqrt(2.0) + math.sqrt(math.log(1.0 / delta)))
    return (math.sqrt(max(float(d2.max()), 0.0)) + 2.0 * esterr) ** 2


@pytest.mark.parametrize("budget", [50, 51])
def test_the_floor_is_tight_for_identical_events_and_a_far_one(budget):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = KernelNovelty(kernel=RBF(0.5), budget=budget)
    for _ in range(budget + 10):
        model.learn_one({"a": 0.0, "b": 0.0})
    far = {"a": 100.0, "b": 100.0}
    X = np.zeros((budget, 2))
    assert model.threshold_ == pytest.approx(cf_5_3_threshold(X, 0.5, 0.01), rel=1e-12)
    assert model.score_one(far) == pytest.approx(2.0, rel=1e-12)
    assert model.predict_one(far) is (budget > floor(0.01, 2.0))
