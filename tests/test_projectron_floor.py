"""``benchmarks.projectron_floor`` counts the events that update, against a plain count.

The floor it reports (issue #16's Projectron cells) is the read of ``P`` on every update:
an update counted where none happened, or missed, moves it. The kernel perceptron updates
exactly on its mistakes, so a plain test-then-train loop says which events those are.
"""

from __future__ import annotations

import itertools

from river import datasets

from benchmarks.projectron_floor import _update_sizes
from streamk import RBF, KernelPerceptron, Projectron


def test_updates_are_the_perceptrons_mistakes_with_the_support_size_before_each():
    data = list(itertools.islice(datasets.Bananas(), 400))
    probe = KernelPerceptron(kernel=RBF(gamma=1.0), budget=Projectron(50))
    expected = []
    for x, y in data:
        n = probe.n_support
        if probe.predict_one(x) != y:
            expected.append(max(n, 1))
        probe.learn_one(x, y)
    model = KernelPerceptron(kernel=RBF(gamma=1.0), budget=Projectron(50))
    got = _update_sizes(model, data, unsupervised=False)
    assert len(expected) > 20 and got == expected
