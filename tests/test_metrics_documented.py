"""Every metric an engine exports is in docs/operations.md's table, and every metric the
table names is exported (four were exported and undocumented before this test)."""

from __future__ import annotations

import re
from pathlib import Path

from streamk.engine.metrics import Metrics

OPERATIONS = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def _documented() -> set[str]:
    text = OPERATIONS.read_text()
    table = text[text.index("## Metrics to watch") :]
    return set(re.findall(r"^\| `(streamk_[a-z_]+)(?:\{[a-z]+\})?` \|", table, re.M))


def _exported() -> set[str]:
    metrics = Metrics()
    metrics.dead_letter("undecodable")  # the labelled counters appear once they count
    metrics.set_adoptions({"adopted": 1})
    return set(re.findall(r"^# TYPE (streamk_[a-z_]+) ", metrics.render(), re.M))


def test_the_operations_table_lists_exactly_the_exported_metrics():
    documented, exported = _documented(), _exported()
    assert len(exported) > 15
    assert exported - documented == set(), "exported but not documented"
    assert documented - exported == set(), "documented but not exported"
