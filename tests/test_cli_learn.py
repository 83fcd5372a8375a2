"""`streamk learn`: prequential evaluation from the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from river import datasets, evaluate, metrics

from streamk import KernelPerceptron, RemoveOldest
from streamk.cli import main
from streamk.engine.registry import iter_csv
from streamk.errors import ConfigError
from streamk.kernels import RBF, Constant, Sum, kernel_from_string


def test_learn_json_matches_river_progressive_validation(capsys):
    assert main(["learn", "Phishing", "--budget", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = evaluate.progressive_val_score(
        datasets.Phishing(), KernelPerceptron(budget=RemoveOldest(100)), metrics.Accuracy()
    )
    assert out["n_events"] == 1250
    assert out["metric"] == pytest.approx(expected.get())
    assert out["n_support"] <= 100
    assert out["schema_version"] == 1


def test_learn_table_and_progress(capsys):
    assert main(["learn", "Phishing", "--limit", "300", "--every", "0"]) == 0
    captured = capsys.readouterr()
    assert "accuracy" in captured.out and "support vectors" in captured.out
    assert "events" in captured.err  # progress lines go to stderr


def test_learn_on_a_csv_file(tmp_path, capsys):
    path = tmp_path / "data.csv"
    rows = ["a,b,label"] + [
        f"{i % 7},{(i * 3) % 5},{'yes' if i % 7 > 3 else 'no'}" for i in range(200)
    ]
    path.write_text("\n".join(rows) + "\n")
    assert main(["learn", str(path), "--json", "--kernel", "rbf:1+bias"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_events"] == 200 and out["metric"] > 0.8
    first = next(iter_csv(str(path)))
    assert first == ({"a": 0.0, "b": 0.0}, "no")


def test_unknown_dataset_is_a_clear_error(capsys):
    assert main(["learn", "NoSuchData"]) == 2
    assert "unknown data set" in capsys.readouterr().err


def test_batch_mode_runs_and_reports(capsys):
    assert main(["learn", "Bananas", "--limit", "2000", "--batch-size", "250", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_events"] == 2000 and out["batch_size"] == 250 and out["metric"] > 0.6


@pytest.mark.parametrize(
    "text,expected",
    [("rbf", RBF()), ("rbf:0.5", RBF(0.5)), ("RBF:2+bias", Sum(RBF(2.0), Constant(1.0)))],
)
def test_kernel_strings(text, expected):
    assert kernel_from_string(text) == expected


@pytest.mark.parametrize("text", ["rbf:x", "poly:1:2:3:4", "sigmoid", "rbf+offset"])
def test_bad_kernel_strings(text):
    with pytest.raises(ConfigError):
        kernel_from_string(text)


def test_console_script_help_lists_commands():
    out = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "learn" in out and "snapshot" in out
    out = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "learn", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "examples:" in out
