"""``/healthz`` and ``/ready`` on the metrics port (issue 19: both answered 404)."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest
from http_probe import free_port

from streamk.engine.config import load_config
from streamk.engine.metrics import Metrics
from streamk.engine.runner import build_engine
from streamk.sources.iterable import IterableSource


def status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_probes_follow_the_loop_and_the_assignment():
    metrics = Metrics()
    port = metrics.serve(0)
    try:
        assert status(port, "/healthz") == 200
        assert status(port, "/ready") == 503  # not restored or assigned yet
        metrics.set_ready(True)
        assert status(port, "/ready") == 200
        metrics.stall_seconds = 0.05
        time.sleep(0.1)  # no beat: the loop has stalled
        assert status(port, "/healthz") == 503
        metrics.beat()
        metrics.stall_seconds = 60
        assert status(port, "/healthz") == 200
        assert status(port, "/metrics") == 200
        assert status(port, "/nope") == 404
    finally:
        metrics.close()


def test_a_running_engine_is_ready_and_alive_then_not_ready(tmp_path):
    def slow_events():
        for i in range(40):
            time.sleep(0.05)
            yield {"a": float(i % 7), "b": float(i % 3)}, i % 2 == 0

    config = load_config(
        overrides={"snapshot_dir": str(tmp_path), "metrics_port": 0, "stop_when_idle": 0.5},
        environ={},
    )
    engine = build_engine(config, source=IterableSource(slow_events))
    port = engine.metrics.serve(0)  # a free port of its own for the test
    seen = {}

    def probe():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "ready" not in seen:
            if status(port, "/ready") == 200:
                seen["ready"] = True
                seen["healthz"] = status(port, "/healthz")
            time.sleep(0.02)

    watcher = threading.Thread(target=probe)
    watcher.start()
    engine.run()
    watcher.join()
    try:
        assert seen == {"ready": True, "healthz": 200}
        assert status(port, "/ready") == 503  # stopped
    finally:
        engine.metrics.close()


def test_the_rolling_metric_gauge_has_no_value_before_a_labelled_event(tmp_path):
    """It read 0 (a perfect MAE for a regressor) until the first labelled event: it is
    NaN in /metrics, and a snapshot written before then holds no rolling metric."""
    from streamk.snapshot import SnapshotStore

    config = load_config(overrides={"snapshot_dir": str(tmp_path), "learner": "svr"})
    engine = build_engine(
        config, source=IterableSource([({"a": float(i)}, None) for i in range(40)])
    )
    assert "streamk_rolling_metric nan" in engine.metrics.render()
    engine.run()
    assert "streamk_rolling_metric nan" in engine.metrics.render()
    snap = SnapshotStore(tmp_path).latest(config["model_name"])
    assert snap is not None and "rolling_metric" not in snap.metrics
    assert snap.metrics["events_scored"] == 40
    labelled = build_engine(
        load_config(overrides={"snapshot_dir": str(tmp_path / "b"), "learner": "svr"}),
        source=IterableSource([({"a": float(i)}, 2.0 * i) for i in range(40)]),
    )
    labelled.run()
    assert "streamk_rolling_metric nan" not in labelled.metrics.render()
    done = SnapshotStore(tmp_path / "b").latest(config["model_name"])
    assert done.metrics["rolling_metric"] == labelled._rolling.get() > 0  # MAE, not 0


@pytest.mark.kafka
def test_a_worker_without_a_partition_stands_by_ready(kafka_broker, topic_name, tmp_path):
    """deploy/README.md: ``/ready`` is 200 once the model is restored and the group gave the
    worker its assignment, even an empty one (more workers than partitions: the spare
    stands by; a readiness that waited for a partition would hold it out of a rollout)."""
    import subprocess
    import sys

    from streamk_run import run_args
    from test_engine_crash import make_events, produce

    produce(kafka_broker.bootstrap_servers, topic_name, make_events(200, seed=8))
    ports = [free_port(), free_port()]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "streamk.cli"]
            + run_args(
                kafka_broker.bootstrap_servers,
                topic_name,
                f"{topic_name}-g",
                tmp_path / f"w{i}",
                model_name=f"w{i}",
                metrics_port=port,
                stop_when_idle=8.0,
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i, port in enumerate(ports)
    ]
    try:
        deadline, events = time.monotonic() + 60, {}
        while time.monotonic() < deadline and (len(events) < 2 or max(events.values()) < 200):
            for port in ports:
                try:
                    ready = status(port, "/ready") == 200
                except urllib.error.URLError:  # not serving yet
                    continue
                if ready:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as resp:
                        text = resp.read().decode()
                    line = next(x for x in text.splitlines() if x.startswith("streamk_events_in"))
                    events[port] = float(line.split()[1])
            time.sleep(0.3)
        assert sorted(events.values()) == [0, 200], events  # both ready, one with nothing
        for proc in procs:
            assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()[-2000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
