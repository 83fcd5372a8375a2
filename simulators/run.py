"""Run a scenario end to end: generate (or reuse) its log, replay it through the engine, report.

``python -m simulators.run SCENARIO.toml [--out DIR] [--scale 0.1]`` writes into ``DIR``
(default ``simulations/<name>``): the log and ``truth.json``, ``snapshots/``,
``dead-letters/dead-letters.jsonl``, ``predictions.jsonl``, ``report.json``,
``report.md`` and, with matplotlib, ``report.png``. Exit code 0 when every injected
fault was dead-lettered with its reason and nothing else was, 1 otherwise, 2 for a bad
scenario file.

The engine is the production one, assembled by :func:`streamk.engine.runner.build_engine` over a
:class:`~streamk.sources.replay.ReplaySource`; run outputs (snapshots, dead letters,
predictions) are deleted before each run, so a run never resumes from an earlier one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamk.engine.config import load_config
from streamk.engine.deadletter import read_dead_letters
from streamk.engine.runner import build_engine
from streamk.sources.base import Record
from streamk.sources.replay import ReplaySource

from .generate import Generated, add_scenario_arguments, generate
from .report import compare_dead_letters, key_figure, write_plot, write_report
from .scenario import Scenario, ScenarioError, load_scenario

__all__ = ["run_scenario", "main", "ObservedReplay"]

SCHEMA_VERSION = 1
_REPORTED = (
    "learner",
    "kernel",
    "budget",
    "policy",
    "consolidate_every",
    "consolidate_mode",
    "consolidate_guard",
    "snapshot_every",
    "max_records",
)


class ObservedReplay(ReplaySource):
    """A :class:`ReplaySource` that calls ``observer(records_so_far)`` before each poll.

    The engine processes a batch completely before it polls again, so the observer sees
    the engine's state after exactly ``records_so_far`` records: a deterministic clock.
    ``max_batch`` caps a poll, so the clock ticks at least that often (the report's
    timeline points and consolidation marks are then exact to ``max_batch`` records).
    """

    def __init__(
        self, path: str | Path, observer: Callable[[int], None], max_batch: int | None = None
    ):
        super().__init__(path)
        self.observer = observer
        self.max_batch = max_batch
        self.count = 0

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        self.observer(self.count)
        if self.max_batch is not None:
            max_records = min(max_records, self.max_batch)
        batch = super().poll(max_records, timeout)
        self.count += len(batch)
        return batch


def _reuse(sc: Scenario, out: Path) -> Generated | None:
    truth_path = out / "truth.json"
    try:
        truth = json.loads(truth_path.read_text())
    except (OSError, ValueError):
        return None
    log = out / truth.get("log", "")
    if truth.get("fingerprint") != sc.fingerprint() or not log.is_file():
        return None
    if "segments" not in truth:  # written before the plot's landmarks were recorded
        return None
    return Generated(log, truth_path, truth)


def _clean_outputs(out: Path) -> None:
    for name in ("snapshots", "dead-letters"):
        shutil.rmtree(out / name, ignore_errors=True)
    for name in ("predictions.jsonl", "report.json", "report.md", "report.png"):
        (out / name).unlink(missing_ok=True)


def _predictions(path: Path) -> dict[str, Any]:
    """First prediction per event id (the engine may score a duplicate again)."""
    first: dict[str, Any] = {}
    if not path.is_file():
        return first
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if isinstance(rec.get("prediction"), dict) and rec.get("id") is None:
            rec = rec["prediction"]  # the engine hands the sink a whole record
        first.setdefault(str(rec.get("id")), rec.get("prediction"))
    return first


def run_scenario(
    sc: Scenario, out_dir: str | Path, *, regenerate: bool = False, plot: bool = True
) -> dict[str, Any]:
    """Generate (or reuse) the log, run the engine over it, write the report; return it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gen = None if regenerate else _reuse(sc, out)
    reused = gen is not None
    if gen is None:
        gen = generate(sc, out)
    _clean_outputs(out)
    overrides = {
        "model_name": "model",  # one engine, not a worker of a group: a fixed name
        **sc.engine_config(),
        "snapshot_dir": str(out / "snapshots"),
        "dead_letter_dir": str(out / "dead-letters"),
        "predictions_file": str(out / "predictions.jsonl"),
    }
    config = load_config(overrides=overrides, environ={})  # STREAMK_* must not leak in
    timeline: list[dict[str, Any]] = []
    consolidations: list[int] = []  # records processed when each consolidation was seen
    engine: Any = None
    next_mark = [sc.report_every]

    def observe(records: int) -> None:
        done = _consolidations(engine.model) if engine is not None else 0
        consolidations.extend([records] * (done - len(consolidations)))
        if records >= next_mark[0]:
            timeline.append(_point(engine, records))
            while next_mark[0] <= records:
                next_mark[0] += sc.report_every

    source = ObservedReplay(gen.log, observe, max_batch=min(sc.report_every, 100))
    engine = build_engine(config, source=source)
    result = engine.run()
    source.close()
    observe(result.records)  # a consolidation in the last batch
    final = _point(engine, result.records)
    if not timeline or timeline[-1]["records"] != final["records"]:
        timeline.append(final)
    letters = [
        (int(d.offset), d.code or "")
        for d in read_dead_letters(out / "dead-letters" / "dead-letters.jsonl")
    ]
    served = _predictions(out / "predictions.jsonl")
    labels = gen.truth["delayed_labels"]
    hits = [served[i] == y for i, y in labels.items() if i in served]
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "scenario": {"name": sc.name, "description": sc.description, "seed": sc.seed},
        "log": {
            "path": gen.log.name,
            "sha256": gen.truth["log_sha256"],
            "reused": reused,
            "counts": gen.truth["counts"],
        },
        "engine": {k: config[k] for k in _REPORTED if k in config},
        "metric": "MAE" if config["learner"] == "svr" else "accuracy",
        "rolling_window": engine.config.rolling_window,
        "every": sc.report_every,
        "timeline": timeline,
        "result": {
            "records": result.records,
            "learned": result.learned,
            "scored": result.scored,
            "dead_lettered": result.dead_lettered,
            "snapshots": result.snapshots,
            "seq": result.seq,
            "positions": result.positions,
            "support": final["support"],
            "dead_letter_reasons": result.metrics.get("dead_letter_reasons", {}),
        },
        "dead_letters": compare_dead_letters(gen.truth["malformed"], letters),
        "landmarks": {
            "segments": gen.truth["segments"],
            "drifts": gen.truth["drifts"],
            "consolidations": consolidations,
            "malformed": [b["offset"] for b in gen.truth["malformed"]],
            "duplicates": [d["offset"] for d in gen.truth["duplicates"]],
            "reordered": gen.truth["reordered"],
        },
        "served_accuracy": sum(hits) / len(hits) if hits else None,
        "timing": {"seconds": result.seconds, "events_per_second": result.events_per_second},
    }
    report["key_figure"] = key_figure(report)
    report["plot"] = None
    if plot:
        png = write_plot(report, out)
        report["plot"] = png.name if png else None
    write_report(report, out)
    return report


