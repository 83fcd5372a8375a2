"""Event codec: round trips, every rejection reason, fuzzing, blocks ≡ events, dead letters."""

from __future__ import annotations

import json
import math
import struct

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from peak_memory import traced_peak

from streamk.engine.events import (
    Block,
    DeadLetter,
    DeadLetterFile,
    Event,
    Limits,
    Schema,
    decode,
    encode_block,
    encode_event,
    read_dead_letters,
)
from streamk.errors import ConfigError, InvalidEvent

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

finite = st.floats(allow_nan=False, allow_infinity=False)
ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)
names = st.text(max_size=12)
xs = st.one_of(
    st.lists(st.one_of(finite, ints, st.booleans()), max_size=20),
    st.dictionaries(st.one_of(names, ints), finite, max_size=20),
    st.text(max_size=50),
)
labels = st.one_of(st.none(), st.booleans(), ints, finite, names)
ids = st.one_of(st.none(), names, ints)


def pack(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def reject(payload: object, code: str, text: str, **kwargs: object) -> InvalidEvent:
    """Assert ``decode`` rejects ``payload`` with ``code`` and a reason containing ``text``."""
    with pytest.raises(InvalidEvent) as info:
        decode(payload, **kwargs)  # type: ignore[arg-type]
    assert info.value.code == code, info.value.reason
    assert text in info.value.reason, info.value.reason
    assert info.value.reason in str(info.value)
    return info.value


# -- round trips ---------------------------------------------------------------------------
@given(xs, labels, ids, st.one_of(st.none(), finite), st.one_of(st.none(), ids))
@settings(deadline=None, max_examples=300)
def test_event_round_trip(x, y, id, t, group) -> None:
    assert decode(encode_event(x, y, id=id, t=t, group=group)) == Event(x, y, id, t, None, group)


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_weight_round_trip(w) -> None:
    assert decode(encode_event([1.0], w=w)).w == w


def test_numpy_values_encode() -> None:
    event = decode(encode_event(np.arange(3, dtype=np.float32), np.int64(1), id=np.int32(7)))
    assert event == Event([0.0, 1.0, 2.0], 1, 7)


def test_bool_features_are_numbers() -> None:
    assert decode(pack({"x": [True, 0.5]})).x == [True, 0.5]
    assert decode(pack({"x": {"a": False}})).x == {"a": False}


def test_nil_fields_count_as_absent() -> None:
    assert decode(pack({"x": [1], "y": None, "id": None, "w": None})) == Event([1])


def test_finite_values_whose_sum_overflows_are_accepted() -> None:
    assert decode(encode_event([1e308, 1e308])).x == [1e308, 1e308]


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_block_whose_finite_sum_overflows_is_accepted_without_a_warning() -> None:
    X = np.array([[1e308, 1e308], [-1e308, -1e308]])
    y = np.array([1e308, 1e308])
    block = decode(encode_block(X, y, None))
    assert np.array_equal(block.X, X) and next(block.rows()).y == 1e308


blocks = st.tuples(
    st.sampled_from([np.float32, np.float64]),
    st.integers(1, 12),
    st.integers(1, 6),
).flatmap(
    lambda a: st.tuples(
        hnp.arrays(
            a[0], (a[1], a[2]), elements=st.floats(width=32, allow_nan=False, allow_infinity=False)
        ),
        st.one_of(
            st.none(),
            hnp.arrays(np.int64, a[1], elements=st.integers(-5, 5)),
            hnp.arrays(np.float64, a[1], elements=finite),
            hnp.arrays(np.bool_, a[1]),
            st.lists(st.one_of(st.none(), names, ints), min_size=a[1], max_size=a[1]),
        ),
        st.one_of(st.none(), st.lists(st.one_of(names, ints), min_size=a[1], max_size=a[1])),
    )
)


@given(blocks)
@settings(deadline=None, max_examples=200)
def test_block_equals_per_event_decoding(case) -> None:
    X, y, row_ids = case
    block = decode(encode_block(X, y, row_ids))
    assert isinstance(block, Block) and len(block) == len(X)
    assert block.X.dtype == X.dtype and np.array_equal(block.X, X)
    y_list = y.tolist() if isinstance(y, np.ndarray) else y
    for i, row in enumerate(block.rows()):
        single = decode(
            encode_event(
                X[i].tolist(),
                None if y_list is None else y_list[i],
                id=None if row_ids is None else row_ids[i],
            )
        )
        assert row == single


# -- every rejection reason ----------------------------------------------------------------
def test_undecodable() -> None:
    reject(b"\xc1", "undecodable", "not a single valid msgpack value")
    reject(pack({"x": [1.0]})[:-3], "undecodable", "incomplete input")
    reject(pack({"x": [1]}) * 2, "undecodable", "extra data")
    reject(b"\x81\xa1x\xa3\xff\xfe\xfd", "undecodable", "not valid UTF-8")
    reject(b"\x81\x91\x01\x02", "undecodable", "map key is itself a container")
    reject("not bytes", "undecodable", "payload must be bytes, got str")
    reject(b"\xdd\xff\xff\xff\xff", "undecodable", "claims 4294967295")
    reject(b"\x91" * 5000, "undecodable", "nested too deeply")


def test_not_a_map() -> None:
    reject(pack([1.0, 2.0]), "not_a_map", "must be a msgpack map, got a list")
    reject(pack(3), "not_a_map", "got an integer")


def test_unknown_keys_rejected_or_ignored() -> None:
    reject(pack({"x": [1], "label": 1}), "unknown_key", "unknown key(s) 'label'")
    reject(pack({"x": [1], "X": b""}), "unknown_key", "both 'x' (one event) and 'X'")
    event = decode(pack({"x": [1], "label": 1}), schema=Schema(unknown_keys="ignore"))
    assert event == Event([1])


def test_missing_x() -> None:
    reject(pack({"y": 1}), "missing_x", "no 'x'")
    reject(pack({"x": None, "y": 1}), "missing_x", "no 'x'")


def test_ill_typed_x() -> None:
    reject(pack({"x": 3}), "bad_x", "got an integer")
    reject(pack({"x": b"\x00"}), "bad_x", "got bytes")
    reject(pack({"x": [[1.0, 2.0]]}), "bad_x", "'x'[0] is a list, expected a number")
    reject(pack({"x": [1.0, "a"]}), "bad_x", "'x'[1] is a string, expected a number")
    reject(pack({"x": {"a": [1]}}), "bad_x", "'x'['a'] is a list")
    reject(pack({"x": {"a": None}}), "bad_x", "'x'['a'] is nil")
    reject(pack({"x": {b"k": 1.0}}), "bad_x", "feature name b'k' is bytes")
    reject(pack({"x": {True: 1.0}}), "bad_x", "feature name True is a bool")
    reject(pack({"x": {1.5: 1.0}}), "bad_x", "feature name 1.5 is a float")


def test_non_finite() -> None:
    reject(pack({"x": [1.0, math.nan]}), "non_finite", "'x'[1] is nan")
    reject(pack({"x": {"a": 1.0, "b": -math.inf}}), "non_finite", "'x'['b'] is -inf")
    reject(pack({"x": [math.inf, -math.inf]}), "non_finite", "'x'[0] is inf")
    reject(pack({"x": [1], "y": math.nan}), "non_finite", "label 'y' is nan")
    reject(pack({"x": [1], "w": math.inf}), "non_finite", "'w' is inf")
    reject(pack({"x": [1], "t": math.nan}), "non_finite", "'t' is nan")
    X = np.ones((3, 2), np.float32)
    X[2, 1] = np.nan
    reject(encode_block(X), "non_finite", "block X[2, 1] is")
    reject(
        encode_block(np.ones((2, 2)), np.array([1.0, np.inf])), "non_finite", "block y[1] is inf"
    )
    reject(encode_block(np.ones((2, 2)), [1.0, math.nan]), "non_finite", "label y[1] is nan")


def test_wrong_dimension() -> None:
    schema = Schema(dim=3)
    assert decode(encode_event([1, 2, 3]), schema=schema).x == [1, 2, 3]
    reject(
        encode_event([1, 2, 3, 4]),
        "dimension",
        "4 values but the schema fixes dim=3",
        schema=schema,
    )
    reject(encode_event({i: 1.0 for i in range(4)}), "dimension", "4 features", schema=schema)
    reject(encode_event({5: 1.0}), "dimension", "feature index 5 is outside [0, 3)", schema=schema)
    reject(encode_event("some text"), "dimension", "'x' is text", schema=schema)
    reject(encode_block(np.ones((2, 4))), "dimension", "d=4 columns", schema=schema)


def test_label_type_and_label_set() -> None:
    reject(pack({"x": [1], "y": [1]}), "bad_label", "must be a bool, int, float or string")
    reject(pack({"x": [1], "y": b"a"}), "bad_label", "got bytes")
    reject(
        encode_event([1], 0.5),
        "bad_label",
        "expects class labels",
        schema=Schema(label_kind="class"),
    )
    reject(
        encode_event([1], "a"), "bad_label", "expects numeric", schema=Schema(label_kind="number")
    )
    fixed = Schema(labels={0, 1})
    assert decode(encode_event([1], True), schema=fixed).y is True  # True == 1, documented
    reject(
        encode_event([1], 2),
        "unknown_label",
        "label 'y' = 2 is not in the label set {0, 1}",
        schema=fixed,
    )
    reject(encode_block(np.ones((2, 1)), [0, 7]), "unknown_label", "y[1]", schema=fixed)
    reject(encode_block(np.ones((2, 1)), np.array([0, 7])), "unknown_label", "7", schema=fixed)
    reject(encode_block(np.ones((2, 1)), [0, [1]]), "bad_label", "label y[1]")


def test_oversize_payload() -> None:
    big = encode_event("a" * (1 << 20))
    reject(big, "oversize", f"payload is {len(big)} bytes, above max_payload_bytes=1048576")
    small = Limits(max_payload_bytes=64)
    reject(encode_event([0.5] * 10), "oversize", "above max_payload_bytes=64", limits=small)


def test_too_many_features() -> None:
    limits = Limits(max_features=5)
    reject(
        encode_event([1.0] * 6),
        "too_many_features",
        "6 values, above max_features=5",
        limits=limits,
    )
    reject(
        encode_event({f"f{i}": 1.0 for i in range(6)}),
        "too_many_features",
        "6 features",
        limits=limits,
    )
    reject(encode_block(np.ones((1, 6))), "too_many_features", "d=6 columns", limits=limits)
    reject(
        encode_event({f"f{i}": 1.0 for i in range(40)}),
        "too_many_features",
        "a map of 40 entries exceeds max_features=20",
        limits=Limits(max_features=20),
    )


def test_too_long_strings() -> None:
    limits = Limits(max_string_bytes=10)
    reject(
        encode_event("x" * 11),
        "too_long",
        "string of 11 bytes exceeds max_string_bytes=10",
        limits=limits,
    )
    reject(encode_event([1], "y" * 20), "too_long", "string of 20 bytes", limits=limits)


def test_bad_fields() -> None:
    reject(
        pack({"x": [1], "id": 1.5}), "bad_field", "'id' must be a string or an integer, got a float"
    )
    reject(
        pack({"x": [1], "id": True}), "bad_field", "'id' must be a string or an integer, got a bool"
    )
    reject(pack({"x": [1], "group": [1]}), "bad_field", "'group' must be a string or an integer")
    reject(pack({"x": [1], "t": "yesterday"}), "bad_field", "'t' must be a number, got a string")
    reject(pack({"x": [1], "w": 0}), "bad_field", "weight 'w' must be positive, got 0")
    reject(pack({"x": [1], "w": -2.0}), "bad_field", "must be positive")
    reject(pack({"x": [1], "w": True}), "bad_field", "'w' must be a number, got a bool")


def _block(**fields: object) -> bytes:
    base: dict[str, object] = {"X": np.ones((2, 3)).tobytes(), "shape": [2, 3], "dtype": "<f8"}
    base.update(fields)
    return pack({k: v for k, v in base.items() if v is not None})


def test_bad_blocks() -> None:
    reject(_block(X=[1.0]), "bad_block", "'X' must be raw bytes")
    reject(_block(dtype="<f2"), "bad_block", "'dtype' must be '<f4' or '<f8'")
    reject(_block(dtype=None), "bad_block", "'dtype' must be")
    reject(_block(shape=[6]), "bad_block", "'shape' must be [n, d]")
    reject(_block(shape=[2.0, 3]), "bad_block", "'shape' must be [n, d]")
    reject(_block(shape=[0, 3], X=b""), "bad_block", "is empty")
    reject(_block(shape=[3, 3]), "bad_block", "'X' has 48 bytes; shape [3, 3] of <f8 needs 72")
    reject(_block(dtype="<f4"), "bad_block", "needs 24")
    reject(_block(y=[1, 2, 3]), "bad_block", "'y' has 3 labels for 2 rows")
    reject(_block(y_dtype="<f8"), "bad_block", "'y_dtype' but no 'y'")
    reject(_block(y=[1, 2], y_dtype="<i8"), "bad_block", "applies only to raw-bytes 'y'")
    reject(_block(y=b"\x00" * 8), "bad_block", "needs 'y_dtype'")
    reject(
        _block(y=b"\x00" * 7, y_dtype="<f4"),
        "bad_block",
        "raw 'y' has 7 bytes; 2 labels of <f4 need 8",
    )
    reject(_block(y=b"\x00\x02", y_dtype="|b1"), "bad_label", "other than 0 or 1")
    reject(_block(y="ab"), "bad_block", "must be a list or raw bytes")
    reject(_block(ids=[1]), "bad_block", "'ids' must be a list of 2 items")
    reject(_block(ids=[1, 2.5]), "bad_field", "block ids[1] must be a string or an integer")
    reject(_block(extra=1), "unknown_key", "unknown key(s) 'extra'")
    reject(_block(shape=[100_000, 3]), "too_large", "100000 rows, above max_block_rows=65536")


def test_block_claiming_a_huge_shape_allocates_nothing() -> None:
    limits = Limits(max_block_rows=2**62, max_features=2**40)
    payload = _block(shape=[2**62, 2**40])
    with traced_peak() as peak:
        reject(payload, "bad_block", "needs", limits=limits)
    assert peak.bytes < 1 << 20


# -- fuzzing -------------------------------------------------------------------------------
VALID = [
    encode_event([0.5, -1.0, 3.0], 1, id=7, t=1.7e9, w=2.0, group="q1"),
    encode_event({"a": 1.0, "b": 2}, "cat", id="e1"),
    encode_event("some text", True),
    encode_block(
        np.arange(12, dtype=np.float32).reshape(4, 3), np.array([0, 1, 0, 1]), [1, 2, 3, 4]
    ),
    encode_block(np.ones((2, 2)), ["a", None]),
]


def decode_or_invalid(payload: bytes, **kwargs: object) -> None:
    """Decoding either succeeds or raises InvalidEvent; anything else fails the test."""
    try:
        decode(payload, **kwargs)  # type: ignore[arg-type]
    except InvalidEvent as exc:
        assert exc.code and exc.reason


@given(st.binary(max_size=512))
@FUZZ
def test_fuzz_random_bytes(payload) -> None:
    decode_or_invalid(payload)


@given(st.sampled_from(VALID), st.lists(st.integers(0, 10**6), min_size=1, max_size=8))
@FUZZ
def test_fuzz_bit_flips(payload, positions) -> None:
    data = bytearray(payload)
    for p in positions:
        data[p % len(data)] ^= 1 << (p % 8)
    decode_or_invalid(bytes(data))
    decode_or_invalid(bytes(data), schema=Schema(dim=3, labels={0, 1}, label_kind="class"))


@given(st.sampled_from(VALID), st.integers(0, 10**6))
@FUZZ
def test_fuzz_truncations(payload, cut) -> None:
    decode_or_invalid(payload[: cut % len(payload)])


@given(st.sampled_from(VALID), st.sampled_from(VALID), st.integers(0, 10**6))
@FUZZ
def test_fuzz_insertions(host, guest, at) -> None:
    i = at % (len(host) + 1)
    decode_or_invalid(host[:i] + guest + host[i:])


msgpack_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), ints, st.floats(), st.text(max_size=8), st.binary(max_size=8)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=3), st.sampled_from(["x", "y", "X", "shape"])),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)


