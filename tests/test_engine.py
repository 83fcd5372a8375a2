"""The engine over replayed logs and iterables: exactly-once state, dead letters, restarts."""

from __future__ import annotations

import io
import json
import math

import msgpack
import numpy as np
import pytest
from river import datasets

from streamk import KernelPerceptron, RemoveOldest
from streamk.engine import Engine, EngineConfig
from streamk.engine.deadletter import DeadLetterFile, read_dead_letters
from streamk.engine.events import encode_block
from streamk.snapshot import SnapshotStore
from streamk.sources.iterable import IterableSource
from streamk.sources.replay import ReplaySource, write_log


def factory():
    return KernelPerceptron(budget=RemoveOldest(60))


def phishing(n=600):
    return list(datasets.Phishing().take(n))


def reference_model(data):
    model = factory()
    for x, y in data:
        model.learn_one(x, y)
    return model


def assert_same_predictions(a, b, queries):
    for x in queries:
        assert a.predict_proba_one(x) == pytest.approx(b.predict_proba_one(x), abs=1e-9)


def test_iterable_run_learns_every_event_once_and_matches_learn_one(tmp_path):
    data = phishing()
    store = SnapshotStore(tmp_path / "snaps")
    engine = Engine(
        IterableSource(lambda: iter(data), name="phishing"),
        factory,
        store=store,
        config=EngineConfig(max_records=64, snapshot_every=200),
    )
    result = engine.run()
    assert result.records == result.learned == len(data)
    assert result.positions == {0: len(data)}
    latest = store.latest("model")
    assert latest.offsets == {"phishing": {0: len(data)}}
    assert latest.seq == result.seq == result.snapshots >= 3
    assert_same_predictions(latest.model, reference_model(data), [x for x, _ in data[:50]])


@pytest.mark.parametrize("stop_at", [1, 137, 200, 451])
def test_restart_from_snapshot_gives_the_uninterrupted_model(tmp_path, stop_at):
    data = phishing()
    store = SnapshotStore(tmp_path / "snaps")
    source = lambda: IterableSource(lambda: iter(data), name="phishing")  # noqa: E731
    first = Engine(
        source(),
        factory,
        store=store,
        config=EngineConfig(max_records=50, snapshot_every=100, max_events=stop_at),
    )
    assert first.run().records == stop_at
    second = Engine(source(), factory, store=store, config=EngineConfig(max_records=50))
    result = second.run()
    assert result.records == len(data) - stop_at  # resumed exactly after the snapshot
    assert_same_predictions(second.model, reference_model(data), [x for x, _ in data[:50]])


def test_bad_records_go_to_the_dead_letter_file_with_reasons(tmp_path):
    good = phishing(200)
    log = tmp_path / "events.jsonl"
    lines = []
    bad_lines = {
        3: b"{not json",
        10: json.dumps({"x": {"a": "red"}, "y": True}).encode(),
        20: json.dumps({"x": [1.0, 2.0], "y": True, "label": 1}).encode(),
        30: json.dumps({"x": "free text", "y": False}).encode(),
        40: json.dumps([1, 2, 3]).encode(),
        50: b'{"x": {"a": NaN}, "y": true}',
    }
    for i, (x, y) in enumerate(good):
        if i in bad_lines:
            lines.append(bad_lines[i])
        lines.append(json.dumps({"x": x, "y": y}).encode())
    log.write_bytes(b"\n".join(lines) + b"\n")
    dead = tmp_path / "dead.jsonl"
    with DeadLetterFile(dead) as sink:
        engine = Engine(
            ReplaySource(log),
            factory,
            dead_letters=sink,
            store=SnapshotStore(tmp_path / "snaps"),
            config=EngineConfig(max_records=32),
        )
        result = engine.run()
    letters = list(read_dead_letters(dead))
    assert result.learned == len(good)
    assert result.dead_lettered == len(bad_lines) == len(letters)
    assert result.records == len(lines)
    assert sorted(letter.payload for letter in letters) == sorted(bad_lines.values())
    name = ReplaySource(log).name  # the log's identity from its content
    assert name.startswith("replay:events.jsonl:")
    assert all(letter.reason and letter.source == name for letter in letters)
    assert {letter.offset for letter in letters} == {
        i for i, line in enumerate(lines) if line in bad_lines.values()
    }
    assert_same_predictions(engine.model, reference_model(good), [x for x, _ in good[:30]])


