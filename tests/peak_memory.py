"""The peak of Python allocations inside a block: how the tests hold hostile input (a
snapshot, an event, a dead letter) to bounded memory before anything is allocated."""

from __future__ import annotations

import contextlib
import tracemalloc
from collections.abc import Iterator


class Peak:
    """Bytes at the peak of the traced block, set when the block ends."""

    bytes: int = 0


@contextlib.contextmanager
def traced_peak() -> Iterator[Peak]:
    """Trace allocations for the ``with`` block; ``.bytes`` holds their peak afterwards
    (also when the block raised: an expected refusal is usually what is measured)."""
    peak = Peak()
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak.bytes = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
