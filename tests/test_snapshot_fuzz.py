"""Hostile and damaged snapshots: only SnapshotError, no hang, bounded memory."""

from __future__ import annotations

import struct

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from peak_memory import traced_peak

from streamk.errors import SnapshotError
from streamk.snapshot import Limits, decode_state, dumps, loads, register_class, seal

MiB = 1 << 20
pack = msgpack.packb


class StrictToy:
    """A small learner whose from_state checks what it is given, as real ones do."""

    def __init__(self, w: np.ndarray | None = None, bias: float = 0.0):
        self.w = np.zeros(3) if w is None else w
        self.bias = bias

    def predict_one(self, x: np.ndarray) -> float:
        return float(self.w @ x + self.bias)

    def state(self) -> dict:
        return {"params": {"bias": self.bias, "kernel": {"name": "linear"}}, "w": self.w}

    @classmethod
    def from_state(cls, state: dict) -> StrictToy:
        w = state["w"]
        if not isinstance(w, np.ndarray) or w.shape != (3,) or w.dtype != np.float64:
            raise ValueError(f"w must be float64 of shape (3,), got {w!r}")
        return cls(w, float(state["params"]["bias"]))


register_class("StrictToyFuzz", f"{__name__}:StrictToy")
VALID = dumps(
    StrictToy(np.array([1.0, -2.0, 0.5]), 0.25),
    offsets={"events": {0: 10, 1: 20}},
    seq=3,
    metrics={"acc": 0.5},
    created_at=1.0,
    note="n" * 40,
)
VALID_BODY = msgpack.unpackb(VALID)["body"]


def body(state_raw: bytes = b"\x80", cls: str = "StrictToyFuzz", **raw: bytes) -> bytes:
    """A body with `state_raw` as the raw msgpack of model.state; other fields overridable."""
    fields = {
        "model": b"\x82" + pack("class") + pack(cls) + pack("state") + state_raw,
        "stream": pack({}),
        "seq": pack(0),
        "created_at": pack(0.0),
        "metrics": pack({}),
        "meta": pack({}),
    }
    fields.update(raw)
    out = bytes([0x80 | len(fields)])
    for key, value in fields.items():
        out += pack(key) + value
    return out


def nd(**over) -> bytes:
    arr = {"__nd__": True, "dtype": "<f8", "shape": [3], "data": b"\0" * 24}
    arr.update(over)
    return pack({"params": {"bias": 0.0}, "w": arr})


def envelope(**over) -> bytes:
    outer = {"format": "streamk.snapshot", "version": 1, "body": VALID_BODY}
    outer["sha256"] = msgpack.unpackb(VALID)["sha256"]
    outer.update(over)
    return pack(outer)