def test_msgpack_log_with_blocks_and_a_truncated_tail(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] * X[:, 1] > 0).tolist()
    log = tmp_path / "events.msgpack"
    with open(log, "wb") as fh:
        fh.write(encode_block(X[:200], y[:200]))
        for row, label in zip(X[200:], y[200:]):
            fh.write(msgpack.packb({"x": row.tolist(), "y": label}))
        last = msgpack.packb({"x": [1.0, 2.0, 3.0], "y": True})
        fh.write(last[:-3])  # a torn write, or one still under way
    store = SnapshotStore(tmp_path / "s")
    engine = Engine(ReplaySource(log), factory, store=store, config=EngineConfig(max_records=40))
    result = engine.run()
    # the tail is left for the next replay (not dead-lettered: its offset would be used up)
    assert result.learned == 300 and result.dead_lettered == 0
    assert result.positions == {0: 101}  # a block of 200 rows, then 100 events
    with open(log, "ab") as fh:
        fh.write(last[-3:])  # the write completes
    again = Engine(ReplaySource(log), factory, store=store, config=EngineConfig(max_records=40))
    assert again.run().learned == 1 and again.model.n_learned == 301
    ref = factory()
    for row, label in zip(X, y):
        ref.learn_one(dict(enumerate(row.tolist())), label)
    assert_same_predictions(engine.model, ref, [dict(enumerate(r)) for r in X[:20].tolist()])


def test_unlabelled_events_are_scored_not_learned(tmp_path):
    data = phishing(300)
    events = [{"x": x, "y": y} for x, y in data[:200]] + [
        {"x": x, "id": i} for i, (x, _) in enumerate(data[200:])
    ]
    log = tmp_path / "mixed.msgpack"
    write_log(log, events)
    from streamk.sinks import FilePredictionSink, read_predictions

    engine = Engine(
        ReplaySource(log),
        factory,
        predictions=FilePredictionSink(tmp_path / "predictions.jsonl"),
        store=SnapshotStore(tmp_path / "s"),
        config=EngineConfig(max_records=64),
    )
    result = engine.run()
    written = list(read_predictions(tmp_path / "predictions.jsonl"))
    assert result.learned == 200 and result.scored == 100
    ref = reference_model(data[:200])
    assert [r["prediction"] for r in written] == [ref.predict_one(x) for x, _ in data[200:]]
    assert all(isinstance(r["prediction"], bool) for r in written)  # a label, not a record
    assert [r["id"] for r in written] == list(range(100))
    assert {r["model_seq"] for r in written} <= {0, 1}


def test_rolling_metric_and_progress_are_reported(tmp_path):
    data = phishing()
    seen = []
    engine = Engine(
        IterableSource(data, name="p"),
        factory,
        on_progress=seen.append,
        config=EngineConfig(max_records=100, progress_seconds=0.0),
    )
    engine.run()
    assert seen and seen[-1]["learned"] == len(data)
    assert 0.5 < seen[-1]["rolling_metric"] <= 1.0
    assert not math.isnan(seen[-1]["events_per_second"])


def test_runs_keep_stream_order_and_blocks_stay_arrays():
    from streamk.engine.events import DEFAULT_LIMITS, encode_event
    from streamk.engine.runs import split_runs
    from streamk.sources.base import Record

    X = np.arange(12, dtype=float).reshape(4, 3)
    payloads = [
        encode_event({"a": 1.0}, y=True),
        encode_event({"a": 2.0}, y=False),
        encode_block(X, [True, None, None, False]),  # labelled, 2 unlabelled, labelled
        b"\xc1",  # undecodable
        encode_event({"a": 3.0}, id="q"),
    ]
    records = [Record(p, 0, i) for i, p in enumerate(payloads)]
    rejected = []
    runs = list(split_runs(records, DEFAULT_LIMITS, None, lambda r, e: rejected.append(r.offset)))
    assert [(r.labelled, len(r)) for r in runs] == [
        (True, 2),
        (True, 1),
        (False, 2),
        (True, 1),
        (False, 1),
    ]
    assert rejected == [3]
    assert isinstance(runs[2].frame(), np.ndarray) and runs[2].frame().shape == (2, 3)
    np.testing.assert_array_equal(runs[3].frame(), X[3:])
    assert runs[4].ids == ["q"]


