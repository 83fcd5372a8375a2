"""Plain-data codec: learner state <-> msgpack, with NumPy arrays as raw little-endian bytes."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from ..errors import SnapshotError
from .limits import DEFAULT_LIMITS, CorruptSnapshot, Limits
from .scan import scan

__all__ = [
    "encode_state",
    "decode_state",
    "to_plain",
    "from_plain",
    "unpack",
    "as_bytes",
    "ARRAY_DTYPES",
]

ARRAY_KEY = "__nd__"
#: The dtypes an array may have in a snapshot (``numpy.dtype.str``, little-endian).
ARRAY_DTYPES = frozenset(
    ["|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8"]
    + ["<c8", "<c16"]
)
_ARRAY_FIELDS = frozenset([ARRAY_KEY, "dtype", "shape", "data"])
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1


def to_plain(obj: Any, *, limits: Limits = DEFAULT_LIMITS, path: str = "state") -> Any:
    """Turn a learner's plain-data state into a msgpack-ready tree.

    NumPy arrays become ``{"__nd__": True, "dtype", "shape", "data"}`` maps with
    C-order little-endian bytes; NumPy scalars become Python scalars; tuples
    become lists. Anything else that is not plain data raises, naming the path.

    Raises
    ------
    SnapshotError
        On a value a snapshot cannot hold (object dtype, non-str key, a set, a
        callable, an int outside [-2**63, 2**64), a reference cycle, ...).
    """
    return _to_plain(obj, path, 0, limits.max_depth)


def _to_plain(obj: Any, path: str, depth: int, max_depth: int) -> Any:
    if obj is None or isinstance(obj, bool | str | bytes | float):
        return float(obj) if isinstance(obj, float) else obj
    if isinstance(obj, int):
        if not _INT_MIN <= obj <= _INT_MAX:
            raise SnapshotError(f"{path}: int {obj} does not fit in 64 bits; store it as a str")
        return int(obj)
    if isinstance(obj, np.ndarray):
        return _array_to_plain(obj, path)
    if isinstance(obj, np.generic):
        if isinstance(obj, np.bool_ | np.integer | np.floating):
            return _to_plain(obj.item(), path, depth, max_depth)
        raise SnapshotError(f"{path}: NumPy scalar of dtype {obj.dtype} is not plain data")
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    if depth >= max_depth:
        raise SnapshotError(
            f"{path}: nesting deeper than max_depth={max_depth} (a reference cycle?)"
        )
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise SnapshotError(
                    f"{path}: map key {key!r} is not a str; only str keys are plain"
                )
            if key == ARRAY_KEY:
                raise SnapshotError(f"{path}: the key {ARRAY_KEY!r} is reserved for arrays")
            out[key] = _to_plain(value, f"{path}.{key}", depth + 1, max_depth)
        return out
    if isinstance(obj, list | tuple):
        return [_to_plain(v, f"{path}[{i}]", depth + 1, max_depth) for i, v in enumerate(obj)]
    raise SnapshotError(
        f"{path}: a {type(obj).__name__} is not plain data; state() may hold only None, bool, "
        "int, float, str, bytes, lists, str-keyed dicts and numeric NumPy arrays"
    )


def _array_to_plain(arr: np.ndarray, path: str) -> dict[str, Any]:
    dt = arr.dtype
    if dt.fields is not None or dt.subdtype is not None or dt.kind not in "biufc":
        raise SnapshotError(f"{path}: arrays of dtype {dt} cannot go in a snapshot (numeric only)")
    le = dt.newbyteorder("<")
    if le.str not in ARRAY_DTYPES:
        raise SnapshotError(f"{path}: dtype {dt} is not one of {sorted(ARRAY_DTYPES)}")
    if le != dt:
        arr = arr.astype(le)
    return {
        ARRAY_KEY: True,
        "dtype": le.str,
        "shape": [int(s) for s in arr.shape],
        "data": arr.tobytes(order="C"),
    }


def from_plain(obj: Any, *, limits: Limits = DEFAULT_LIMITS, path: str = "state") -> Any:
    """Rebuild state from a decoded msgpack tree, validating every array map.

    Each ``__nd__`` map must have exactly the four fields, an allowed dtype, a
    shape of non-negative ints within ``limits``, and exactly
    ``prod(shape) * itemsize`` data bytes; this is checked before any
    allocation. Arrays come back as fresh, writable, native-order copies, and
    their bytes are released from the tree as they are converted. Map keys must
    be str.

    Raises
    ------
    CorruptSnapshot
        On any value that is not valid plain data.
    """
    try:
        return _from_plain(obj, path, limits)
    except RecursionError:  # only reachable with a user-raised max_depth
        raise CorruptSnapshot(f"{path}: nesting too deep to decode") from None


def _from_plain(obj: Any, path: str, limits: Limits) -> Any:
    if obj is None or isinstance(obj, bool | int | float | str | bytes):
        return obj
    if isinstance(obj, dict):
        if ARRAY_KEY in obj:
            return _array_from_plain(obj, path, limits)
        out = {}
        for key in obj:
            if not isinstance(key, str):
                raise CorruptSnapshot(f"{path}: map key {key!r} is not a str")
            out[key] = _from_plain(obj[key], f"{path}.{key}", limits)
        return out
    if isinstance(obj, list):
        return [_from_plain(v, f"{path}[{i}]", limits) for i, v in enumerate(obj)]
    raise CorruptSnapshot(f"{path}: unexpected {type(obj).__name__} in decoded data")


def _array_from_plain(obj: dict, path: str, limits: Limits) -> np.ndarray:
    if set(obj) != _ARRAY_FIELDS or obj[ARRAY_KEY] is not True:
        raise CorruptSnapshot(
            f"{path}: an array map needs exactly the keys {sorted(_ARRAY_FIELDS)}"
        )
    dtype, shape, data = obj["dtype"], obj["shape"], obj["data"]
    if not isinstance(dtype, str) or dtype not in ARRAY_DTYPES:
        raise CorruptSnapshot(f"{path}: array dtype {dtype!r} is not allowed")
    if not isinstance(shape, list) or len(shape) > limits.max_ndim:
        raise CorruptSnapshot(
            f"{path}: array shape must be a list of at most {limits.max_ndim} ints"
        )
    count = 1
    declared = 1  # product of the non-zero dims: what an empty array still declares
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise CorruptSnapshot(f"{path}: array shape {shape!r} has a negative or non-int dim")
        if dim > limits.max_dim:
            raise CorruptSnapshot(
                f"{path}: array dim {dim} exceeds max(max_support, max_features)="
                f"{limits.max_dim}; raise those Limits if this snapshot is trusted"
            )
        count *= dim
        declared *= max(dim, 1)
        if declared > limits.max_array_elements:
            raise CorruptSnapshot(
                f"{path}: array shape {shape!r} declares more than "
                f"max_array_elements={limits.max_array_elements} elements"
            )
    if count > limits.max_array_elements:
        raise CorruptSnapshot(
            f"{path}: array of {count} elements exceeds "
            f"max_array_elements={limits.max_array_elements}"
        )
    dt = np.dtype(dtype)
    if not isinstance(data, bytes) or len(data) != count * dt.itemsize:
        got = len(data) if isinstance(data, bytes) else type(data).__name__
        raise CorruptSnapshot(
            f"{path}: array {dtype}{tuple(shape)} needs {count * dt.itemsize} data bytes, got {got}"
        )
    del obj["data"]  # let the bytes go once copied: the tree is ours
    arr = np.frombuffer(data, dtype=dt).reshape(shape)
    return arr.astype(dt.newbyteorder("="), copy=True)


def unpack(buf: bytes | memoryview, limits: Limits, what: str = "body") -> Any:
    """Decode msgpack bytes safely: pre-scan (depth, counts, sizes), then unpack with limits."""
    if len(buf) > limits.max_bytes:
        raise CorruptSnapshot(f"{what}: {len(buf)} bytes exceeds max_bytes={limits.max_bytes}")
    scan(buf, limits, what)
    try:
        return msgpack.unpackb(
            buf,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=limits.max_str_len,
            max_bin_len=limits.max_bytes,
            max_array_len=limits.max_container_len,
            max_map_len=limits.max_container_len,
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises ValueError, TypeError, UnicodeDecodeError, ...
        raise CorruptSnapshot(f"{what}: msgpack decoding failed: {exc}") from None


def encode_state(state: Any, *, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Encode plain-data state (arrays included) to msgpack bytes, without a model.

    Raises
    ------
    SnapshotError
        If the state holds anything that is not plain data.
    """
    try:
        return msgpack.packb(to_plain(state, limits=limits), use_bin_type=True)
    except SnapshotError:
        raise
    except Exception as exc:  # e.g. a str with lone surrogates
        raise SnapshotError(f"state could not be encoded: {exc}") from None


def decode_state(data: bytes | bytearray | memoryview, *, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Decode bytes from :func:`encode_state` safely (see :class:`Limits`).

    Raises
    ------
    CorruptSnapshot
        (a :class:`streamk.errors.SnapshotError`) on anything malformed or over a limit.
    """
    return from_plain(unpack(as_bytes(data, "state"), limits, "state"), limits=limits)


def as_bytes(data: Any, what: str) -> bytes | memoryview:
    """Accept bytes, bytearray or a contiguous memoryview as a flat byte buffer."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        try:
            return memoryview(data).cast("B")
        except (TypeError, ValueError) as exc:
            raise CorruptSnapshot(f"{what}: unusable buffer: {exc}") from None
    raise CorruptSnapshot(f"{what}: expected bytes, got {type(data).__name__}")
