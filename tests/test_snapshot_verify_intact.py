"""``streamk snapshot verify`` tells a damaged snapshot from an intact one this streamk
cannot load (session 26).

After a roll-back to an older streamk, the snapshots the newer one wrote (a newer format
version) were listed as ``CORRUPT``, and a model with only such snapshots got the advice
"restore a copy, or start it fresh with: streamk snapshot reset": the reset of a model
the engine would load again after the upgrade, with its offsets. Now they are ``INTACT``
with the reason, the summary counts them apart, and the advice is to upgrade, never to
reset; damaged files keep the old verdict. Oracle: which files the test made newer and
which it damaged.
"""

from __future__ import annotations

import json
import subprocess
import sys

import msgpack
import numpy as np

from streamk import KernelPerceptron
from streamk.kernels import RBF
from streamk.snapshot import SnapshotStore


def _model(seed: int) -> KernelPerceptron:
    rng = np.random.default_rng(seed)
    model = KernelPerceptron(kernel=RBF(1.0), budget=20)
    for _ in range(60):
        a, b = rng.normal(size=2)
        model.learn_one({"a": a, "b": b}, a * b > 0)
    return model


def _as_newer_format(path) -> None:
    """The snapshot as a newer streamk would frame it: envelope version 2, same body."""
    envelope = msgpack.unpackb(path.read_bytes(), raw=False)
    envelope["version"] = 2
    path.write_bytes(msgpack.packb(envelope, use_bin_type=True))


def _damage(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "streamk.cli", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd,
    )  # fmt: skip


def _store(tmp_path):
    store = SnapshotStore(tmp_path / "store")
    paths = {}
    for name in ("old-and-newer", "only-newer", "only-damaged"):
        for seq in (1, 2):
            paths[name, seq] = store.save(_model(seq), name, {"t": {0: 60 * seq}}, seq)
    _as_newer_format(paths["old-and-newer", 2])
    for seq in (1, 2):
        _as_newer_format(paths["only-newer", seq])
        _damage(paths["only-damaged", seq])
    return store, paths


def test_newer_snapshots_are_intact_not_corrupt_and_never_advised_for_reset(tmp_path):
    store, paths = _store(tmp_path)
    done = _cli("snapshot", "verify", str(tmp_path / "store"))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()

    def label(name: str, seq: int) -> str:
        (line,) = [s for s in lines if s.split()[1].rstrip(":") == str(paths[name, seq])]
        return line.split()[0]

    assert label("old-and-newer", 1) == "OK" and label("old-and-newer", 2) == "INTACT"
    assert {label("only-newer", s) for s in (1, 2)} == {"INTACT"}
    assert {label("only-damaged", s) for s in (1, 2)} == {"CORRUPT"}
    assert "1 ok, 2 corrupt, 3 intact but not loadable by this streamk" in done.stdout
    advice = [s for s in lines if s.startswith("model ")]
    (newer,) = [s for s in advice if "'only-newer'" in s]
    assert "upgrade streamk" in newer and "do not reset" in newer and "reset --dir" not in newer
    (damaged,) = [s for s in advice if "'only-damaged'" in s]
    assert "streamk snapshot reset --dir" in damaged
    assert not any("'old-and-newer'" in s for s in advice)  # it has a snapshot to load

    as_json = json.loads(_cli("snapshot", "verify", str(tmp_path / "store"), "--json").stdout)
    by_path = {r["path"]: r for r in as_json["results"]}
    assert by_path[str(paths["only-newer", 1])]["intact"] is True
    assert by_path[str(paths["only-damaged", 1])]["intact"] is False
    assert by_path[str(paths["old-and-newer", 1])]["intact"] is True


def test_the_engine_and_reset_keep_the_newer_snapshots(tmp_path):
    _, paths = _store(tmp_path)
    log = tmp_path / "events.jsonl"
    log.write_text("".join(f'{{"x": [{i % 3}, {i % 4}], "y": {i % 2}}}\n' for i in range(20)))
    run = _cli("replay", str(log), "--snapshot-dir", str(tmp_path / "store"),
               "--model-name", "only-newer", "--quiet")  # fmt: skip
    assert run.returncode == 2 and "upgrade streamk" in run.stderr
    reset = _cli("snapshot", "reset", "--dir", str(tmp_path / "store"), "--model", "only-newer")
    assert reset.returncode != 0 and "--force" in reset.stderr
    assert paths["only-newer", 1].exists() and paths["only-newer", 2].exists()
