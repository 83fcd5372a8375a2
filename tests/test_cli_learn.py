"""`streamk learn`: prequential evaluation from the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from river import datasets, evaluate, metrics, preprocessing
from river.datasets import synth
from streamk_run import streamk

from streamk import KernelPerceptron, OnlineSVR, RemoveOldest
from streamk.cli import main
from streamk.engine.registry import iter_csv
from streamk.errors import ConfigError
from streamk.kernels import RBF, Constant, Sum, kernel_from_string


def test_learn_json_matches_river_progressive_validation(capsys):
    assert main(["learn", "Phishing", "--budget", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = preprocessing.StandardScaler() | KernelPerceptron(budget=RemoveOldest(100))
    expected = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
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


def test_a_missing_file_is_named_as_a_missing_file(tmp_path, capsys):
    missing = str(tmp_path / "events.csv")
    assert main(["learn", missing]) == 2
    assert f"no such file: {missing!r}" in capsys.readouterr().err


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


# -- the task from the data set, scaling, the learner choices (issue 19) ----------------------


def _running_mean_mae(stream) -> float:
    """Predict the mean of the targets seen so far (0 before any), computed plainly."""
    total, n, errors = 0.0, 0, []
    for _, y in stream:
        errors.append(abs(y - (total / n if n else 0.0)))
        total += y
        n += 1
    return sum(errors) / len(errors)


def _river_scores(model, stream):
    mae, r2 = metrics.MAE(), metrics.R2()
    for x, y in stream:
        p = model.predict_one(x)
        mae.update(y, p)
        r2.update(y, p)
        model.learn_one(x, y)
    return mae.get(), r2.get()


@pytest.mark.parametrize(
    "name, args, stream",
    [
        ("TrumpApproval", [], lambda: datasets.TrumpApproval()),
        ("Friedman", ["--n", "1500"], lambda: synth.Friedman(seed=42).take(1500)),
    ],
)
def test_learn_picks_regression_from_the_data_set_and_reports_mae_and_r2(name, args, stream):
    run = streamk("learn", name, *args, "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["task"] == "regression" and out["learner"] == "svr" and out["scale"] == "standard"
    assert out["metric_name"] == "MAE"
    mae, r2 = _river_scores(preprocessing.StandardScaler() | OnlineSVR(), stream())
    assert out["metric"] == pytest.approx(mae, rel=1e-9)
    assert out["extra"]["R2"] == pytest.approx(r2, rel=1e-9)
    assert out["metric"] < 0.5 * _running_mean_mae(stream())
    assert out["extra"]["R2"] > 0.25
    table = streamk("learn", name, *args, "--quiet").stdout
    assert "(regression)" in table and "mae " in table and "r2 " in table
    assert "accuracy" not in table


def test_learn_scales_features_by_default_and_not_with_scale_none():
    stream = lambda: synth.Agrawal(seed=42).take(2000)  # noqa: E731
    scaled = json.loads(streamk("learn", "Agrawal", "--n", "2000", "--json").stdout)
    raw = json.loads(streamk("learn", "Agrawal", "--n", "2000", "--scale", "none", "--json").stdout)
    want_scaled = evaluate.progressive_val_score(
        stream(), preprocessing.StandardScaler() | KernelPerceptron(), metrics.Accuracy()
    ).get()
    want_raw = evaluate.progressive_val_score(
        stream(), KernelPerceptron(), metrics.Accuracy()
    ).get()
    assert (scaled["task"], scaled["scale"], raw["scale"]) == ("classification", "standard", "none")
    assert scaled["metric"] == pytest.approx(want_scaled)
    assert raw["metric"] == pytest.approx(want_raw)
    assert scaled["metric"] > raw["metric"] + 0.1  # Agrawal's salary swamps an unscaled RBF


def test_learn_reads_the_task_from_a_csv_target(tmp_path):
    path = tmp_path / "reg.csv"
    lines = ["a,b,price"] + [
        f"{i % 13},{(i * 7) % 11},{2.5 * (i % 13) + 0.1 * i:.3f}" for i in range(300)
    ]
    path.write_text("\n".join(lines) + "\n")
    out = json.loads(streamk("learn", str(path), "--json").stdout)
    assert out["task"] == "regression" and out["metric_name"] == "MAE"
    ys = [y for _, y in iter_csv(str(path))]
    assert out["metric"] < _running_mean_mae([(None, y) for y in ys])
    path = tmp_path / "clf.csv"
    lines = ["a,b,kind"] + [f"{i % 7},{(i * 3) % 5},{i % 7 // 3}" for i in range(300)]
    path.write_text("\n".join(lines) + "\n")
    out = json.loads(streamk("learn", str(path), "--json").stdout)
    assert out["task"] == "classification" and out["metric_name"] == "Accuracy"


def test_learn_refuses_a_classifier_on_a_regression_data_set():
    run = streamk("learn", "TrumpApproval", "--learner", "perceptron")
    assert run.returncode == 2
    assert "regression" in run.stderr and "svr" in run.stderr
    assert "Traceback" not in run.stderr


def test_learn_help_lists_the_learners_and_the_scale_option():
    out = streamk("learn", "--help").stdout
    for name in ("perceptron", "margin-perceptron", "adatron", "svr", "ranker"):
        assert name in out
    assert "--scale {standard,none}" in out
    run = streamk("learn", "Bananas", "--learner", "nosuch")
    assert run.returncode == 2 and "invalid choice" in run.stderr


def test_learn_in_blocks_with_scaling_gives_the_per_event_figures():
    # Friedman's features are keyed by integers, which river's StandardScaler.transform_many
    # cannot turn into a frame; blocks must also score each event before learning it
    one = json.loads(streamk("learn", "Friedman", "--n", "600", "--json").stdout)
    run = streamk("learn", "Friedman", "--n", "600", "--batch-size", "128", "--json")
    assert run.returncode == 0, run.stderr
    blocks = json.loads(run.stdout)
    assert blocks["metric"] == pytest.approx(one["metric"], rel=1e-9)
    assert blocks["extra"]["R2"] == pytest.approx(one["extra"]["R2"], rel=1e-9)
    assert blocks["n_support"] == one["n_support"]


def test_learn_skips_and_counts_the_rows_the_model_refuses(tmp_path):
    """A CSV row the model refuses (a value too large for the kernels; one so large it
    reads as infinity) used to end the evaluation with an error and no figures. It is
    skipped and counted; one event at a time the figures are those of the rows without it
    (oracle: river's progressive validation of the same model on the good rows), and in
    blocks the same rows are skipped."""
    import random

    rnd = random.Random(0)
    rows = [(rnd.gauss(0, 1), rnd.gauss(0, 1)) for _ in range(600)]
    bad = {250: "1e200", 433: "1e400"}
    lines = ["a,b,y"]
    for i, (a, b) in enumerate(rows):
        lines.append(f"{bad.get(i, repr(a))},{b!r},{int(a + b > 0)}")
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n")
    one = streamk("learn", str(path), "--target", "y", "--json")
    assert one.returncode == 0, one.stderr
    assert "Warning" not in one.stderr
    got = json.loads(one.stdout)
    assert got["n_events"] == 600 and got["skipped"] == 2
    assert got["first_skipped"].startswith("event 250: feature values too large")
    good = [({"a": a, "b": b}, int(a + b > 0)) for i, (a, b) in enumerate(rows) if i not in bad]
    model = preprocessing.StandardScaler() | KernelPerceptron()
    want = evaluate.progressive_val_score(good, model, metrics.Accuracy()).get()
    assert got["metric"] == pytest.approx(want)
    blocks = streamk("learn", str(path), "--target", "y", "--batch-size", "100", "--json")
    assert blocks.returncode == 0, blocks.stderr
    got = json.loads(blocks.stdout)
    assert got["skipped"] == 2 and got["first_skipped"].startswith("event 250:")
    table = streamk("learn", str(path), "--target", "y").stdout
    assert "skipped rows     2 (first: event 250: feature values too large" in table
