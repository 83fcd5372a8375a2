"""Snapshots written by earlier releases still load and predict as they did.

``tests/data/snapshots-0.1.0/`` holds one snapshot per learner class written by the code
before the layout move (commit 83e40f7; ``make.py`` there says how), with the
predictions that code gave on probe points. Today's code must read every file and give
the same predictions: the module paths moved, the snapshot names (the allow-list's
public class names) did not.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from streamk import snapshot

DATA = Path(__file__).parent / "data" / "snapshots-0.1.0"
GOLDEN = json.loads((DATA / "golden.json").read_text())


@pytest.mark.parametrize("name", sorted(GOLDEN["models"]))
def test_snapshot_from_before_the_move_loads_and_predicts_as_then(name):
    expected = GOLDEN["models"][name]
    snap = snapshot.loads((DATA / f"{name}.snapshot").read_bytes())
    assert type(snap.model).__name__ == expected["class"]
    assert snap.seq == 3 and snap.offsets == {"events": {0: 300}}
    for row, want in zip(GOLDEN["probe"], expected["predictions"]):
        got = snap.model.predict_one({f"x{j}": v for j, v in enumerate(row)})
        if isinstance(want, float) and not isinstance(want, bool):
            assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12), (row, got, want)
        else:
            assert got == want, (row, got, want)
