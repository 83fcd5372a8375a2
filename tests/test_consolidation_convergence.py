"""A consolidation's solve that stops at its limit logs one WARNING a user can act on.

Every consolidation of an ``OnlineSVR(Polynomial(2))`` on Friedman printed a raw
``ConvergenceWarning`` recommending ``max_iter``/``tol``, which neither ``Consolidated`` nor
the engine exposed (``Consolidated(..., tol=...)`` was a ``TypeError``). Now the
consolidator collects the solver's message (per thread, so the background worker does not
touch the process's warning filters), logs it once per solve on ``streamk.consolidation``,
and ``Consolidated`` takes ``tol`` and ``max_epochs`` (river-style parameters, passed to the
``Consolidator`` that had them). Oracle: the solver's own ``status`` (1: stopped at its
limit) read through the consolidator's figures, and the plain ``Consolidator``.
"""

from __future__ import annotations

import logging
import warnings

import pytest
from river.datasets import synth

from streamk.consolidation import Consolidated
from streamk.errors import ConfigError, ConvergenceWarning
from streamk.kernels import Polynomial
from streamk.learners import OnlineSVR

EVENTS = list(synth.Friedman(seed=1).take(500))  # three solves: "once per solve", not once


def _run(mode: str = "sync", **params):
    model = Consolidated(
        OnlineSVR(kernel=Polynomial(degree=2), budget=200),
        every=500,
        window_size=500,
        mode=mode,
        **params,
    )
    statuses = []
    with warnings.catch_warnings(record=True) as raw:
        warnings.simplefilter("always")
        for x, y in EVENTS:
            before = model.n_consolidations + model.n_skipped + model.n_failed
            model.learn_one(x, y)
            model.join()  # (background: settle each solve, so its status is read here)
            if model.n_consolidations + model.n_skipped + model.n_failed > before:
                statuses.append(model.last_status)
    return model, statuses, [w for w in raw if issubclass(w.category, ConvergenceWarning)]


def _logged(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "streamk.consolidation" and "stopped before converging" in r.getMessage()
    ]


@pytest.mark.parametrize("mode", ["sync", "background"])
def test_a_solve_at_its_limit_logs_once_and_warns_nothing_raw(mode, caplog):
    caplog.set_level(logging.WARNING, logger="streamk.consolidation")
    model, statuses, raw = _run(mode)
    assert raw == []  # the raw ConvergenceWarning no longer reaches stderr
    logged = _logged(caplog)
    assert statuses and statuses.count(1) == len(logged) == len(statuses)  # one per solve
    text = logged[0]
    assert "svr_dual_no_bias stopped at max_epochs=1000" in text
    assert "max_iter" not in text  # a knob that exists: Consolidated's max_epochs and tol
    assert "Consolidated(..., tol=0.001, max_epochs=1000)" in text
    assert "not optimal" in text and "guard" in text


def test_tol_and_max_epochs_are_parameters_that_reach_the_solver(caplog):
    caplog.set_level(logging.WARNING, logger="streamk.consolidation")
    model, statuses, raw = _run(tol=0.05, max_epochs=20_000)
    assert (model.tol, model.max_epochs) == (0.05, 20_000)
    assert (model.consolidator_.tol, model.consolidator_.max_epochs) == (0.05, 20_000)
    assert statuses and set(statuses) == {0} and _logged(caplog) == [] and raw == []
    restored = type(model).from_state(model.state())
    assert (restored.tol, restored.max_epochs) == (0.05, 20_000)
    clone = model.clone()
    assert (clone.tol, clone.max_epochs) == (0.05, 20_000)


@pytest.mark.parametrize(
    "params", [{"tol": 0.0}, {"tol": float("inf")}, {"max_epochs": 0}, {"max_epochs": 1.5}]
)
def test_bad_tol_or_max_epochs_are_refused_at_construction(params):
    with pytest.raises(ConfigError, match=next(iter(params))):
        Consolidated(OnlineSVR(), **params)