def test_a_label_the_model_refuses_mid_block_is_dead_lettered_and_nothing_is_learned_twice(
    tmp_path,
):
    from streamk import OnlineRanker

    rng = np.random.default_rng(2)
    events = [{"x": rng.normal(size=2).tolist(), "y": int(rng.integers(1, 4))} for _ in range(90)]
    events[40]["y"] = 9  # not one of the ranks
    log = tmp_path / "ranks.msgpack"
    write_log(log, events)
    dead = tmp_path / "dead.jsonl"
    with DeadLetterFile(dead) as sink:
        engine = Engine(
            ReplaySource(log),
            lambda: OnlineRanker(ranks=(1, 2, 3)),
            dead_letters=sink,
            config=EngineConfig(max_records=64),
        )
        result = engine.run()
    assert result.learned == 89 and result.dead_lettered == 1
    assert engine.model.n_learned == 89
    assert [letter.offset for letter in read_dead_letters(dead)] == [40]
    ref = OnlineRanker(ranks=(1, 2, 3))
    for i, e in enumerate(events):
        if i != 40:
            ref.learn_one(dict(enumerate(e["x"])), e["y"])
    for e in events[:20]:
        x = dict(enumerate(e["x"]))
        assert engine.model.score_one(x) == pytest.approx(ref.score_one(x))


_TRICKY = [
    {"x": [1.0, 2.0], "y": True},
    {"x": [1, 2.5, True], "y": 3},
    {"x": [1.0], "y": 0.5},
    {"x": [1.0], "y": float("nan")},
    {"x": [1.0], "y": None},
    {"x": [1.0], "id": 7},
    {"x": [1.0], "id": "a", "y": "cat"},
    {"x": [1.0], "id": 1.5},
    {"x": [1.0], "id": True},
    {"x": [1.0], "y": [1]},
    {"x": [1.0], "t": None},
    {"x": [1.0], "w": 2.0, "y": 1},
    {"x": [1.0], "label": 1},
    {"x": [float("inf")]},
    {"x": [1e308, 1e308]},  # finite values whose sum overflows: accepted
    {"x": ["a"]},
    {"x": [[1.0]]},
    {"x": []},
    {"x": list(range(20))},
    {"x": {"a": 1.0}, "y": True},
    {"x": "text"},
    {"y": 1},
    [1.0, 2.0],
    7,
]


@pytest.mark.parametrize("schema", [None, "dim", "labels"])
def test_the_fast_decode_path_accepts_and_rejects_exactly_what_decode_does(schema):
    from streamk.engine.events import Limits, Schema
    from streamk.engine.runs import decode_record, split_runs
    from streamk.errors import InvalidEvent
    from streamk.sources.base import Record

    limits = Limits(max_features=10)
    schema = {
        None: None,
        "dim": Schema(dim=2),
        "labels": Schema(labels={True, 3, "cat"}, label_kind="class"),
    }[schema]
    payloads = [msgpack.packb(e) for e in _TRICKY] + [b"\xc1", b"", b'{"x": [1.0]}']
    for i, payload in enumerate(payloads):
        record = Record(payload, 0, i)
        rejected: list[str] = []
        runs = list(
            split_runs([record], limits, schema, lambda r, e, out=rejected: out.append(e.code))
        )
        try:
            event = decode_record(record, limits, schema)
        except InvalidEvent as exc:
            assert rejected == [exc.code] and not runs, payload
            continue
        assert not rejected and len(runs) == 1, payload
        run = runs[0]
        assert (run.ys, run.ids) == ([event.y], [event.id]), payload
        assert (run.vectors or run.xs)[0] == event.x, payload


def _mixed_log(tmp_path, n_learn=200, n_score=100):
    """A log of labelled then unlabelled (id'd) Phishing events, and the data."""
    data = phishing(n_learn + n_score)
    events = [{"x": x, "y": y} for x, y in data[:n_learn]] + [
        {"x": x, "id": f"q{i}"} for i, (x, _) in enumerate(data[n_learn:])
    ]
    log = tmp_path / "mixed.msgpack"
    write_log(log, events)
    return log, data


