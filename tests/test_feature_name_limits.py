"""The engine bounds the feature names a model meets (``max_feature_names``,
``max_feature_name_chars``; session 24's limits audit).

Every support vector is as wide as the feature names ever met. A producer that put a fresh
key in each event grew every row without end: after 2,000 such events (100 new keys each)
the first checkpoint was refused (the model would rebuild to 608 MB, over the snapshot
limit), exit 2, and again on every restart: a crash loop. Now an event that would take the
model past ``max_feature_names`` distinct names, or that names a feature longer than
``max_feature_name_chars``, is a dead letter saying so, and the model is as if it had never
seen it. Oracle: the plain learner fed only the accepted events.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pandas as pd
import pytest

from streamk import RBF, KernelPerceptron, RemoveOldest
from streamk.errors import InvalidInput
from streamk.learners.features import NameLimits, limited_names
from streamk.snapshot import SnapshotStore


def _events(n: int, every: int, seed: int = 0) -> list[tuple[dict, bool]]:
    """``a``, ``b`` in every event; a key of its own in every ``every``-th."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = {"a": rng.random(), "b": rng.random()}
        if i % every == 0:
            x[f"id-{i}"] = 1.0
        out.append((x, x["a"] + 0.3 * x["b"] > 0.6))
    return out


def _model() -> KernelPerceptron:
    return KernelPerceptron(kernel=RBF(0.5), budget=RemoveOldest(60))


def _replay(tmp_path, events, *flags) -> dict:
    with open(tmp_path / "log.jsonl", "w") as f:
        for x, y in events:
            f.write(json.dumps({"x": x, "y": y}) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "streamk.cli", "replay", "log.jsonl", "--snapshot-dir", "s",
         "--kernel", "rbf:0.5", "--budget", "60", "--scale", "none", "--dead-letter-dir",
         "dead", "--json", "--quiet", *flags],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_events_past_max_feature_names_are_dead_letters_and_the_rest_learned(tmp_path):
    events = _events(2000, every=10)
    out = _replay(tmp_path, events, "--max-feature-names", "50")
    # a, b and the first 48 keys of their own fit; the 152 later events with one do not
    kept = [e for e in events if len(e[0]) == 2 or int(list(e[0])[2][3:]) < 480]
    assert (out["learned"], out["dead_lettered"]) == (len(kept), 2000 - len(kept)) == (1848, 152)
    letters = [json.loads(line) for line in open(tmp_path / "dead" / "dead-letters.jsonl")]
    assert all("above max_feature_names=50" in d["reason"] for d in letters)
    assert [d["offset"] for d in letters] == list(range(480, 2000, 10))
    model = SnapshotStore(tmp_path / "s").latest("model").model
    oracle = _model()
    for x, y in kept:
        oracle.learn_one(x, y)
    for x, _ in _events(200, every=1000, seed=1):
        assert model.predict_proba_one(x) == pytest.approx(oracle.predict_proba_one(x), abs=1e-12)


def test_a_feature_name_past_max_feature_name_chars_is_a_dead_letter(tmp_path):
    events = _events(300, every=1000)
    events[100] = ({**events[100][0], "n" * 101: 1.0}, True)
    events[200] = ({**events[200][0], "m" * 100: 1.0}, True)  # at the limit: learned
    out = _replay(tmp_path, events, "--max-feature-name-chars", "100")
    assert (out["learned"], out["dead_lettered"]) == (299, 1)
    (letter,) = [json.loads(line) for line in open(tmp_path / "dead" / "dead-letters.jsonl")]
    assert letter["offset"] == 100 and "above max_feature_name_chars=100" in letter["reason"]


@pytest.mark.parametrize("way", ["one", "many"])
def test_inside_limited_names_a_refused_event_leaves_the_model_as_it_was(way):
    events = _events(300, every=1000)
    model, oracle = _model(), _model()
    for x, y in events[:100]:
        model.learn_one(x, y)
        oracle.learn_one(x, y)
    wide = {**events[100][0], "c": 1.0, "d": 2.0}  # a, b, id-0 known: 5 names, above 4
    with limited_names(NameLimits(max_names=4, max_name_chars=10)):
        with pytest.raises(InvalidInput, match="would make 5 distinct names"):
            if way == "one":
                model.learn_one(wide, True)
            else:
                model.learn_many(pd.DataFrame([wide]), pd.Series([True]))
        model.learn_one({**events[101][0], "c": 1.0}, True)  # 4 names: within the limit
        oracle.learn_one({**events[101][0], "c": 1.0}, True)
    model.learn_one(wide, True)  # outside the block: no limit (the Python API's default)
    oracle.learn_one(wide, True)
    for x, _ in _events(100, every=1000, seed=2):
        assert model.predict_proba_one(x) == oracle.predict_proba_one(x)


def test_name_limits_are_checked():
    for bad in (0, -1, True, 2.5):
        with pytest.raises(Exception, match="must be a positive int"):
            NameLimits(bad, 10)
