"""Shared pytest fixtures: one real local Kafka-compatible broker per session, topic names.

Tests marked ``@pytest.mark.kafka`` get the session broker automatically (and a
test that asks for ``kafka_broker`` is marked ``kafka``, so ``-m "not kafka"``
deselects it). If the tansu binary is unavailable the broker fixture *fails*
when the ``CI`` environment variable is set (to anything but ``""``, ``0`` or
``false``) and skips with the install hint otherwise: CI never skips silently.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamk.cli.broker import LocalBroker, find_tansu
from streamk.errors import BrokerError

_topic_counter = itertools.count()


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


#: Seconds each long test file takes, one ``SECONDS PATH`` a line (``#``: a comment).
FILE_SECONDS = Path(__file__).with_name("file_seconds.txt")


def pytest_configure(config: pytest.Config) -> None:
    """Keep the file order below: xdist's own (most tests first) would start the files of a
    few long tests last, where the slowest of them sets how long the whole run takes."""
    if getattr(config.option, "loadscopereorder", False):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the broker fixture as ``kafka``; in an xdist worker, put
    the files that take longest first (longest-first: the run ends on short files)."""
    for item in items:
        if "kafka_broker" in getattr(item, "fixturenames", ()) and not item.get_closest_marker(
            "kafka"
        ):
            item.add_marker(pytest.mark.kafka)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker sorts alike: same collection
        items[:] = longest_files_first(items, file_seconds(FILE_SECONDS))


def file_seconds(path: Path) -> dict[str, float]:
    """``{path relative to the repository: seconds}`` from a ``SECONDS PATH`` file."""
    seconds: dict[str, float] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            value, name = line.split(maxsplit=1)
            seconds[name] = float(value)
    return seconds


def longest_files_first(items: list[pytest.Item], seconds: dict[str, float]) -> list[pytest.Item]:
    """``items`` with each file's tests kept together and in order, the files sorted by
    ``seconds`` (longest first; a file not listed counts 0 and keeps its place after)."""
    root = Path(__file__).resolve().parents[1]

    def weight(item: pytest.Item) -> float:
        return -seconds.get(Path(os.path.relpath(item.path, root)).as_posix(), 0.0)

    return sorted(items, key=weight)  # stable: the order within a file is kept


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[LocalBroker]:
    """One tansu broker on 127.0.0.1 for the whole session, stopped at the end."""
    try:
        find_tansu()
    except BrokerError as exc:
        if _in_ci():
            pytest.fail(f"CI is set and the Kafka broker is unavailable: {exc}", pytrace=False)
        pytest.skip(f"local Kafka broker unavailable: {exc}")
    broker = LocalBroker()  # a start-up failure is a real failure, never a skip
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(autouse=True)
def _kafka_marker_uses_broker(request: pytest.FixtureRequest) -> None:
    """Give tests marked ``kafka`` the session broker (fail/skip as documented above)."""
    if request.node.get_closest_marker("kafka") is not None:
        request.getfixturevalue("kafka_broker")


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique within the session, derived from the test's node id."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.nodeid.split("::", 1)[-1]).strip("-")
    return f"t-{base[:180]}-{next(_topic_counter)}"


@pytest.fixture
def river_checks():
    """Run every check of ``river.checks`` on a model (honouring ``_unit_test_skips``).

    Returns how many ran, so a test can assert the suite was not silently empty.
    ``wrap`` adapts a check first (e.g. to swap a downloaded data set for a shipped one).
    """
    from river import checks

    def run(model, wrap=lambda check: check) -> int:
        ran = 0
        for check in checks.yield_checks(model):
            if check.__name__ in model._unit_test_skips():
                continue
            wrap(check)(model.clone())
            ran += 1
        return ran

    return run
