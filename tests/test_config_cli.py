"""Configuration precedence and validation, and `streamk replay` end to end on files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from river import datasets

from streamk.cli import main
from streamk.engine.config import DEFAULTS, load_config, render_table
from streamk.engine.deadletter import read_dead_letters
from streamk.errors import ConfigError
from streamk.snapshot import SnapshotStore
from streamk.sources.replay import ReplaySource, write_log


def test_precedence_defaults_file_env_flags(tmp_path):
    path = tmp_path / "streamk.toml"
    path.write_text('[source]\ntopic = "from-file"\ngroup = "g"\n[learner]\nbudget = 50\n')
    env = {"STREAMK_TOPIC": "from-env", "STREAMK_SNAPSHOT_SECONDS": "7"}
    config = load_config(path, {"budget": 70}, environ=env)
    assert config["topic"] == "from-env"  # env beats file
    assert config["group"] == "g"  # file beats default
    assert config["budget"] == 70  # flag beats file
    assert config["snapshot_seconds"] == 7.0  # env strings are converted
    assert config["kernel"] == DEFAULTS["kernel"].default


@pytest.mark.parametrize(
    "text,message",
    [
        ('tpoic = "x"', r"unknown keys \['tpoic'\] \('tpoic': did you mean 'topic'\?\)"),
        ("zzzzz = 1", r"unknown keys \['zzzzz'\]; known keys"),
        ('budget = "many"', "budget must be int"),
        ("budget = -1", ">= 0"),
        ("max_records = 0", "max_records"),
        ("x = [", "not valid TOML"),
        ("poll_timeout = 400.0", "max_poll_interval_ms"),
        ('predictions_layout = "blocks"', "predictions_layout must be record or block"),
        ('predictions_proba = "maybe"', "predictions_proba must be bool"),
    ],
)
def test_bad_config_files_name_the_key(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError, match=message):
        load_config(path, environ={})


@pytest.mark.parametrize("text,value", [("true", True), ("0", False), (" Off ", False)])
def test_a_boolean_key_reads_the_usual_spellings(text, value):
    config = load_config(environ={"STREAMK_PREDICTIONS_PROBA": text})
    assert config["predictions_proba"] is value


@pytest.mark.parametrize(
    "flag,value", [([], None), (["--predictions-proba"], True), (["--no-predictions-proba"], False)]
)
def test_a_boolean_key_is_a_flag_pair_on_the_command_line(flag, value):
    from streamk.cli.main import build_parser
    from streamk.cli.run import engine_overrides as _engine_overrides

    args = build_parser().parse_args(["run", *flag])
    assert _engine_overrides(args).get("predictions_proba") is value


def test_bad_environment_value_names_the_variable():
    with pytest.raises(ConfigError, match="STREAMK_MAX_RECORDS"):
        load_config(environ={"STREAMK_MAX_RECORDS": "lots"})


def test_every_key_is_documented_and_the_docs_are_current():
    table = render_table()
    for key in DEFAULTS:
        assert f"`{key}`" in table and f"STREAMK_{key.upper()}" in table
    docs = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
    assert table in docs.read_text(), "regenerate docs/configuration.md from render_table()"


def test_replay_command_learns_resumes_and_dead_letters(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    events = [{"x": x, "y": y} for x, y in datasets.Phishing().take(400)]
    events.insert(100, {"x": {"a": float("inf")}, "y": True})  # rejected: non-finite
    write_log("log.msgpack", events[:250])
    args = [
        "replay",
        "log.msgpack",
        "--model-name",
        "model",
        "--budget",
        "50",
        "--snapshot-every",
        "100",
        "--dead-letter-dir",
        "dead",
        "--json",
    ]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["records"] == 250 and first["dead_lettered"] == 1 and first["learned"] == 249
    # The log grows; a second replay resumes after the newest snapshot.
    write_log("log.msgpack", events)
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["records"] == len(events) - 250
    assert second["learned"] == len(events) - 250
    snap = SnapshotStore("snapshots").latest("model")
    assert snap.offsets == {ReplaySource("log.msgpack").name: {0: len(events)}}
    letters = list(read_dead_letters(tmp_path / "dead" / "dead-letters.jsonl"))
    assert [letter.offset for letter in letters] == [100]


def test_replay_of_a_missing_file_is_a_clear_error(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "nope.jsonl")]) == 2
    assert "no event log at" in capsys.readouterr().err


def test_replay_with_consolidation_snapshots_the_wrapped_model_and_resumes(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    write_log("bananas.msgpack", ({"x": x, "y": y} for x, y in datasets.Bananas().take(1500)))
    args = [
        "replay",
        "bananas.msgpack",
        "--model-name",
        "model",
        "--budget",
        "100",
        "--consolidate-every",
        "400",
        "--consolidate-window",
        "300",
        "--snapshot-every",
        "500",
        "--json",
        "--max-events",
        "1000",
    ]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["records"] == 1000
    snap = SnapshotStore("snapshots").latest("model")
    assert snap.class_name == "ConsolidatedClassifier" and snap.model.model.n_support <= 100
    assert snap.metrics["consolidations"] >= 2
    assert snap.model.consolidator_.n_seen == 1000  # the window and counters came along
    assert main(args[:-2]) == 0  # resumes with the restored wrapper
    second = json.loads(capsys.readouterr().out)
    assert second["records"] == 500


@pytest.mark.parametrize(
    "env,message",
    [
        ({"STREAMK_BUDGET": "99999999999999999999999"}, "budget must be >= 0 and <= 1048576"),
        ({"STREAMK_POLL_TIMEOUT": "nan"}, "STREAMK_POLL_TIMEOUT: poll_timeout must be float"),
        ({"STREAMK_SNAPSHOT_SECONDS": "inf"}, "snapshot_seconds must be float"),
        ({"STREAMK_METRICS_PORT": "70000"}, "metrics_port must be >= 0 and <= 65535"),
        ({"STREAMK_SECURITY_PROTOCOL": "CARRIER_PIGEON"}, "PLAINTEXT, SSL, SASL_PLAINTEXT or"),
        ({"STREAMK_STOP_WHEN_IDLE": "-1"}, "stop_when_idle must be >= 0"),
        ({"STREAMK_SESSION_TIMEOUT_MS": "-5"}, "session_timeout_ms must be >= 1"),
        ({"STREAMK_ON_OFFSET_BEYOND_END": "skip"}, "on_offset_beyond_end must be fail or"),
        ({"STREAMK_MAX_RECORDS": "0"}, "max_records must be >= 1"),
        # above the window a snapshot may hold: the first checkpoint failed, exit 2
        (
            {"STREAMK_CONSOLIDATE_WINDOW": "2000000"},
            "consolidate_window must be >= 1 and <= 1048576",
        ),
    ],
)
def test_every_key_is_range_checked_and_the_error_names_it(env, message):
    """Issue 19: these were tracebacks (overflow, nan) or silently accepted."""
    with pytest.raises(ConfigError, match=message):
        load_config(environ=env)


def test_nan_in_a_toml_file_is_refused(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("snapshot_seconds = nan\n")
    with pytest.raises(ConfigError, match="snapshot_seconds"):
        load_config(path, environ={})


def test_snapshot_dir_that_is_a_file_names_the_key(tmp_path):
    afile = tmp_path / "f"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="snapshot_dir .* is a file"):
        load_config(overrides={"snapshot_dir": str(afile)}, environ={})


def test_cli_reports_bad_settings_in_one_line_without_traceback(tmp_path):
    import os
    import subprocess
    import sys

    for env in (
        {"STREAMK_BUDGET": "99999999999999999999999"},
        {"STREAMK_METRICS_PORT": "70000"},
        {"STREAMK_POLL_TIMEOUT": "nan"},
    ):
        out = subprocess.run(
            [sys.executable, "-m", "streamk.cli", "replay", str(tmp_path / "none.jsonl")],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=120,
        )
        assert out.returncode == 2, out.stderr
        assert "Traceback" not in out.stderr
        assert out.stderr.startswith("streamk: error:"), out.stderr


def test_metrics_port_in_use_names_the_key(tmp_path):
    import socket

    from streamk.engine.runner import build_engine
    from streamk.sources.iterable import IterableSource

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = load_config(
            overrides={"metrics_port": port, "snapshot_dir": str(tmp_path)}, environ={}
        )
        with pytest.raises(ConfigError, match=f"metrics_port {port}"):
            build_engine(config, source=IterableSource([]))
