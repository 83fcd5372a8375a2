"""Replay simulations: shipped scenarios run, injected faults == dead letters, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from simulators import SCENARIOS
from simulators.generate import build_log, generate
from simulators.report import compare_dead_letters
from simulators.run import main as run_main
from simulators.run import run_scenario
from simulators.scenario import ScenarioError, load_scenario, parse_scenario
from streamk.engine.deadletter import read_dead_letters
from streamk.snapshot import SnapshotStore

pytestmark = pytest.mark.simulation

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(SCENARIOS.glob("*.toml"))
LENGTH = 1200  # generated events per scenario in tests: a second or two each


def test_the_four_documented_scenarios_ship() -> None:
    names = {p.stem for p in SHIPPED}
    assert {
        "bananas_then_drift",
        "sea_abrupt_drift",
        "noisy_labels_and_bad_input",
        "delayed_labels",
    } <= names


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_scenario_runs_at_reduced_length(path: Path, tmp_path: Path) -> None:
    sc = load_scenario(path, length=LENGTH)
    rep = run_scenario(sc, tmp_path, plot=False)
    assert rep["dead_letters"]["ok"], rep["dead_letters"]
    assert rep["result"]["records"] == rep["log"]["counts"]["records"]
    assert rep["result"]["learned"] > 0
    assert rep["result"]["snapshots"] >= 1
    assert rep["timeline"] and rep["timeline"][-1]["records"] == rep["result"]["records"]
    assert rep["timeline"][-1]["rolling_metric"] is not None
    assert 0 < rep["result"]["support"] <= sc.engine_config().get("budget", 500)
    assert (tmp_path / "report.md").read_text().startswith(f"# Simulation report: {sc.name}")
    assert json.loads((tmp_path / "report.json").read_text())["schema_version"] == 1


def test_every_fault_is_dead_lettered_by_offset_and_code(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / "noisy_labels_and_bad_input.toml", length=LENGTH)
    rep = run_scenario(sc, tmp_path, plot=False)
    truth = json.loads((tmp_path / "truth.json").read_text())
    injected = {(b["offset"], b["code"]) for b in truth["malformed"]}
    letters = read_dead_letters(tmp_path / "dead-letters" / "dead-letters.jsonl")
    got = [(d.offset, d.code) for d in letters]
    assert len(got) == len(set(got)) == len(injected)
    assert set(got) == injected
    assert set(truth["malformed_by_kind"]) == set(sc.malformed)  # every kind, at least once
    assert rep["result"]["dead_letter_reasons"] == {
        code: n["injected"] for code, n in rep["dead_letters"]["by_code"].items()
    }
    # delivery faults are valid events: learned or scored, never dead-lettered
    assert truth["counts"]["duplicate"] > 0 and truth["counts"]["reordered"] > 0
    records = rep["result"]["records"]
    assert rep["result"]["learned"] + rep["result"]["scored"] + len(got) == records


def test_compare_dead_letters_names_each_mismatch() -> None:
    expected = [{"offset": 3, "code": "oversize"}, {"offset": 7, "code": "non_finite"}]
    ok = compare_dead_letters(expected, [(3, "oversize"), (7, "non_finite")])
    assert ok["ok"] and ok["by_code"]["oversize"] == {"injected": 1, "dead_lettered": 1}
    bad = compare_dead_letters(expected, [(3, "bad_x"), (9, "undecodable"), (9, "undecodable")])
    assert not bad["ok"]
    assert bad["missing"] == [7]
    assert bad["unexpected"] == [{"offset": 9, "code": "undecodable"}]
    assert bad["wrong_code"] == [{"offset": 3, "expected": "oversize", "got": "bad_x"}]
    assert bad["repeated"] == [9]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def test_same_scenario_and_seed_give_identical_logs_and_models(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / "bananas_then_drift.toml", length=LENGTH)
    reports, snaps = [], []
    for name in ("a", "b"):
        reports.append(run_scenario(sc, tmp_path / name, plot=False))
        snaps.append(SnapshotStore(tmp_path / name / "snapshots").latest("model"))
    log_a, log_b = (tmp_path / n / "events.msgpack" for n in ("a", "b"))
    assert log_a.read_bytes() == log_b.read_bytes()
    assert (tmp_path / "a" / "truth.json").read_bytes() == (
        tmp_path / "b" / "truth.json"
    ).read_bytes()
    a, b = snaps
    assert a.seq == b.seq
    assert list(a.offsets.values()) == list(b.offsets.values())  # keyed by the log's path
    assert _equal(a.model.state(), b.model.state())
    rng = np.random.default_rng(0)
    probe = [{"1": float(u), "2": float(v)} for u, v in rng.normal(size=(50, 2))]
    assert [a.model.predict_one(x) for x in probe] == [b.model.predict_one(x) for x in probe]
    strip = ("timing", "log")  # wall-clock figures, and whether the log was reused
    ra, rb = ({k: v for k, v in r.items() if k not in strip} for r in reports)
    assert ra == rb


def test_log_bytes_do_not_depend_on_hash_seed(tmp_path: Path) -> None:
    path = SCENARIOS / "noisy_labels_and_bad_input.toml"
    code = (
        "import sys; from simulators.scenario import load_scenario; "
        "from simulators.generate import generate; "
        f"generate(load_scenario({str(path)!r}, length=300), sys.argv[1])"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / seed)], check=True, cwd=REPO, env=env
        )
    assert (tmp_path / "1" / "events.jsonl").read_bytes() == (
        tmp_path / "2" / "events.jsonl"
    ).read_bytes()


def test_a_different_seed_gives_a_different_log() -> None:
    path = SCENARIOS / "sea_abrupt_drift.toml"
    assert (
        build_log(load_scenario(path, length=200))[0]
        != build_log(load_scenario(path, length=200, seed=99))[0]
    )


def test_delayed_label_is_the_same_x_and_id_with_y_later(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / "delayed_labels.toml", length=600)
    records, truth = build_log(sc)
    assert truth["delayed_labels"]
    events = {}
    for offset, payload in enumerate(records):
        try:
            event = msgpack.unpackb(payload)
        except Exception:  # noqa: BLE001 - malformed records
            continue
        if isinstance(event, dict) and "id" in event:
            events.setdefault(event["id"], []).append((offset, event))
    for key, y in truth["delayed_labels"].items():
        (first_at, first), (later_at, later) = events[int(key)]
        assert "y" not in first and later["y"] == y
        assert later["x"] == first["x"] and later_at > first_at


def test_a_reused_log_is_not_regenerated(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / "sea_abrupt_drift.toml", length=300)
    first = run_scenario(sc, tmp_path, plot=False)
    second = run_scenario(sc, tmp_path, plot=False)
    assert not first["log"]["reused"] and second["log"]["reused"]
    assert second["result"]["seq"] == first["result"]["seq"]  # did not resume from the first


def test_plot_is_written_when_matplotlib_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    sc = load_scenario(SCENARIOS / "sea_abrupt_drift.toml", length=2000)
    rep = run_scenario(sc, tmp_path, plot=True)
    assert rep["plot"] == "report.png" and (tmp_path / "report.png").stat().st_size > 1000


def test_image_segments_multiclass_and_block_free_generators(tmp_path: Path) -> None:
    sc = parse_scenario(
        {
            "scenario": {"name": "segments", "seed": 1},
            "segments": [{"generator": "ImageSegments", "length": 300}],
            "faults": {"malformed": {"wrong_type": 0.01}},
        }
    )
    gen = generate(sc, tmp_path)
    assert gen.truth["counts"]["labelled"] == 300
    assert len(gen.truth["malformed"]) == 3


_BASE = """
[scenario]
name = "t"
[[segments]]
generator = "SEA"
length = 100
"""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[labels]\nunlabeled = 0.1", r"\[labels\] unknown key 'unlabeled'"),
        ("[label]\nunlabelled = 0.1", r"unknown table\(s\) \['label'\]"),
        ("[labels]\nunlabelled = 1.5", r"share and must be in \[0, 1\]"),
        ("[labels]\ndelay = 'soon'", r"\[labels\] delay must be int"),
        ("[faults.malformed]\nnull_bytes = 0.1", r"unknown kind 'null_bytes'"),
        ("[engine]\nbudgett = 10", r"\[engine\] unknown key 'budgett'"),
        ("[engine]\nbudget = -1", r"budget must be >= 0"),
        ("[engine]\nlearner = 'forest'", r"learner must be perceptron, .*, got 'forest'"),
        ("[engine]\nbudget = '10'", r"\[engine\] budget must be int"),
        ("[engine]\nsnapshot_dir = '/tmp/x'", r"snapshot_dir is set by the simulator"),
        ("[scenario.extra]\nx = 1", r"\[scenario\] unknown key 'extra'"),
    ],
)
def test_bad_scenario_gives_a_clear_error(tmp_path: Path, extra: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(_BASE + extra + "\n")
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


@pytest.mark.parametrize(
    ("segment", "message"),
    [
        ('generator = "SEA"\nlength = 10\nvariants = 2', r"unknown parameter\(s\) \['variants'\]"),
        ('generator = "SEA"\nlength = 10\nvariant = 9', r"SEA\(variant=9\) refused"),
        ('generator = "Bananas"\nlength = 6000', r"more than the 5300 rows"),
        ('generator = "Bananas"\nlength = 10\nseed = 1', r"takes no parameters"),
        ('generator = "Shuttle"\nlength = 10', r"generator must be one of"),
        ('generator = "SEA"\nlength = 0', r"length must be >= 1"),
        (
            'generator = "ConceptDriftStream"\nlength = 100\nposition = 5000\nwidth = 1',
            r"width 1 is too small for position 5000.*width >= 29",
        ),
        (
            'generator = "ConceptDriftStream"\nlength = 100\nstream = { generator = "Bananas" }',
            r"stream must be an inline table with generator",
        ),
    ],
)
def test_bad_segment_gives_a_clear_error(tmp_path: Path, segment: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(f'[scenario]\nname = "t"\n[[segments]]\n{segment}\n')
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_cli_reports_a_bad_scenario_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(_BASE + "[engine]\nkernal = 'rbf'\n")
    assert run_main([str(path), "--out", str(tmp_path / "out")]) == 2
    assert "unknown key 'kernal'" in capsys.readouterr().err
    assert run_main([str(tmp_path / "missing.toml")]) == 2
    assert "no scenario file" in capsys.readouterr().err
