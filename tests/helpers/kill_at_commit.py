"""Run ``streamk`` and SIGKILL this process at its N-th offset commit, before it happens.

``python tests/helpers/kill_at_commit.py N run --config ...``: the engine works normally,
writes its snapshots, and dies by a real ``kill -9`` at the one point a random kill rarely
hits: after a snapshot is durable, before the offsets it covers are committed (issue 13,
item 12). Only the moment is chosen; the kill, the lost commit and the restart are real.
"""

from __future__ import annotations

import os
import signal
import sys

from streamk.sources import kafka


def main() -> int:
    kill_at = int(sys.argv[1])
    real_commit = kafka.KafkaSource.commit
    calls = [0]

    def commit(self, positions, metadata=None):
        if positions:
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        return real_commit(self, positions, metadata)

    kafka.KafkaSource.commit = commit  # type: ignore[method-assign]
    from streamk.cli import main as streamk_main

    return streamk_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
