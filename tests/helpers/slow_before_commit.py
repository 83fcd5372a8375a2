"""Run ``streamk`` and sleep S seconds before its N-th offset commit (after the snapshot).

``python tests/helpers/slow_before_commit.py N S run --config ...``: the engine works
normally; once, between a durable snapshot and the commit of the offsets it covers, it
takes longer than ``max_poll_interval_ms`` allows, so the group evicts it and the broker
refuses the commit. Only the delay is injected; the eviction, the refused commit, the lost
partitions and the resume are the real client's and broker's.
"""

from __future__ import annotations

import sys
import time

from streamk.sources import kafka, kafka_confluent


def main() -> int:
    at, seconds = int(sys.argv[1]), float(sys.argv[2])
    calls = [0]

    def slowed(real_commit):
        def commit(self, positions, metadata=None):
            if positions:
                calls[0] += 1
                if calls[0] == at:
                    time.sleep(seconds)
            return real_commit(self, positions, metadata)

        return commit

    for source in (kafka.KafkaSource, kafka_confluent.ConfluentKafkaSource):
        source.commit = slowed(source.commit)  # type: ignore[method-assign]
    from streamk.cli import main as streamk_main

    return streamk_main(sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())