class ListSink:
    """A user's prediction sink with only ``write``/``flush``/``close`` (no ``write_many``)."""

    def __init__(self):
        self.records, self.flushes = [], 0

    def write(self, prediction, *, id=None, proba=None, model_seq=0, partition=None, offset=None):
        self.records.append((id, prediction, model_seq, partition, offset))

    def flush(self):
        self.flushes += 1

    def close(self):
        pass


def test_a_sink_without_write_many_still_gets_every_prediction(tmp_path):
    log, data = _mixed_log(tmp_path)
    sink = ListSink()
    engine = Engine(
        ReplaySource(log), factory, predictions=sink, config=EngineConfig(max_records=64)
    )
    result = engine.run()
    ref = reference_model(data[:200])
    assert result.scored == 100 and sink.flushes >= 1
    assert sink.records == [
        (f"q{i}", ref.predict_one(x), 0, 0, 200 + i) for i, (x, _) in enumerate(data[200:])
    ]


@pytest.mark.kafka
@pytest.mark.parametrize(
    "transport, layout",
    [("kafka-python", "record"), ("kafka-python", "block"), ("confluent", "record")],
)
def test_predictions_published_to_kafka_read_back_event_by_event(
    kafka_broker, topic_name, tmp_path, transport, layout
):
    from kafka import KafkaConsumer, TopicPartition

    from streamk.cli.broker import create_topic
    from streamk.sinks import ConfluentPredictionSink, KafkaPredictionSink, decode_predictions

    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
        sink = ConfluentPredictionSink(bootstrap, topic_name, layout=layout)
    else:
        sink = KafkaPredictionSink(bootstrap, topic_name, layout=layout)
    log, data = _mixed_log(tmp_path)
    engine = Engine(
        ReplaySource(log), factory, predictions=sink, config=EngineConfig(max_records=64)
    )
    assert engine.run().scored == 100
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic_name, 0)])
    records, messages = [], 0
    try:
        for _ in range(100):  # bounded: until all 100 predictions are in
            for batch in consumer.poll(timeout_ms=300).values():
                messages += len(batch)
                records += [r for m in batch for r in decode_predictions(m.value)]
            if len(records) >= 100:
                break
    finally:
        consumer.close()
    ref = reference_model(data[:200])
    assert records == [
        {
            "id": f"q{i}",
            "prediction": ref.predict_one(x),
            "model_seq": 0,
            "partition": 0,
            "offset": 200 + i,
        }
        for i, (x, _) in enumerate(data[200:])
    ]
    # runs of at most 64 records: 100 messages per event, or one per run (200 = 3*64 + 8)
    assert messages == (100 if layout == "record" else 2)


@pytest.mark.parametrize("freeze", [True, False])
def test_the_heap_is_frozen_only_while_the_loop_runs(tmp_path, freeze):
    import gc

    log, _ = _mixed_log(tmp_path, 100, 20)
    seen = []
    engine = Engine(
        ReplaySource(log),
        factory,
        config=EngineConfig(max_records=16, progress_seconds=0.0, freeze_heap=freeze),
        on_progress=lambda _: seen.append(gc.get_freeze_count()),
    )
    assert gc.get_freeze_count() == 0
    engine.run()
    assert seen and all((count > 0) == freeze for count in seen)
    assert gc.get_freeze_count() == 0  # undone on the way out


@pytest.mark.kafka
@pytest.mark.parametrize("layout", ["record", "block"])
@pytest.mark.parametrize("transport", ["kafka-python", "confluent"])
def test_the_configured_transport_publishes_the_predictions(
    kafka_broker, topic_name, transport, layout
):
    from kafka import KafkaConsumer, TopicPartition

    from streamk.cli.broker import create_topic
    from streamk.engine.config import load_config
    from streamk.engine.runner import prediction_sink
    from streamk.sinks import ConfluentPredictionSink, KafkaPredictionSink, decode_predictions

    if transport == "confluent":
        pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    config = load_config(
        overrides={
            "transport": transport,
            "bootstrap_servers": bootstrap,
            "predictions_topic": topic_name,
            "predictions_layout": layout,
            "security_protocol": "PLAINTEXT",  # kafka-python's spelling, passed to both
        },
        environ={},
    )
    sink = prediction_sink(config)
    kind = ConfluentPredictionSink if transport == "confluent" else KafkaPredictionSink
    assert type(sink) is kind
    sink.write_many([True, False], ids=["a", "b"], offsets=[5, 6], model_seq=2, partition=0)
    sink.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic_name, 0)])
    got: list = []
    try:
        for _ in range(100):
            got += [m for batch in consumer.poll(timeout_ms=300).values() for m in batch]
            if len(got) >= (2 if layout == "record" else 1):
                break
    finally:
        consumer.close()
    records = [r for m in got for r in decode_predictions(m.value)]
    assert [r["prediction"] for r in records] == [True, False]
    assert [r["id"] for r in records] == ["a", "b"]
    if layout == "record":  # a message per prediction, keyed by the event id
        assert [m.key for m in got] == [b"a", b"b"]
    else:  # one message for the run, keyed by its source partition
        assert [m.key for m in got] == [b"0"]


