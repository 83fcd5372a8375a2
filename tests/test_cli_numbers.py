"""The command line's numeric options: a value out of range is argparse's clear error
naming the option (exit 2), before anything runs. Before: ``streamk learn --limit -1``
and ``streamk demo --n -5`` ended in a ValueError traceback from ``islice``, and
``--batch-size 0``, ``--n 0`` or ``--every -1`` ran as if given another value."""

from __future__ import annotations

import json

import pytest
from streamk_run import streamk

BAD = [
    ("learn", "Bananas", "--limit", "-1"),
    ("learn", "Bananas", "--limit", "ten"),
    ("learn", "Bananas", "--n", "0"),
    ("learn", "Bananas", "--batch-size", "0"),
    ("learn", "Bananas", "--batch-size", "-5"),
    ("learn", "Bananas", "--budget", "-3"),
    ("learn", "Bananas", "--every", "-1"),
    ("learn", "Bananas", "--every", "nan"),
    ("demo", "--n", "-5"),
    ("broker", "--port", "70000"),
    ("produce", "events.jsonl", "--topic", "t", "--batch", "0"),
    ("produce", "events.jsonl", "--topic", "t", "--partitions", "0"),
    ("produce", "events.jsonl", "--topic", "t", "--block-size", "-2"),
    ("snapshot", "ls", "--topic", "t", "--timeout", "0"),
]


@pytest.mark.parametrize("args", BAD, ids=lambda a: " ".join(a))
def test_an_out_of_range_number_is_a_clear_error(args):
    option, value = args[-2], args[-1]
    run = streamk(*args)
    assert run.returncode == 2
    assert f"argument {option}: must be" in run.stderr
    assert repr(value) in run.stderr
    assert "Traceback" not in run.stderr


def test_budget_zero_still_means_no_budget_as_in_the_engine_config():
    """``--budget 0`` keeps the engine's meaning (``budget = 0``: unbounded)."""
    run = streamk("learn", "Bananas", "--limit", "300", "--budget", "0", "--json")
    assert run.returncode == 0, run.stderr
    unbounded = streamk("learn", "Bananas", "--limit", "300", "--json")
    assert json.loads(run.stdout)["n_support"] == json.loads(unbounded.stdout)["n_support"]
