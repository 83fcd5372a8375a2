"""CSV files on the command line: what `streamk learn` and `streamk produce` accept and refuse.

Both commands read a CSV file with one reader (streamk.engine.registry: csv_header,
csv_rows, parse_label), so a file one refuses the other refuses with the same words, and a
label means the same to both. Figures are checked against river run in this process on the
same rows (an independent oracle), never against streamk's own output.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from river import datasets, evaluate, metrics, preprocessing
from river.datasets import synth
from streamk_run import streamk
from test_cli_learn import _river_scores

from streamk import KernelPerceptron, OnlineSVR
from streamk.cli.produce import iter_messages
from streamk.engine.events import decode

#: an address nothing listens on: produce must refuse a bad file before it connects
NO_BROKER = "127.0.0.1:9"


def _write(path: Path, header: list[str] | None, rows: list[list], delimiter: str = ",") -> str:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, delimiter=delimiter)
        if header is not None:
            writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def _error_line(run) -> str:
    """The one ``streamk: error:`` line of a refused run (exit 2, no traceback)."""
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("streamk: error: "), run.stderr
    return lines[0]


# -- rows with more or fewer cells than the header -------------------------------------------------


@pytest.mark.parametrize(
    "text, cells",
    [("a,b,y\n1,2,x\n3,4,y,5\n", 4), ("a,b,y\n1,2,x\n3,4\n5,6,y\n", 2)],
    ids=["extra cell", "short row"],
)
def test_a_ragged_row_is_named_with_its_line_and_cell_counts(tmp_path, text, cells):
    path = tmp_path / "ragged.csv"
    path.write_text(text)
    want = f"{path}:3: {cells} cells, but the header has 3"
    learned = _error_line(streamk("learn", str(path), "--quiet"))
    assert want in learned and "quote" in learned
    sent = _error_line(
        streamk("produce", str(path), "--topic", "t", "--bootstrap-servers", NO_BROKER)
    )
    assert want in sent and "Nothing was sent" in sent
    # the text-column path reads CSV files with the same reader
    text_run = streamk("learn", str(path), "--text-column", "a", "--quiet")
    assert want in _error_line(text_run)


# -- an empty target cell is an unlabelled row -----------------------------------------------------


def test_one_empty_target_leaves_a_regression_csv_a_regression(tmp_path):
    rows = [[*x.values(), y] for x, y in synth.Friedman(seed=42).take(400)]
    gap = 4
    written = [row[:-1] + [""] if i == gap else row for i, row in enumerate(rows)]
    path = _write(tmp_path / "friedman_gap.csv", [f"f{i}" for i in range(10)] + ["target"], written)
    run = streamk("learn", path, "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert (out["task"], out["learner"], out["metric_name"]) == ("regression", "svr", "MAE")
    assert out["unlabelled"] == 1 and out["n_events"] == 399
    # the oracle: river's scaler and the SVR on the labelled rows, in this process
    stream = [
        ({f"f{j}": float(v) for j, v in enumerate(row[:-1])}, row[-1])
        for i, row in enumerate(rows)
        if i != gap
    ]
    mae, r2 = _river_scores(preprocessing.StandardScaler() | OnlineSVR(), stream)
    assert out["metric"] == pytest.approx(mae, rel=1e-9)
    assert out["extra"]["R2"] == pytest.approx(r2, rel=1e-9)
    table = streamk("learn", path, "--quiet").stdout
    assert "(regression)" in table
    assert any(line.split()[:3] == ["unlabelled", "rows", "1"] for line in table.splitlines())


def test_empty_labels_of_a_classification_csv_are_no_class(tmp_path):
    rows = [[i % 7, (i * 3) % 5, "yes" if i % 7 > 3 else "no"] for i in range(300)]
    blank = {10, 11, 150, 299}
    written = [r[:2] + [""] if i in blank else r for i, r in enumerate(rows)]
    path = _write(tmp_path / "clf.csv", ["a", "b", "label"], written)
    out = json.loads(streamk("learn", path, "--json").stdout)
    assert out["task"] == "classification" and out["unlabelled"] == len(blank)
    assert out["n_events"] == 300 - len(blank)
    stream = [
        ({"a": float(r[0]), "b": float(r[1])}, r[2]) for i, r in enumerate(rows) if i not in blank
    ]
    want = evaluate.progressive_val_score(
        stream, preprocessing.StandardScaler() | KernelPerceptron(), metrics.Accuracy()
    ).get()
    assert out["metric"] == pytest.approx(want)
    # produce sends the same rows without a label (y absent), not a class ""
    events = [decode(m) for m in iter_messages(path)]
    assert [i for i, e in enumerate(events) if e.y is None] == sorted(blank)


# -- a file that is not the CSV streamk reads ------------------------------------------------------


def test_a_semicolon_file_is_refused_naming_the_delimiter(tmp_path):
    rows = [[*x.values(), y] for x, y in datasets.Bananas().take(50)]
    path = _write(tmp_path / "semi.csv", ["x1", "x2", "label"], rows, delimiter=";")
    for run in (
        streamk("learn", path, "--quiet"),
        streamk("produce", path, "--topic", "t", "--bootstrap-servers", NO_BROKER),
    ):
        line = _error_line(run)
        assert "no feature besides the target" in line and "';'" in line and "comma" in line


def test_a_file_without_a_header_row_is_refused(tmp_path):
    rows = [[*x.values(), y] for x, y in datasets.Bananas().take(50)]
    path = _write(tmp_path / "noheader.csv", None, rows)
    for run in (
        streamk("learn", path, "--quiet"),
        streamk("produce", path, "--topic", "t", "--bootstrap-servers", NO_BROKER),
    ):
        line = _error_line(run)
        assert "the first row looks like data" in line and "a CSV needs a header row" in line


def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    # csv rows became dicts by name: the second 'x1' cell replaced the first in silence
    rows = [[*x.values(), 2 * next(iter(x.values())), y] for x, y in datasets.Bananas().take(50)]
    path = _write(tmp_path / "twice.csv", ["x1", "x2", "x1", "label"], rows)
    for run in (
        streamk("learn", path, "--quiet"),
        streamk("produce", path, "--topic", "t", "--bootstrap-servers", NO_BROKER),
    ):
        line = _error_line(run)
        assert "the header names 'x1' more than once" in line


def test_numbers_in_the_header_beside_names_are_column_names(tmp_path):
    path = _write(tmp_path / "years.csv", ["2019", "2020", "label"], [[1, 2, "a"], [2, 1, "b"]])
    assert streamk("learn", path, "--quiet").returncode == 0


# -- a header-only file has no figure, not 0.0 -----------------------------------------------------


def test_a_header_only_csv_reports_no_value(tmp_path):
    path = tmp_path / "header_only.csv"
    path.write_text("x1,x2,label\n")
    run = streamk("learn", str(path), "--quiet")
    assert run.returncode == 0, run.stderr
    rows = dict(line.split(None, 1) for line in run.stdout.splitlines() if line.strip())
    assert rows["events"].strip() == "0" and rows["accuracy"].strip() == "-"
    out = json.loads(streamk("learn", str(path), "--json").stdout)
    assert out["n_events"] == 0 and out["metric"] is None


# -- true/false labels are booleans ----------------------------------------------------------------


def test_the_bananas_csv_gives_the_bananas_figure(tmp_path):
    rows = [[*x.values(), y] for x, y in datasets.Bananas()]
    path = _write(tmp_path / "bananas.csv", ["x1", "x2", "label"], rows)
    assert {r[-1] for r in rows} == {True, False}  # written as the text True / False
    out = json.loads(streamk("learn", path, "--json").stdout)
    want = evaluate.progressive_val_score(
        datasets.Bananas(), preprocessing.StandardScaler() | KernelPerceptron(), metrics.Accuracy()
    ).get()
    assert out["n_events"] == 5300
    assert out["metric"] == pytest.approx(want, rel=1e-12)
    events = [decode(m) for m in iter_messages(path)]
    assert [e.y for e in events] == [r[-1] for r in rows]  # produce: booleans too


@pytest.mark.parametrize("cell, value", [("TRUE", True), ("false", False), ("trueish", "trueish")])
def test_true_and_false_in_any_case_are_booleans(tmp_path, cell, value):
    path = _write(tmp_path / "b.csv", ["a", "y"], [[1, cell]])
    (event,) = [decode(m) for m in iter_messages(path)]
    assert event.y == value and type(event.y) is type(value)


# -- --n only for synthetic streams ----------------------------------------------------------------


def test_n_on_a_fixed_data_set_or_a_file_is_refused(tmp_path):
    line = _error_line(streamk("learn", "Bananas", "--n", "100"))
    assert "--n" in line and "fixed data set" in line and "--limit" in line
    path = _write(tmp_path / "d.csv", ["a", "y"], [[1, 0], [2, 1]])
    line = _error_line(streamk("learn", path, "--n", "100"))
    assert "--n" in line and "--limit" in line
    assert streamk("learn", "SEA", "--n", "50", "--quiet").returncode == 0
