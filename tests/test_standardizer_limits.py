"""A feature value the running standardiser cannot take is refused on its own, not after it
has spoilt the feature (session 24's limits audit).

With ``scale = "standard"`` (the default for a classifier or regressor) the statistics are
river's ``StandardScaler``'s. A new feature whose first value was 1e200 was learned (mean
1e200, variance 0); the next ordinary value's squared distance from that mean overflowed,
so every later event carrying the feature was refused ("cannot be standardised"): 16 of 16
in the audit's engine run. Now a value beyond 1e150 in size is refused, and the model is
as if it had never seen it. Oracle: the same model fed the stream without that event.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from streamk import RBF, KernelPerceptron, RemoveOldest
from streamk.errors import InvalidInput
from streamk.learners.scaling import StandardScaledClassifier


def _stream(n: int = 400, seed: int = 0) -> list[tuple[dict, bool]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a, b = rng.normal(size=2)
        out.append(({"a": float(a), "b": float(b)}, bool(a + 0.5 * b > 0)))
    return out


def _model() -> StandardScaledClassifier:
    return StandardScaledClassifier(KernelPerceptron(kernel=RBF(0.5), budget=RemoveOldest(50)))


@pytest.mark.parametrize("huge", [1e200, -1e151, 2**600])
@pytest.mark.parametrize("way", ["one", "many"])
def test_a_huge_first_value_is_refused_and_the_feature_still_learns(huge, way):
    events = _stream()
    bad = ({"a": 0.3, "b": -0.1, "c": huge}, True)
    model, oracle = _model(), _model()
    for x, y in events[:100]:
        model.learn_one(x, y)
        oracle.learn_one(x, y)
    if way == "one":
        with pytest.raises(InvalidInput, match=r"feature 'c' = .* cannot be standardised"):
            model.learn_one(*bad)
    else:
        import pandas as pd

        with pytest.raises(InvalidInput, match="cannot be standardised"):
            model.learn_many(pd.DataFrame([bad[0]]), pd.Series([bad[1]]))
    later = [({**x, "c": float(i % 7)}, y) for i, (x, y) in enumerate(events[100:])]
    for x, y in later:  # every later value of c is learned (each was refused before)
        model.learn_one(x, y)
        oracle.learn_one(x, y)
    for x, _ in _stream(100, seed=1):
        probe = {**x, "c": 1.0}
        assert model.predict_proba_one(probe) == oracle.predict_proba_one(probe)


def test_the_engine_dead_letters_the_one_huge_value_and_learns_the_rest(tmp_path):
    stream = _stream(300)  # c first appears with 1e200, then with ordinary values
    events = stream[:50] + [({"a": 0.1, "b": 0.2, "c": 1e200}, True)]
    events += [({**x, "c": float(i % 5)}, y) for i, (x, y) in enumerate(stream[50:])]
    with open(tmp_path / "log.jsonl", "w") as f:
        for x, y in events:
            f.write(json.dumps({"x": x, "y": y}) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "replay", "log.jsonl", "--snapshot-dir", "s",
         "--dead-letter-dir", "dead", "--quiet", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert (out["learned"], out["dead_lettered"]) == (300, 1)  # 250 were dead before
    (letter,) = (tmp_path / "dead" / "dead-letters.jsonl").read_text().splitlines()
    assert "cannot be standardised" in json.loads(letter)["reason"]
