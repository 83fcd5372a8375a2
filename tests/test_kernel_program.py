"""Kernel programs (streamk/kernels/program.py, run by streamk/_kprog.pxi) against the
kernels' own NumPy ``gram`` and ``diag``.

Random trees of every node kind (RBF, Laplacian, polynomial, linear and constant leaves;
sums of two or three, products, scalings, normalisations), on rows as wide as the set's and
narrower (absent features read as 0), the zero row (a normalisation's 0) included. Kernels a
program cannot describe have none, and learners keep their NumPy path for them
(``tests/test_eventpass.py`` runs learners on programs against that path).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamk.kernels import (
    RBF,
    Constant,
    Kernel,
    Laplacian,
    Linear,
    Normalized,
    Polynomial,
    Product,
    Scaled,
    Spectrum,
    Sum,
)
from streamk.kernels.program import MAX_DEPTH, kernel_program
from streamk.learners import eventpass

pytestmark = pytest.mark.skipif(
    not eventpass.available(), reason="the compiled per-event path is not built here"
)


def _event():
    from streamk.learners import _event

    return _event


def random_kernel(rng: np.random.Generator, depth: int) -> Kernel:
    """A random tree of at most ``depth`` levels of combinators."""
    if depth == 0 or rng.random() < 0.3:
        leaf = rng.integers(5)
        if leaf == 0:
            return RBF(float(rng.uniform(0.05, 1.0)))
        if leaf == 1:
            return Laplacian(float(rng.uniform(0.05, 1.0)))
        if leaf == 2:
            return Polynomial(
                degree=int(rng.choice([1, 2, 3, 5])),
                scale=float(rng.uniform(0.05, 0.5)),
                offset=float(rng.choice([0.0, 0.5, 1.0])),
            )
        if leaf == 3:
            return Linear()
        return Constant(float(rng.uniform(0.1, 2.0)))
    kind = rng.integers(4)
    if kind == 0:
        return Sum(*(random_kernel(rng, depth - 1) for _ in range(int(rng.integers(2, 4)))))
    if kind == 1:
        return Product(random_kernel(rng, depth - 1), random_kernel(rng, depth - 1))
    if kind == 2:
        return Scaled(random_kernel(rng, depth - 1), float(rng.uniform(0.2, 3.0)))
    return Normalized(random_kernel(rng, depth - 1))


@pytest.mark.parametrize("seed", range(60))
def test_a_program_row_is_the_kernels_gram_row(seed):
    rng = np.random.default_rng(seed)
    kernel = random_kernel(rng, 3)
    assert kernel_program(kernel) is not None, kernel
    X = rng.normal(size=(37, 6))
    X[5] = 0.0  # a zero row: a normalisation gives 0 there
    sq = np.einsum("ij,ij->i", X, X)
    for width in (6, 4):
        for row in (rng.normal(size=width), np.zeros(width)):
            got, diag = _event().program_row(kernel, X, sq, row)
            want = kernel.gram(row, X)[0]
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(
                got, want, rtol=1e-12, atol=1e-12 * scale, err_msg=repr(kernel)
            )
            np.testing.assert_allclose(diag, kernel.diag_one(row), rtol=1e-12, atol=1e-15)


def test_every_node_kind_is_drawn():
    """The random trees above cover every kind of node the core runs."""
    kinds = set()
    for seed in range(60):
        program = kernel_program(random_kernel(np.random.default_rng(seed), 3))
        kinds |= {(int(op), int(code)) if op == 0 else int(op) for op, *_, code in program.ops}
    assert kinds == {(0, 0), (0, 1), (0, 2), (0, 3), 1, 2, 3, 4, 5}


class Cubic(Kernel):
    """A user's own kernel."""

    def _gram(self, A, B, a_sq, b_sq):
        return (A @ B.T) ** 3

    def diag(self, A):
        return np.einsum("ij,ij->i", A, A) ** 3


def nested(depth: int) -> Kernel:
    """A sum nested to the right, so that its stack grows by one row per level."""
    kernel: Kernel = RBF(0.5)
    for _ in range(depth - 1):
        kernel = Sum(Linear(), kernel)
    return kernel


@pytest.mark.parametrize(
    "kernel",
    [
        Cubic(),
        Sum(RBF(0.5), Cubic()),
        Normalized(Product(Linear(), Cubic())),
        Sum(RBF("auto"), Linear()),
        Spectrum(2),
        nested(MAX_DEPTH + 1),
    ],
    ids=["own", "sum-with-own", "normalized-own", "auto", "strings", "too-deep"],
)
def test_kernels_a_program_cannot_describe_have_none(kernel):
    assert kernel_program(kernel) is None


def test_the_deepest_program_fits_the_cores_stack():
    """The core's stack is MAX_DEPTH rows, the depth the user guide states."""
    assert _event().PROGRAM_STACK == MAX_DEPTH
    guide = (Path(__file__).resolve().parents[1] / "docs" / "user-guide.md").read_text()
    assert f"at most {MAX_DEPTH} rows deep" in " ".join(guide.split())
    kernel = nested(MAX_DEPTH)
    assert kernel_program(kernel).depth == MAX_DEPTH
    rng = np.random.default_rng(3)
    X = rng.normal(size=(9, 3))
    row = rng.normal(size=3)
    got, _ = _event().program_row(kernel, X, np.einsum("ij,ij->i", X, X), row)
    np.testing.assert_allclose(got, kernel.gram(row, X)[0], rtol=1e-12)
