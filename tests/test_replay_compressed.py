"""Compressed event logs (``.gz``, ``.bz2``, ``.xz``) replayed as a stream (session 26).

``streamk replay events.jsonl.gz`` was refused ("not an event log ... its first byte does
not open a msgpack map"): a recorded stream kept compressed had to be decompressed to disk
first. Now the compression extension after the format's is read as a stream; the records,
their offsets and so the model are the plain log's. Oracle: the same events replayed from
the plain log, and the count of events written.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
import sys

import pytest

from streamk import KernelPerceptron
from streamk.cli.produce import iter_messages
from streamk.engine.events import encode_event
from streamk.errors import InvalidInput
from streamk.learners.scaling import StandardScaledClassifier
from streamk.sources.replay import ReplaySource

N = 1200
CODECS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


def _events() -> list[dict]:
    return [{"x": [i % 7 * 0.3, (i * 13) % 11 * 0.2], "y": (i % 7) > (i % 5)} for i in range(N)]


def _plain(tmp_path, fmt: str):
    path = tmp_path / f"plain.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(e) + "\n" for e in _events()))
    else:
        path.write_bytes(b"".join(encode_event(e["x"], y=e["y"]) for e in _events()))
    return path


#: summary keys that differ between two runs of the same data (timing, the machine, the file)
VARYING = {"events_per_second", "seconds", "machine", "dataset"}


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "streamk.cli", *args], capture_output=True, text=True, timeout=300
    )


def _replay(log, store, *args):
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "replay", str(log), "--snapshot-dir", str(store),
         "--quiet", "--json", "--snapshot-every", "300", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), done.stderr


SAME = ("records", "learned", "dead_lettered", "positions", "support", "rolling_metric")


@pytest.mark.parametrize(
    "fmt, ext", [("jsonl", ".gz"), ("jsonl", ".bz2"), ("jsonl", ".xz"), ("msgpack", ".gz")]
)  # (every codec, and the other framing once: the two are independent)
def test_a_compressed_log_replays_as_the_plain_one(tmp_path, fmt, ext):
    plain = _plain(tmp_path, fmt)
    packed = tmp_path / f"events.{fmt}{ext}"
    packed.write_bytes(CODECS[ext](plain.read_bytes()))
    want, _ = _replay(plain, tmp_path / "a")
    got, _ = _replay(packed, tmp_path / "b")
    assert got["records"] == N and got["learned"] == N
    assert {k: got[k] for k in SAME} == {k: want[k] for k in SAME}


def test_a_copy_cut_short_replays_to_the_cut_and_the_whole_copy_resumes_after_it(tmp_path):
    plain = _plain(tmp_path, "msgpack")
    whole = gzip.compress(plain.read_bytes())
    log = tmp_path / "events.msgpack.gz"
    log.write_bytes(whole[: len(whole) * 2 // 3])
    first, err = _replay(log, tmp_path / "s")
    assert "the compressed stream is cut short" in err
    assert 0 < first["learned"] < N and first["dead_lettered"] == 0  # its torn tail left
    log.write_bytes(whole)  # copied again, whole: the same name and head
    second, _ = _replay(log, tmp_path / "s")
    assert first["learned"] + second["learned"] == N  # every event once
    assert second["positions"] == {"0": N}


def test_a_log_not_compressed_as_named_is_refused(tmp_path):
    plain = _plain(tmp_path, "jsonl")
    fake = tmp_path / "events.jsonl.gz"
    fake.write_bytes(plain.read_bytes())
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "replay", str(fake), "--snapshot-dir",
         str(tmp_path / "s"), "--quiet"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2
    assert "cannot be decompressed as its extension says (.gz)" in done.stderr


def test_a_compressed_log_cannot_be_followed(tmp_path):
    log = tmp_path / "events.jsonl.xz"
    log.write_bytes(lzma.compress(_plain(tmp_path, "jsonl").read_bytes()))
    with pytest.raises(InvalidInput, match="cannot be followed"):
        ReplaySource(log, follow=True)


@pytest.mark.parametrize("fmt", ["jsonl", "msgpack"])
def test_produce_sends_a_compressed_logs_events_as_the_plain_ones(tmp_path, fmt):
    plain = _plain(tmp_path, fmt)
    packed = tmp_path / f"events.{fmt}.bz2"
    packed.write_bytes(bz2.compress(plain.read_bytes()))
    assert list(iter_messages(packed)) == list(iter_messages(plain))


def test_a_compressed_csv_reads_as_the_plain_one(tmp_path):
    rows = "".join(f"{i % 5},{i % 3 * 0.5},{'yes' if i % 4 else 'no'}\n" for i in range(300))
    plain = tmp_path / "data.csv"
    plain.write_text("a,b,label\n" + rows)
    packed = tmp_path / "data.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(iter_messages(packed)) == list(iter_messages(plain))
    learned = [
        json.loads(_cli("learn", str(path), "--json", "--quiet").stdout) for path in (plain, packed)
    ]
    assert learned[0]["n_events"] == 300
    assert {k: v for k, v in learned[0].items() if k not in VARYING} == {
        k: v for k, v in learned[1].items() if k not in VARYING
    }


def test_learn_reads_an_event_log_as_the_engine_does(tmp_path):
    events = _events()
    for fmt in ("jsonl", "msgpack"):
        log = _plain(tmp_path, fmt)
        out = json.loads(_cli("learn", str(log), "--json", "--quiet").stdout)
        assert (out["n_events"], out["learner"], out["scale"]) == (N, "perceptron", "standard")
        # the oracle: learn's learner and protocol in this process, on the events as written
        model = StandardScaledClassifier(KernelPerceptron())
        said = []  # river's prequential rule: a model that says nothing (None) is not scored
        for e in events:
            x = dict(enumerate(e["x"]))
            said.append((model.predict_one(x), e["y"]))
            model.learn_one(x, e["y"])
        scored = [p == y for p, y in said if p is not None]
        assert out["metric"] == pytest.approx(sum(scored) / len(scored), abs=1e-12)


def test_learn_refuses_a_log_with_a_record_the_engine_would_dead_letter(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text('{"x": [1, 2], "y": true}\n{"x": [1, "two"], "y": false}\n')
    done = _cli("learn", str(log), "--quiet")
    assert done.returncode == 2 and "record 1:" in done.stderr, done.stderr