DEEP_LISTS = b"\x91" * 10_000 + b"\xc0"
DEEP_MAPS = b"\x81\xa1a" * 10_000 + b"\xc0"
LIST_OF_EMPTY_LISTS = b"\xdd" + struct.pack(">I", 800_000) + b"\x90" * 800_000
HOSTILE = {
    # arrays: claimed sizes, dims, dtypes, fields
    "huge shape": seal(body(nd(shape=[2**40, 2**40]))),
    "huge product": seal(body(nd(shape=[2**20, 2**20]))),
    "huge dim with zero": seal(body(nd(shape=[0, 2**62]))),
    "shape vs data": seal(body(nd(shape=[10**6]))),
    "negative dim": seal(body(nd(shape=[-1, -3]))),
    "float dim": seal(body(nd(shape=[3.0]))),
    "bool dim": seal(body(nd(shape=[True, True, True]))),
    "str dim": seal(body(nd(shape=["3"]))),
    "shape not list": seal(body(nd(shape=3))),
    "too many dims": seal(body(nd(shape=[1] * 40, data=b"\0" * 8))),
    "object dtype": seal(body(nd(dtype="|O"))),
    "unicode dtype": seal(body(nd(dtype="<U4"))),
    "big-endian dtype": seal(body(nd(dtype=">f8"))),
    "longdouble dtype": seal(body(nd(dtype="<f16"))),
    "datetime dtype": seal(body(nd(dtype="<M8[s]"))),
    "int dtype": seal(body(nd(dtype=8))),
    "extra array key": seal(body(nd(extra=1))),
    "nd false": seal(body(nd(__nd__=False))),
    "data is str": seal(body(nd(data="x" * 24))),
    "wrong dtype for learner": seal(body(nd(dtype="<f4", data=b"\0" * 12))),
    # structure
    "deep lists": seal(body(b"\x81" + pack("x") + DEEP_LISTS)),
    "deep maps": seal(body(b"\x81" + pack("x") + DEEP_MAPS)),
    "deep meta": seal(body(meta=b"\x81" + pack("x") + DEEP_LISTS)),
    "claimed giant str": seal(body(b"\x81" + pack("x") + b"\xdb\x7f\xff\xff\xff" + b"abc")),
    "claimed giant bin": seal(body(b"\x81" + pack("x") + b"\xc6\xff\xff\xff\xff" + b"abc")),
    "claimed giant list": seal(body(b"\x81" + pack("x") + b"\xdd\xff\xff\xff\xff" + b"\xc0")),
    "claimed giant map": seal(body(b"\x81" + pack("x") + b"\xdf\xff\xff\xff\xff" + b"\xc0")),
    "object bomb": seal(
        body(b"\x81" + pack("x") + b"\xdd" + struct.pack(">I", 2 * MiB) + b"\x90" * (2 * MiB))
    ),
    "object count bomb": seal(body(b"\x81" + pack("x") + b"\x92" + 2 * LIST_OF_EMPTY_LISTS)),
    "ext type": seal(body(b"\x81" + pack("x") + b"\xd4\x05\x00")),
    "timestamp": seal(body(b"\x81" + pack("x") + b"\xd6\xff\x00\x00\x00\x01")),
    "never-used byte": seal(body(b"\x81" + pack("x") + b"\xc1")),
    "invalid utf-8": seal(body(b"\x81" + pack("x") + b"\xa2\xff\xfe")),
    "int key": seal(body(b"\x81\x01\x02")),
    "bytes key": seal(body(b"\x81\xc4\x01k\x02")),
    "nil key": seal(body(b"\x81\xc0\x02")),
    "trailing bytes": seal(body() + b"\xc0"),
    "truncated body": seal(body()[:-1]),
    "empty body": seal(b""),
    "body is a list": seal(pack([1, 2])),
    "body lacks keys": seal(pack({"model": {"class": "StrictToyFuzz", "state": {}}})),
    "model not a map": seal(body(model=pack([1]))),
    "state is a list": seal(body(pack([1]))),
    "class not str": seal(body(model=pack({"class": 5, "state": {}}))),
    "unknown class": seal(body(cls="os.system")),
    "from_state rejects": seal(body(pack({"w": 1}))),
    # scalar fields
    "seq negative": seal(body(seq=pack(-1))),
    "seq too big": seal(body(seq=pack(2**64 - 1))),
    "seq str": seal(body(seq=pack("3"))),
    "seq bool": seal(body(seq=pack(True))),
    "created_at nan": seal(body(created_at=pack(float("nan")))),
    "created_at str": seal(body(created_at=pack("2024-01-01"))),
    "metric str": seal(body(metrics=pack({"a": "x"}))),
    "metrics list": seal(body(metrics=pack([1]))),
    "partition negative": seal(body(stream=pack({"t": {"-1": 0}}))),
    "partition padded": seal(body(stream=pack({"t": {"01": 0}}))),
    "offset negative": seal(body(stream=pack({"t": {"0": -1}}))),
    "stream list": seal(body(stream=pack({"t": [0]}))),
    "empty source": seal(body(stream=pack({"": {}}))),
    "meta not map": seal(body(meta=pack([1]))),
    # envelope
    "not msgpack": b"\xc1" * 10,
    "empty input": b"",
    "outer list": pack([1, 2, 3]),
    "wrong format": envelope(format="pickle"),
    "version zero": envelope(version=0),
    "version str": envelope(version="1"),
    "version bool": envelope(version=True),
    "sha uppercase": envelope(sha256=msgpack.unpackb(VALID)["sha256"].upper()),
    "sha wrong": envelope(sha256="0" * 64),
    "body str": envelope(body="x"),
    "no body": pack({"format": "streamk.snapshot", "version": 1, "sha256": "0" * 64}),
    "deep envelope": b"\x85" + pack("x") + DEEP_LISTS + VALID[1:],
    "claimed giant envelope bin": b"\x81\xa4body\xc6\xff\xff\xff\xff",
    "newer version": envelope(version=99),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_raises_snapshot_error_within_bounded_memory(name):
    data = HOSTILE[name]
    budget = 4 * MiB + 2 * len(data)  # the body copy plus a little working memory
    with traced_peak() as peak, pytest.raises(SnapshotError) as info:
        loads(data)
    assert str(info.value)
    assert peak.bytes < budget, f"{name}: peak {peak.bytes} bytes"


def test_giant_real_string_is_refused():
    data = seal(body(b"\x81" + pack("x") + pack("s" * (2 * MiB))))
    with pytest.raises(SnapshotError, match="max_str_len"):
        loads(data)


def test_payload_over_max_bytes_is_refused_before_decoding():
    with pytest.raises(SnapshotError, match="max_bytes"):
        loads(VALID, Limits(max_bytes=len(VALID) - 1))


def test_non_bytes_input():
    for value in (None, "text", 3, [1], np.zeros(3)):
        with pytest.raises(SnapshotError):
            loads(value)


def test_every_truncation_is_detected():
    for k in range(len(VALID)):
        with pytest.raises(SnapshotError):
            loads(VALID[:k])


def check(data: bytes) -> None:
    """Loading either works (a snapshot) or raises SnapshotError; nothing else escapes."""
    try:
        snap = loads(data)
    except SnapshotError as exc:
        assert str(exc)
    else:
        assert isinstance(snap.model, StrictToy)


fuzz = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fuzz
@given(
    st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 7)), min_size=1, max_size=8)
)
def test_bit_flips(flips):
    data = bytearray(VALID)
    for pos, bit in flips:
        data[pos] ^= 1 << bit
    check(bytes(data))


