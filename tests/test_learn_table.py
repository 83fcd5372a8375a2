"""The user guide's table of `streamk learn` results is what `benchmarks.learn_table` wrote.

The table covers every data set the README lists, agrees with the committed JSON, every
figure beats its plain baseline, and re-running the real command line on the cheap data
sets gives the committed figures.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import learn_table

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = json.loads(learn_table.RESULTS.read_text())
ROWS = {r["dataset"]: r for r in COMMITTED["rows"]}


def test_guide_table_is_the_rendering_of_the_committed_json():
    text = learn_table.GUIDE.read_text()
    block = text.split(learn_table.START, 1)[1].split(learn_table.END, 1)[0].strip()
    assert block == learn_table.render(COMMITTED["rows"])


def test_table_covers_every_data_set_the_readme_lists():
    readme = (ROOT / "README.md").read_text()
    paragraph = readme.split("For `streamk learn`, `DATASET` is", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"`([A-Z][A-Za-z]+)`", paragraph)
    assert listed and set(listed) == set(ROWS) == set(learn_table.DATASETS)


@pytest.mark.parametrize("name", learn_table.DATASETS)
def test_every_default_figure_beats_its_plain_baseline(name):
    row = ROWS[name]
    if row["task"] == "regression":
        assert row["metric_name"] == "MAE" and row["metric"] < 0.6 * row["baseline"]
        assert row["r2"] > 0.2
    else:
        assert row["metric_name"] == "Accuracy" and row["metric"] > row["baseline"]


@pytest.mark.parametrize("name", ["Phishing", "TrumpApproval"])
def test_committed_rows_are_what_the_command_line_gives(name):
    out = json.loads(
        subprocess.run(
            [sys.executable, "-m", "streamk.cli", "learn", name, "--json", "--quiet"],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        ).stdout
    )
    row = ROWS[name]
    assert (out["task"], out["learner"], out["n_events"]) == (
        row["task"],
        row["learner"],
        row["events"],
    )
    assert out["metric"] == pytest.approx(row["metric"], rel=1e-9)
    assert out["n_support"] == row["n_support"]
    assert row["baseline"] == pytest.approx(learn_table.baseline(name, row["task"]))


def test_write_guide_replaces_only_the_marked_block(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text(f"before\n{learn_table.START}\nold\n{learn_table.END}\nafter\n")
    learn_table.write_guide(COMMITTED["rows"][:1], guide)
    text = guide.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old" not in text
    assert learn_table.render(COMMITTED["rows"][:1]) in text
