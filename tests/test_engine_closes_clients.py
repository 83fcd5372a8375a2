"""The engine leaves no Kafka connection open when ``run`` returns.

``Engine.run`` closes its sinks and its snapshot publisher after the last checkpoint
(``Engine._close_outputs``). A publisher's producer left open kept its broker connections:
stopping the demo's embedded broker then waited its full stop timeout (5 s of the demo's
20) before killing it. The oracle is the kernel's own table of this process's TCP
connections (``/proc/net/tcp``), on a broker no other test talks to.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka import KafkaProducer

from streamk.cli.broker import QUICK_GROUP_CONFIG, LocalBroker, create_topic, find_tansu
from streamk.engine.config import load_config
from streamk.engine.events import encode_event
from streamk.engine.runner import build_engine
from streamk.errors import BrokerError
from streamk.snapshot.kafka import SnapshotReader
from streamk.sources.kafka import KafkaSource


def _open_connections_to(port: int) -> int:
    """This process's established TCP connections to ``port`` (``/proc/net/tcp*``)."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            mine.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == "01" and fields[9] in mine:
                count += 1
    return count


@pytest.fixture()
def own_broker():
    try:
        find_tansu()
    except BrokerError as exc:
        pytest.skip(f"local Kafka broker unavailable: {exc}")
    with LocalBroker() as broker:
        yield broker


def test_run_returns_with_no_connection_left_to_the_broker(own_broker, tmp_path):
    bootstrap = own_broker.bootstrap_servers
    port = int(bootstrap.rsplit(":", 1)[1])
    create_topic(bootstrap, "events", partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for i in range(300):
        y = None if i % 10 == 9 else i % 3 == 0
        producer.send("events", encode_event({"a": i % 7, "b": (i * 13) % 5}, y=y, id=f"e-{i}"))
    producer.send("events", b"\xc1 not an event")  # a dead letter: the dead-letter topic used
    producer.flush()
    producer.close()
    config = load_config(
        overrides={
            "bootstrap_servers": bootstrap,
            "topic": "events",
            "group": "closing",
            "snapshot_dir": str(tmp_path / "snapshots"),
            "snapshot_every": 100,
            "stop_when_idle": 1.0,
            "predictions_topic": "events-predictions",
            "dead_letter_topic": "events-dead-letters",
            "snapshot_topic": "events-snapshots",
            "model_name": "closing",
            "max_poll_interval_ms": QUICK_GROUP_CONFIG["max_poll_interval_ms"],
        }
    )
    source = KafkaSource(bootstrap, "events", "closing", consumer_config=QUICK_GROUP_CONFIG)
    engine = build_engine(config, source=source)
    engine.restore()
    result = engine.run()
    assert result.records == 301 and result.dead_lettered == 1
    assert _open_connections_to(port) == 0
    # the publisher's last snapshot reached the topic before it closed
    assert SnapshotReader(bootstrap, "events-snapshots").latest("closing").seq == result.seq
