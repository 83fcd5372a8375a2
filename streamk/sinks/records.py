"""The prediction record, one per event or one block per run, and how to read either back.

Per event (``layout="record"``, the default) a prediction is the map
``{id, prediction, model_seq, partition, offset[, proba]}``. A **block**
(``layout="block"``, opt-in) carries a whole run of one partition in one map::

    {"kind": "predictions", "v": 1, "model_seq": s, "partition": p,
     "ids": [...], "predictions": [...], "offsets": [...][, "probas": [...]]}

:func:`expand` turns either into per-event records, so readers need not care which
layout a writer chose. Runs are encoded column by column (one packer call per value,
no per-event dict), and the bytes of a record are exactly those of
``msgpack.packb(prediction_record(...))`` or ``json.dumps(..., separators=(",", ":"))``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import msgpack
import numpy as np

from ..errors import ConfigError

__all__ = [
    "Layout",
    "BLOCK_KIND",
    "prediction_record",
    "builtin",
    "encode_json",
    "pack_records",
    "json_records",
    "block_map",
    "expand",
    "decode_predictions",
    "check_layout",
]

Layout = Literal["record", "block"]
#: the ``kind`` of a prediction block map
BLOCK_KIND = "predictions"
_FIELDS = ("id", "prediction", "model_seq", "partition", "offset")


def builtin(obj: Any) -> Any:
    """``default=`` hook for msgpack and json: NumPy scalars and arrays as Python values."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot write a {type(obj).__name__} in a prediction record")


def check_layout(layout: str) -> None:
    """Raise :class:`~streamk.errors.ConfigError` unless ``layout`` is known."""
    if layout not in ("record", "block"):
        raise ConfigError(f"prediction layout must be 'record' or 'block', not {layout!r}.")


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


def pack_records(
    predictions: Sequence[Any],
    ids: Sequence[Any],
    offsets: Sequence[int | None],
    *,
    model_seq: int = 0,
    partition: int | None = None,
    probas: Sequence[dict[Any, float] | None] | None = None,
) -> list[bytes]:
    """msgpack bytes of one record per event, as ``packb(prediction_record(...))``."""
    if probas is not None:
        return [
            msgpack.packb(
                prediction_record(
                    p, id=i, proba=q, model_seq=model_seq, partition=partition, offset=o
                ),
                default=builtin,
            )
            for p, i, o, q in zip(predictions, ids, offsets, probas)
        ]
    pack = msgpack.Packer(default=builtin).pack
    head = b"\x85" + pack("id")  # a fixmap of the five fields, in prediction_record's order
    between = pack("prediction")
    tail = pack("model_seq") + pack(model_seq) + pack("partition") + pack(partition)
    tail += pack("offset")
    return [
        head + i + between + p + tail + o
        for i, p, o in zip(map(pack, ids), map(pack, predictions), map(pack, offsets))
    ]


#: ``json.dumps(obj, default=builtin, separators=(",", ":"))`` without building an encoder per call
encode_json = json.JSONEncoder(default=builtin, separators=(",", ":")).encode


def json_records(
    predictions: Sequence[Any],
    ids: Sequence[Any],
    offsets: Sequence[int | None],
    *,
    model_seq: int = 0,
    partition: int | None = None,
    probas: Sequence[dict[Any, float] | None] | None = None,
) -> list[str]:
    """JSON lines (with their newline) of one record per event, as ``json.dumps`` writes."""
    enc = encode_json
    if probas is not None:
        return [
            enc(
                prediction_record(
                    p, id=i, proba=q, model_seq=model_seq, partition=partition, offset=o
                )
            )
            + "\n"
            for p, i, o, q in zip(predictions, ids, offsets, probas)
        ]
    middle = f',"model_seq":{enc(model_seq)},"partition":{enc(partition)},"offset":'
    return [
        '{"id":' + i + ',"prediction":' + p + middle + o + "}\n"
        for i, p, o in zip(map(enc, ids), map(enc, predictions), map(enc, offsets))
    ]


def block_map(
    predictions: Sequence[Any],
    ids: Sequence[Any],
    offsets: Sequence[int | None],
    *,
    model_seq: int = 0,
    partition: int | None = None,
    probas: Sequence[dict[Any, float] | None] | None = None,
) -> dict[str, Any]:
    """The map of one prediction block (see the module docstring)."""
    block: dict[str, Any] = {
        "kind": BLOCK_KIND,
        "v": 1,
        "model_seq": model_seq,
        "partition": partition,
        "ids": list(ids),
        "predictions": list(predictions),
        "offsets": list(offsets),
    }
    if probas is not None:
        block["probas"] = list(probas)
    if not len(block["ids"]) == len(block["predictions"]) == len(block["offsets"]):
        raise ValueError("a prediction block needs as many ids and offsets as predictions")
    return block


def expand(obj: Any) -> Iterator[dict[str, Any]]:
    """The per-event records of a decoded record or block map."""
    if not (isinstance(obj, dict) and obj.get("kind") == BLOCK_KIND and "predictions" in obj):
        yield obj
        return
    if obj.get("v") != 1:
        raise ValueError(f"unknown prediction block version {obj.get('v')!r}")
    seq, partition = obj["model_seq"], obj["partition"]
    probas = obj.get("probas")
    rows = zip(obj["ids"], obj["predictions"], obj["offsets"])
    for k, (i, p, o) in enumerate(rows):
        record = {"id": i, "prediction": p, "model_seq": seq, "partition": partition, "offset": o}
        if probas is not None and probas[k] is not None:
            record["proba"] = probas[k]
        yield record


def decode_predictions(value: bytes) -> list[dict[str, Any]]:
    """The per-event records of one prediction message (a record or a block)."""
    return list(expand(msgpack.unpackb(value, raw=False, strict_map_key=False)))
