"""Text and tree events: the schema's checks, and the engine learning a string model.

The schema tests feed hand-made msgpack payloads to ``decode``; the engine tests run the
real engine on a real topic of the local broker (and on a replayed JSONL log), with
malformed events mixed in, and compare the learned model with the book's kernel
perceptron (Alg. 7.52) written plainly over a ``Counter`` p-spectrum kernel.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import msgpack
import pytest
from kafka import KafkaProducer

from streamk import AllSubtree, KernelPerceptron, Spectrum
from streamk.cli.broker import create_topic
from streamk.engine import Engine, EngineConfig
from streamk.engine.deadletter import DeadLetterFile, read_dead_letters
from streamk.engine.events import decode, encode_event
from streamk.engine.schema import Limits, Schema, input_schema
from streamk.errors import ConfigError, InvalidEvent
from streamk.sources.motifs import motif_stream

TEXT, TREE = Schema(x_kind="text"), Schema(x_kind="tree")


def chain(depth: int) -> list:
    root = node = ["n"]
    for _ in range(depth - 1):
        child = ["n"]
        node.append(child)
        node = child
    return root


def code_of(payload: bytes, schema: Schema | None = None, limits: Limits | None = None) -> str:
    limits = limits or Limits()
    with pytest.raises(InvalidEvent) as info:
        decode(payload, limits, schema)
    assert info.value.reason
    return info.value.code


# -- the schema -------------------------------------------------------------------------------


def test_text_and_tree_events_decode_under_their_schema():
    assert decode(encode_event("gattaca", y=True), schema=TEXT).x == "gattaca"
    assert decode(msgpack.packb({"x": "wörld".encode(), "y": 1}), schema=TEXT).x == "wörld"
    tree = ["S", ["NP", ["D"], ["N"]], ["VP", [7]]]
    assert decode(encode_event(tree, y=False), schema=TREE).x == tree
    assert decode(encode_event(chain(64)), schema=TREE).x == chain(64)
    assert decode(encode_event("plain text"), schema=None).x == "plain text"


@pytest.mark.parametrize(
    "payload, schema, code",
    [
        (msgpack.packb({"x": b"\xc3\x28ab", "y": True}), TEXT, "bad_text"),
        (msgpack.packb({"x": 42, "y": True}), TEXT, "bad_x"),
        (msgpack.packb({"x": [1.0, 2.0], "y": True}), TEXT, "bad_x"),
        (msgpack.packb({"x": "a" * 10_001, "y": True}), TEXT, "too_long"),
        (msgpack.packb({"x": "a" * 10_001, "y": True}), None, "too_long"),
        (msgpack.packb({"x": chain(65), "y": True}), TREE, "tree_too_deep"),
        (msgpack.packb({"x": ["r"] + [["l"]] * 5_000, "y": True}), TREE, "tree_too_large"),
        (msgpack.packb({"x": ["r", [2.5]], "y": True}), TREE, "bad_tree"),
        (msgpack.packb({"x": ["r", []], "y": True}), TREE, "bad_tree"),
        (msgpack.packb({"x": "text", "y": True}), TREE, "bad_tree"),
        (msgpack.packb({"x": "text", "y": True}), Schema(x_kind="vector"), "bad_x"),
    ],
    ids=[
        "invalid-utf8",
        "number",
        "vector",
        "over-long",
        "over-long-any",
        "deep",
        "large",
        "float-label",
        "empty-node",
        "text-for-tree",
        "text-for-vector",
    ],
)
def test_bad_text_and_trees_are_refused_with_a_code(payload, schema, code):
    assert code_of(payload, schema) == code


def test_invalid_utf8_in_a_msgpack_str_is_undecodable_with_the_reason():
    good = msgpack.packb({"x": "QQQQ", "y": True})
    bad = good.replace(b"QQQQ", b"\xff\xfeQQ")
    with pytest.raises(InvalidEvent, match="UTF-8"):
        decode(bad, schema=TEXT)


def test_limits_are_configurable():
    limits = Limits(max_text_chars=5, max_tree_depth=3, max_tree_nodes=4)
    assert code_of(encode_event("abcdef"), TEXT, limits) == "too_long"
    assert decode(encode_event("abcde"), limits, TEXT).x == "abcde"
    assert code_of(encode_event(chain(4)), TREE, limits) == "tree_too_deep"
    assert code_of(encode_event(["r", ["a"], ["b"], ["c"], ["d"]]), TREE, limits) == (
        "tree_too_large"
    )
    with pytest.raises(ConfigError):
        Limits(max_text_chars=0)
    with pytest.raises(ConfigError):
        Schema(x_kind="words")


def test_the_schema_follows_the_kernel():
    assert input_schema(KernelPerceptron(kernel=Spectrum(3))).x_kind == "text"
    assert input_schema(KernelPerceptron(kernel=AllSubtree())).x_kind == "tree"
    assert input_schema(KernelPerceptron()) is None


# -- the engine on a real topic ---------------------------------------------------------------


def grams(s: str, p: int) -> Counter:
    return Counter(s[i : i + p] for i in range(len(s) - p + 1))


def book_perceptron(data: list[tuple[str, bool]], p: int) -> list[tuple[str, bool]]:
    """Alg. 7.52 on the p-spectrum kernel, no budget: the support strings and their signs."""
    support: list[tuple[Counter, str, bool]] = []
    for s, y in data:
        g = grams(s, p)
        f = sum((1 if yi else -1) * sum(c * gi[u] for u, c in g.items()) for gi, _, yi in support)
        if (f >= 0) != y:
            support.append((g, s, y))
    return [(s, y) for _, s, y in support]


def bad_text_event(rng: random.Random) -> tuple[bytes, str]:
    kind = rng.choice(["utf8", "number", "long", "vector", "map", "junk"])
    if kind == "utf8":
        return msgpack.packb({"x": b"\xc3\x28acgt", "y": True}), "bad_text"
    if kind == "number":
        return msgpack.packb({"x": 17, "y": False}), "bad_x"
    if kind == "long":
        return msgpack.packb({"x": "acgt" * 2_600, "y": True}), "too_long"
    if kind == "vector":
        return msgpack.packb({"x": [0.5, 1.5], "y": True}), "bad_x"
    if kind == "map":
        return msgpack.packb({"x": {"a": 1.0}, "y": True}), "bad_x"
    return b"\xc1not msgpack", "undecodable"


def mixed_stream(n: int, seed: int) -> tuple[list[bytes], list[tuple[str, bool]], dict[int, str]]:
    rng = random.Random(seed)
    payloads, valid, bad = [], [], {}
    for s, y in motif_stream(n, seed=seed):
        if rng.random() < 0.1:
            payload, code = bad_text_event(rng)
            bad[len(payloads)] = code
            payloads.append(payload)
        payloads.append(encode_event(s, y=y, id=len(payloads)))
        valid.append((s, y))
    return payloads, valid, bad


def check_run(engine, result, letters, payloads, valid, bad) -> None:
    assert result.records == len(payloads)
    assert {letter.offset: letter.code for letter in letters} == bad
    assert all(letter.reason for letter in letters)
    reasons = engine.metrics.snapshot()["dead_letter_reasons"]
    assert reasons == dict(Counter(bad.values()))
    assert result.learned == len(valid)
    model = engine.model
    support = list(zip(model.support_.X, (model.support_.coef[:, 0] > 0).tolist()))
    assert support == book_perceptron(valid, 3)


@pytest.mark.kafka
def test_the_engine_learns_a_string_model_from_a_topic(kafka_broker, topic_name, tmp_path):
    payloads, valid, bad = mixed_stream(400, seed=5)
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, topic_name, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20)
    for p in payloads:
        producer.send(topic_name, p)
    producer.flush()
    producer.close()
    from streamk.sources.kafka import KafkaSource

    source = KafkaSource(bootstrap, topic_name, group_id=f"{topic_name}-g", partitions=[0])
    with DeadLetterFile(tmp_path / "dead.jsonl") as sink:
        engine = Engine(
            source,
            lambda: KernelPerceptron(kernel=Spectrum(3)),
            dead_letters=sink,
            config=EngineConfig(
                max_records=64, stop_when_idle=3.0, snapshot_every=None, snapshot_seconds=None
            ),
        )
        result = engine.run()
    source.close()
    check_run(
        engine, result, list(read_dead_letters(tmp_path / "dead.jsonl")), payloads, valid, bad
    )


def test_the_engine_learns_a_string_model_from_a_replayed_log(tmp_path):
    from streamk.sources.replay import ReplaySource

    payloads, valid, bad = mixed_stream(300, seed=6)
    log = tmp_path / "events.jsonl"
    with open(log, "w") as fh:
        for p in payloads:
            try:
                event = msgpack.unpackb(p, raw=False)
                line = json.dumps(event)
            except Exception:  # the undecodable ones: a line that is not JSON
                line = "{not json"
            fh.write(line + "\n")
    # in JSON, invalid UTF-8 cannot be written: those lines carry other reasons
    source = ReplaySource(log)
    with DeadLetterFile(tmp_path / "dead.jsonl") as sink:
        engine = Engine(
            source,
            lambda: KernelPerceptron(kernel=Spectrum(3)),
            dead_letters=sink,
            config=EngineConfig(max_records=64, snapshot_every=None, snapshot_seconds=None),
        )
        result = engine.run()
    letters = list(read_dead_letters(tmp_path / "dead.jsonl"))
    assert result.learned == len(valid)
    assert {letter.offset for letter in letters} == set(bad)
    model = engine.model
    support = list(zip(model.support_.X, (model.support_.coef[:, 0] > 0).tolist()))
    assert support == book_perceptron(valid, 3)
