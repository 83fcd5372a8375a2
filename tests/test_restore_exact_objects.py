"""A learner on strings, dumped and loaded anywhere, continues bit for bit (as
tests/test_restore_exact.py asks of the vector learners).

On a trie kernel (``Spectrum``, ``Mismatch``, ``RestrictedGapWeighted``, also under
``Normalized``) the support set keeps the primal weight map ``W = sum_i coef_i phi(s_i)``,
built by every addition and subtraction of the support's history, in its order. Rebuilt
from the support alone on load, it rounded differently in the last bit, and a restored
model's probabilities moved (about 70 of 300 probes under a budget); the snapshot now
carries the map.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from streamk import (
    Forgetron,
    KernelAdatron,
    KernelPerceptron,
    MarginPerceptron,
    RemoveOldest,
    RemoveRandom,
    snapshot,
)
from streamk.errors import SnapshotError
from streamk.kernels import Mismatch, Normalized, Spectrum
from streamk.snapshot.codec import to_plain
from tests.test_consolidation_snapshot import restarted
from tests.test_restore_exact import _edited

N = 500
STOPS = frozenset(range(17, N, 41))  # irregular restore points

LEARNERS: dict[str, Callable[[Any, Any], Any]] = {
    "perceptron": lambda k, b: KernelPerceptron(kernel=k, budget=b),
    "margin": lambda k, b: MarginPerceptron(kernel=k, budget=b),
    "adatron": lambda k, b: KernelAdatron(kernel=k, C=1.0, budget=b),
    # resweeps change coefficients in place: the map is stale until its next use
    "adatron-resweep": lambda k, b: KernelAdatron(kernel=k, C=1.0, resweeps=1, budget=b),
}
KERNELS: dict[str, Callable[[], Any]] = {
    "normalized-spectrum-3": lambda: Normalized(Spectrum(3)),
    "spectrum-2": lambda: Spectrum(2),
    "mismatch-3-1": lambda: Mismatch(3, 1, "acgt"),
}
POLICIES: dict[str, Callable[[], Any]] = {
    "none": lambda: None,
    "oldest": lambda: RemoveOldest(30),
    "random": lambda: RemoveRandom(30, seed=1),
    "forgetron": lambda: Forgetron(30),
}


def _strings(n: int, seed: int = 0) -> list[tuple[str, bool]]:
    rng = random.Random(seed)
    words = ["".join(rng.choice("acgt") for _ in range(rng.randint(5, 15))) for _ in range(n)]
    return [(w, "gg" in w or w.startswith("ta")) for w in words]


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_a_string_learner_restored_anywhere_continues_bit_for_bit(learner, kernel, policy):
    def make():
        return LEARNERS[learner](KERNELS[kernel](), POLICIES[policy]())

    data = _strings(N)
    whole, restored = restarted(make, data, frozenset()), restarted(make, data, STOPS)
    probe = [x for x, _ in _strings(150, seed=1)]
    assert [restored.predict_proba_one(x) for x in probe] == [
        whole.predict_proba_one(x) for x in probe
    ]
    assert snapshot.dumps(restored, created_at=0.0) == snapshot.dumps(whole, created_at=0.0)


def _trained() -> KernelPerceptron:
    model = KernelPerceptron(kernel=Normalized(Spectrum(3)), budget=RemoveOldest(20))
    for x, y in _strings(200):
        model.learn_one(x, y)
    return model


def _weights(edit: Callable[[dict], None]) -> Callable[[dict], None]:
    def on_support(support: dict) -> None:
        assert support["weights"] is not None and len(support["weights"]["keys"]) > 10
        edit(support["weights"])

    return on_support


def _nan_weights(w: dict) -> None:
    w["W"] = to_plain(np.full((len(w["keys"]), 1), np.nan))


HOSTILE = {
    "not finite": (_nan_weights, "finite"),
    "fewer keys than rows": (lambda w: w.update(keys=w["keys"][:-1]), "shape"),
    "zero scale": (lambda w: w.update(scale=0.0), "scale"),
    "keys not strings": (lambda w: w.update(keys=[1] * len(w["keys"])), "strings"),
    "no scale": (lambda w: w.pop("scale"), "map of keys"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_damaged_weight_map_is_refused(name):
    edit, match = HOSTILE[name]
    with pytest.raises(SnapshotError, match=match):
        snapshot.loads(_edited(_trained(), _weights(edit)))


def test_a_weight_map_of_other_leaves_is_rebuilt_from_the_support():
    """A map whose leaves are not the support's (the support was edited, e.g. merged) is
    not used: the weights rebuilt from the support stand, as from a snapshot without one."""
    model = _trained()

    def other_leaves(w: dict) -> None:
        w["keys"] = [k + "x" for k in w["keys"]]

    def no_map(support: dict) -> None:
        support["weights"] = None

    edited = snapshot.loads(_edited(model, _weights(other_leaves))).model
    rebuilt = snapshot.loads(_edited(model, no_map)).model
    probe = [x for x, _ in _strings(50, seed=2)]
    assert [edited.predict_proba_one(x) for x in probe] == [
        rebuilt.predict_proba_one(x) for x in probe
    ]
