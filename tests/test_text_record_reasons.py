"""A text record that is no event map is dead-lettered with a JSON reason (session 25).

A ``.jsonl`` line (or a Kafka payload) that is not sniffed as JSON — it does not both start
with ``{``/``[`` and end with ``}``/``]``: ``{not json``, ``null``, ``"a string"``, ``42.5e`` —
was decoded as msgpack, and its dead letter said "payload is not a single valid msgpack
value: unpack(b) received extra data", which points an operator reading a JSON log the
wrong way. Oracle: Python's ``json`` module's own verdict on each line.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest

from streamk.engine.events import encode_event
from streamk.engine.runs import decode_record
from streamk.engine.schema import Limits
from streamk.errors import InvalidEvent
from streamk.sources.base import Record

LINES = [b"{not json", b"null", b'"just a string"', b"42.5e", b"true", b"[1, 2", b"{}x"]


def _expected(line: bytes) -> str:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"neither msgpack nor JSON: {exc.msg}"
    kind = {bool: "boolean", str: "string", type(None): "null"}[type(value)]
    return f"a JSON {kind}, not an event map"


def test_the_replayed_log_names_the_json_fault(tmp_path):
    good = [json.dumps({"x": {"a": float(i)}, "y": i % 2}).encode() for i in range(6)]
    with open(tmp_path / "log.jsonl", "wb") as f:
        for i, line in enumerate(LINES):
            f.write(good[i % 6] + b"\n" + line + b"\n")
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "replay", "log.jsonl", "--snapshot-dir", "s",
         "--dead-letter-dir", "dead", "--quiet", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert (out["learned"], out["dead_lettered"]) == (len(LINES), len(LINES))
    letters = [json.loads(s) for s in (tmp_path / "dead" / "dead-letters.jsonl").open()]
    assert [base64.b64decode(d["payload_b64"]) for d in letters] == LINES
    for d, line in zip(letters, LINES, strict=True):
        assert d["code"] == "undecodable"
        assert d["reason"].startswith(_expected(line)), (line, d["reason"])
        assert "msgpack value" not in d["reason"]


@pytest.mark.parametrize("payload", [b"\xc1", b"\x92\x01", b"\x81\xa1x"])
def test_a_broken_msgpack_payload_keeps_its_msgpack_reason(payload):
    record = Record(partition=0, offset=0, payload=payload)
    with pytest.raises(InvalidEvent) as caught:
        decode_record(record, Limits(), None)
    assert "msgpack" in caught.value.reason and "JSON" not in caught.value.reason


def test_a_valid_msgpack_event_is_still_decoded():
    record = Record(partition=0, offset=0, payload=encode_event({"a": 1.0}, y=True))
    assert decode_record(record, Limits(), None).y is True
