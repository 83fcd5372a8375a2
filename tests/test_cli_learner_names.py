"""Every learner by its CLI name, and the ranker's ranks as a setting (issue 19).

``--learner novelty`` (``learner = "novelty"``) runs the book's novelty detector in ``learn``,
``replay`` and ``run``, and the summary says what fraction it flagged; ``ranks`` (config
key, ``STREAMK_RANKS``, ``--ranks``) fixes the ranker's ranks. Each test runs the real
``streamk`` entry point in a subprocess; the novelty oracle is Shawe-Taylor & Cristianini's
Code Fragment 5.3 written plainly with NumPy.
"""

from __future__ import annotations

import json
import math
import random
import re

import numpy as np
import pytest
from streamk_run import streamk

from streamk.sources.replay import write_log

GAMMA = 0.01  # wide enough that a far point stays far from the centre
DELTA = 0.01  # KernelNovelty's default, the book's


WINDOW = 200  # --budget: RemoveOldest keeps the centre of the last WINDOW events


def _novelty_events(n: int = 900, seed: int = 4) -> list[dict]:
    """A Gaussian cloud with a far point every 250 events; every 5th event unlabelled.

    CF 5.3's threshold grows with the farthest stored point, so a far point is found only
    once the previous one has left the window."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        far = i % 250 == 210
        centre = 20.0 if far else 0.0
        x = {"a": rng.gauss(centre, 1.0), "b": rng.gauss(-centre, 1.0)}
        event = {"x": x, "id": i}
        if i % 5:
            event["y"] = far  # never read by a detector
        events.append(event)
    return events


def _book_flags(X: np.ndarray, gamma: float, delta: float, window: int) -> list[bool]:
    """CF 5.3 before each event is learned: novel iff its squared feature-space distance
    from the centre of mass of the last ``window`` events exceeds
    ``(max_i dist(x_i) + 2 esterr)^2`` over those events."""
    G = np.exp(-gamma * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    flags = []
    for t in range(len(X)):
        if t == 0:
            flags.append(False)  # the threshold is infinite before anything is learned
            continue
        s = slice(max(0, t - window), t)
        K, m = G[s, s], min(t, window)
        cc = K.sum() / m**2
        train = np.diag(K) - 2.0 * K.sum(axis=1) / m + cc
        d2 = G[t, t] - 2.0 * G[t, s].sum() / m + cc
        r2 = np.diag(K).max()
        esterr = math.sqrt(2.0 * r2 / m) * (math.sqrt(2.0) + math.sqrt(math.log(1.0 / delta)))
        threshold = (math.sqrt(max(train.max(), 0.0)) + 2.0 * esterr) ** 2
        flags.append(bool(d2 > threshold))
    return flags


@pytest.mark.parametrize("max_records", [1, 64])
def test_replay_novelty_flags_as_the_book_and_says_the_fraction(tmp_path, max_records):
    """Each event flagged by the detector that has learned every event before it: the
    same flags whether the engine takes the log one record at a time or in runs of 64."""
    events = _novelty_events()
    log = tmp_path / "events.jsonl"
    write_log(log, events)
    preds = tmp_path / "preds.jsonl"
    common = ["--learner", "novelty", "--kernel", f"rbf:{GAMMA}", "--budget", str(WINDOW)]
    common += ["--max-records", str(max_records), "--snapshot-dir", str(tmp_path / "snaps")]
    done = streamk("replay", str(log), *common, "--predictions-file", str(preds), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)

    X = np.array([[e["x"]["a"], e["x"]["b"]] for e in events])
    flags = _book_flags(X, GAMMA, DELTA, WINDOW)
    assert sum(flags) >= 3  # the planted points are there to be found
    assert summary["learned"] == len(events)  # labelled or not, a detector learns each one
    assert summary["flagged"] == sum(flags)
    assert summary["flagged_fraction"] == pytest.approx(sum(flags) / len(events))
    # unlabelled events get their flag published, as any learner's predictions
    published = {
        json.loads(line)["id"]: json.loads(line)["prediction"]
        for line in preds.read_text().splitlines()
    }
    expected = {e["id"]: f for e, f in zip(events, flags) if "y" not in e}
    assert published == expected

    human = streamk("replay", str(log), *common[:-2], "--snapshot-dir", str(tmp_path / "s2"))
    assert human.returncode == 0, human.stderr
    rows = dict(line.split(None, 1) for line in human.stdout.splitlines() if line.strip())
    assert rows["flagged"] == f"{sum(flags):,}"
    assert rows["flagged_fraction"] == f"{sum(flags) / len(events):.4f}"


def test_config_file_names_the_novelty_learner_and_the_snapshot_holds_it(tmp_path):
    events = _novelty_events(n=120)
    log = tmp_path / "events.jsonl"
    write_log(log, events)
    config = tmp_path / "streamk.toml"
    config.write_text(f'learner = "novelty"\nkernel = "rbf:{GAMMA}"\nbudget = 0\n')
    done = streamk(
        "replay", str(log), "--config", str(config), "--snapshot-dir", str(tmp_path / "s")
    )
    assert done.returncode == 0, done.stderr
    shown = streamk("snapshot", "show", str(tmp_path / "s" / "model"), "--json")
    assert json.loads(shown.stdout)["class"] == "KernelNovelty"


def test_learn_novelty_reports_the_fraction_flagged(tmp_path):
    events = _novelty_events(n=400)
    csv = tmp_path / "data.csv"
    csv.write_text(
        "a,b,label\n"
        + "".join(f"{e['x']['a']},{e['x']['b']},{int(bool(e.get('y')))}\n" for e in events)
    )
    args = ["learn", str(csv), "--learner", "novelty", "--kernel", f"rbf:{GAMMA}"]
    args += ["--budget", str(WINDOW), "--json"]
    done = streamk(*args, "--scale", "none", "--quiet")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    X = np.array([[e["x"]["a"], e["x"]["b"]] for e in events])
    assert out["task"] == "novelty detection" and out["metric_name"] == "FlaggedFraction"
    assert out["metric"] == pytest.approx(sum(_book_flags(X, GAMMA, DELTA, WINDOW)) / len(events))
    human = streamk(*args[:-1], "--scale", "none", "--quiet")
    assert human.returncode == 0, human.stderr
    assert "novelty detection" in human.stdout and "flagged" in human.stdout
    helped = streamk("learn", "--help")
    assert "novelty" in helped.stdout


def _rank_log(path, n=400, seed=1) -> list[dict]:
    """Ordinal labels 1..3 first met in the order 3, 1, 2, and a few 4s."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        y = (3, 1, 2)[i] if i < 3 else rng.choice((1, 2, 3))
        if i % 50 == 7:
            y = 4
        events.append({"x": {"a": y + rng.gauss(0, 0.3), "b": rng.gauss(0, 1)}, "y": y, "id": i})
    write_log(path, events)
    return events


