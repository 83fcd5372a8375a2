"""Replay-based simulation: scenario files, event-log generators, fault injection, reports.

``python -m simulators.run simulators/scenarios/sea_abrupt_drift.toml --scale 0.1``
generates a scenario's event log, replays it through the production engine and writes a
report. See ``simulators/README.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "SCENARIOS",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "build_log",
    "generate",
    "run_scenario",
]

#: the directory of the shipped scenario files
SCENARIOS = Path(__file__).parent / "scenarios"

_LAZY = {
    "Scenario": "scenario",
    "ScenarioError": "scenario",
    "load_scenario": "scenario",
    "build_log": "generate",
    "generate": "generate",
    "run_scenario": "run",
}


def __getattr__(name: str) -> Any:
    # lazy, so that ``python -m simulators.run`` does not import run.py twice
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'simulators' has no attribute {name!r}")
