"""A model's (edited) state sealed as snapshot bytes, for tests that hand a reader a state
no writer would produce: hostile fields, or one written before a field existed."""

from __future__ import annotations

from typing import Any

import msgpack

from streamk import snapshot
from streamk.snapshot.codec import to_plain


def sealed(state: dict[str, Any], class_name: str = "ConsolidatedClassifier") -> bytes:
    """``state`` as the body of a checksummed snapshot of a ``class_name`` model."""
    body = {
        "model": {"class": class_name, "state": to_plain(state)},
        "stream": {},
        "seq": 1,
        "created_at": 0.0,
        "metrics": {},
        "meta": {},
    }
    return snapshot.seal(msgpack.packb(body, use_bin_type=True))
