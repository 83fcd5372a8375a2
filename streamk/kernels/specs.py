"""Kernels rebuilt from plain data (snapshots) and from the short text syntax (CLI, config)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import ConfigError
from .base import (
    AUTO,
    RBF,
    Constant,
    Cosine,
    Kernel,
    Laplacian,
    Linear,
    Normalized,
    Polynomial,
    Product,
    Scaled,
    Sum,
)
from .strings import (
    CharacterWeightedSubsequences,
    GapNumberWeightedSubsequences,
    GapWeightedSubsequences,
    Mismatch,
    RestrictedGapWeighted,
    SoftMatchingSubsequences,
    Spectrum,
)
from .trees import AllSubtree, CoRootedSubtree

__all__ = ["kernel_from_spec", "kernel_from_string", "text_kernel_from_string", "TEXT_KERNELS"]

#: short names of the string and tree kernels on the command line and in config files
TEXT_KERNELS = {
    "spectrum": "spectrum:p (Alg. 11.46)",
    "mismatch": "mismatch:k:m[:alphabet] (Alg. 11.51; alphabet default acgt)",
    "gap": "gap:p[:lam] (gap-weighted subsequences, Alg. 11.38)",
    "rgap": "rgap:p:m[:lam] (restricted gap-weighted, Alg. 11.54)",
    "subtree": "subtree (all-subtree, Alg. 11.65; trees)",
    "corooted": "corooted (co-rooted subtree, Alg. 11.62; trees)",
}


_SIMPLE = {
    "Linear": Linear,
    "Polynomial": Polynomial,
    "RBF": RBF,
    "Laplacian": Laplacian,
    "Constant": Constant,
    # strings and trees (book ch. 11)
    "GapWeightedSubsequences": GapWeightedSubsequences,
    "Spectrum": Spectrum,
    "Mismatch": Mismatch,
    "RestrictedGapWeighted": RestrictedGapWeighted,
    "CharacterWeightedSubsequences": CharacterWeightedSubsequences,
    "SoftMatchingSubsequences": SoftMatchingSubsequences,
    "GapNumberWeightedSubsequences": GapNumberWeightedSubsequences,
    "CoRootedSubtree": CoRootedSubtree,
    "AllSubtree": AllSubtree,
}
_COMBINATORS = {"Sum": Sum, "Product": Product}


def kernel_from_spec(spec: dict[str, Any], _depth: int = 0) -> Kernel:
    """Rebuild a kernel from :meth:`Kernel.to_spec` output; only known kernel names are accepted."""
    if _depth > 32:
        raise ConfigError("kernel spec is nested more than 32 levels deep")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ConfigError(f"a kernel spec is a dict with a 'name', got {spec!r:.200}")
    name = spec["name"]
    params = {k: v for k, v in spec.items() if k != "name"}
    try:
        if name in _SIMPLE:
            return _SIMPLE[name](**params)
        if name in _COMBINATORS:
            return _COMBINATORS[name](*_sub_specs(params.pop("kernels", None), _depth))
        if name == "Scaled":
            return Scaled(kernel_from_spec(params["kernel"], _depth + 1), params["c"])
        if name == "Normalized":
            return Normalized(kernel_from_spec(params["kernel"], _depth + 1))
    except (TypeError, KeyError) as exc:
        raise ConfigError(f"bad parameters for kernel {name!r}: {exc}") from None
    known = sorted([*_SIMPLE, *_COMBINATORS, "Scaled", "Normalized"])
    raise ConfigError(f"unknown kernel {name!r}; known: {known}")


def _sub_specs(specs: Any, depth: int) -> Iterable[Kernel]:
    if not isinstance(specs, list):
        raise ConfigError(f"a combinator spec needs a list under 'kernels', got {specs!r:.200}")
    return [kernel_from_spec(s, depth + 1) for s in specs]


#: what the short kernel syntax accepts, said by every error about it
KERNEL_USAGE = (
    "use rbf[:gamma], laplacian[:gamma], linear, cosine or poly[:degree[:scale[:offset]]], "
    "optionally with +bias (on text or trees: spectrum:p, mismatch:k:m[:alphabet], gap:p[:lam], "
    "rgap:p:m[:lam], subtree, corooted, each with an optional norm- prefix)"
)


def kernel_from_string(text: str) -> Kernel:
    """Parse the short kernel syntax of the command line and config files.

    ``rbf`` / ``rbf:0.5`` (gamma; default ``auto``), ``laplacian[:gamma]``, ``linear``,
    ``poly[:degree[:scale[:offset]]]``, ``cosine``; a ``+bias`` suffix adds ``Constant(1)``
    (an offset for the book's bias-free learners). Example: ``rbf:2+bias``.

    Strings and trees (see :func:`text_kernel_from_string`): ``spectrum:p``,
    ``mismatch:k:m[:alphabet]``, ``gap:p[:lam]``, ``rgap:p:m[:lam]``, ``subtree``,
    ``corooted``, each normalised with a ``norm-`` prefix (``norm-spectrum:3``).
    """
    text_kernel = text_kernel_from_string(text)
    if text_kernel is not None:
        return text_kernel
    body, _, suffix = text.strip().lower().partition("+")
    if suffix not in ("", "bias"):
        raise ConfigError(
            f"unknown kernel suffix {'+' + suffix!r} in {text!r}; only '+bias' exists"
        )
    name, *args = body.split(":")
    try:
        values = [float(a) if a != AUTO else AUTO for a in args]
        if name == "rbf" and len(values) <= 1:
            kernel: Kernel = RBF(*values)
        elif name == "laplacian" and len(values) <= 1:
            kernel = Laplacian(*values)
        elif name == "linear" and not values:
            kernel = Linear()
        elif name == "cosine" and not values:
            kernel = Cosine()
        elif name in ("poly", "polynomial") and len(values) <= 3:
            kernel = Polynomial(int(values[0]) if values else 3, *values[1:])
        else:
            raise ConfigError(f"cannot parse kernel {text!r}; {KERNEL_USAGE}")
    except ConfigError:  # already says what is wrong (a ConfigError is a ValueError)
        raise
    except ValueError as exc:
        raise ConfigError(f"cannot parse kernel {text!r} ({exc}); {KERNEL_USAGE}") from None
    return Sum(kernel, Constant(1.0)) if suffix == "bias" else kernel


def text_kernel_from_string(text: str) -> Kernel | None:
    """A string or tree kernel from its short name (``norm-spectrum:3``), else ``None``.

    Parameters are ``:``-separated; a ``norm-`` prefix wraps it in :class:`Normalized`.
    Names are case-insensitive, a ``Mismatch`` alphabet is kept as written.
    """
    raw = text.strip()
    normalised = raw.lower().startswith("norm-")
    name, *args = (raw[5:] if normalised else raw).split(":")
    name = name.lower()
    if name not in TEXT_KERNELS:
        return None
    usage = f"use {TEXT_KERNELS[name]}"
    kernel: Kernel | None = None
    try:
        if name == "spectrum" and len(args) == 1:
            kernel = Spectrum(int(args[0]))
        elif name == "mismatch" and len(args) in (2, 3):
            kernel = Mismatch(int(args[0]), int(args[1]), *args[2:])
        elif name == "gap" and len(args) in (1, 2):
            kernel = GapWeightedSubsequences(int(args[0]), *map(float, args[1:]))
        elif name == "rgap" and len(args) in (2, 3):
            kernel = RestrictedGapWeighted(int(args[0]), int(args[1]), *map(float, args[2:]))
        elif name == "subtree" and not args:
            kernel = AllSubtree()
        elif name == "corooted" and not args:
            kernel = CoRootedSubtree()
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(f"cannot parse kernel {text!r}: {exc}; {usage}") from None
    if kernel is None:
        raise ConfigError(f"cannot parse kernel {text!r}; {usage}")
    return Normalized(kernel) if normalised else kernel
