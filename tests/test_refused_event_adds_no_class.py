"""An event refused for its ``x`` adds no class (session 24's string and tree audit).

The classifiers registered the event's label before reading ``x``: a NaN, a text value or a
string given to a vector model was refused (``InvalidInput``), but its label stayed a
class with zero coefficients, which one-vs-rest can then predict (a margin of 0 beats
negative ones). Oracle: the same model never given the refused events.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamk import KernelAdatron, KernelPerceptron, MarginPerceptron, RemoveOldest
from streamk.errors import InvalidInput

LEARNERS = {
    "perceptron": KernelPerceptron,
    "margin": MarginPerceptron,
    "adatron": KernelAdatron,
    "adatron-resweep": lambda **kw: KernelAdatron(resweeps=1, **kw),
}


def _events(n: int, seed: int) -> list[tuple[dict, str]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a, b = rng.normal(size=2)
        out.append(({"a": float(a), "b": float(b)}, "xyz"[int(a > 0) + int(b > 0)]))
    return out


@pytest.mark.parametrize("budget", [None, 20], ids=["unbounded", "budget"])
@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_a_refused_x_leaves_its_label_out_of_the_classes(learner, budget):
    def make():
        return LEARNERS[learner](budget=None if budget is None else RemoveOldest(budget))

    model, oracle = make(), make()
    events = _events(200, seed=3)
    for i, (x, y) in enumerate(events):
        if i in (50, 120):
            for bad in ({"a": float("nan"), "b": 1.0}, {"a": "text", "b": 1.0}, "a string"):
                with pytest.raises(InvalidInput):
                    model.learn_one(bad, f"junk-{i}")
        model.learn_one(x, y)
        oracle.learn_one(x, y)
    assert model.classes_ == oracle.classes_ and set(model.classes_) == {"x", "y", "z"}
    for x, _ in _events(100, seed=4):
        assert model.predict_proba_one(x) == oracle.predict_proba_one(x)
