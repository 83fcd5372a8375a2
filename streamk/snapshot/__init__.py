"""Versioned, checksummed msgpack snapshots of learners, and a file store for them.

A snapshot holds a learner's plain-data ``state()``, the stream offsets it has
learned up to, a sequence number and metrics. Decoding never executes code:
only classes in an allow-list are imported, and every size is checked against
the bytes present before anything is allocated. The byte format is specified
in ``docs/snapshot-format.md``; ``SnapshotPublisher`` and ``SnapshotReader``
carry snapshots over a compacted Kafka topic in checksummed chunks.

Examples
--------
>>> from streamk import snapshot
>>> data = snapshot.dumps(model, offsets={"events": {0: 1042}}, seq=7)  # doctest: +SKIP
>>> snap = snapshot.loads(data)  # doctest: +SKIP
>>> snap.model.predict_one(x), snap.offsets  # doctest: +SKIP
"""

from __future__ import annotations

from .codec import ARRAY_DTYPES, decode_state, encode_state
from .format import FORMAT, VERSION, Snapshot, dumps, loads, seal, verify_bytes
from .kafka import HotSwapModel, ManifestInfo, PublishResult, SnapshotPublisher, SnapshotReader
from .limits import DEFAULT_LIMITS, CorruptSnapshot, Limits, SnapshotOverLimit
from .registry import CLASSES, class_name_of, register_class, resolve_class
from .store import SnapshotInfo, SnapshotStore

__all__ = [
    "ARRAY_DTYPES",
    "CLASSES",
    "DEFAULT_LIMITS",
    "FORMAT",
    "VERSION",
    "CorruptSnapshot",
    "HotSwapModel",
    "Limits",
    "ManifestInfo",
    "PublishResult",
    "Snapshot",
    "SnapshotInfo",
    "SnapshotOverLimit",
    "SnapshotPublisher",
    "SnapshotReader",
    "SnapshotStore",
    "class_name_of",
    "decode_state",
    "dumps",
    "encode_state",
    "loads",
    "register_class",
    "resolve_class",
    "seal",
    "verify_bytes",
]
