"""Messages for a mistyped setting: say what was typed, what is accepted, and once.

A kernel or budget policy typo is one ``streamk: error:`` line naming the valid forms (not
an internal dict, not the same words twice); a misspelt ``STREAMK_*`` variable is a warning
naming the closest real one (it used to be ignored in silence); the kernel forms the parser
accepts are the ones docs/configuration.md lists; every ``--json`` has a schema_version.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamk_run import streamk

from streamk.kernels import kernel_from_string
from streamk.sources.replay import write_log

ROOT = Path(__file__).resolve().parents[1]


def _error_line(run) -> str:
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("streamk: error: "), run.stderr
    return lines[-1]


def _log(tmp_path: Path) -> str:
    log = tmp_path / "events.jsonl"
    X = np.random.default_rng(5).normal(size=(100, 2))
    write_log(log, [{"x": {"a": float(a), "b": float(b)}, "y": bool(a > 0)} for a, b in X])
    return str(log)


@pytest.mark.parametrize("kernel", ["rbff", "rbf:x", "poly:1:2:3:4"])
def test_a_kernel_typo_is_said_once_with_every_accepted_form(kernel):
    line = _error_line(streamk("learn", "Bananas", "--limit", "10", "--kernel", kernel))
    assert line.count("cannot parse kernel") == 1, line
    assert f"cannot parse kernel {kernel!r}" in line
    for form in ("rbf[:gamma]", "laplacian[:gamma]", "linear", "cosine", "poly[:degree", "+bias"):
        assert form in line, (form, line)


def test_the_kernel_row_of_the_configuration_lists_what_the_parser_accepts():
    rows = (ROOT / "docs" / "configuration.md").read_text().splitlines()
    (row,) = [r for r in rows if r.startswith("| `kernel` |")]
    for form, example in [
        ("rbf[:gamma]", "rbf:0.5"),
        ("laplacian[:gamma]", "laplacian:2"),
        ("linear", "linear"),
        ("cosine", "cosine"),
        ("poly[:degree[:scale[:offset]]]", "poly:2:0.5:1"),
        ("+bias", "rbf+bias"),
        ("spectrum:p", "norm-spectrum:3"),
        ("subtree", "subtree"),
    ]:
        kernel_from_string(example)  # the parser accepts it ...
        assert form in row, form  # ... and the table says so


@pytest.mark.parametrize("command", ["learn", "replay"])
def test_a_policy_typo_names_the_valid_policies(tmp_path, command):
    source = "Bananas" if command == "learn" else _log(tmp_path)
    args = [command, source, "--budget", "50", "--policy", "RemoveOlderst"]
    if command == "replay":
        args += ["--snapshot-dir", str(tmp_path / "s"), "--quiet"]
    line = _error_line(streamk(*args))
    assert "unknown budget policy 'RemoveOlderst'" in line and "'RemoveOldest'?" in line
    assert "RemoveSmallest" in line and "Projectron" in line
    assert "{" not in line  # no internal spec dict


def test_a_misspelt_streamk_variable_is_warned_about_once(tmp_path):
    run = streamk(
        "replay", _log(tmp_path), "--snapshot-dir", str(tmp_path / "s"), "--quiet",
        env={"STREAMK_BUDJET": "3", "STREAMK_NO_ACCEL": "0"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if "STREAMK_BUDJET" in line]
    assert len(warnings) == 1 and "STREAMK_BUDGET" in warnings[0], run.stderr
    assert "WARNING" in warnings[0]
    assert "STREAMK_NO_ACCEL" not in run.stderr  # a real variable, not a setting


def test_produce_json_has_the_schema_version_of_the_other_commands(
    kafka_broker, topic_name, tmp_path
):
    path = tmp_path / "d.csv"
    path.write_text("a,b,y\n1,2,true\n3,4,false\n")
    run = streamk(
        "produce", str(path), "--topic", topic_name, "--json",
        "--bootstrap-servers", kafka_broker.bootstrap_servers,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    learned = json.loads(streamk("learn", str(path), "--json").stdout)
    assert out["schema_version"] == learned["schema_version"] == 1
    assert out["messages"] == 2 and out["topic"] == topic_name


def test_learn_with_a_policy_but_no_budget_says_what_is_missing():
    """``--policy`` without ``--budget`` ran unbounded and exit 0, the policy silently
    ignored (so ``--policy Merge --kernel linear`` reported success too)."""
    done = streamk("learn", "Phishing", "--policy", "Merge", "--kernel", "linear")
    assert done.returncode == 2, done.stderr
    assert "--policy Merge keeps a budget of support vectors" in done.stderr
    assert "--budget N" in done.stderr and "Traceback" not in done.stderr
    bounded = streamk("learn", "Phishing", "--policy", "Forgetron", "--budget", "40", "--json")
    assert bounded.returncode == 0, bounded.stderr
    assert json.loads(bounded.stdout)["n_support"] <= 40