@given(
    st.dictionaries(
        st.sampled_from(
            ["x", "y", "id", "t", "w", "group", "X", "shape", "dtype", "ids", "y_dtype"]
        ),
        msgpack_values,
    )
)
@FUZZ
def test_fuzz_structured_maps(obj) -> None:
    decode_or_invalid(pack(obj))


def test_nested_array_headers_do_not_allocate_much() -> None:
    payload = b"\x81\xa1x" + b"\xdd\x00\x00\x23\x28" * 2000  # 2000 arrays, each claiming 9000
    with traced_peak() as peak:
        reject(payload, "undecodable", "nested too deeply")
    assert peak.bytes < 128 << 20  # bounded by 1024 levels × 8 × len(payload), see module docstring


def test_limits_and_schema_are_validated() -> None:
    with pytest.raises(ConfigError, match="max_features"):
        Limits(max_features=0)
    with pytest.raises(ConfigError, match="dim"):
        Schema(dim=-1)
    with pytest.raises(ConfigError, match="unknown_keys"):
        Schema(unknown_keys="drop")  # type: ignore[arg-type]


# -- dead letters --------------------------------------------------------------------------
def _records() -> list[DeadLetter]:
    out = []
    for i, payload in enumerate([b"\xc1", pack({"x": [math.nan]}), b"", bytes(range(256))]):
        try:
            decode(payload)
        except InvalidEvent as exc:
            out.append(
                DeadLetter.from_error(payload, exc, "events", 0, 100 + i, 1_700_000_000_000 + i)
            )
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "msgpack"])
def test_dead_letter_file_round_trip(tmp_path, fmt) -> None:
    path = tmp_path / f"dead.{fmt}"
    records = _records()
    with DeadLetterFile(path, fmt) as out:
        for record in records[:2]:
            out.write(record)
    with DeadLetterFile(path, fmt) as out:  # appends
        for record in records[2:]:
            out.write(record)
        assert out.count == 2
    assert list(read_dead_letters(path)) == records
    assert list(read_dead_letters(path, fmt)) == records
    assert records[1].code == "non_finite" and "'x'[0] is nan" in records[1].reason


