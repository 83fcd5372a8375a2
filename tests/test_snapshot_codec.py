"""Plain-data codec: state with NumPy arrays <-> msgpack bytes, round trips and rejections."""

from __future__ import annotations

import math
import struct

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from streamk.errors import SnapshotError
from streamk.snapshot import ARRAY_DTYPES, Limits, decode_state, encode_state

WIRE_DTYPES = sorted(ARRAY_DTYPES)
# Every allowed dtype, in both byte orders where that means anything.
INPUT_DTYPES = WIRE_DTYPES + [d.replace("<", ">") for d in WIRE_DTYPES if d[0] == "<"]


def assert_same(original, decoded, path="state"):
    """Decoded equals original up to the documented normalisations (tuples -> lists,
    NumPy scalars -> Python scalars, arrays -> native byte order), bit for bit."""
    if isinstance(original, np.ndarray):
        assert isinstance(decoded, np.ndarray), path
        assert decoded.dtype.str == original.dtype.newbyteorder("<").str, path
        assert decoded.shape == original.shape, path
        assert decoded.flags.writeable and decoded.flags.c_contiguous, path
        assert (
            decoded.astype(decoded.dtype.newbyteorder("<")).tobytes()
            == original.astype(original.dtype.newbyteorder("<")).tobytes()
        ), path
    elif isinstance(original, np.generic):
        assert_same(original.item(), decoded, path)
    elif isinstance(original, dict):
        assert isinstance(decoded, dict) and list(decoded) == list(original), path
        for key in original:
            assert_same(original[key], decoded[key], f"{path}.{key}")
    elif isinstance(original, list | tuple):
        assert isinstance(decoded, list) and len(decoded) == len(original), path
        for i, (a, b) in enumerate(zip(original, decoded, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(original, float):
        assert isinstance(decoded, float), path
        assert struct.pack("<d", original) == struct.pack("<d", decoded) or (
            math.isnan(original) and math.isnan(decoded)
        ), path
    else:
        assert type(decoded) is type(original) and decoded == original, path


@st.composite
def arrays(draw):
    dtype = draw(st.sampled_from(INPUT_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    arr = draw(hnp.arrays(np.dtype(dtype), shape))
    view = draw(st.sampled_from(["as-is", "transpose", "step", "fortran"]))
    if view == "transpose":
        arr = arr.T
    elif view == "step" and arr.ndim:
        arr = arr[::2]
    elif view == "fortran":
        arr = np.asfortranarray(arr)
    return arr


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
numpy_scalars = st.sampled_from(
    [np.float64(1.5), np.float32(-2.25), np.int64(-7), np.uint8(200), np.bool_(True)]
)
keys = st.text(max_size=10).filter(lambda k: k != "__nd__")
plain = st.recursive(
    scalars | numpy_scalars | arrays(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, plain, max_size=6))
def test_round_trip_of_arbitrary_plain_state(state):
    assert_same(state, decode_state(encode_state(state)))


@settings(max_examples=200, deadline=None)
@given(arrays())
def test_arrays_round_trip_every_dtype_and_layout(arr):
    out = decode_state(encode_state({"a": arr}))["a"]
    assert_same(arr, out)


@pytest.mark.parametrize("dtype", WIRE_DTYPES)
def test_wire_form_is_little_endian_c_order(dtype):
    arr = np.arange(6).astype(dtype).reshape(2, 3).T  # non-contiguous
    raw = msgpack.unpackb(encode_state({"a": arr}))["a"]
    assert raw == {
        "__nd__": True,
        "dtype": dtype,
        "shape": [3, 2],
        "data": np.ascontiguousarray(arr).astype(dtype).tobytes(),
    }


def test_zero_d_and_empty_arrays():
    state = {"z": np.array(3.5), "e": np.zeros((0, 4)), "e2": np.zeros((3, 0, 2), "<i4")}
    out = decode_state(encode_state(state))
    assert out["z"].shape == () and out["z"] == 3.5
    assert out["e"].shape == (0, 4) and out["e2"].shape == (3, 0, 2)


def test_decoded_arrays_are_writable_copies():
    out = decode_state(encode_state({"a": np.ones(3)}))["a"]
    out[0] = 5.0
    assert out.tolist() == [5.0, 1.0, 1.0]


def test_accepts_bytearray_and_memoryview():
    data = encode_state({"a": [1, 2]})
    assert decode_state(bytearray(data)) == {"a": [1, 2]}
    assert decode_state(memoryview(data)) == {"a": [1, 2]}


@pytest.mark.parametrize(
    "value, message",
    [
        (np.array(["a"]), "dtype"),
        (np.array([object()], dtype=object), "dtype"),
        (np.zeros(2, dtype=[("a", "<f8")]), "dtype"),
        (np.zeros(2, dtype="datetime64[s]"), "dtype"),
        (np.zeros(2, dtype=np.longdouble), "dtype"),
        ({1: 2}, "not a str"),
        ({"__nd__": True}, "reserved"),
        ({1, 2}, "set is not plain data"),
        (lambda: 0, "not plain data"),
        (2**64, "64 bits"),
        (-(2**63) - 1, "64 bits"),
        (np.complex128(1j), "not plain data"),
    ],
)
def test_encode_rejects_what_is_not_plain_data(value, message):
    with pytest.raises(SnapshotError, match=message):
        encode_state({"x": value})


def test_encode_rejects_reference_cycles_without_recursion_error():
    cyc: list = []
    cyc.append(cyc)
    with pytest.raises(SnapshotError, match="cycle"):
        encode_state({"x": cyc})


def test_encode_rejects_deep_nesting():
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(SnapshotError, match="max_depth"):
        encode_state(deep)


def test_decode_honours_custom_limits():
    data = encode_state({"a": np.zeros(100), "s": "x" * 50})
    with pytest.raises(SnapshotError, match="max_array_elements"):
        decode_state(data, limits=Limits(max_array_elements=99))
    with pytest.raises(SnapshotError, match="max_str_len"):
        decode_state(data, limits=Limits(max_str_len=49))
    with pytest.raises(SnapshotError, match="max_bytes"):
        decode_state(data, limits=Limits(max_bytes=len(data) - 1))
    assert decode_state(data, limits=Limits(max_array_elements=100, max_str_len=50))["s"]
