"""The simulator's report.png shows what the scenario is about (issue 19).

Segment boundaries, the drift centre, consolidations and injected faults are marked, and
the scenario's key figure is in the title. The landmarks are checked against the log
itself (decoded here), the markers against the landmarks, by reading the figure's artists.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulators.generate import build_log
from simulators.run import run_scenario
from simulators.scenario import load_scenario

pytestmark = pytest.mark.simulation

SCENARIO = """
[scenario]
name = "plot_check"
description = "two segments, a drift in the second, faults of every kind"
seed = 3
format = "jsonl"

[[segments]]
generator = "Bananas"
length = 600

[[segments]]
generator = "ConceptDriftStream"
length = 1400
position = 700
width = 100
stream = { generator = "SEA", variant = 0 }
drift_stream = { generator = "SEA", variant = 2 }

[labels]
unlabelled = 0.05
delayed = 0.05
delay = 30

[faults]
duplicates = 0.01
out_of_order = 0.01

[faults.malformed]
undecodable = 0.002
nan = 0.002

[engine]
learner = "perceptron"
budget = 200
consolidate_every = 400
consolidate_window = 200
consolidate_mode = "sync"
snapshot_every = 1000

[report]
every = 200
"""


def _first_offset_of_event(records: list[bytes], event: int) -> int:
    """Oracle: the first record of the log carrying the event's id (the event itself:
    its late label and any duplicate come after it)."""
    for offset, raw in enumerate(records):
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("id") == event:
            return offset
    raise AssertionError(f"event {event} is not in the log")


def test_landmarks_are_the_offsets_where_segments_start_and_the_drift_is_centred(tmp_path):
    path = tmp_path / "plot_check.toml"
    path.write_text(SCENARIO)
    sc = load_scenario(path)
    records, truth = build_log(sc)
    assert [s["generator"] for s in truth["segments"]] == ["Bananas", "ConceptDriftStream"]
    assert [s["event"] for s in truth["segments"]] == [0, 600]
    for seg in truth["segments"]:
        assert seg["offset"] == _first_offset_of_event(records, seg["event"])
    (drift,) = truth["drifts"]
    assert drift["event"] == 600 + 700 and drift["width"] == 100
    assert drift["offset"] == _first_offset_of_event(records, 1300)
    # faults before them push the landmarks past their event index
    assert drift["offset"] > drift["event"]


def _run(tmp_path):
    path = tmp_path / "plot_check.toml"
    path.write_text(SCENARIO)
    return run_scenario(load_scenario(path), tmp_path / "out", plot=True)


def test_report_names_the_key_figure_and_the_consolidations(tmp_path):
    pytest.importorskip("matplotlib")
    rep = _run(tmp_path)
    marks = rep["landmarks"]
    # sync consolidation every 400 labelled events, seen once per consolidation, in order
    labelled = rep["result"]["learned"]
    assert len(marks["consolidations"]) == labelled // 400 >= 3
    assert marks["consolidations"] == sorted(marks["consolidations"])
    assert all(0 < c <= rep["result"]["records"] for c in marks["consolidations"])
    truth = json.loads((tmp_path / "out" / "truth.json").read_text())
    assert marks["malformed"] == [b["offset"] for b in truth["malformed"]]
    assert marks["duplicates"] == [d["offset"] for d in truth["duplicates"]] != []
    # delayed labels: the key figure is the served accuracy, recomputed here from the files
    served = {}
    for line in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines():
        rec = json.loads(line)
        served.setdefault(str(rec["id"]), rec["prediction"])
    hits = [served[k] == y for k, y in truth["delayed_labels"].items() if k in served]
    expected = f"served accuracy on delayed labels {100 * sum(hits) / len(hits):.1f}%"
    assert rep["key_figure"].startswith(expected), rep["key_figure"]
    assert f"all {len(truth['malformed'])} bad messages dead-lettered" in rep["key_figure"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert f"**{rep['key_figure']}**" in md


def test_the_plot_marks_every_landmark_and_carries_the_key_figure(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from simulators.report import plot_figure

    rep = _run(tmp_path)
    assert (tmp_path / "out" / "report.png").stat().st_size > 10_000
    fig = plot_figure(rep, plt)
    ax = fig.axes[0]
    marks = rep["landmarks"]
    assert rep["key_figure"] in ax.get_title()
    vlines = sorted(
        line.get_xdata()[0]
        for line in ax.get_lines()
        if len(line.get_xdata()) == 2 and line.get_xdata()[0] == line.get_xdata()[1]
    )
    wanted = sorted([s["offset"] for s in marks["segments"]] + [marks["drifts"][0]["offset"]])
    assert vlines == wanted  # segment boundaries and the drift centre
    scattered = [np.asarray(c.get_offsets())[:, 0].tolist() for c in ax.collections]
    for key in ("consolidations", "malformed", "duplicates", "reordered"):
        assert [float(v) for v in marks[key]] in scattered, key
    labels = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {
        "segment boundary",
        "drift centre",
        "consolidation",
        "malformed (dead-lettered)",
        "duplicate",
        "reordered",
    } <= labels
    plt.close(fig)