@pytest.mark.parametrize("how", ["flag", "file_number", "file_list", "env"])
def test_ranks_reach_the_ranker_and_labels_outside_them_are_dead_letters(tmp_path, how):
    events = _rank_log(tmp_path / "ranks.jsonl")
    args = ["replay", str(tmp_path / "ranks.jsonl"), "--learner", "ranker", "--json", "--quiet"]
    args += ["--snapshot-dir", str(tmp_path / "s")]
    env = None
    if how == "flag":
        args += ["--ranks", "1,2,3"]
    elif how == "env":
        env = {"STREAMK_RANKS": "3"}
    else:
        config = tmp_path / "c.toml"
        config.write_text("ranks = 3\n" if how == "file_number" else "ranks = [1, 2, 3]\n")
        args += ["--config", str(config)]
    done = streamk(*args, env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    outside = sum(e["y"] == 4 for e in events)
    assert summary["dead_lettered"] == outside > 0
    assert summary["learned"] == len(events) - outside
    shown = json.loads(streamk("snapshot", "show", str(tmp_path / "s" / "model"), "--json").stdout)
    assert shown["params"]["ranks"] == [1, 2, 3]  # fixed, not the order first met (3, 1, 2)


def test_without_ranks_the_ranker_discovers_them(tmp_path):
    events = _rank_log(tmp_path / "ranks.jsonl")
    args = ["replay", str(tmp_path / "ranks.jsonl"), "--learner", "ranker", "--json", "--quiet"]
    done = streamk(*args, "--snapshot-dir", str(tmp_path / "s"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["dead_lettered"] == 0
    assert json.loads(done.stdout)["learned"] == len(events)


@pytest.mark.parametrize(
    "setting, words",
    [
        ("ranks = 1", ["ranks must be", "a number N >= 2"]),
        ("ranks = [1, 1]", ["ranks must be", "repeated"]),
        ('ranks = "a,,b"', ["ranks must be", "repeated"]),
        ("ranks = 1.5", ["ranks must be", "'1,2,3'"]),
        ('learner = "perceptron"\nranks = 3', ["ranks applies to learner = ranker only"]),
        ('learner = "oracle"', ["learner must be", "margin-perceptron", "novelty"]),
        ('learner = "novelty"\nconsolidate_every = 100', ["consolidate_every must be 0"]),
        ('learner = "novelty"\nscale = "standard"', ["needs a classifier or a regressor"]),
    ],
)
def test_bad_ranks_or_learner_is_one_line_naming_the_key(tmp_path, setting, words):
    config = tmp_path / "c.toml"
    learner = "" if "learner" in setting else 'learner = "ranker"\n'
    config.write_text(learner + setting + "\n")
    log = tmp_path / "e.jsonl"
    write_log(log, [{"x": {"a": 1.0}, "y": 1}])
    done = streamk("replay", str(log), "--config", str(config), "--snapshot-dir", str(tmp_path))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("streamk: error")]
    assert len(error) == 1, done.stderr
    for word in words:
        assert word in error[0], error[0]


def test_learn_takes_ranks_too(tmp_path):
    events = _rank_log(tmp_path / "unused.jsonl")
    csv = tmp_path / "r.csv"
    csv.write_text("a,b,y\n" + "".join(f"{e['x']['a']},{e['x']['b']},{e['y']}\n" for e in events))
    # a rank the configuration rules out stops the evaluation (every such row would be
    # refused), unlike a row with a bad value, which is skipped and counted
    done = streamk("learn", str(csv), "--learner", "ranker", "--ranks", "3", "--quiet")
    assert done.returncode == 2 and "label 4 is not one of ranks=(1, 2, 3)" in done.stderr
    # the whole sentence, to its remedy (issue 19: it was cut off mid-sentence)
    assert done.stderr.rstrip().endswith("to take the ranks from the labels seen")
    done = streamk("learn", str(csv), "--learner", "ranker", "--ranks", "4", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "ranks=(1, 2, 3, 4)" in done.stdout


def test_snapshot_show_prints_the_resolved_gamma_and_integer_counters(tmp_path):
    """``gamma="auto"`` is 2 / sum_j Var(x_j) (population variance) over the first 200
    learned rows (streamk.kernels.RBF, streamk.learners.base.AUTO_WINDOW): computed here
    from the raw rows, which ``--scale none`` hands to the learner unchanged."""
    rng = np.random.default_rng(8)
    X = rng.normal(0.0, [3.0, 0.5, 1.0], size=(600, 3))
    events = [
        {"x": {"a": a, "b": b, "c": c}, "y": bool(a + b > 0), "id": i}
        for i, (a, b, c) in enumerate(X.tolist())
    ]
    write_log(tmp_path / "e.jsonl", events)
    done = streamk(
        "replay", str(tmp_path / "e.jsonl"), "--scale", "none", "--snapshot-dir", str(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    gamma = 2.0 / X[:200].var(axis=0).sum()

    shown = streamk("snapshot", "show", str(tmp_path / "model"))
    assert shown.returncode == 0, shown.stderr
    lines = {
        line[:11].strip(): line[12:] for line in shown.stdout.splitlines() if line[:11].strip()
    }
    match = re.fullmatch(r"RBF\(gamma=([0-9.e+-]+)\).*", lines["kernel"])
    assert match, lines["kernel"]
    assert float(match.group(1)) == pytest.approx(gamma, rel=1e-9)
    assert "events_in = 600" in shown.stdout and "events_learned = 600" in shown.stdout
    counters = (
        r"(events_(in|learned|scored|dead_lettered)|snapshots_written|support_size|model_seq)"
    )
    assert not re.search(counters + r" = \d+\.0\b", shown.stdout)

    doc = json.loads(streamk("snapshot", "show", str(tmp_path / "model"), "--json").stdout)
    assert doc["kernel"]["gamma"] == pytest.approx(gamma, rel=1e-9)
    assert doc["metrics"]["events_in"] == 600 and type(doc["metrics"]["events_in"]) is int
    assert type(doc["metrics"]["support_size"]) is int
