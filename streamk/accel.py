"""The optional compiled core, and whether to use it.

:mod:`streamk._core` is built from ``streamk/_core.pyx`` at install time when a C compiler
is present. Without it, or with the environment variable ``STREAMK_NO_ACCEL=1``, every
code path uses NumPy alone: the same algorithm, the same results up to floating-point
rounding, just slower on streams with many mistakes. :func:`describe` says which, and why,
in one line for start-up logs.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import platform
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

import numpy as np

__all__ = [
    "core",
    "optional_extension",
    "available",
    "describe",
    "reason",
    "isa",
    "x86_64_clone",
    "sqnorms",
    "row_sqnorm",
    "scaled_exp",
    "rbf_from_dots",
    "fsum_rows",
]

#: CPU flags (as /proc/cpuinfo spells them) of the x86-64-v3 level, v2's included: the
#: clones ``target_clones("arch=x86-64-v3", "default")`` in ``_fastexp.h`` run only when
#: the CPU has every one of them.
X86_64_V3_FLAGS = frozenset(
    # x86-64-v2
    {"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"}
    # x86-64-v3
    | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
)
_CLONE_MARK = b".arch_x86_64_v3"  # GCC names the clones <function>.arch_x86_64_v3


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get("STREAMK_NO_ACCEL", "").strip() not in ("", "0"):
        return None, "STREAMK_NO_ACCEL is set"
    name = f"{__package__}._core"
    try:
        _core = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            return None, f"streamk._core failed to load: {exc}"
        # not built: no C compiler (or no Cython and no generated C) at install time
        return None, "not built at install (no working C compiler); reinstall with one"
    except ImportError as exc:  # built for another Python, or a broken build
        return None, f"streamk._core failed to load: {exc}"
    return _core, ""


#: The compiled module, or ``None`` when the NumPy paths are in use.
core: ModuleType | None
_reason: str
core, _reason = _load()


def optional_extension(name: str, needs_core: bool = True) -> ModuleType | None:
    """A compiled extension beside the core (``"streamk.learners._event"``), or ``None`` when
    it is not built, fails to load, ``STREAMK_NO_ACCEL`` is set or (``needs_core``) the core
    itself is off: its callers then take their NumPy paths."""
    if needs_core and core is None:
        return None
    if os.environ.get("STREAMK_NO_ACCEL", "").strip() not in ("", "0"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # not built (no C compiler at install) or built for another Python
        return None


def available() -> bool:
    """Whether the compiled core is loaded."""
    return core is not None


def reason() -> str:
    """Why the compiled core is not in use (``""`` when it is)."""
    return _reason


def x86_64_clone(flags: Iterable[str]) -> str:
    """The clone of the core's kernel loops that a CPU with these flags runs.

    GCC's loader picks the ``arch=x86-64-v3`` clone (AVX2 + FMA) when the CPU has the
    whole level, the baseline clone otherwise.
    """
    return "x86-64-v3" if X86_64_V3_FLAGS <= set(flags) else "x86-64 baseline"


def _cpu_flags() -> set[str] | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return None


@functools.cache
def isa() -> str:
    """The instruction set the compiled kernel loops run with here (``""`` without the core).

    On x86-64 the loops are built twice, AVX2+FMA and baseline, when GCC compiled the core
    (the clone symbols are then in the module); elsewhere there is one build, named by
    the machine.
    """
    if core is None:
        return ""
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        return machine or "unknown CPU"
    try:
        cloned = _CLONE_MARK in Path(core.__file__).read_bytes()
    except (OSError, TypeError):
        cloned = False
    if not cloned:
        return "x86-64 baseline"
    flags = _cpu_flags()
    return "x86-64, CPU level unknown" if flags is None else x86_64_clone(flags)


def describe() -> str:
    """One line for start-up logs: whether the compiled core runs, and on what or why not.

    ``"compiled core: on (x86-64-v3)"`` or ``"compiled core: off (NumPy) — <reason>"``.
    """
    if core is not None:
        return f"compiled core: on ({isa()})"
    return f"compiled core: off (NumPy) — {_reason}"


def sqnorms(A: np.ndarray) -> np.ndarray:
    """Row-wise squared norms of a 2-D float64 array.

    With the compiled core the sum runs left to right, so trailing zero padding never
    changes a norm and a stored row, a restored row and a block row agree bit for bit.
    """
    if core is not None:
        return core.sqnorms(np.ascontiguousarray(A, dtype=np.float64))
    return np.einsum("ij,ij->i", A, A)


def fsum_rows(A: np.ndarray) -> list[float]:
    """``math.fsum`` of each row of a 2-D float64 array: correctly rounded sums, so the same
    numbers on either path (the compiled one is CPython's algorithm in C). Where a row has
    an infinite or NaN term, or its partial sums overflow, every row goes to ``math.fsum``
    itself, which gives its value or raises its error for it."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    if core is not None and A.ndim == 2 and hasattr(core, "fsum_rows"):
        sums, finite = core.fsum_rows(A)
        if finite:
            return sums.tolist()
    return [math.fsum(row) for row in A.tolist()]


def row_sqnorm(row: np.ndarray) -> float:
    """``||row||^2`` by the same rule as :func:`sqnorms`."""
    if core is not None:
        return float(core.sqnorms(np.ascontiguousarray(row, dtype=np.float64)[None, :])[0])
    return float(row @ row)


def scaled_exp(A: np.ndarray, factor: float) -> np.ndarray:
    """``A = exp(factor * A)`` in place, returning ``A`` (the RBF and Laplacian kernels' pass).

    The compiled exponential is vectorised (AVX2, and AVX-512 where the CPU has it) and
    within 1 ulp of the C library's; every compiled loop uses the same one, so a kernel value does
    not depend on the path that computed it.
    """
    if core is not None and A.dtype == np.float64 and A.flags.c_contiguous:
        core.scaled_exp(A.reshape(-1), float(factor))
        return A
    A *= factor
    return np.exp(A, out=A)


def rbf_from_dots(D: np.ndarray, a_sq: np.ndarray, b_sq: np.ndarray, gamma: float) -> np.ndarray:
    """``D = exp(-gamma max(0, a_sq[i] + b_sq[j] - 2 D[i, j]))`` in place, returning ``D``:
    an RBF Gram block finished from its dot products (one compiled pass, or five NumPy ones).
    """
    if core is not None and D.dtype == np.float64 and D.flags.c_contiguous:
        core.rbf_from_dots(D, np.ascontiguousarray(a_sq), np.ascontiguousarray(b_sq), gamma)
        return D
    D *= -2.0
    D += a_sq[:, None]
    D += b_sq[None, :]
    np.maximum(D, 0.0, out=D)
    return scaled_exp(D, -gamma)
