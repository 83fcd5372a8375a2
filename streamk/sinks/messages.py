"""Kafka messages (value, key) of prediction records, shared by both Kafka transports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgpack

from .records import block_map, builtin, pack_records

__all__ = ["encode_messages", "record_keys"]


def record_keys(ids: Sequence[Any]) -> list[bytes | None]:
    """Message keys of per-event records: the event id as UTF-8 text, or no key."""
    return [None if i is None else str(i).encode("utf-8") for i in ids]


def encode_messages(
    layout: str,
    predictions: Sequence[Any],
    ids: Sequence[Any],
    offsets: Sequence[int | None],
    model_seq: int,
    partition: int | None,
    probas: Sequence[dict[Any, float] | None] | None,
) -> tuple[list[bytes], list[bytes | None]]:
    """``(values, keys)`` of the messages for a run: one per event, or one block.

    A block is keyed by its source partition number (text), so the blocks of one source
    partition land on one prediction partition, in order.
    """
    fields: dict[str, Any] = {"model_seq": model_seq, "partition": partition, "probas": probas}
    if layout == "block":
        value = msgpack.packb(block_map(predictions, ids, offsets, **fields), default=builtin)
        return [value], [None if partition is None else str(partition).encode("ascii")]
    return pack_records(predictions, ids, offsets, **fields), record_keys(ids)
