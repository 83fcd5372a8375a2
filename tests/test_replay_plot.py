"""``streamk replay --plot``: the learning curve as a PNG and as numbers (issue 19).

The real ``streamk`` entry point writes ``curve.png`` and ``curve.json``; the curve's
numbers must equal a prequential run computed here independently (river's
``StandardScaler() | KernelPerceptron`` event by event, the rolling accuracy over the last
1,000 scored events, the counters by counting the log), and its marks the batches a brute
force says.
"""

from __future__ import annotations

import json
import os
import random

import pytest
from streamk_run import streamk

from streamk.sources.replay import write_log

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BATCH = 500  # max_records: a point after every batch


def _events(n: int = 3200, seed: int = 7) -> list[dict]:
    """XOR-like labels; every 9th event unlabelled, a malformed event every 997."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        x = {"a": rng.gauss(0, 3), "b": rng.gauss(0, 1)}
        event: dict = {"x": x, "id": i}
        if i % 9:
            event["y"] = x["a"] * x["b"] > 0
        if i % 997 == 5:
            event = {"x": {"a": "not a number"}, "y": True, "id": i}
        events.append(event)
    return events


def _prequential(events: list[dict], window: int = 1000) -> dict[int, dict]:
    """Offset (after each batch) -> rolling accuracy and counters, event by event."""
    from river import preprocessing

    from streamk.learners import KernelPerceptron

    model = preprocessing.StandardScaler() | KernelPerceptron(budget=500)
    scores: list[bool] = []
    learned = scored = dead = 0
    out = {}
    for i, e in enumerate(events, start=1):
        if isinstance(e["x"]["a"], str):
            dead += 1
        elif "y" in e:
            p = model.predict_one(e["x"])
            if p is not None:
                scores.append(p == e["y"])
            model.learn_one(e["x"], e["y"])
            learned += 1
        else:
            scored += 1
        if i % BATCH == 0 or i == len(events):
            last = scores[-window:]
            out[i] = {
                "rolling_metric": sum(last) / len(last),
                "learned": learned,
                "scored": scored,
                "dead_lettered": dead,
            }
    return out


def test_replay_plot_writes_a_png_and_the_curve_of_a_prequential_run(tmp_path):
    events = _events()
    write_log(tmp_path / "events.jsonl", events)
    args = ["replay", str(tmp_path / "events.jsonl"), "--plot", str(tmp_path / "curve.png")]
    args += ["--snapshot-dir", str(tmp_path / "snaps"), "--snapshot-every", "1000"]
    done = streamk(*args, "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["plot"] == str(tmp_path / "curve.png")

    png = (tmp_path / "curve.png").read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 10_000
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(tmp_path / "curve.png").shape
    assert (width, height) == (1000, 500)

    data = json.loads((tmp_path / "curve.json").read_text())
    assert data["metric"] == "accuracy" and data["window"] == 1000
    oracle = _prequential(events)
    got = {p["offset"]: p for p in data["points"]}
    assert sorted(got) == sorted(oracle)  # a point per batch, and the end
    for offset, want in oracle.items():
        for key in ("learned", "scored", "dead_lettered"):
            assert got[offset][key] == want[key], (offset, key)
        assert got[offset]["rolling_metric"] == pytest.approx(want["rolling_metric"], abs=1e-12)

    # marks: the batches holding a malformed event, and those a snapshot followed
    bad = [i for i, e in enumerate(events) if isinstance(e["x"]["a"], str)]
    assert data["marks"]["dead_lettered"] == sorted({(i // BATCH + 1) * BATCH for i in bad})
    assert data["marks"]["snapshots"] == [1000, 2000, 3000, 3200]  # every 1,000; shutdown
    assert data["marks"]["consolidations"] == []


def test_replay_plot_marks_consolidations(tmp_path):
    events = [e for e in _events(2600) if "y" in e and not isinstance(e["x"]["a"], str)]
    write_log(tmp_path / "events.jsonl", events)
    args = ["replay", str(tmp_path / "events.jsonl"), "--plot", str(tmp_path / "c.png")]
    args += ["--snapshot-dir", str(tmp_path / "s"), "--consolidate-every", "1000", "--quiet"]
    done = streamk(*args)
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "c.json").read_text())
    # sync consolidation every 1,000 labelled events: after events 1,000 and 2,000
    assert data["marks"]["consolidations"] == [1000, 2000]
    assert (tmp_path / "c.png").read_bytes().startswith(PNG_SIGNATURE)
    assert "plot" in done.stdout and "c.png" in done.stdout


def test_replay_plot_without_matplotlib_says_how_to_get_it(tmp_path):
    """A matplotlib that cannot be imported (a stand-in package raising ImportError, first
    on the path): one clear line before anything is learned, no traceback."""
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    write_log(tmp_path / "events.jsonl", _events(50))
    path = os.pathsep.join([str(tmp_path / "fake"), os.environ.get("PYTHONPATH", "")])
    args = ["replay", str(tmp_path / "events.jsonl"), "--plot", str(tmp_path / "c.png")]
    done = streamk(*args, "--snapshot-dir", str(tmp_path / "s"), env={"PYTHONPATH": path})
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "--plot needs matplotlib" in done.stderr and "streamk[plot]" in done.stderr
    assert not (tmp_path / "c.png").exists() and not (tmp_path / "s").exists()
