"""The command line as a user meets it (issue 19): one number format in the summaries,
plain JSON, examples in every command's ``--help``, and a one-line summary per command.

Each test runs the real ``streamk`` entry point in a subprocess.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest
from streamk_run import streamk

from streamk.sources.replay import write_log

COUNT = re.compile(r"^\d{1,3}(,\d{3})*$")  # 3,000 and 429, never 3000
RATE = re.compile(r"^\d{1,3}(,\d{3})*\.\d$")  # 10,146.7
METRIC = re.compile(r"^\d\.\d{4}$")  # 0.9490


def _log(path, n=3000, seed=3, labelled=True):
    rng = random.Random(seed)
    events = []
    for i in range(n):
        x = {"a": rng.uniform(-1, 1), "b": rng.uniform(-1, 1)}
        event = {"x": x, "id": i}
        if labelled and i % 7:  # every 7th unlabelled: scored, not learned
            event["y"] = x["a"] * x["b"] > 0
        events.append(event)
    write_log(path, events)
    return events


def _rows(stdout: str) -> dict[str, str]:
    rows = {}
    for line in stdout.splitlines():
        if line.strip():
            key, _, value = line.partition("  ")
            rows[key.strip()] = value.strip()
    return rows


def _assert_one_format(rows: dict[str, str]) -> None:
    for key, value in rows.items():
        assert "None" not in value and "{" not in value and "'" not in value, (key, value)
        assert "nan" not in value.lower(), (key, value)


def test_replay_summary_has_one_number_format(tmp_path):
    events = _log(tmp_path / "events.jsonl")
    out = streamk(
        "replay", str(tmp_path / "events.jsonl"), "--snapshot-dir", str(tmp_path / "s"), "--quiet"
    )
    assert out.returncode == 0, out.stderr
    rows = _rows(out.stdout)
    _assert_one_format(rows)
    labelled = sum("y" in e for e in events)
    # the counts, computed from the log itself, written with thousands separators
    assert rows["records"] == f"{len(events):,}" == "3,000"
    assert rows["learned"] == f"{labelled:,}"
    assert rows["scored"] == f"{len(events) - labelled:,}"
    for key in ("records", "learned", "scored", "dead_lettered", "support", "snapshots"):
        assert COUNT.match(rows[key]), (key, rows[key])
    assert RATE.match(rows["events_per_second"]), rows["events_per_second"]
    assert METRIC.match(rows["rolling_metric"]), rows["rolling_metric"]
    assert re.match(r"^\d+\.\d{2}$", rows["seconds"]), rows["seconds"]
    assert rows["positions"] == "0:3000"  # an offset, not a Python dict


def test_replay_summary_shows_a_dash_for_what_is_missing(tmp_path):
    # a second replay of the same log resumes after its snapshot: nothing to process, so
    # there is no rate; it used to print "None"
    _log(tmp_path / "events.jsonl", n=200)
    args = ("replay", str(tmp_path / "events.jsonl"), "--snapshot-dir", str(tmp_path / "s"))
    assert streamk(*args, "--quiet").returncode == 0
    out = streamk(*args, "--quiet")
    assert out.returncode == 0, out.stderr
    rows = _rows(out.stdout)
    _assert_one_format(rows)
    assert rows["records"] == "0"
    assert rows["events_per_second"] == "-"
    assert rows["positions"] == "0:200"


def _strict_json(text: str):
    def no_constant(name):
        raise AssertionError(f"non-JSON constant {name} in the summary")

    return json.loads(text, parse_constant=no_constant)


def test_replay_json_keeps_its_content_in_plain_types(tmp_path):
    events = _log(tmp_path / "events.jsonl", n=500)
    out = streamk(
        "replay",
        str(tmp_path / "events.jsonl"),
        "--snapshot-dir",
        str(tmp_path / "s"),
        "--json",
    )
    assert out.returncode == 0, out.stderr
    doc = _strict_json(out.stdout)
    assert set(doc) >= {
        "schema_version", "records", "learned", "scored", "dead_lettered", "snapshots",
        "seq", "seconds", "events_per_second", "positions", "support", "rolling_metric",
        "snapshot_dir", "machine",
    }  # fmt: skip
    assert doc["records"] == len(events) and isinstance(doc["records"], int)
    assert doc["positions"] == {"0": 500}  # an int offset, not the string "500"
    assert isinstance(doc["seconds"], float) and isinstance(doc["rolling_metric"], float)
    assert isinstance(doc["machine"]["cpus"], int)
    assert doc["snapshot_dir"] == str(tmp_path / "s")


@pytest.mark.kafka
@pytest.mark.slow
def test_demo_summary_has_one_number_format(tmp_path):
    out = streamk("demo", "--dir", str(tmp_path), "--n", "500", "--quiet")
    assert out.returncode == 0, out.stderr
    rows = _rows(out.stdout.split("look inside")[0].strip().split("\n\n")[-1])
    _assert_one_format(rows)
    assert COUNT.match(rows["produced"]) and COUNT.match(rows["records"])
    assert int(rows["produced"].replace(",", "")) > 5000  # Bananas (5,300) + 500 + malformed
    assert "," in rows["produced"]
    assert RATE.match(rows["events_per_second"]), rows["events_per_second"]
    assert METRIC.match(rows["rolling_accuracy"]), rows["rolling_accuracy"]


def _commands() -> list[str]:
    from streamk.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return list(sub.choices)


def _with_subcommands() -> list[tuple[str, ...]]:
    """Every command, and for a command with its own commands (snapshot) each of those."""
    import argparse

    from streamk.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    out: list[tuple[str, ...]] = []
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        out += [(name, child) for child in nested[0].choices] if nested else [(name,)]
    return out


@pytest.mark.parametrize("command", _with_subcommands(), ids=" ".join)
def test_every_command_help_has_an_example(command):
    out = streamk(*command, "--help")
    assert out.returncode == 0, out.stderr
    name = " ".join(command)
    assert "examples:" in out.stdout, f"`streamk {name} --help` shows no example"
    example = out.stdout.split("examples:", 1)[1]
    assert re.search(rf"^\s+streamk {name}\b", example, re.M), example


def test_top_level_help_lists_every_command_on_one_line():
    # at 100 columns: argparse wraps the summaries to the terminal, and a one-line summary
    # must fit a usual terminal beside the 24-column command column
    out = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, "COLUMNS": "100"},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for command in _commands():
        row = [ln for ln in lines if re.match(rf"^\s+{command}\s{{2,}}\S", ln)]
        assert row, f"`streamk --help` has no one-line summary for {command}"
        i = lines.index(row[0])
        following = lines[i + 1] if i + 1 < len(lines) else ""
        # a wrapped summary continues on an indented line that names no command
        assert not re.match(r"^\s{20,}\S", following), f"{command}'s summary wraps: {following}"
