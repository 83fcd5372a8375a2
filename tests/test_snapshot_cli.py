"""snapshot ls|show|verify: output, JSON schema and exit codes."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from streamk.cli.snapshot import (
    SCHEMA_VERSION,
    add_arguments,
    cmd_ls,
    cmd_show,
    cmd_verify,
    kernel_spec,
    main,
    support_size,
)
from streamk.snapshot import SnapshotStore, register_class


class Tiny:
    """A learner with a support set in the layout streamk's learners use."""

    def __init__(self, n: int = 3):
        self.n = n

    def state(self) -> dict:
        return {
            "params": {"kernel": None, "budget": 50, "C": 1.5},
            "support": {"kernel": {"name": "RBF", "gamma": 0.5}, "X": np.zeros((self.n, 2))},
        }

    @classmethod
    def from_state(cls, state: dict) -> Tiny:
        return cls(state["support"]["X"].shape[0])


register_class("TinyCli", f"{__name__}:Tiny")


@pytest.fixture
def store_dir(tmp_path):
    store = SnapshotStore(tmp_path / "snaps")
    for n in range(3):
        store.save(Tiny(n + 1), "alpha", offsets={"events": {0: 10 * n}}, metrics={"acc": 0.5})
    store.save(Tiny(7), "beta", note="hello")
    return tmp_path / "snaps"


def test_ls_human_and_json(store_dir, capsys):
    assert cmd_ls(str(store_dir)) == 0
    out = capsys.readouterr().out
    assert "alpha" in out and "beta" in out and "000000000002.snapshot *" in out
    assert cmd_ls(str(store_dir / "alpha"), json_out=True) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == SCHEMA_VERSION
    assert [r["seq"] for r in doc["snapshots"]] == [0, 1, 2]
    assert [r["latest"] for r in doc["snapshots"]] == [False, False, True]


def test_ls_missing_path_is_a_usage_error(tmp_path, capsys):
    assert cmd_ls(str(tmp_path / "nope")) == 2
    assert "no such file" in capsys.readouterr().err


def test_show_human(store_dir, capsys):
    assert cmd_show(str(store_dir / "alpha")) == 0
    out = capsys.readouterr().out
    for text in (
        "TinyCli",
        "seq         2",
        "3 vectors",
        "events[0] = 20",
        "(verified)",
        "C = 1.5",
    ):
        assert text in out, text
    assert "RBF(gamma=0.5)" in out


def test_show_json(store_dir, capsys):
    path = store_dir / "beta" / "000000000000.snapshot"
    assert cmd_show(str(path), json_out=True) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == SCHEMA_VERSION and doc["checksum_ok"] is True
    assert doc["class"] == "TinyCli" and doc["support_size"] == 7
    assert doc["params"] == {"kernel": None, "budget": 50, "C": 1.5}
    assert doc["kernel"] == {"name": "RBF", "gamma": 0.5}
    assert doc["meta"] == {"note": "hello"} and len(doc["checksum"]) == 64


def test_show_corrupt_exits_1(store_dir, capsys):
    path = store_dir / "beta" / "000000000000.snapshot"
    path.write_bytes(path.read_bytes()[:-10])
    assert cmd_show(str(path)) == 1
    assert "CORRUPT" in capsys.readouterr().err
    assert cmd_show(str(path), json_out=True) == 1
    assert json.loads(capsys.readouterr().out)["checksum_ok"] is False


def test_verify_store_file_and_exit_codes(store_dir, capsys):
    assert cmd_verify(str(store_dir)) == 0
    assert "4 ok, 0 corrupt" in capsys.readouterr().out
    bad = store_dir / "alpha" / "000000000001.snapshot"
    data = bytearray(bad.read_bytes())
    data[-70] ^= 1
    bad.write_bytes(bytes(data))
    assert cmd_verify(str(store_dir)) == 1
    out = capsys.readouterr().out
    assert f"CORRUPT {bad}" in out and "3 ok, 1 corrupt" in out
    assert cmd_verify(str(store_dir / "beta" / "000000000000.snapshot")) == 0
    assert cmd_verify(str(store_dir / "nothing")) == 2


def test_verify_reports_a_dangling_latest(store_dir, capsys):
    (store_dir / "beta" / "LATEST").write_text("000000000009.snapshot\n")
    assert cmd_verify(str(store_dir / "beta"), json_out=True) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and "does not exist" in doc["results"][-1]["reason"]


def test_verify_empty_directory_is_a_usage_error(tmp_path):
    assert cmd_verify(str(tmp_path)) == 2


def test_argparse_wiring_and_help_examples(store_dir, capsys):
    parser = argparse.ArgumentParser(prog="streamk")
    add_arguments(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["snapshot", "verify", str(store_dir)])
    assert args.func(args) == 0
    for command in ("ls", "show", "verify"):
        with pytest.raises(SystemExit) as info:
            parser.parse_args(["snapshot", command, "--help"])
        assert info.value.code == 0
        assert "examples:" in capsys.readouterr().out
    assert main(["ls", str(store_dir), "--json"]) == 0
    assert main(["frobnicate"]) == 2


def test_state_helpers():
    assert support_size({"n_support": 4}) == 4
    assert support_size({"support": {"X": np.zeros((5, 1))}}) == 5
    assert support_size({"w": np.zeros(3)}) is None
    assert kernel_spec({"params": {"kernel": {"name": "Linear"}}}) == {"name": "Linear"}


@pytest.mark.timeout(60)  # opening the FIFO would block for ever
def test_verify_reports_a_fifo_without_opening_it(store_dir, capsys):
    import os

    fifo = store_dir / "alpha" / "000000000009.snapshot"
    os.mkfifo(fifo)
    assert cmd_verify(str(store_dir)) == 1
    out = capsys.readouterr().out
    assert f"CORRUPT {fifo}: not a regular file" in out
    assert "4 ok, 1 corrupt" in out
