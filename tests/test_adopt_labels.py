"""The warm-up registers a block's first classes ahead of their rows
(``KernelPerceptron._adopt_labels``, ``LabelCoder.adds_quietly``) only where that changes
nothing: against ``LabelCoder.add``'s remap, and against ``learn_one`` and the run-by-run
loop (``_warm_runs`` declined) for label pairs that do and do not remap."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from streamk import RBF, KernelPerceptron, RemoveOldest, accel
from streamk.learners.budgeted import MarginPerceptron
from streamk.learners.labels import LabelCoder
from streamk.learners.perceptron import KernelPerceptron as _KP

POOL = [True, False, 1, 0, -1, "a", "b", 2.5]


@pytest.mark.parametrize("sequence", list(itertools.permutations(POOL, 3)))
def test_adds_quietly_is_add_without_a_remap_or_a_new_column(sequence: tuple) -> None:
    coder = LabelCoder()
    for label in sequence:
        if label in coder.classes:
            continue
        quiet, outputs = coder.adds_quietly(label), coder.n_outputs
        remap = coder.add(label)
        assert quiet == (remap is None and coder.n_outputs == outputs)


# label pairs: bools, ints whose second shares the first's sign (a remap), strings
PAIRS = {
    "bools": (True, False),
    "false-first": (False, True),
    "remap": (0, -1),
    "strings": ("no", "yes"),
}


def _stream(n: int, pair: tuple, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) * [1.0, 3.0]
    hit = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.3 * rng.standard_normal(n) > 0
    y = [pair[0] if h else pair[1] for h in hit.tolist()]
    y[: 3 + seed % 5] = [pair[0]] * (3 + seed % 5)  # the second class a few rows in
    dtype = object if isinstance(pair[0], str) else None
    return pd.DataFrame(X, columns=["a", "b"]), pd.Series(y, dtype=dtype)


def _state(model: KernelPerceptron) -> tuple:
    s = model.support_
    return (
        model._scale.n,
        model._scale._m2.tobytes(),
        model.kernel_.gamma,
        s.n,
        s._ids[: s.n].tolist(),
        s._X[: s.n].tobytes(),
        s._coef[: s.n].tobytes(),
        model.n_mistakes,
        model.n_learned,
        model.classes_,
        model._labels.signs,
    )


MAKE = {
    "perceptron": lambda: KernelPerceptron(kernel=RBF(gamma="auto"), budget=RemoveOldest(40)),
    "margin": lambda: MarginPerceptron(kernel=RBF(gamma="auto"), budget=RemoveOldest(40)),
}


@pytest.mark.skipif(accel.core is None, reason="needs the compiled core")
@pytest.mark.parametrize("learner", sorted(MAKE))
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_adopted_labels_learn_the_model_of_the_row_by_row_paths(
    pair: str, learner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    adopted = []
    adopt = _KP._adopt_labels

    def spy(self, labels, start, values):
        before = len(self.classes_)
        stop = adopt(self, labels, start, values)
        adopted.append(len(self.classes_) - before)
        return stop

    monkeypatch.setattr(_KP, "_adopt_labels", spy)
    for seed in range(4):
        X, y = _stream(260, PAIRS[pair], seed)
        many = MAKE[learner]()
        many.learn_many(X, y)
        one = MAKE[learner]()
        for x, t in zip(X.to_dict("records"), y.tolist()):
            one.learn_one(x, t)
        with monkeypatch.context() as m:
            m.setattr(_KP, "_warm_runs", lambda self, rows, labels, i, *_: (i, False))
            runs = MAKE[learner]()
            runs.learn_many(X, y)
        assert _state(many) == _state(runs) == _state(one)
        probe = X.iloc[:40].to_dict("records")
        assert [many.predict_one(x) for x in probe] == [one.predict_one(x) for x in probe]
    assert sum(adopted) == (4 if pair == "remap" else 8)  # the remapping second: not adopted
