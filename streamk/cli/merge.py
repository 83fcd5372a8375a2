"""``streamk merge``: the merge role of a scaled-out group (issue 18, design §9)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from .output import SCHEMA_VERSION, format_summary, machine

__all__ = ["cmd_merge", "MERGE_EXAMPLES"]

MERGE_EXAMPLES = """examples:
  # every merge_every seconds: the workers' newest snapshots on snapshot_topic -> "merged"
  streamk merge --config streamk.toml
  # one pass over a shared file store (no snapshot topic), summary as JSON
  streamk merge --snapshot-dir ./snapshots --topic events --once --json
"""


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge the workers' newest snapshots into one model and publish it under `merge_name`.

    Workers are the models on the snapshot topic (or, without one, in the file store) that
    learned from `topic`. The merged snapshot has no stream offsets (it is not a worker);
    its metadata lists the worker snapshots (name, seq, offsets) it came from. A pass whose
    worker snapshots are unchanged publishes nothing, so restarts never republish a merge.
    """
    from ..engine.config import load_config
    from ..merge.role import Merger
    from ..merge.serve import MERGE_METRICS, role_metrics, serve_metrics
    from .run import engine_overrides

    config = load_config(args.config, engine_overrides(args))
    quiet = args.quiet or args.json
    metrics = role_metrics(own=MERGE_METRICS)
    metrics.set("merge_seq", -1)
    metrics.stall_seconds = max(120.0, 3 * config["merge_every"])  # a pass per merge_every
    merger = Merger(config)

    def show(done: Any) -> None:
        metrics.beat()
        metrics.inc("merge_passes_total")
        metrics.inc("merge_published_total", float(done.published))
        metrics.inc("merge_failures_total", float(done.skipped.startswith("failed")))
        metrics.set("merge_seq", done.seq)
        metrics.set("merge_last_pass_seconds", done.pass_seconds)
        metrics.set("merge_workers", len(done.workers))
        metrics.set("merge_excluded", len(done.excluded))
        if not quiet:
            print(done.line(merger.name), file=sys.stderr, flush=True)

    passes = []
    try:
        serve_metrics(config, metrics, "streamk merge")
        metrics.set_ready(True)
        if args.once:
            passes.append(merger.run_once())
            show(passes[-1])
        else:
            stop = threading.Event()

            def handler(signum: int, frame: Any) -> None:
                print(f"streamk: {signal.Signals(signum).name}: stopping", file=sys.stderr)
                stop.set()

            signal.signal(signal.SIGTERM, handler)
            signal.signal(signal.SIGINT, handler)
            merger.run(stop, lambda done: (passes.append(done), show(done)))
    finally:
        metrics.set_ready(False)
        metrics.close()
        merger.close()
    published = [p for p in passes if p.published]
    last = passes[-1] if passes else None
    summary = {
        "schema_version": SCHEMA_VERSION,
        "merge_name": merger.name,
        "passes": len(passes),
        "published": len(published),
        "seq": None if last is None else last.seq,
        # models of the file store no snapshot of which could be read: not in the merge
        "excluded": [] if last is None else last.excluded,
        # models of other consumer groups (a canary's): theirs to merge, not ours
        "other_groups": {} if last is None else last.other_groups,
        "last": None if last is None else last.as_dict(),
        "machine": machine(),
    }
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:  # --quiet silences progress only, as for run, replay, demo and learn
        print(format_summary(summary, skip=("schema_version", "machine", "last")))
    return 0
