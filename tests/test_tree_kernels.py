"""Tree kernels against brute-force enumeration of co-rooted and all subtrees.

The oracle lists every subtree shape explicitly (as nested tuples) and counts
occurrences; the kernels are the dot products of those counts.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamk
from streamk.errors import ConfigError, InvalidInput
from streamk.kernels import AllSubtree, CoRootedSubtree, Normalized, Spectrum, Sum, kernel_from_spec
from streamk.kernels.trees import MAX_TREE_DEPTH, MAX_TREE_NODES

# -- brute force -----------------------------------------------------------------------------------


def shapes(node, labelled):
    """Every subtree shape rooted at ``node`` that includes ``node``: the node alone, or
    the node with all its children, each child again any of its shapes."""
    label = node[0] if labelled else None
    out = [(label,)]
    kids = node[1:]
    if kids:
        for choice in itertools.product(*(shapes(c, labelled) for c in kids)):
            out.append((label, *choice))
    return out


def proper(node, labelled):
    """Co-rooted subtrees proper: the root with its children (Remark 11.60)."""
    return [s for s in shapes(node, labelled) if len(s) > 1]


def nodes(tree):
    yield tree
    for c in tree[1:]:
        yield from nodes(c)


def phi_corooted(tree, labelled):
    return Counter(proper(tree, labelled))


def phi_all(tree, labelled):
    out = Counter()
    for v in nodes(tree):
        out.update(proper(v, labelled))
    return out


def dot(a, b):
    return sum(v * b[u] for u, v in a.items())


def trees(max_depth=4):
    leaf = st.sampled_from("ab").map(lambda lab: [lab])
    return st.recursive(
        leaf,
        lambda kids: st.tuples(st.sampled_from("ab"), st.lists(kids, min_size=1, max_size=3)).map(
            lambda t: [t[0], *t[1]]
        ),
        max_leaves=7,
    )


# -- worked values ---------------------------------------------------------------------------------

CHAIN = ["r", ["c", ["g"]]]


def test_chain_values_from_the_reference():
    assert CoRootedSubtree(labelled=False)(CHAIN, CHAIN) == 2
    assert AllSubtree(labelled=False)(CHAIN, CHAIN) == 5  # counts occurrences, not 0/1


def test_leaf_and_cherry_values_from_the_reference():
    t = ["x", ["x"], ["x", ["x"], ["x"]]]
    assert CoRootedSubtree(labelled=False)(t, t) == 2
    assert AllSubtree(labelled=False)(t, t) == 5


def test_labels_must_agree_on_every_included_node():
    a = ["S", ["NP", ["D"], ["N"]], ["VP", ["V"]]]
    b = ["S", ["NP", ["D"], ["N"]], ["VP", ["V"], ["NP"]]]
    # common co-rooted: S(NP, VP) and S(NP(D, N), VP): VP's children differ
    assert CoRootedSubtree()(a, b) == 2
    assert CoRootedSubtree()(a, ["T", ["NP"], ["VP"]]) == 0


# -- brute force on random trees -------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(trees(), trees(), st.booleans())
def test_corooted_equals_enumeration(a, b, labelled):
    want = dot(phi_corooted(a, labelled), phi_corooted(b, labelled))
    assert CoRootedSubtree(labelled=labelled)(a, b) == want


@settings(max_examples=80, deadline=None)
@given(trees(), trees(), st.booleans())
def test_all_subtree_equals_enumeration(a, b, labelled):
    want = dot(phi_all(a, labelled), phi_all(b, labelled))
    assert AllSubtree(labelled=labelled)(a, b) == want


KERNELS = [
    CoRootedSubtree(),
    CoRootedSubtree(labelled=False),
    AllSubtree(),
    AllSubtree(labelled=False),
    Normalized(AllSubtree()),
    Sum(CoRootedSubtree(), AllSubtree(labelled=False)),
]


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
@settings(max_examples=15, deadline=None)
@given(st.lists(trees(), min_size=2, max_size=10))
def test_gram_is_symmetric_psd_and_matches_calls(kernel, sample):
    G = kernel.gram(sample, sample)
    assert np.allclose(G, G.T, rtol=1e-12, atol=0)  # normalising rounds k_ij, k_ji apart
    scale = max(1.0, float(np.abs(G).max()))
    assert np.linalg.eigvalsh(G).min() >= -1e-9 * scale
    assert G[0, 1] == kernel(sample[0], sample[1])
    assert np.allclose(kernel.diag(sample), np.diag(G), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_spec_round_trip(kernel):
    assert kernel_from_spec(kernel.to_spec()) == kernel


def test_public_names():
    assert streamk.CoRootedSubtree is CoRootedSubtree and streamk.AllSubtree is AllSubtree


def test_tuples_are_trees_too():
    assert AllSubtree()(("a", ("b",)), ["a", ["b"]]) == 1


# -- bad input -------------------------------------------------------------------------------------


def chain(depth):
    t = ["x"]
    for _ in range(depth - 1):
        t = ["x", t]
    return t


@pytest.mark.parametrize(
    "bad, words",
    [
        ("abc", "non-empty list"),
        ([], "non-empty list"),
        (["a", "b"], "non-empty list"),
        ([1.5], "str or int"),
        ([None, ["a"]], "str or int"),
        ([True], "str or int"),
        (chain(MAX_TREE_DEPTH + 1), "deeper"),
        (["r", *[["x"]] * MAX_TREE_NODES], "more than"),
    ],
    ids=["string", "empty", "bare-child", "float-label", "none-label", "bool", "deep", "big"],
)
@pytest.mark.parametrize("kernel", [CoRootedSubtree(), AllSubtree()], ids=repr)
def test_bad_trees_raise_invalid_input(kernel, bad, words):
    with pytest.raises(InvalidInput, match=words):
        kernel(["a", ["b"]], bad)


def test_deepest_allowed_tree_works():
    t = chain(MAX_TREE_DEPTH)
    assert CoRootedSubtree()(t, t) == MAX_TREE_DEPTH - 1


def test_tree_and_string_kernels_combine_but_not_with_vectors():
    Sum(CoRootedSubtree(), AllSubtree())  # fine
    with pytest.raises(ConfigError):
        Sum(CoRootedSubtree(), streamk.RBF(1.0))
    assert Spectrum(2).takes_objects and Normalized(AllSubtree()).takes_objects
