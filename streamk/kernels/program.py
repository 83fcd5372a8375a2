"""A vector kernel as a flat postfix program, the form the compiled per-event path reads.

The per-event core (``streamk/learners/_event.pyx``, ``streamk/_kprog.pxi``) computes a
kernel row in one call for the RBF, Laplacian, polynomial and linear kernels. A sum,
product, scaling or cosine normalisation of them (``Sum(RBF(0.5), Constant(1))``,
``Normalized(Polynomial(3))``, ...) is the same leaves combined element by element, so it
is handed over as a program: one row of six numbers per node, children before their
parent, which the core runs on a stack of kernel rows. Any other kernel (a user's own
``Kernel`` subclass, strings, trees, an unresolved ``"auto"``) has no program and the
learner keeps its NumPy path.

Each row is ``(op, p0, p1, p2, 1.0, arg)``: for a leaf ``p0..p2`` are the parameters the
core's kernel column takes (``gamma``; or ``scale, offset, degree``) and ``arg`` the
kernel's code, so ``row[1:5]`` is that column's parameter block as it is; for a constant
and a scaling ``p0`` is ``c``; a sum or product node combines the top two rows (an
n-ary ``Sum`` is n - 1 of them, left to right as ``Sum._gram`` adds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import (
    RBF,
    Constant,
    Kernel,
    Laplacian,
    Linear,
    Normalized,
    Polynomial,
    Product,
    Scaled,
    Sum,
)

__all__ = ["KernelProgram", "kernel_program", "OPS", "LEAF_CODES", "MAX_DEPTH"]

#: The node kinds (the program's first column).
OPS = {"leaf": 0, "constant": 1, "sum": 2, "product": 3, "scale": 4, "normalize": 5}
#: The leaves' codes (the core's ``K_*``; the last column of a leaf's row).
LEAF_CODES = {RBF: 0, Laplacian: 1, Polynomial: 2, Linear: 3}
#: The deepest stack of rows a program may need: each level holds one kernel row (two
#: under a normalisation), so a deeper kernel keeps the NumPy path.
MAX_DEPTH = 8


@dataclass(frozen=True)
class KernelProgram:
    """A kernel's program (see the module docstring).

    Attributes
    ----------
    ops
        ``(m, 6)`` float64, C-contiguous: the nodes in postfix order.
    depth
        The deepest stack of kernel rows the program needs.
    normalizes
        Whether a node normalises: the core then also carries each row's ``k(x, x)``.
    rbf_gamma
        The largest RBF width among the leaves (0 without one), for the check that the
        norm expansion ``||a||² + ||b||² - 2ab`` is exact (``RBF.expansion_exact``).
    """

    ops: np.ndarray
    depth: int
    normalizes: bool
    rbf_gamma: float


def kernel_program(kernel: Kernel) -> KernelProgram | None:
    """``kernel`` as a program, or ``None`` where the core cannot run it (see the module
    docstring)."""
    if kernel.takes_objects or not kernel.is_resolved:
        return None
    rows: list[tuple[float, float, float, float, float, float]] = []
    depth = _emit(kernel, rows, 0)
    if depth is None or depth > MAX_DEPTH:
        return None
    ops = np.ascontiguousarray(rows, dtype=np.float64).reshape(len(rows), 6)
    leaves = ops[(ops[:, 0] == OPS["leaf"]) & (ops[:, 5] == LEAF_CODES[RBF])]
    return KernelProgram(
        ops=ops,
        depth=depth,
        normalizes=bool((ops[:, 0] == OPS["normalize"]).any()),
        rbf_gamma=float(leaves[:, 1].max(initial=0.0)),
    )


def _emit(kernel: Kernel, rows: list, height: int) -> int | None:
    """Append ``kernel``'s nodes to ``rows`` with ``height`` rows already on the stack;
    the stack's peak while it runs, or ``None`` for a kernel with no program."""
    kind = type(kernel)
    if kind in (RBF, Laplacian):
        rows.append((OPS["leaf"], float(kernel.gamma), 0.0, 0.0, 1.0, LEAF_CODES[kind]))
        return height + 1
    if kind is Polynomial:
        params = (float(kernel.scale), float(kernel.offset), float(kernel.degree))
        rows.append((OPS["leaf"], *params, 1.0, LEAF_CODES[kind]))
        return height + 1
    if kind is Linear:
        rows.append((OPS["leaf"], 0.0, 0.0, 0.0, 1.0, LEAF_CODES[kind]))
        return height + 1
    if kind is Constant:
        rows.append((OPS["constant"], float(kernel.c), 0.0, 0.0, 1.0, 0.0))
        return height + 1
    if kind in (Scaled, Normalized):
        peak = _emit(kernel.kernel, rows, height)
        if peak is None:
            return None
        if kind is Scaled:
            rows.append((OPS["scale"], float(kernel.c), 0.0, 0.0, 1.0, 0.0))
        else:
            rows.append((OPS["normalize"], 0.0, 0.0, 0.0, 1.0, 0.0))
        return peak
    if kind in (Sum, Product):  # ((k0 + k1) + k2) ...: the order of Sum._gram's loop
        op = OPS["sum"] if kind is Sum else OPS["product"]
        peak = _emit(kernel.kernels[0], rows, height)
        for child in kernel.kernels[1:]:
            child_peak = _emit(child, rows, height + 1)
            if peak is None or child_peak is None:
                return None
            peak = max(peak, child_peak)
            rows.append((op, 0.0, 0.0, 0.0, 1.0, 0.0))
        return peak
    return None
