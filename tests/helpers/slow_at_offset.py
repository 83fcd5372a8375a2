"""Run ``streamk`` with one slow batch: after the batch holding offset N, sleep S seconds.

``python tests/helpers/slow_at_offset.py N S run --config ...``: the engine works normally
and, once, takes longer over a batch than ``max_poll_interval_ms`` allows (as a long
consolidation or a stalled sink would), so the group evicts it and its partitions are
*lost* (KIP-429). Only the delay is injected; the eviction, the lost partitions, the
rejoin and the resume are the real client's and broker's.
"""

from __future__ import annotations

import sys
import time

from streamk.engine import loop


def main() -> int:
    offset, seconds = int(sys.argv[1]), float(sys.argv[2])
    real_process = loop.Engine._process
    slept = [False]

    def process(self, batch):
        out = real_process(self, batch)
        if not slept[0] and any(record.offset == offset for record in batch):
            slept[0] = True
            time.sleep(seconds)
        return out

    loop.Engine._process = process  # type: ignore[method-assign]
    from streamk.cli import main as streamk_main

    return streamk_main(sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())
