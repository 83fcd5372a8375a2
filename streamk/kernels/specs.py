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
from .strings import GapWeightedSubsequences, Mismatch, RestrictedGapWeighted, Spectrum
from .trees import AllSubtree, CoRootedSubtree

__all__ = ["kernel_from_spec", "kernel_from_string"]


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


def kernel_from_string(text: str) -> Kernel:
    """Parse the short kernel syntax of the command line and config files.

    ``rbf`` / ``rbf:0.5`` (gamma; default ``auto``), ``laplacian[:gamma]``, ``linear``,
    ``poly[:degree[:scale[:offset]]]``, ``cosine``; a ``+bias`` suffix adds ``Constant(1)``
    (an offset for the book's bias-free learners). Example: ``rbf:2+bias``.
    """
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
            raise ConfigError(
                f"cannot parse kernel {text!r}; use rbf[:gamma], laplacian[:gamma], linear, "
                "cosine or poly[:degree[:scale[:offset]]], optionally with +bias"
            )
    except ValueError as exc:
        raise ConfigError(f"cannot parse kernel {text!r}: {exc}") from None
    return Sum(kernel, Constant(1.0)) if suffix == "bias" else kernel