@pytest.mark.parametrize("layout", ["record", "block"])
def test_the_configured_layout_reaches_the_prediction_file(tmp_path, layout):
    """predictions_layout applies to a predictions_file too; read_predictions reads both."""
    from streamk.engine.config import load_config
    from streamk.engine.runner import build_engine
    from streamk.sinks import read_predictions

    path = tmp_path / "predictions.msgpack"
    config = load_config(
        overrides={
            "predictions_file": str(path),
            "predictions_layout": layout,
            "snapshot_dir": str(tmp_path / "snapshots"),
            "snapshot_seconds": 0.0,
            "stop_when_idle": 0.2,
            "budget": 20,
        },
        environ={},
    )
    events = [({"x": float(i % 7)}, i % 2 == 0) for i in range(30)]
    events += [({"x": float(i % 7)}, None) for i in range(12)]  # to score only
    engine = build_engine(config, source=IterableSource(events))
    engine.run()  # closes the sinks when it stops
    records = list(read_predictions(path))
    assert [r["offset"] for r in records] == list(range(30, 42))
    maps = list(msgpack.Unpacker(io.BytesIO(path.read_bytes()), raw=False))
    assert len(maps) == (12 if layout == "record" else 1)


def test_predictions_proba_publishes_each_events_probabilities(tmp_path):
    """predictions_proba: every scored event's record carries predict_proba_one's numbers
    for the model as it stood (the labelled events before it, learned one by one)."""
    from streamk.engine.config import load_config
    from streamk.engine.runner import build_engine, model_factory
    from streamk.sinks import read_predictions

    path = tmp_path / "predictions.msgpack"
    config = load_config(
        path=None,
        overrides={
            "predictions_file": str(path),
            "predictions_proba": "true",  # as an environment variable would give it
            "snapshot_dir": str(tmp_path / "snapshots"),
            "snapshot_seconds": 0.0,
            "stop_when_idle": 0.2,
            "budget": 20,
        },
        environ={},
    )
    rng = np.random.default_rng(5)
    labelled = [({"a": float(a), "b": float(b)}, a > b) for a, b in rng.normal(size=(60, 2))]
    unlabelled = [({"a": float(a), "b": float(b)}, None) for a, b in rng.normal(size=(15, 2))]
    engine = build_engine(config, source=IterableSource(labelled + unlabelled))
    engine.run()
    oracle = model_factory(config)()
    for x, y in labelled:
        oracle.learn_one(x, y)
    records = list(read_predictions(path))
    assert len(records) == 15
    for record, (x, _) in zip(records, unlabelled):
        want = oracle.predict_proba_one(x)
        assert record["proba"].keys() == want.keys()
        for label, p in want.items():
            assert record["proba"][label] == pytest.approx(p, abs=1e-9)
        assert record["prediction"] == oracle.predict_one(x)


def test_predictions_proba_needs_a_classifier(tmp_path):
    from streamk.engine.config import load_config
    from streamk.engine.runner import build_engine
    from streamk.errors import ConfigError

    config = load_config(
        overrides={
            "learner": "svr",
            "predictions_proba": True,
            "predictions_file": str(tmp_path / "p.jsonl"),
            "snapshot_dir": str(tmp_path / "snapshots"),
        },
        environ={},
    )
    with pytest.raises(ConfigError, match="predictions_proba needs a classifier"):
        build_engine(config, source=IterableSource([]))
