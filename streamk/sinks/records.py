"""The prediction record: the map every prediction sink writes for one event."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["prediction_record", "builtin"]


def builtin(obj: Any) -> Any:
    """``default=`` hook for msgpack and json: NumPy scalars and arrays as Python values."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot write a {type(obj).__name__} in a prediction record")


def prediction_record(
    prediction: Any,
    *,
    id: Any = None,
    proba: dict[Any, float] | None = None,
    model_seq: int = 0,
    partition: int | None = None,
    offset: int | None = None,
) -> dict[str, Any]:
    """The map a prediction sink writes (``proba`` left out when ``None``)."""
    record: dict[str, Any] = {
        "id": id,
        "prediction": prediction,
        "model_seq": model_seq,
        "partition": partition,
        "offset": offset,
    }
    if proba is not None:
        record["proba"] = proba
    return record
