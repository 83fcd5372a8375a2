"""The simulators' text stream: a scenario of motif reads through the production engine."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from simulators import SCENARIOS
from simulators.run import run_scenario
from simulators.scenario import ScenarioError, load_scenario, parse_scenario
from streamk.engine.deadletter import read_dead_letters
from streamk.snapshot import SnapshotStore
from streamk.sources.motifs import motif_stream

pytestmark = pytest.mark.simulation

TEXT = SCENARIOS / "text_motifs.toml"


@pytest.mark.parametrize("fmt", ["msgpack", "jsonl"])
def test_text_scenario_dead_letters_every_text_fault_by_offset_and_code(fmt, tmp_path: Path):
    data = tomllib.loads(TEXT.read_text())
    data["scenario"]["format"] = fmt
    sc = parse_scenario(data, str(TEXT), length=1500)
    rep = run_scenario(sc, tmp_path, plot=False)
    truth = json.loads((tmp_path / "truth.json").read_text())
    injected = {(b["offset"], b["code"]) for b in truth["malformed"]}
    letters = read_dead_letters(tmp_path / "dead-letters" / "dead-letters.jsonl")
    assert {(d.offset, d.code) for d in letters} == injected
    codes = {code for _, code in injected}
    assert {"bad_x", "too_long"} <= codes
    assert ("bad_text" in codes) is (fmt == "msgpack")  # JSON cannot carry invalid UTF-8
    assert rep["dead_letters"]["ok"]
    model = SnapshotStore(tmp_path / "snapshots").latest("model").model
    assert 0 < len(model.support_) <= 500
    assert all(isinstance(s, str) for s in model.support_.X)


def test_the_text_segment_is_the_motif_stream(tmp_path: Path):
    from simulators.streams import iter_segment

    assert list(iter_segment("MotifReads", 50, {}, seed=4)) == motif_stream(50, seed=4)
    assert list(iter_segment("MotifReads", 5, {"seed": 9}, seed=4)) == motif_stream(5, seed=9)


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda d: d["segments"].append({"generator": "SEA", "length": 10}), "cannot be mixed"),
        (lambda d: d["faults"]["malformed"].update(nan=0.01), "does not apply to a text"),
        (lambda d: d["segments"][0].update(alphabet="xyz"), "unknown parameter"),
    ],
    ids=["mixed", "numeric-fault", "unknown-param"],
)
def test_bad_text_scenarios_are_clear_errors(change, words):
    data = tomllib.loads(TEXT.read_text())
    change(data)
    with pytest.raises(ScenarioError, match=words):
        parse_scenario(data, "text.toml")


def test_a_text_fault_on_numeric_features_is_refused():
    sc = tomllib.loads((SCENARIOS / "sea_abrupt_drift.toml").read_text())
    sc.setdefault("faults", {}).setdefault("malformed", {})["long_text"] = 0.01
    with pytest.raises(ScenarioError, match="does not apply to numeric"):
        parse_scenario(sc, "sea.toml")


def test_the_shipped_text_scenario_loads():
    sc = load_scenario(TEXT)
    assert sc.segments[0].generator == "MotifReads"
    assert sc.engine_config()["kernel"] == "norm-spectrum:6"
