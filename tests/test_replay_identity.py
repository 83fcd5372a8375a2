"""Replayed logs: one identity for every spelling of a file, and bad lines dead-lettered.

Run through the real ``streamk`` entry point in a subprocess, with real snapshot and
dead-letter files. The oracles are counts known from how the files were written.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import datasets

from streamk import snapshot
from streamk.engine.deadletter import read_dead_letters
from streamk.engine.events import encode_event
from streamk.learners import KernelPerceptron
from streamk.snapshot import SnapshotStore
from streamk.sources.replay import (
    FINGERPRINT_BYTES,
    ReplaySource,
    _skip_one,
    decode_json_record,
)

ROOT = Path(__file__).resolve().parents[1]
BANANAS = [
    json.dumps({"x": x, "y": y}).encode() for x, y in itertools.islice(datasets.Bananas(), 700)
]


def streamk(*args: str, cwd: Path) -> dict:
    """Run the real ``streamk`` command; return its JSON summary (exit code must be 0)."""
    script = Path(sys.executable).with_name("streamk")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "streamk.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [*cmd, *args, "--json", "--quiet"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def test_every_spelling_of_one_log_resumes_alike(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "work").mkdir()
    log = tmp_path / "logs" / "events.jsonl"
    write_lines(log, BANANAS[:600])
    (tmp_path / "link.jsonl").symlink_to(log)
    snaps = str(tmp_path / "snaps")
    first = streamk(
        "replay", "../logs/events.jsonl", "--snapshot-dir", snaps, cwd=tmp_path / "work"
    )
    assert first["learned"] == 600
    again = streamk("replay", str(log), "--snapshot-dir", snaps, cwd=tmp_path / "work")
    link = streamk("replay", "link.jsonl", "--snapshot-dir", snaps, cwd=tmp_path)
    assert again["learned"] == link["learned"] == again["records"] == 0
    snap = SnapshotStore(snaps).latest("model")
    (name,) = snap.offsets
    assert name.startswith("replay:events.jsonl:") and snap.offsets[name] == {0: 600}
    assert name == ReplaySource(tmp_path / "link.jsonl").name == ReplaySource(log).name


def test_an_appended_log_resumes_and_a_replaced_one_is_learned_whole(tmp_path):
    log = tmp_path / "events.jsonl"
    write_lines(log, BANANAS[:300])
    assert streamk("replay", "events.jsonl", cwd=tmp_path)["learned"] == 300
    write_lines(log, BANANAS[:650])  # the same log, grown
    assert streamk("replay", "events.jsonl", cwd=tmp_path)["learned"] == 350
    write_lines(log, BANANAS[50:150])  # another log at the same path: not skipped
    third = streamk("replay", "events.jsonl", cwd=tmp_path)
    assert third["learned"] == 100 and third["positions"] == {"0": 100}


def test_a_snapshot_keyed_by_the_typed_path_still_resumes(tmp_path):
    log = tmp_path / "events.jsonl"
    write_lines(log, BANANAS[:500])
    model = KernelPerceptron(budget=100)
    store = SnapshotStore(tmp_path / "snapshots")
    # written by an older streamk that named the source by the path as typed
    store.save(snapshot.dumps(model, offsets={"events.jsonl": {0: 420}}, seq=3), "model")
    result = streamk("replay", str(log), cwd=tmp_path)  # another spelling: the file is the same
    assert result["records"] == 80 and result["positions"] == {"0": 500}
    assert SnapshotStore(tmp_path / "snapshots").latest("model").offsets == {
        ReplaySource(log).name: {0: 500}
    }


def test_the_name_covers_at_most_the_first_64_kib_and_answers_to_shorter_selves(tmp_path):
    log = tmp_path / "big.jsonl"
    write_lines(log, BANANAS[:100])
    short = ReplaySource(log).name
    write_lines(log, BANANAS * 2)  # well over 64 KiB
    assert log.stat().st_size > FINGERPRINT_BYTES
    source = ReplaySource(log)
    assert source.name.split(":")[2] == str(FINGERPRINT_BYTES)
    assert source.answers_to(short) and source.answers_to(source.name)
    assert not source.answers_to(short[:-1] + ("0" if short[-1] != "0" else "1"))
    for junk in ["replay:", "replay:x:0:0123456789abcdef", "replay:x:99999999999:ab", "nope"]:
        assert not source.answers_to(junk)


def test_follow_mode_waits_for_a_line_to_be_complete(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_bytes(BANANAS[0] + b"\n" + BANANAS[1][:10])
    source = ReplaySource(log, follow=True)
    assert [r.payload for r in source.poll(10, 0.0)] == [BANANAS[0]]
    with open(log, "ab") as fh:
        fh.write(BANANAS[1][10:] + b"\n")
    assert [(r.offset, r.payload) for r in source.poll(10, 0.0)] == [(1, BANANAS[1])]


# -- bad lines -------------------------------------------------------------------------------------
BAD = {
    "deeply nested array": b"[" * 100_000 + b"]" * 100_000,
    "deeply nested in x": b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b', "y": 1}',
    "nested past msgpack's limit": b'{"x": ' + b"[" * 600 + b"]" * 600 + b', "y": 1}',
    "huge integer label": b'{"x": [1.0, 2.0], "y": 123456789012345678901234567890}',
    "huge integer feature": b'{"x": [1.0, 18446744073709551616], "y": 1}',
    "integer of 5000 digits": b'{"x": [1.0], "y": ' + b"9" * 5000 + b"}",
    "float overflow": b'{"x": [1e999999, 2.0], "y": 1}',
    "invalid utf-8": b'{"x": [1.0, 2.0], "y": "\xff\xfe"}',
    "NaN literal": b'{"x": [NaN, 2.0], "y": 1}',
    "Infinity literal": b'{"x": [1.0, -Infinity], "y": 1}',
    "bare integer": b"5",
    "bare string": b'"hello"',
    "null": b"null",
    "true": b"true",
    "array": b"[1, 2, 3]",
    "truncated": b'{"x": [1.0, 2',
    "byte order mark": b'\xef\xbb\xbf{"x": [1.0, 2.0], "y": 1}',
    "NUL byte": b'{"x": [1.0, 2.0], "y": 1}\x00',
    "over the size limit": b'{"x": [' + b"1.0, " * 300_000 + b'1.0], "y": 1}',
    # its first 2**20 + 1 bytes (what the reader keeps) end in "]", so they look like JSON
    "over the size limit, ends in a bracket": b"["
    + b" " * 3566
    + b"[1.0, 2.0]," * 120_000
    + b"[]]",
}


def test_decode_json_record_raises_only_value_error():
    for name, line in BAD.items():
        try:
            decode_json_record(line)
        except ValueError:
            pass
        except Exception as exc:  # noqa: BLE001 - the point of the test
            pytest.fail(f"{name}: {type(exc).__name__} escaped: {exc}")


def test_a_hostile_replay_log_is_dead_lettered_line_by_line(tmp_path):
    good = BANANAS[: len(BAD) * 3]
    lines, bad_at = [], {}
    for i, line in enumerate(good):
        lines.append(line)
        if i % 3 == 1:
            name, bad = list(BAD.items())[i // 3]
            bad_at[len(lines)] = (name, bad)
            lines.append(bad)
    log = tmp_path / "hostile.jsonl"
    write_lines(log, lines)
    result = streamk("replay", "hostile.jsonl", "--dead-letter-dir", "dead", cwd=tmp_path)
    assert result["records"] == len(lines)
    assert result["learned"] == len(good)
    assert result["dead_lettered"] == len(BAD)
    letters = {d.offset: d for d in read_dead_letters(tmp_path / "dead" / "dead-letters.jsonl")}
    assert set(letters) == set(bad_at)
    for offset, (name, bad) in bad_at.items():
        letter = letters[offset]
        assert letter.reason, name
        if name.startswith("over the size limit"):
            assert letter.code == "oversize", (name, letter.reason)
            assert bad.startswith(letter.payload) and len(letter.payload) == (1 << 20) + 1
            assert name != "over the size limit, ends in a bracket" or letter.payload[-1:] == b"]"
        else:
            assert letter.payload == bad.strip(), name
        if name in ("NaN literal", "Infinity literal", "float overflow"):
            assert letter.code == "non_finite", (name, letter.reason)
    # every good line was learned, in order: the model equals one that learned them directly
    snap = SnapshotStore(tmp_path / "snapshots").latest("model")
    assert snap.offsets == {ReplaySource(log).name: {0: len(lines)}}
    assert snap.model.n_learned == len(good)
    oracle = snap.model.clone()  # same hyper-parameters, fresh state
    for line in good:
        event = json.loads(line)
        oracle.learn_one(event["x"], event["y"])
    probe = [json.loads(line)["x"] for line in BANANAS[600:700]]
    for x in probe:
        assert snap.model.predict_proba_one(x) == pytest.approx(oracle.predict_proba_one(x))


# -- msgpack logs ----------------------------------------------------------------------------------
plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.binary(max_size=300),
    lambda children: (
        st.lists(children, max_size=20)
        | st.dictionaries(st.text(max_size=5), children, max_size=20)
    ),
    max_leaves=60,
)


@settings(max_examples=300, deadline=None)
@given(obj=plain, ext=st.binary(max_size=300))
def test_skip_one_frames_msgpack_exactly_as_msgpack_does(obj, ext):
    for value in (obj, [obj, msgpack.ExtType(5, ext)]):
        data = msgpack.packb(value, use_bin_type=True)
        unpacker = msgpack.Unpacker(io.BytesIO(data + b"\x01"), strict_map_key=False)
        unpacker.skip()
        assert _skip_one(data + b"\x01", 0) == unpacker.tell() == len(data)
        assert _skip_one(data[:-1], 0) is None


def test_a_msgpack_record_nested_past_msgpacks_stack_is_framed_alone(tmp_path):
    good = [encode_event(x=[float(i % 5), 1.0], y=i % 2) for i in range(40)]
    deep = b"\x91" * 5000 + b"\xc0"  # well-formed, deeper than msgpack's stack
    log = tmp_path / "events.msgpack"
    log.write_bytes(b"".join(good[:10]) + deep + b"".join(good[10:]))
    result = streamk("replay", "events.msgpack", "--dead-letter-dir", "dead", cwd=tmp_path)
    assert result["learned"] == 40 and result["dead_lettered"] == 1
    (letter,) = read_dead_letters(tmp_path / "dead" / "dead-letters.jsonl")
    assert letter.offset == 10 and letter.payload == deep and letter.reason


def test_follow_mode_waits_for_a_msgpack_record_to_be_whole(tmp_path):
    records = [encode_event(x=[1.0, 2.0], y=1), encode_event(x=[3.0, 4.0], y=0)]
    log = tmp_path / "events.msgpack"
    log.write_bytes(records[0] + records[1][:5])
    source = ReplaySource(log, follow=True)
    assert [r.payload for r in source.poll(10, 0.0)] == [records[0]]
    with open(log, "ab") as fh:
        fh.write(records[1][5:])
    got = []  # a msgpack log is re-read at the poll after the one that reached its end
    for _ in range(3):
        got += [(r.offset, r.payload) for r in source.poll(10, 0.0)]
    assert got == [(1, records[1])]