def test_dead_letter_json_shows_payload_as_base64() -> None:
    record = _records()[0]
    data = json.loads(record.to_json())
    assert data["payload_b64"] == "wQ==" and data["source"] == "events" and data["offset"] == 100
    assert DeadLetter.from_dict(data) == record
    assert DeadLetter.from_dict(msgpack.unpackb(record.to_msgpack())) == record


def test_corrupt_dead_letter_files_are_reported(tmp_path) -> None:
    path = tmp_path / "dead.msgpack"
    with DeadLetterFile(path, "msgpack") as out:
        out.write(_records()[0])
    path.write_bytes(path.read_bytes() + _records()[1].to_msgpack()[:-2])
    with pytest.raises(InvalidEvent, match="truncated"):
        list(read_dead_letters(path))
    bad = tmp_path / "dead.jsonl"
    bad.write_text(_records()[0].to_json() + "\n{not json\n")
    with pytest.raises(InvalidEvent, match=":2:"):
        list(read_dead_letters(bad))
    with pytest.raises(ConfigError):
        DeadLetterFile(tmp_path / "x", "csv")  # type: ignore[arg-type]


def test_claimed_lengths_never_outgrow_the_payload() -> None:
    """Random headers claiming up to 4 GiB (arrays, maps, str, bin, ext) stay cheap."""
    rng = np.random.default_rng(7)
    heads = [b"\xdc", b"\xdd", b"\xde", b"\xdf", b"\xc6", b"\xdb", b"\xc9", b"\x81\xa1x\xdd"]
    with traced_peak() as peak:
        for _ in range(1500):
            parts = [
                heads[rng.integers(len(heads))] + struct.pack(">I", int(rng.integers(2**32)))
                for _ in range(rng.integers(1, 60))
            ]
            decode_or_invalid(b"".join(parts) + rng.bytes(int(rng.integers(0, 64))))
    assert peak.bytes < 16 << 20


def test_bytes_like_payloads_and_read_only_view() -> None:
    payload = encode_block(np.eye(3))
    block = decode(memoryview(bytearray(payload)))
    assert isinstance(block, Block) and np.array_equal(block.X, np.eye(3))
    assert not block.X.flags.writeable  # a view of the message, never copied
