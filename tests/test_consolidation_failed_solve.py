"""A consolidation whose solve fails keeps the on-line model, logs one WARNING and counts it.

Found with a ``KernelPerceptron(Polynomial(3))`` fed features of 1e60, whose window's Gram
overflowed (``SolverError: K has non-finite entries``): that came out of ``learn_one``
after the event was learned, and the engine took it for the event's refusal and logged and
counted nothing. Such rows are now refused by the learner (``tests/test_kernel_value_range.py``),
so here every solve fails on the Gram bound instead (``MAX_GRAM_BYTES`` set to one row's:
a ``SolverError`` raised by the solve, as the overflow was). Oracle: the plain learner fed
the same events (a failed solve must leave the model exactly as it learned).
"""

from __future__ import annotations

import copy
import itertools
import logging
import warnings

import numpy as np
import pytest
from river import datasets

from streamk.consolidation import Consolidated, Consolidator, limits
from streamk.kernels import Polynomial
from streamk.learners import KernelPerceptron

EVENTS = list(itertools.islice(datasets.Bananas(), 400))


@pytest.fixture(autouse=True)
def _every_solve_fails(monkeypatch):
    monkeypatch.setattr(limits, "MAX_GRAM_BYTES", 8)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _make() -> KernelPerceptron:
    return KernelPerceptron(kernel=Polynomial(degree=3), budget=50)


def _failures(caplog) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "streamk.consolidation" and r.levelno == logging.WARNING
        and "consolidation failed" in r.getMessage()
    ]  # fmt: skip


@pytest.mark.parametrize("mode", ["sync", "background"])
def test_a_failed_solve_keeps_the_online_model_logs_and_counts(mode, caplog):
    model = Consolidated(_make(), every=100, window_size=100, guard=0, mode=mode)
    plain = _make()
    caplog.set_level(logging.WARNING, logger="streamk.consolidation")
    for x, y in EVENTS:
        model.learn_one(x, y)  # raised SolverError at event 97
        plain.learn_one(x, y)
    model.join()
    assert model.n_learned == plain.n_learned == len(EVENTS)
    assert model.n_consolidations == 0 and model.n_failed >= 4  # at least the every=100 ones
    S, P = model.model.support_, plain.support_
    assert np.array_equal(S.X, P.X) and np.array_equal(S.coef, P.coef)
    assert np.array_equal(S.ids, P.ids)
    assert [model.predict_one(x) for x, _ in EVENTS] == [plain.predict_one(x) for x, _ in EVENTS]
    records = _failures(caplog)
    assert len(records) == model.n_failed  # one WARNING per failed attempt, not per event
    assert "SolverError" in records[0].getMessage() and "Gram" in records[0].getMessage()
    assert model.metrics()["consolidations_failed"] == model.n_failed


def test_a_failure_waits_a_tenth_of_the_window_before_when_full_tries_again():
    """A full learner whose solve fails stays full: ``when_full`` must not retry each event."""
    model = Consolidated(_make(), every=None, window_size=100, guard=0)
    plain, full_from = _make(), None
    for i, (x, y) in enumerate(EVENTS):
        model.learn_one(x, y)
        plain.learn_one(x, y)
        if full_from is None and plain.n_support >= 50:
            full_from = i
    assert full_from is not None and model.n_failed >= 1
    assert model.n_failed <= (len(EVENTS) - full_from) // 10 + 1


def test_the_failure_count_is_kept_in_the_state_and_older_states_load_with_zero():
    model = Consolidated(_make(), every=100, window_size=100, guard=0)
    for x, y in EVENTS[:250]:
        model.learn_one(x, y)
    assert model.n_failed > 0
    state = model.consolidator_.state()
    assert Consolidator.from_state(state).n_failed == model.n_failed
    older = copy.deepcopy(state)
    del older["figures"]["n_failed"]  # a snapshot written before the counter existed
    assert Consolidator.from_state(older).n_failed == 0


def test_a_bad_solver_or_compress_is_refused_at_construction():
    """They were refused at the first solve; a failed solve is now logged, not raised."""
    from streamk.errors import ConfigError

    with pytest.raises(ConfigError, match="solver"):
        Consolidated(_make(), solver="smo")
    with pytest.raises(ConfigError, match="compress"):
        Consolidated(_make(), compress="zip")


def test_the_engine_exports_the_failures_as_a_metric(caplog):
    """``streamk_consolidation_failures_total`` (docs/operations.md, "Metrics to watch"):
    the engine learned through the failed solves and counted none of them. Its count is
    the WARNINGs' (every solve here fails: the ``every`` ones and the full set's)."""
    from streamk.engine import Engine, EngineConfig
    from streamk.sources.iterable import IterableSource

    engine = Engine(
        IterableSource(lambda: iter(EVENTS), name="big"),
        lambda: Consolidated(_make(), every=100, window_size=100, guard=0),
        config=EngineConfig(max_records=50, snapshot_every=None, snapshot_seconds=None),
    )
    caplog.set_level(logging.WARNING, logger="streamk.consolidation")
    result = engine.run()
    assert result.learned == len(EVENTS)
    failed = engine.metrics.snapshot()["consolidation_failures_total"]
    assert failed == len(_failures(caplog)) >= len(EVENTS) // 100
