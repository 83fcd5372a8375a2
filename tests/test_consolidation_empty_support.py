"""Consolidating a learner whose support set is empty: the solve is skipped (or starts from
no warm start), never an ``IndexError``.

A perceptron whose first events are all one class never errs and holds no support vector;
an ``OnlineRanker`` that has seen one rank and an ``OnlineSVR`` with a constant target hold
none either. The first consolidation then indexed the empty support ids with
``np.where``'s both branches and raised ``IndexError``; in the engine that killed the loop
at the same event on every restart. Oracle: the plain learner fed the same events (a
skipped solve leaves the model as it learned) and, for the CLI, the event count.
"""

from __future__ import annotations

import itertools
import json
import warnings

import pytest
from river import datasets
from streamk_run import streamk

from streamk.consolidation import Consolidated
from streamk.engine.config import load_config
from streamk.learners import KernelPerceptron, OnlineRanker, OnlineSVR
from streamk.snapshot import SnapshotStore
from streamk.sources.replay import write_log

BANANAS = list(itertools.islice(datasets.Bananas(), 1000))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


CASES = {
    "perceptron, one class": (lambda: KernelPerceptron(budget=50), True),
    "ranker, one rank": (lambda: OnlineRanker(budget=50), 1),
    "svr, constant target, C auto": (lambda: OnlineSVR(budget=50), 3.0),
    "svr, constant target, C=1": (lambda: OnlineSVR(budget=50, C=1.0), 3.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_empty_support_set_consolidates_without_raising(case):
    make, label = CASES[case]
    model = Consolidated(make(), every=100, window_size=100, guard=0)
    plain = make()
    for x, _ in BANANAS:
        model.learn_one(x, label)
        plain.learn_one(x, label)
    assert model.n_learned == plain.n_learned == len(BANANAS)
    assert model.model.n_support == plain.n_support == 0
    # each of the 10 triggers either skipped (counted) or adopted an empty solution
    assert model.n_skipped + model.n_consolidations == 10
    probe = [x for x, _ in BANANAS[:200]]
    assert [model.predict_one(x) for x in probe] == [plain.predict_one(x) for x in probe]


def test_one_class_or_rank_or_a_constant_target_counts_as_skipped():
    """The existing skip semantics ("fewer than two classes", "window lacks some ranks"):
    nothing to solve is a skipped consolidation, not an adopted one."""
    for case in ("perceptron, one class", "ranker, one rank", "svr, constant target, C auto"):
        make, label = CASES[case]
        model = Consolidated(make(), every=100, window_size=100, guard=0)
        for x, _ in BANANAS[:300]:
            model.learn_one(x, label)
        assert (model.n_skipped, model.n_consolidations) == (3, 0), case


def test_the_engine_learns_every_event_when_the_first_window_is_one_class(tmp_path):
    """``streamk replay --consolidate-every``: the first 600 events are class 1, so the
    perceptron holds no support vector at the consolidation at event 500. Before, the run
    exited 1 with a traceback there, and again on every restart."""
    events = [
        {"x": x, "y": 1 if i < 600 else int(y), "id": i}
        for i, (x, y) in enumerate(itertools.islice(datasets.Bananas(), 1500))
    ]
    log = tmp_path / "events.jsonl"
    write_log(log, events)
    snaps = tmp_path / "snaps"
    args = [
        "--learner", "perceptron", "--budget", "200", "--consolidate-every", "500",
        "--consolidate-window", "500", "--snapshot-dir", str(snaps), "--snapshot-every", "200",
        "--snapshot-seconds", "0", "--max-records", "100", "--json",
    ]  # fmt: skip
    run = streamk("replay", str(log), *args)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["learned"], summary["dead_lettered"]) == (1500, 0)
    overrides = {"learner": "perceptron", "budget": 200, "consolidate_every": 500}
    snapshot = SnapshotStore(snaps).latest(load_config(overrides=overrides)["model_name"])
    model = snapshot.model
    assert model.n_learned == model.consolidator_.n_seen == 1500
    assert model.n_skipped == 1  # event 500: one class so far
    assert model.n_consolidations == 2  # events 1000 and 1500
