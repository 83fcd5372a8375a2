"""Malformed messages of named kinds, each with the dead-letter code the engine must give it.

Every payload is one record of the log in either format: in a msgpack log it frames as
exactly one msgpack value (so the records after it keep their offsets), in a JSON-lines
log it is one line without a newline. The ``code`` is ``InvalidEvent.code`` as
``streamk.engine.events.decode`` (or the engine's run splitter) sets it.

=============  =====================  ==========================================
kind           code                   payload
=============  =====================  ==========================================
undecodable    ``undecodable``        bytes that are not a valid event encoding
nan            ``non_finite``         a feature value is NaN
wrong_type     ``bad_x``              a feature value is a string
text_x         ``text_unsupported``   ``x`` is text (needs a string kernel)
unknown_key    ``unknown_key``        a ``label`` key instead of ``y``
oversize       ``oversize``           a payload above the 1 MiB message limit
missing_x      ``missing_x``          an event with ``y`` but no ``x``
bad_label      ``bad_label``          ``y`` is a list
not_text       ``bad_x``              ``x`` is a number where text belongs
long_text      ``too_long``           ``x`` is text above the 10,000-character limit
bad_utf8       ``bad_text``           ``x`` is msgpack bin that is not UTF-8 (msgpack
                                      logs; in JSON lines: a line that is not UTF-8,
                                      ``undecodable``)
=============  =====================  ==========================================

On a text stream (``x`` a string) the kinds that rewrite numeric features (``nan``,
``wrong_type``, ``text_x``) do not apply; the text kinds (:data:`TEXT_KINDS`) apply only
there.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import msgpack

from streamk.engine.events import DEFAULT_LIMITS

__all__ = ["KINDS", "CODES", "TEXT_KINDS", "NUMERIC_KINDS", "malformed", "code_of"]

Maker = Callable[[dict[str, float], Any, random.Random, str], bytes]


def _pack(event: dict[str, Any], fmt: str) -> bytes:
    if fmt == "jsonl":
        return json.dumps(event).encode()
    return msgpack.packb(event)


def _undecodable(x: dict[str, float], y: Any, rng: random.Random, fmt: str) -> bytes:
    if fmt == "jsonl":  # not JSON (does not start with '{'), and not msgpack either
        return b"\xc1\x00 garbage " + bytes(rng.randrange(0x80, 0x100) for _ in range(8))
    # one msgpack map whose key is not UTF-8: frames as one value, fails to decode
    return b"\x81\xa2\xff\xfe\xa1x"


def _nan(x: dict[str, float], y: Any, rng: random.Random, fmt: str) -> bytes:
    bad = dict(x)
    bad[rng.choice(sorted(bad))] = float("nan")
    return _pack({"x": bad, "y": y}, fmt)


def _wrong_type(x: dict[str, float], y: Any, rng: random.Random, fmt: str) -> bytes:
    bad: dict[str, Any] = dict(x)
    bad[rng.choice(sorted(bad))] = "12.5"
    return _pack({"x": bad, "y": y}, fmt)


def _text_x(x: dict[str, float], y: Any, rng: random.Random, fmt: str) -> bytes:
    return _pack({"x": "free text where numbers belong", "y": y}, fmt)


def _unknown_key(x: dict[str, float], y: Any, rng: random.Random, fmt: str) -> bytes:
    return _pack({"x": x, "label": y}, fmt)


def _oversize(x: dict[str, float], y: Any, rng: random.Random, fmt: str) -> bytes:
    return _pack({"x": x, "y": y, "id": "a" * (DEFAULT_LIMITS.max_payload_bytes + 1)}, fmt)


def _missing_x(x: dict[str, float], y: Any, rng: random.Random, fmt: str) -> bytes:
    return _pack({"y": y}, fmt)


def _bad_label(x: dict[str, float], y: Any, rng: random.Random, fmt: str) -> bytes:
    return _pack({"x": x, "y": [y]}, fmt)


def _not_text(x: Any, y: Any, rng: random.Random, fmt: str) -> bytes:
    return _pack({"x": rng.randrange(1000), "y": y}, fmt)


def _long_text(x: Any, y: Any, rng: random.Random, fmt: str) -> bytes:
    return _pack({"x": "acgt" * 2_501, "y": y}, fmt)


def _bad_utf8(x: Any, y: Any, rng: random.Random, fmt: str) -> bytes:
    if fmt == "jsonl":  # starts and ends like JSON, but is not UTF-8
        return b'{"x": "\xc3\x28acgt", "y": true}'
    return msgpack.packb({"x": b"\xc3\x28acgt", "y": y}, use_bin_type=True)


#: kind -> (dead-letter code, payload maker)
KINDS: dict[str, tuple[str, Maker]] = {
    "undecodable": ("undecodable", _undecodable),
    "nan": ("non_finite", _nan),
    "wrong_type": ("bad_x", _wrong_type),
    "text_x": ("text_unsupported", _text_x),
    "unknown_key": ("unknown_key", _unknown_key),
    "oversize": ("oversize", _oversize),
    "missing_x": ("missing_x", _missing_x),
    "bad_label": ("bad_label", _bad_label),
    "not_text": ("bad_x", _not_text),
    "long_text": ("too_long", _long_text),
    "bad_utf8": ("bad_text", _bad_utf8),
}
CODES: dict[str, str] = {kind: code for kind, (code, _) in KINDS.items()}
#: kinds that only make sense on a text stream, and kinds that need numeric features
TEXT_KINDS = frozenset({"not_text", "long_text", "bad_utf8"})
NUMERIC_KINDS = frozenset({"nan", "wrong_type", "text_x"})


def code_of(kind: str, fmt: str) -> str:
    """The dead-letter code a ``kind`` gets in a log of format ``fmt``."""
    if kind == "bad_utf8" and fmt == "jsonl":
        return "undecodable"
    return CODES[kind]


def malformed(kind: str, x: dict[str, float], y: Any, rng: random.Random, fmt: str) -> bytes:
    """The payload of one malformed message of ``kind``, built around a real event."""
    return KINDS[kind][1](x, y, rng, fmt)