def _support(model: Any) -> int:
    """Support vectors of the learner, also inside a ``Consolidated`` wrapper.

    (``Engine.progress()["support"]`` reads ``model.n_support``, which the wrapper does
    not forward in streamk 0.1, so it reports 0 with consolidation on.)
    """
    inner = getattr(model, "model", model)
    return int(getattr(inner, "n_support", 0))


def _consolidations(model: Any) -> int:
    """Consolidations a ``Consolidated`` wrapper has run (0 for a bare learner)."""
    return int(getattr(model, "n_consolidations", 0))


def _point(engine: Any, records: int) -> dict[str, Any]:
    progress = engine.progress()
    return {
        "records": records,
        "rolling_metric": progress["rolling_metric"],
        "support": _support(engine.model),
        "learned": progress["learned"],
        "scored": progress["scored"],
        "dead_lettered": progress["dead_lettered"],
        "snapshots": progress["snapshots"],
    }


def main(argv: list[str] | None = None) -> int:
    """Replay a scenario through the engine and report accuracy, support, dead letters."""
    parser = argparse.ArgumentParser(
        prog="python -m simulators.run",
        description=main.__doc__,
        epilog="examples:\n"
        "  # a tenth of the shipped drift scenario, report in /tmp/sea\n"
        "  python -m simulators.run simulators/scenarios/sea_abrupt_drift.toml "
        "--out /tmp/sea --scale 0.1\n"
        "  # every shipped scenario, full length\n"
        "  for s in simulators/scenarios/*.toml; do python -m simulators.run $s; done",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_arguments(parser)
    parser.add_argument("--out", help="output directory (default: simulations/<name>)")
    parser.add_argument(
        "--regenerate", action="store_true", help="rebuild the log even if reusable"
    )
    parser.add_argument("--no-plot", action="store_true", help="skip report.png")
    parser.add_argument("--json", action="store_true", help="print report.json to stdout")
    args = parser.parse_args(argv)
    try:
        sc = load_scenario(args.scenario, scale=args.scale, length=args.length, seed=args.seed)
    except ScenarioError as exc:
        print(f"simulators: error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out or Path("simulations") / sc.name)
    if sc.scaleout:  # a simulated consumer group: workers, a crash, rebalances
        from .scaleout import run_scaleout

        out.mkdir(parents=True, exist_ok=True)
        gen = None if args.regenerate else _reuse(sc, out)
        gen = gen or generate(sc, out)
        _clean_outputs(out)
        rep = run_scaleout(sc, gen.log, out)
        text = json.dumps(rep, indent=1, default=str) if args.json else None
        print(text or (out / "report.md").read_text())
        return 0 if rep["exactly_once"]["ok"] else 1
    rep = run_scenario(sc, out, regenerate=args.regenerate, plot=not args.no_plot)
    if args.json:
        print(json.dumps(rep, indent=1, sort_keys=True, default=str))
    else:
        print((out / "report.md").read_text())
        print(f"report: {out / 'report.md'} and {out / 'report.json'}")
    return 0 if rep["dead_letters"]["ok"] else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
