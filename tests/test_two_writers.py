"""Two engines given the same ``model_name`` and the same snapshot directory (a
misconfigured deployment): the second to save stops with "another engine is writing model
…" (docs/operations.md), and the other learns the whole stream, each event once.

Before session 23 neither was refused: each saved above the other's newest seq, retention
then deleted one model's snapshots, and a restart skipped the events only that model held
(1,200 of 2,400). Real ``streamk run`` processes, a real broker, a real file store.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from streamk_run import run_args
from test_engine_crash import make_events, produce

from streamk.snapshot import SnapshotStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N, PARTS = 2400, 2


def test_the_second_engine_to_save_a_model_stops_and_no_event_is_lost(
    kafka_broker, topic_name, tmp_path
):
    produce(kafka_broker.bootstrap_servers, topic_name, make_events(N, seed=5), partitions=PARTS)
    store = tmp_path / "snapshots"
    args = run_args(
        kafka_broker.bootstrap_servers,
        topic_name,
        f"{topic_name}-group",
        store,
        model_name="m",
        snapshot_every=150,
        snapshot_seconds=0,
        max_records=50,
        budget=80,
        stop_when_idle=8.0,
    )
    cmd = [sys.executable, "-m", "streamk.cli", *args]
    procs = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=240)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    refused = [i for i, err in enumerate(outs) if "another engine is writing model 'm'" in err]
    assert len(refused) == 1, outs  # both were assigned a partition and saved
    assert procs[refused[0]].returncode == 2
    assert procs[1 - refused[0]].returncode == 0, outs[1 - refused[0]][-2000:]
    snap = SnapshotStore(store).latest("m")
    assert snap.offsets == {topic_name: {p: N // PARTS for p in range(PARTS)}}
    assert snap.model.n_learned == N  # every event in the survivor's model, once
