"""``benchmarks.resweep_floor`` counts the support's size at each pass, against a plain count.

The floor it reports (the resweeping adatron's cells of issue #16's grid) is the read of
the Gram triangle at every pass and of the event's kernel row: a size taken at the wrong
moment (after the pass took vectors out, or before the event's vector went in) moves it.
Under no budget a vector enters exactly when ``n_updates`` moves, so a plain loop over
``learn_one`` says the size each pass saw.
"""

from __future__ import annotations

import itertools

from river import datasets

from benchmarks.resweep_floor import _sizes, floor_bytes
from streamk import RBF, KernelAdatron


def test_pass_sizes_are_the_set_before_the_event_plus_its_vector():
    data = list(itertools.islice(datasets.Bananas(), 300))
    probe = KernelAdatron(kernel=RBF(gamma=1.0), resweeps=1)
    passes, before = [], []
    for x, y in data:
        n, updates = probe.n_support, probe.n_updates
        probe.learn_one(x, y)
        before.append(n)
        passes.append(n + probe.n_updates - updates)
    model = KernelAdatron(kernel=RBF(gamma=1.0), resweeps=1)
    got = _sizes(model, data)
    assert probe.n_updates > probe.n_support + 20  # passes took vectors out: sizes differ
    assert got == (passes, before)
    assert model.n_support == probe.n_support and "_resweep" not in vars(model)


def test_the_floor_reads_each_pass_triangle_and_each_kernel_row_once():
    # passes of 1, 2, 3 vectors: 1 + 3 + 6 Gram entries; rows against 0, 1, 2 vectors of 2
    assert floor_bytes([1, 2, 3], [0, 1, 2], width=2) == 8 * (10 + 6)
