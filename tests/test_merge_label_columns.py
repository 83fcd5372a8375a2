"""The merger maps each worker's coefficient columns onto the union's classes without dense
remap matrices (session 25).

``label_remap`` composed a dense ``[I | 0]`` matrix per class a worker never saw, O(C^3)
each: merging two one-vs-rest workers of 400 classes each (disjoint) took 15 s, 4,000
classes would have taken hours at every merge. ``remap_coef`` keeps each column as a
combination of the worker's columns. Oracle: the old dense composition, kept here verbatim
(through ``LabelCoder.add``, the matrix form of the learners' rule).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamk.learners.labels import LabelCoder
from streamk.merge import align
from streamk.merge.expansions import _remap_class_index


def _dense_remap(worker: dict, union: LabelCoder) -> np.ndarray:
    """The old ``label_remap``, verbatim."""
    coder = LabelCoder.from_state(worker)
    M = np.eye(coder.n_outputs)
    for c in union.classes:
        if c not in coder.classes:
            r = coder.add(c)
            if r is not None:
                M = M @ r
    if union.multiclass:
        P = np.zeros((coder.n_outputs, union.n_outputs))
        for j, c in enumerate(union.classes):
            P[coder.classes.index(c), j] = 1.0
        return M @ P
    if union.classes:
        c = union.classes[0]
        same = coder.signs[coder.classes.index(c)] == union.signs[0]
        return M if same else -M
    return M


# labels with and without a known sign (bools, +-1), so the binary rules all show up
POOL = [True, False, 1, -1, 0, "a", "b", "c", "d", "e", 2.5, ("t", 1)]


def _coder(labels: list) -> LabelCoder:
    coder = LabelCoder()
    for c in labels:
        coder.register(c)
    return coder


@settings(max_examples=300, deadline=None)
@given(
    workers=st.lists(
        st.lists(st.sampled_from(POOL), min_size=0, max_size=7), min_size=1, max_size=4
    ),
    seed=st.integers(0, 2**16),
)
def test_the_columns_equal_the_dense_composition(workers, seed):
    states = [_coder(labels).state() for labels in workers]
    union = align.label_union(states)
    rng = np.random.default_rng(seed)
    for s in states:
        C = rng.normal(size=(5, LabelCoder.from_state(s).n_outputs))
        want = C @ _dense_remap(s, union)
        got = align.remap_coef(C, s, union)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_many_disjoint_classes():
    a = _coder([f"a{i}" for i in range(60)])
    b = _coder([f"b{i}" for i in range(60)] + ["a3"])
    union = align.label_union([a.state(), b.state()])
    C = np.random.default_rng(0).normal(size=(8, 61))
    np.testing.assert_array_equal(
        align.remap_coef(C, b.state(), union), C @ _dense_remap(b.state(), union)
    )


@given(st.lists(st.integers(-1, 7), min_size=0, max_size=30), st.permutations(range(6)))
def test_class_indices_follow_the_union(indices, perm):
    classes = [f"c{i}" for i in range(6)]
    union = [classes[p] for p in perm] + ["extra"]
    vals = np.array(indices, dtype=np.float64).reshape(-1, 1)
    vals[vals < 0] = np.nan
    want = np.full_like(vals, np.nan)
    for j, c in enumerate(classes):  # the old loop
        want[vals == j] = float(union.index(c))
    np.testing.assert_array_equal(_remap_class_index(vals, classes, union), want)
