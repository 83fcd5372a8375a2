"""The scale-out simulator scenario: a simulated group with a kill -9 and rebalances.

Oracles: the generated log (its labelled events, counted from the generator's truth file,
and the partition lengths it splits into) for the exactly-once check; the scenario's own
plan for the landmarks; the report's timeline must carry the merged model and every worker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulators import SCENARIOS
from simulators.generate import generate
from simulators.run import main as run_main
from simulators.scaleout import run_scaleout
from simulators.scenario import ScenarioError, load_scenario, parse_scenario

pytestmark = pytest.mark.simulation

SCENARIO = SCENARIOS / "scaleout_crash_rebalance.toml"


def test_crash_and_rebalances_keep_every_event_learned_once_and_report_merged(tmp_path: Path):
    sc = load_scenario(SCENARIO, length=3000)
    gen = generate(sc, tmp_path)
    rep = run_scaleout(sc, gen.log, tmp_path)
    truth = json.loads((tmp_path / "truth.json").read_text())
    counts = truth["counts"]
    eo = rep["exactly_once"]
    assert not rep["errors"], rep["errors"]
    assert eo["labelled_events"] == counts["records"] - counts.get("malformed", 0)
    assert sum(eo["learned"].values()) == eo["labelled_events"], eo
    assert eo["reach_equals_ends"] and eo["ok"]
    events = [m["event"] for m in rep["landmarks"]]
    assert events == [
        "start",
        "kill -9 w1",
        "rebalance: w1 gone",
        "rebalance: w1 restarted",
        "rebalance: w3 joined",
    ]
    kill = next(m["records"] for m in rep["landmarks"] if m["event"] == "kill -9 w1")
    assert kill >= 0.3 * counts["records"]
    # after the crash the survivors own w1's partitions; all four learned something
    gone = next(m for m in rep["landmarks"] if m["event"] == "rebalance: w1 gone")
    assert sorted(gone["assignment"]) == ["w0", "w2"]
    assert sorted(p for ps in gone["assignment"].values() for p in ps) == list(range(6))
    assert all(n > 0 for n in eo["learned"].values()) and len(eo["learned"]) == 4
    merged = [p["merged"] for p in rep["timeline"] if p["merged"] is not None]
    assert len(merged) >= len(rep["timeline"]) - 2 and all(0 <= a <= 1 for a in merged)
    md = (tmp_path / "report.md").read_text()
    assert "| merged |" in md and "kill -9 w1" in md and "Exactly once: yes" in md


def test_the_scaleout_table_is_checked():
    base = {"scenario": {"name": "s"}, "segments": [{"generator": "SEA", "length": 100}]}
    with pytest.raises(ScenarioError, match="restart_at must come after"):
        parse_scenario({**base, "scaleout": {"crash_at": 0.5, "restart_at": 0.4}})
    with pytest.raises(ScenarioError, match="share of the stream"):
        parse_scenario({**base, "scaleout": {"crash_at": 1.5}})
    with pytest.raises(ScenarioError, match="unknown key"):
        parse_scenario({**base, "scaleout": {"crashes": 2}})
    assert parse_scenario(base).scaleout == {}


def test_the_command_runs_it_and_exits_0(tmp_path: Path, capsys):
    assert run_main([str(SCENARIO), "--length", "1500", "--out", str(tmp_path)]) == 0
    assert "Exactly once: yes" in capsys.readouterr().out
