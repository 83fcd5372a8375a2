"""A learner whose budget is a Projectron is not consolidated, in the API and in the engine.

The batch solution hands the Projectron ``fill x budget`` support vectors, more than the
feature space of a linear (2) or degree-2 (6) kernel on Bananas has dimensions, and the
Projectron's inverse Gram of that near-singular set blew the coefficients up: 1.5e17 with a
linear perceptron, inf with the adatron, whose snapshots then failed to load (the model was
lost). Oracle for the restore path: the plain learner fed the same events.
"""

from __future__ import annotations

import itertools
import logging
import warnings

import pytest
from river import datasets
from streamk_run import streamk

from streamk.budget import Merge, Projectron, RemoveOldest, RemoveSmallest
from streamk.consolidation import Consolidated
from streamk.errors import ConfigError
from streamk.kernels import RBF, Linear
from streamk.learners import KernelAdatron, KernelPerceptron, OnlineSVR
from streamk.sources.replay import write_log

BANANAS = list(itertools.islice(datasets.Bananas(), 300))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("make", [KernelPerceptron, KernelAdatron, OnlineSVR])
def test_a_projectron_budget_is_refused_with_the_reason_and_what_to_use(make):
    with pytest.raises(ConfigError, match="Projectron") as refused:
        Consolidated(make(kernel=Linear(), budget=Projectron(100)), every=500)
    assert "consolidate_every = 0" in str(refused.value)
    assert "RemoveOldest" in str(refused.value)


@pytest.mark.parametrize("budget", [100, RemoveOldest(100), RemoveSmallest(100), Merge(100)])
def test_other_budgets_are_still_consolidated(budget):
    model = Consolidated(KernelPerceptron(kernel=RBF(), budget=budget), every=100, guard=0)
    for x, y in BANANAS:
        model.learn_one(x, y)
    assert model.n_consolidations >= 1


def test_the_engine_refuses_the_projectron_with_consolidation_at_start_up(tmp_path):
    log = tmp_path / "events.jsonl"
    write_log(log, [{"x": x, "y": y} for x, y in BANANAS])
    snaps = tmp_path / "snaps"
    run = streamk(
        "replay", str(log), "--learner", "adatron", "--kernel", "linear", "--policy",
        "Projectron", "--budget", "100", "--consolidate-every", "100", "--snapshot-dir",
        str(snaps), "--quiet",
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "Projectron is not consolidated" in run.stderr and "Traceback" not in run.stderr
    assert not list(snaps.rglob("*.snapshot"))  # nothing learned, nothing written
    plain = streamk(  # the same without consolidation runs
        "replay", str(log), "--learner", "adatron", "--kernel", "linear", "--policy",
        "Projectron", "--budget", "100", "--snapshot-dir", str(tmp_path / "plain"), "--quiet",
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr


def test_a_state_written_before_the_refusal_still_loads_so_its_learner_can_be_taken_out(caplog):
    """Its learner is recovered (the engine with consolidate_every = 0 takes it out)."""
    plain = KernelPerceptron(kernel=RBF(), budget=Projectron(50))
    for x, y in BANANAS:
        plain.learn_one(x, y)
    wrapped = Consolidated(KernelPerceptron(kernel=RBF(), budget=50), every=1000, guard=0)
    state = wrapped.state()
    state["model"] = plain.state()  # what an older streamk wrote around a Projectron
    caplog.set_level(logging.WARNING, logger="streamk.consolidation")
    restored = type(wrapped).from_state(state)
    assert any("Projectron" in r.getMessage() for r in caplog.records)
    learner = restored.served_model
    assert isinstance(learner.budget, Projectron)
    assert [learner.predict_one(x) for x, _ in BANANAS] == [
        plain.predict_one(x) for x, _ in BANANAS
    ]
    with pytest.raises(ConfigError, match="Projectron"):  # a fresh one is still refused
        Consolidated(learner, every=1000)
