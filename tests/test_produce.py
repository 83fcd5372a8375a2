"""``streamk produce``: CSV rows and event logs to a topic; counts and decoded events match."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pytest

from streamk.cli.produce import add_arguments, iter_messages, produce
from streamk.engine.events import Block, Event, decode
from streamk.errors import ConfigError, InvalidInput
from streamk.sources.base import Record
from streamk.sources.kafka import KafkaSource
from streamk.sources.replay import write_log

DEADLINE_S = 60.0

CSV = """a,b,label
1.5,2,yes
0,-3.25,no
,4,yes
7,8,
"""
CSV_EVENTS = [
    ({"a": 1.5, "b": 2.0}, "yes"),
    ({"a": 0.0, "b": -3.25}, "no"),
    ({"b": 4.0}, "yes"),
    ({"a": 7.0, "b": 8.0}, None),
]


def _consume(bootstrap: str, topic: str, partitions: list[int], n: int) -> list[Record]:
    source = KafkaSource(bootstrap, topic, partitions=partitions)
    out: list[Record] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(out) < n:
            assert time.monotonic() < deadline, f"read {len(out)} of {n}"
            out.extend(source.poll(1000, 0.2))
        out.extend(source.poll(1000, 0.3))  # nothing more may arrive
    finally:
        source.close()
    return out


@pytest.mark.kafka
def test_produce_csv_sends_one_event_per_row(kafka_broker, topic_name, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text(CSV)
    calls: list[tuple[int, float]] = []
    bootstrap = kafka_broker.bootstrap_servers
    n = produce(
        path, topic_name, bootstrap, partitions=2, progress=lambda s, t: calls.append((s, t))
    )
    assert n == 4
    assert calls[-1][0] == 4
    records = _consume(bootstrap, topic_name, [0, 1], 4)
    assert len(records) == 4
    events = [decode(r.payload) for r in records]
    assert all(isinstance(e, Event) for e in events)
    got = sorted(((e.x, e.y) for e in events), key=repr)
    assert got == sorted(CSV_EVENTS, key=repr)


@pytest.mark.kafka
@pytest.mark.parametrize("suffix", [".jsonl", ".msgpack"])
def test_produce_event_log_sends_every_event_unchanged(kafka_broker, topic_name, tmp_path, suffix):
    events = [{"x": {"f": float(i), "g": -i}, "y": i % 3, "id": f"e{i}"} for i in range(120)] + [
        {"x": [1.0, 2.0], "id": "list"},
        {"x": "some text", "y": "spam", "id": "text"},
    ]
    path = tmp_path / f"events{suffix}"
    write_log(path, events)
    bootstrap = kafka_broker.bootstrap_servers
    assert produce(path, topic_name, bootstrap, batch=50) == len(events)
    records = _consume(bootstrap, topic_name, [0], len(events))
    assert [r.offset for r in records] == list(range(len(events)))
    decoded = [decode(r.payload) for r in records]
    assert [(e.x, e.y, e.id) for e in decoded] == [
        (ev["x"], ev.get("y"), ev["id"]) for ev in events
    ]


@pytest.mark.kafka
def test_produce_csv_blocks(kafka_broker, topic_name, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 3))
    y = rng.integers(0, 2, size=10)
    path = tmp_path / "dense.csv"
    rows = ["x0,x1,x2,y"] + [",".join([*map(repr, X[i].tolist()), str(y[i])]) for i in range(10)]
    path.write_text("\n".join(rows) + "\n")
    bootstrap = kafka_broker.bootstrap_servers
    assert produce(path, topic_name, bootstrap, block_size=4) == 3
    blocks = [decode(r.payload) for r in _consume(bootstrap, topic_name, [0], 3)]
    assert all(isinstance(b, Block) for b in blocks)
    assert [len(b) for b in blocks] == [4, 4, 2]
    np.testing.assert_array_equal(np.vstack([b.X for b in blocks]), X)
    assert [v for b in blocks for v in list(b.y)] == y.tolist()


def test_iter_messages_rejects_bad_input_with_its_position(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,y\n1,0\nx,1\n")
    with pytest.raises(InvalidInput, match=r"bad.csv:3: column 'a' is 'x'"):
        list(iter_messages(bad))
    with pytest.raises(ConfigError, match="no column 'nope'"):
        iter_messages(bad, target="nope")  # checked before anything is sent
    sparse = tmp_path / "sparse.csv"
    sparse.write_text("a,b,y\n1,,0\n")
    with pytest.raises(InvalidInput, match="block events need every feature"):
        list(iter_messages(sparse, block_size=2))
    with pytest.raises(ConfigError, match="block_size packs CSV rows"):
        iter_messages(tmp_path / "bad.csv", format="jsonl", block_size=2)
    lines = tmp_path / "bad.jsonl"
    lines.write_text('{"x": [1]}\n{oops\n')
    with pytest.raises(InvalidInput, match=r"bad.jsonl:2: not a JSON event"):
        list(iter_messages(lines))
    with pytest.raises(FileNotFoundError):
        iter_messages(tmp_path / "missing.csv")


def test_target_column_can_be_anywhere(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("label,a\n3,0.5\n")
    (event,) = [decode(m) for m in iter_messages(path, target="label")]
    assert event.x == {"a": 0.5} and event.y == 3


@pytest.mark.kafka
def test_cli_produce_json_output(kafka_broker, topic_name, tmp_path, capsys):
    path = tmp_path / "data.csv"
    path.write_text(CSV)
    parser = argparse.ArgumentParser(prog="streamk")
    add_arguments(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "produce",
            str(path),
            "--topic",
            topic_name,
            "--json",
            "--bootstrap-servers",
            kafka_broker.bootstrap_servers,
        ]
    )
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["messages"] == 4 and out["topic"] == topic_name
    helptext = parser._subparsers._group_actions[0].choices["produce"].format_help()
    assert "examples:" in helptext and "--block-size" in helptext


def test_a_bad_line_late_in_the_file_sends_nothing(kafka_broker, topic_name, tmp_path):
    """Issue 19: the command used to send the lines before a bad one, then exit 2; producing
    the fixed file then duplicated them. Now the whole file is checked first."""
    import subprocess
    import sys

    from kafka import KafkaConsumer, TopicPartition

    path = tmp_path / "events.jsonl"
    lines = [json.dumps({"x": [float(i), 1.0], "y": i % 2 == 0}) for i in range(50)]
    lines.insert(40, "{not json")
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "produce", str(path), "--topic", topic_name]
        + ["--bootstrap-servers", kafka_broker.bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert ":41:" in out.stderr and "Nothing was sent" in out.stderr
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        # the topic was never created, or holds nothing
        parts = consumer.partitions_for_topic(topic_name)
        if parts:
            consumer.assign([TopicPartition(topic_name, p) for p in parts])
            consumer.seek_to_beginning()
            assert not consumer.poll(timeout_ms=2000)
    finally:
        consumer.close()


@pytest.mark.parametrize(
    "bad", ["[" * 100_000 + "]" * 100_000, '{"x": [1.0], "y": 123456789012345678901234567890}']
)
def test_hostile_json_lines_are_refused_not_raised(tmp_path, bad):
    """Deep nesting (RecursionError) and integers beyond 64 bits (msgpack's OverflowError)
    used to escape; they are now a clear InvalidInput naming the line."""
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps({"x": [1.0, 2.0], "y": True}) + "\n" + bad + "\n")
    with pytest.raises(InvalidInput, match=":2:"):
        list(iter_messages(path))
