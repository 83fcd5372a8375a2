"""The ``streamk`` command lines the process tests start, in one place.

Small groups join fast on tansu only with short group timings (design §8), so every
test that runs real engine processes uses these.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

#: tansu completes a join after the rebalance timeout: keep it short in tests
QUICK_GROUP = {
    "max_poll_interval_ms": 3000,
    "session_timeout_ms": 3000,
    "heartbeat_interval_ms": 500,
}


def run_args(bootstrap: str, topic: str, group: str, snapshot_dir: Any, **settings: Any) -> list:
    """``["run", "--bootstrap-servers", ..., "--quiet"]`` with ``settings`` as flags
    (``snapshot_every=150`` becomes ``--snapshot-every 150``; ``None`` leaves a flag out)."""
    args = ["run", "--bootstrap-servers", bootstrap, "--topic", topic, "--group", group]
    args += ["--snapshot-dir", str(snapshot_dir)]
    for key, value in {**QUICK_GROUP, **settings}.items():
        if value is not None:
            args += ["--" + key.replace("_", "-"), str(value)]
    return [*args, "--quiet"]


def recreate_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Delete ``topic`` and create it again, empty (bounded wait: deletion is asynchronous)."""
    import time

    from kafka.admin import KafkaAdminClient

    from streamk.cli.broker import create_topic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([topic], timeout_ms=10_000)
    finally:
        admin.close()
    deadline = time.monotonic() + 30
    while not create_topic(bootstrap, topic, partitions=partitions):
        assert time.monotonic() < deadline, "the deleted topic never went away"
        time.sleep(0.2)


def streamk(*args: str, cwd: Any = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real ``streamk`` entry point in a subprocess (``env``: added to this one's)."""
    return subprocess.run(
        [sys.executable, "-m", "streamk.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
    )
