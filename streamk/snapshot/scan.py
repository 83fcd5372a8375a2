"""Structural pre-scan of msgpack bytes: bound depth, counts and sizes before decoding."""

from __future__ import annotations

from struct import unpack_from

from .limits import CorruptSnapshot, Limits

__all__ = ["scan"]

# Leading byte -> (size of the length field, kind). Fixed-size scalars map to
# (payload size, "skip"); see https://github.com/msgpack/msgpack/blob/master/spec.md
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8}
_FIXED.update({0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8})
_LEN_FMT = {1: ">B", 2: ">H", 4: ">I"}
_BIN = {0xC4: 1, 0xC5: 2, 0xC6: 4}
_STR = {0xD9: 1, 0xDA: 2, 0xDB: 4}
_ARRAY = {0xDC: 2, 0xDD: 4}
_MAP = {0xDE: 2, 0xDF: 4}
_EXT = frozenset(range(0xC7, 0xCA)) | frozenset(range(0xD4, 0xD9))


def scan(buf: bytes | memoryview, limits: Limits, what: str = "body") -> int:
    """Check that `buf` holds exactly one well-formed msgpack object within `limits`.

    Walks the encoding iteratively (an explicit stack, never Python recursion)
    without building any object, so a hostile input cannot make the decoder that
    runs afterwards recurse deeply, allocate a huge container, or build millions
    of tiny objects. Extension types (including msgpack timestamps) are rejected.

    Returns
    -------
    int
        The number of objects found.

    Raises
    ------
    CorruptSnapshot
        On malformed, truncated, trailing or over-limit content.
    """
    n = len(buf)
    pos = 0
    objects = 0
    stack: list[int] = []  # items still expected by each open container
    remaining = 1  # items still expected at the current level
    while True:
        while remaining == 0:
            if not stack:
                if pos != n:
                    raise CorruptSnapshot(
                        f"{what}: {n - pos} trailing bytes after the msgpack object"
                    )
                return objects
            remaining = stack.pop()
        remaining -= 1
        if pos >= n:
            raise CorruptSnapshot(f"{what}: truncated msgpack data at byte {pos}")
        b = buf[pos]
        pos += 1
        objects += 1
        if objects > limits.max_objects:
            raise CorruptSnapshot(
                f"{what}: more than max_objects={limits.max_objects} msgpack objects; "
                "raise Limits.max_objects if this snapshot is trusted"
            )
        count = -1  # container entries (maps count keys and values) or -1
        length = -1  # str/bin payload or -1
        if b <= 0x7F or b >= 0xE0:
            continue
        if b <= 0x8F:
            count = 2 * (b & 0x0F)
        elif b <= 0x9F:
            count = b & 0x0F
        elif b <= 0xBF:
            length = b & 0x1F
        elif b in _FIXED:
            pos += _FIXED[b]
        elif b in _BIN or b in _STR:
            size = _BIN.get(b) or _STR[b]
            if pos + size > n:
                raise CorruptSnapshot(f"{what}: truncated length field at byte {pos}")
            (length,) = unpack_from(_LEN_FMT[size], buf, pos)
            pos += size
            if b in _STR and length > limits.max_str_len:
                raise CorruptSnapshot(
                    f"{what}: string of {length} bytes exceeds max_str_len={limits.max_str_len}"
                )
        elif b in _ARRAY or b in _MAP:
            size = _ARRAY.get(b) or _MAP[b]
            if pos + size > n:
                raise CorruptSnapshot(f"{what}: truncated length field at byte {pos}")
            (count,) = unpack_from(_LEN_FMT[size], buf, pos)
            pos += size
            if count > limits.max_container_len:
                raise CorruptSnapshot(
                    f"{what}: container of {count} entries exceeds "
                    f"max_container_len={limits.max_container_len}"
                )
            if b in _MAP:
                count *= 2
        elif b in _EXT:
            raise CorruptSnapshot(f"{what}: msgpack extension type 0x{b:02x} is not allowed")
        else:  # 0xC1 is never used
            raise CorruptSnapshot(f"{what}: invalid msgpack byte 0x{b:02x} at {pos - 1}")
        if length >= 0:
            pos += length
            if pos > n:
                raise CorruptSnapshot(f"{what}: truncated msgpack data (a string or bin)")
        elif count > 0:
            if count > n - pos:  # every entry takes at least one byte
                raise CorruptSnapshot(f"{what}: container claims {count} entries past the end")
            if len(stack) + 1 > limits.max_depth:
                raise CorruptSnapshot(f"{what}: nesting deeper than max_depth={limits.max_depth}")
            stack.append(remaining)
            remaining = count
        if pos > n:
            raise CorruptSnapshot(f"{what}: truncated msgpack data at the end")