@fuzz
@given(st.integers(0, len(VALID)), st.binary(min_size=1, max_size=64), st.integers(0, 64))
def test_insertions_and_deletions(pos, insert, delete):
    check(VALID[:pos] + insert + VALID[pos + delete :])


@fuzz
@given(st.binary(max_size=512))
def test_random_bytes(data):
    check(data)


@fuzz
@given(
    st.lists(
        st.tuples(st.integers(0, len(VALID_BODY) - 1), st.integers(0, 255)), min_size=1, max_size=6
    )
)
def test_damaged_bodies_with_valid_checksums(edits):
    """The checksum cannot help here: every later layer has to hold on its own."""
    raw = bytearray(VALID_BODY)
    for pos, value in edits:
        raw[pos] = value
    data = seal(bytes(raw))
    with traced_peak() as peak:
        check(data)
    assert peak.bytes < 4 * MiB


keys = st.sampled_from(["model", "class", "state", "stream", "seq", "meta", "__nd__", "shape", "w"])
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=16)
    | st.sampled_from(["StrictToyFuzz", "<f8", "|O"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(keys | st.text(max_size=4), children, max_size=5)
    ),
    max_leaves=30,
)


@fuzz
@given(st.dictionaries(keys, values, max_size=7))
def test_random_sealed_bodies(tree):
    check(seal(pack(tree)))


@fuzz
@given(st.binary(max_size=256))
def test_decode_state_random_bytes(data):
    try:
        decode_state(data)
    except SnapshotError:
        pass
