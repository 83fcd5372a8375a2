"""The ``streamk run`` command line the process tests start, in one place.

Small groups join fast on tansu only with short group timings (design §8), so every
test that runs real engine processes uses these.
"""

from __future__ import annotations

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
