"""A NumPy random generator's state as plain snapshot data, and back, checked.

``np.random.default_rng`` makes a PCG64 generator whose state holds two 128-bit integers;
msgpack carries at most 64-bit integers, so they travel as decimal strings. Every learner,
budget policy, window and detector that draws random numbers stores its generator this
way, so that a restored model draws exactly what the uninterrupted one would have.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import SnapshotError

__all__ = ["generator_state", "generator_from_state"]

_U128 = 1 << 128


def generator_state(gen: np.random.Generator) -> dict[str, Any]:
    """``gen``'s PCG64 state as a map of plain values (128-bit integers as decimal strings)."""
    st = gen.bit_generator.state
    if st.get("bit_generator") != "PCG64":
        raise SnapshotError(f"only PCG64 generators are snapshotted, not {st.get('bit_generator')}")
    return {
        "bit_generator": "PCG64",
        "state": str(st["state"]["state"]),
        "inc": str(st["state"]["inc"]),
        "has_uint32": int(st["has_uint32"]),
        "uinteger": int(st["uinteger"]),
    }


def generator_from_state(state: Any, where: str = "rng") -> np.random.Generator:
    """A PCG64 generator at the state :func:`generator_state` wrote; every value checked.

    Raises
    ------
    SnapshotError
        Naming ``where`` when the map is malformed or a value is out of range.
    """
    if not isinstance(state, dict) or state.get("bit_generator", "PCG64") != "PCG64":
        raise SnapshotError(f"{where}: must be a PCG64 state map")
    try:
        st, inc = int(state["state"]), int(state["inc"])
        has, uint = state["has_uint32"], state["uinteger"]
    except (KeyError, TypeError, ValueError):
        raise SnapshotError(f"{where}: state/inc must be decimal strings") from None
    if not (0 <= st < _U128 and 0 <= inc < _U128) or has not in (0, 1):
        raise SnapshotError(f"{where}: values out of range")
    if isinstance(uint, bool) or not isinstance(uint, int) or not 0 <= uint < 1 << 32:
        raise SnapshotError(f"{where}: uinteger out of range")
    gen = np.random.Generator(np.random.PCG64())
    gen.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": st, "inc": inc},
        "has_uint32": int(has),
        "uinteger": uint,
    }
    return gen
