"""``model_name = "auto"``: a name unique and stable per worker (issue 18).

The default stays ``"model"``: a name taken from the host changes with every new
container where the host name is not fixed, and a renamed model would be a new, empty
one (the old one's snapshots then count as another worker's coverage).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from streamk.engine.config import default_model_name, load_config
from streamk.snapshot import SnapshotStore

# The store's rule, written out here as the oracle (not imported from the store).
ROOT = str(Path(__file__).resolve().parents[1])
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def test_auto_is_the_pod_name_and_the_default_stays_model():
    config = load_config(environ={"HOSTNAME": "streamk-2", "STREAMK_MODEL_NAME": "auto"})
    assert config["model_name"] == "streamk-2"
    assert load_config(environ={"HOSTNAME": "streamk-2"})["model_name"] == "model"


def test_without_hostname_the_host_name_is_used():
    assert load_config(environ={"STREAMK_MODEL_NAME": "auto"})["model_name"] == default_model_name(
        {}
    )
    expected = socket.gethostname()
    if NAME_RULE.fullmatch(expected):
        assert default_model_name({}) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("worker 1", "worker-1"),
        ("_x/y:z", "x-y-z"),
        ("pod.ns.svc", "pod.ns.svc"),
        ("a" * 300, "a" * 128),
        ("émile", "mile"),
    ],
)
def test_a_host_name_is_made_a_valid_model_name(raw, expected):
    name = default_model_name({"HOSTNAME": raw})
    assert name == expected and NAME_RULE.fullmatch(name)


def test_an_unusable_host_name_falls_back_to_model(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "///")
    assert default_model_name({"HOSTNAME": "   "}) == "model"


def test_a_configured_name_wins_over_the_host():
    env = {"HOSTNAME": "pod-7", "STREAMK_MODEL_NAME": "fraud"}
    assert load_config(environ=env)["model_name"] == "fraud"
    assert (
        load_config(overrides={"model_name": "x"}, environ={"HOSTNAME": "p"})["model_name"] == "x"
    )


def test_two_workers_on_two_hosts_write_two_models(tmp_path):
    """The real entry point: replay with only HOSTNAME differing writes two model names."""
    log = tmp_path / "log.jsonl"
    log.write_text("".join(f'{{"x": [{i % 7}.0, 1.0], "y": {i % 2}}}\n' for i in range(40)))
    for pod in ("streamk-0", "streamk-1"):
        env = {"HOSTNAME": pod, "PATH": os.environ.get("PATH", ""), "PYTHONPATH": ROOT}
        env["STREAMK_MODEL_NAME"] = "auto"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "streamk.cli",
                "replay",
                str(log),
                "--snapshot-dir",
                str(tmp_path / "snaps"),
                "--quiet",
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    assert SnapshotStore(tmp_path / "snaps").names() == ["streamk-0", "streamk-1"]
