"""``model_name`` defaults to a name unique and stable per worker (issue 18)."""

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


def test_the_pod_name_is_the_default_model_name():
    config = load_config(environ={"HOSTNAME": "streamk-2"})
    assert config["model_name"] == "streamk-2"


def test_without_hostname_the_host_name_is_used():
    assert load_config(environ={})["model_name"] == default_model_name({})
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


def test_a_store_holding_the_old_default_model_keeps_it(tmp_path, caplog):
    """Before model_name defaulted per worker it was "model": an upgraded engine with no
    model_name set must continue that model, not start a new one beside it (its commits
    and snapshots would then make the new model skip what the old one learned)."""
    import logging

    from streamk.engine.config import load_config

    (tmp_path / "model").mkdir()
    with caplog.at_level(logging.WARNING, logger="streamk"):
        config = load_config(overrides={"snapshot_dir": str(tmp_path)}, environ={})
    assert config["model_name"] == "model"
    assert "continuing it" in caplog.text
    fresh = load_config(
        overrides={"snapshot_dir": str(tmp_path / "empty")}, environ={"HOSTNAME": "pod-3"}
    )
    assert fresh["model_name"] == "pod-3"
