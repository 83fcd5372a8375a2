"""Issue 19's last surfaces: every learner named in every command's help, one default
broker address, the group timings reaching librdkafka, and the store's warnings on the
command line. Each CLI test runs the real ``streamk`` entry point in a subprocess.
"""

from __future__ import annotations

import json
import random

import pytest
from streamk_run import streamk

from streamk.engine.registry import LEARNERS
from streamk.sources.replay import write_log


@pytest.mark.parametrize("command", ["learn", "run", "replay"])
def test_every_learner_is_named_in_the_help(command):
    """``run --help`` lacked margin-perceptron, and novelty had no name at all."""
    done = streamk(command, "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # argparse wraps lines
    for name in LEARNERS:
        assert name in text, (command, name)
    assert "novelty" in LEARNERS and "margin-perceptron" in LEARNERS


@pytest.mark.parametrize(
    "args", [("run", "--help"), ("produce", "--help"), ("snapshot", "ls", "--help")]
)
def test_every_command_defaults_to_the_same_broker_address(args):
    """``produce`` and ``snapshot`` defaulted to localhost:9092, ``run`` to 127.0.0.1:9092."""
    done = streamk(*args)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "127.0.0.1:9092" in text and "localhost" not in text


@pytest.mark.parametrize(
    "settings, librdkafka_key",
    [
        ({"session_timeout_ms": 3_600_001, "max_poll_interval_ms": 86_400_000}, "session.timeout"),
        ({"heartbeat_interval_ms": 3_600_001}, "heartbeat.interval"),
        ({"max_poll_interval_ms": 86_400_001}, "max.poll.interval"),
    ],
)
def test_confluent_transport_hands_the_group_timings_to_librdkafka(settings, librdkafka_key):
    """With ``transport = "confluent"`` the three group timings were dropped (librdkafka ran
    with its defaults). Values inside streamk's ranges but outside librdkafka's show that
    each one reaches the consumer: librdkafka refuses it by name."""
    pytest.importorskip("confluent_kafka", reason="optional [kafka-fast] transport")
    from streamk.engine.config import load_config
    from streamk.engine.runner import kafka_source
    from streamk.errors import ConfigError

    config = load_config(
        None, {"transport": "confluent", "bootstrap_servers": "127.0.0.1:1", **settings}
    )
    with pytest.raises(ConfigError, match=librdkafka_key):
        kafka_source(config).close()


def test_confluent_session_timeout_above_the_poll_interval_names_both_keys():
    """librdkafka refuses it in its own words; kafka-python (the default) accepts it."""
    from streamk.engine.config import load_config
    from streamk.errors import ConfigError

    timings = {"session_timeout_ms": 20_000, "max_poll_interval_ms": 10_000}
    with pytest.raises(ConfigError, match="session_timeout_ms .* max_poll_interval_ms"):
        load_config(None, {"transport": "confluent", **timings})
    assert load_config(None, timings)["session_timeout_ms"] == 20_000


def test_a_damaged_snapshot_is_reported_on_the_command_line(tmp_path):
    """The CLI configures logging, so the store's "damaged ... moved it aside" reaches the
    operator (docs/operations.md tells them to look for it), and the run resumes from the
    snapshot before."""
    rng = random.Random(2)
    events = [
        {"x": {"a": rng.uniform(-1, 1)}, "y": rng.random() > 0.5, "id": i} for i in range(900)
    ]
    write_log(tmp_path / "e.jsonl", events[:600])
    snaps = tmp_path / "snaps"
    args = ["replay", str(tmp_path / "e.jsonl"), "--snapshot-dir", str(snaps)]
    first = streamk(*args, "--snapshot-every", "300")
    assert first.returncode == 0, first.stderr
    files = sorted((snaps / "model").glob("*.snapshot"))
    assert len(files) == 2  # after the batch that passed 300 events, and at the end
    older = json.loads(streamk("snapshot", "show", str(files[0]), "--json").stdout)
    (resume,) = [o for parts in older["offsets"].values() for o in parts.values()]
    files[-1].write_bytes(files[-1].read_bytes()[:-20])  # truncated, as by a full disk
    write_log(tmp_path / "e.jsonl", events)  # the log grew meanwhile
    again = streamk(*args, "--json")
    assert again.returncode == 0, again.stderr
    assert "is damaged" in again.stderr and files[-1].name in again.stderr
    assert json.loads(again.stdout)["learned"] == len(events) - resume < 900 - 300


def test_an_unknown_metrics_host_names_the_key(tmp_path):
    """One of the six errors that did not name their key (issue 19)."""
    write_log(tmp_path / "e.jsonl", [{"x": {"a": 1.0}, "y": True}])
    done = streamk(
        "replay",
        str(tmp_path / "e.jsonl"),
        *("--metrics-port", "1", "--metrics-host", "no-such-host.invalid"),
        *("--snapshot-dir", str(tmp_path / "s")),
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "metrics_host 'no-such-host.invalid'" in done.stderr


def test_deploy_readme_says_the_endpoint_binds_metrics_host():
    """deploy/README said /metrics binds to 127.0.0.1 only; the config sets metrics_host."""
    from pathlib import Path

    text = " ".join((Path(__file__).parents[1] / "deploy" / "README.md").read_text().split())
    assert "binds `metrics_host`" in text
    assert "127.0.0.1 only" not in text
