"""River data sets and synthetic generators, built from a scenario's ``[[segments]]`` tables.

Shipped data sets (no download): ``Bananas`` (5,300), ``Phishing`` (1,250),
``ImageSegments`` (2,310); they take no parameters and a segment may use at most all of
their rows. Synthetic streams from ``river.datasets.synth``: ``SEA``, ``Agrawal``,
``Hyperplane`` and ``ConceptDriftStream``, whose ``stream`` and ``drift_stream`` are
inline tables naming another synthetic generator (``{generator = "SEA", variant = 2}``).
A synthetic generator without a ``seed`` gets the scenario's seed, so every stream is
reproducible.

Text: ``MotifReads`` is :mod:`streamk.sources.motifs`' deterministic stream of DNA-like
reads with planted motifs (``x`` a string, ``y`` a bool; optional ``seed``). A scenario
with a text segment needs a string kernel in ``[engine]`` (e.g. ``norm-spectrum:6``) and
may not mix text with numeric segments.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from typing import Any

__all__ = [
    "GENERATORS",
    "SHIPPED",
    "TEXT",
    "check_segment",
    "iter_segment",
    "min_drift_width",
]

#: shipped data set -> number of rows
SHIPPED: dict[str, int] = {"Bananas": 5300, "Phishing": 1250, "ImageSegments": 2310}
SYNTHETIC = ("SEA", "Agrawal", "Hyperplane", "ConceptDriftStream")
#: text streams (``x`` a string)
TEXT = ("MotifReads",)
GENERATORS = frozenset(SHIPPED) | frozenset(SYNTHETIC) | frozenset(TEXT)
_NESTED = ("stream", "drift_stream")


def _synth_class(name: str) -> type:
    from river.datasets import synth

    return getattr(synth, name)


def check_segment(name: str, length: int, params: dict[str, Any]) -> None:
    """Raise ``ValueError``/``TypeError`` if the segment cannot be built as written."""
    if name in TEXT:
        unknown = sorted(set(params) - {"seed"})
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; {name} takes ['seed']")
        if not isinstance(params.get("seed", 0), int) or isinstance(params.get("seed"), bool):
            raise TypeError(f"seed must be an int, got {params['seed']!r}")
        return
    if name in SHIPPED:
        if params:
            raise ValueError(f"a shipped data set takes no parameters, got {sorted(params)}")
        if length > SHIPPED[name]:
            raise ValueError(f"length {length} is more than the {SHIPPED[name]} rows it has")
        return
    if name == "ConceptDriftStream":
        position, width = params.get("position", 5000), params.get("width", 1000)
        if isinstance(position, int) and isinstance(width, int) and width > 0:
            least = min_drift_width(position)
            if width < least:
                raise ValueError(
                    f"width {width} is too small for position {position}: river computes "
                    f"exp(4 * (position - t) / width), which overflows; use width >= {least}"
                )
    _build(name, params, seed=0)


def min_drift_width(position: int) -> int:
    """The narrowest ConceptDriftStream width whose drift curve does not overflow a float."""
    return max(1, math.ceil(4.0 * position / 700.0))


def _build(name: str, params: dict[str, Any], seed: int) -> Any:
    cls = _synth_class(name)
    allowed = set(inspect.signature(cls).parameters)
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown}; {name} takes {sorted(allowed)}")
    kwargs = dict(params)
    for key in _NESTED:
        if key in kwargs:
            inner = kwargs[key]
            if not isinstance(inner, dict) or inner.get("generator") not in SYNTHETIC:
                raise ValueError(
                    f"{key} must be an inline table with generator = one of {list(SYNTHETIC)}"
                )
            inner = dict(inner)
            kwargs[key] = _build(inner.pop("generator"), inner, seed)
    if "seed" in allowed and "seed" not in kwargs:
        kwargs["seed"] = seed
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}({_show(params)}) refused: {exc}") from None


def _show(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def iter_segment(name: str, length: int, params: dict[str, Any], seed: int) -> Iterator[tuple]:
    """``(x, y)`` pairs with plain-Python values: features ``{str: float}`` (a text stream:
    a string), labels bool/int/str."""
    from river import datasets

    if name in TEXT:
        from streamk.sources.motifs import iter_motifs

        yield from iter_motifs(length, seed=params.get("seed", seed))
        return
    if name in SHIPPED:
        source: Any = getattr(datasets, name)()
    else:
        source = _build(name, params, seed)
    for i, (x, y) in enumerate(source):
        if i >= length:
            return
        yield {str(k): float(v) for k, v in x.items()}, _label(y)


def _label(y: Any) -> bool | int | str | float:
    if hasattr(y, "item"):  # NumPy scalar
        y = y.item()
    return y
