"""Scenario → event log (msgpack or JSON lines) plus a ground-truth sidecar (JSON).

``python -m simulators.generate SCENARIO.toml --out DIR [--scale 0.1]`` writes
``DIR/events.msgpack`` (or ``events.jsonl``) and ``DIR/truth.json``.

The log, in order of construction (each step has its own seeded random generator, so a
change to one share does not reshuffle the others):

1. the segments' events, with ``id`` = their index in the generated stream;
2. labels: an event is labelled (``{x, y, id}``), unlabelled for good (``{x, id}``), or
   **delayed**: ``{x, id}`` now and, ``delay`` events later, the *same* ``x`` and ``id``
   with ``y`` as a labelled event (test-then-train scores it once more, then learns it);
3. out of order: a share of messages swapped with one up to ``window`` places later;
4. duplicates: a share of messages delivered again within ``window`` places;
5. malformed messages of the named kinds at random places (see :mod:`simulators.faults`).

The record at index *i* of the log has offset *i* in :class:`~streamk.sources.replay.ReplaySource`.
The same scenario, scale and seed give byte-identical logs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamk.engine.events import encode_event

from .faults import code_of, malformed
from .scenario import Scenario, ScenarioError, load_scenario
from .streams import iter_segment

__all__ = ["Generated", "build_log", "generate", "main"]

SCHEMA_VERSION = 1


@dataclass
class _Msg:
    payload: bytes
    kind: str  # labelled | unlabelled | delayed | label | duplicate | malformed
    id: int | None = None
    fault: str | None = None
    moved: bool = False


@dataclass
class Generated:
    """Paths and ground truth of one generated log."""

    log: Path
    truth_path: Path
    truth: dict[str, Any] = field(default_factory=dict)


def _encode(event: dict[str, Any], fmt: str) -> bytes:
    if fmt == "jsonl":
        return json.dumps(event).encode()
    return encode_event(**event)


def _rng(sc: Scenario, step: str) -> random.Random:
    return random.Random(f"{sc.seed}:{step}")  # str seeds hash with SHA-512: stable everywhere


def _clean(sc: Scenario) -> list[tuple[dict[str, float], Any]]:
    out: list[tuple[dict[str, float], Any]] = []
    for i, seg in enumerate(sc.segments):
        out.extend(iter_segment(seg.generator, seg.length, seg.params, seed=sc.seed + i))
    return out


def _labelled(sc: Scenario, events: list[tuple[dict[str, float], Any]]) -> tuple[list[_Msg], dict]:
    rng = _rng(sc, "labels")
    msgs: list[_Msg] = []
    pending: list[tuple[int, int]] = []  # (due index, event id), in due order
    delayed: dict[int, Any] = {}
    fmt = sc.format

    def flush(upto: int) -> None:
        while pending and pending[0][0] <= upto:
            _, eid = pending.pop(0)
            x, y = events[eid]
            msgs.append(_Msg(_encode({"x": x, "y": y, "id": eid}, fmt), "label", eid))

    for i, (x, y) in enumerate(events):
        flush(i)
        r = rng.random()
        if r < sc.unlabelled:
            msgs.append(_Msg(_encode({"x": x, "id": i}, fmt), "unlabelled", i))
        elif r < sc.unlabelled + sc.delayed:
            msgs.append(_Msg(_encode({"x": x, "id": i}, fmt), "delayed", i))
            pending.append((i + sc.delay, i))
            delayed[i] = y
        else:
            msgs.append(_Msg(_encode({"x": x, "y": y, "id": i}, fmt), "labelled", i))
    flush(len(events) + sc.delay)
    return msgs, delayed


def _reorder(sc: Scenario, msgs: list[_Msg]) -> None:
    rng = _rng(sc, "order")
    for i in range(len(msgs)):
        if rng.random() < sc.out_of_order:
            j = i + rng.randint(1, sc.window)
            if j < len(msgs):
                msgs[i], msgs[j] = msgs[j], msgs[i]
                msgs[i].moved = msgs[j].moved = True


def _duplicate(sc: Scenario, msgs: list[_Msg]) -> list[_Msg]:
    rng = _rng(sc, "duplicates")
    out: list[_Msg] = []
    pending: list[tuple[int, _Msg]] = []
    for i, m in enumerate(msgs):
        out.append(m)
        if rng.random() < sc.duplicates:
            pending.append((i + rng.randint(0, sc.window - 1), m))
            pending.sort(key=lambda p: p[0])
        while pending and pending[0][0] <= i:
            _, orig = pending.pop(0)
            out.append(_Msg(orig.payload, "duplicate", orig.id))
    out.extend(_Msg(orig.payload, "duplicate", orig.id) for _, orig in pending)
    return out


def _inject(sc: Scenario, msgs: list[_Msg], events: list[tuple]) -> list[_Msg]:
    rng = _rng(sc, "malformed")
    inserts: list[tuple[int, int, _Msg]] = []
    n = len(events)
    for kind, share in sc.malformed.items():
        count = max(1, round(share * n)) if share > 0 else 0
        for _ in range(count):
            x, y = events[rng.randrange(n)]
            payload = malformed(kind, x, y, rng, sc.format)
            inserts.append(
                (rng.randrange(len(msgs) + 1), len(inserts), _Msg(payload, "malformed", fault=kind))
            )
    inserts.sort(key=lambda t: (t[0], t[1]))
    out: list[_Msg] = []
    k = 0
    for i, m in enumerate(msgs):
        while k < len(inserts) and inserts[k][0] == i:
            out.append(inserts[k][2])
            k += 1
        out.append(m)
    out.extend(t[2] for t in inserts[k:])
    return out


def build_log(sc: Scenario) -> tuple[list[bytes], dict[str, Any]]:
    """The log's records in order and its ground truth (without file names)."""
    events = _clean(sc)
    msgs, delayed = _labelled(sc, events)
    _reorder(sc, msgs)
    msgs = _duplicate(sc, msgs)
    msgs = _inject(sc, msgs, events)
    counts: dict[str, Any] = {"records": len(msgs), "generated": len(events)}
    for m in msgs:
        counts[m.kind] = counts.get(m.kind, 0) + 1
    counts["reordered"] = sum(m.moved for m in msgs)
    bad = [
        {"offset": i, "kind": m.fault, "code": code_of(m.fault, sc.format)}
        for i, m in enumerate(msgs)
        if m.kind == "malformed"
    ]
    by_kind: dict[str, int] = {}
    for b in bad:
        by_kind[b["kind"]] = by_kind.get(b["kind"], 0) + 1
    truth = {
        "schema_version": SCHEMA_VERSION,
        "scenario": sc.name,
        "fingerprint": sc.fingerprint(),
        "seed": sc.seed,
        "format": sc.format,
        "counts": counts,
        "malformed_by_kind": by_kind,
        "malformed": bad,
        "duplicates": [
            {"offset": i, "id": m.id} for i, m in enumerate(msgs) if m.kind == "duplicate"
        ],
        "reordered": [i for i, m in enumerate(msgs) if m.moved],
        "delayed_labels": {str(k): v for k, v in delayed.items()},
        **_landmarks(sc, msgs, len(events)),
    }
    return [m.payload for m in msgs], truth


def _landmarks(sc: Scenario, msgs: list[_Msg], n_events: int) -> dict[str, Any]:
    """Where each segment starts and each drift is centred, as record offsets of the log.

    An event's offset is where the event itself (not its late label or a duplicate) sits
    after labelling, reordering, duplication and injection: what the report's plot marks.
    """
    offset_of: dict[int, int] = {}
    for i, m in enumerate(msgs):
        if m.kind in ("labelled", "unlabelled", "delayed") and m.id is not None:
            offset_of.setdefault(m.id, i)

    def at(event: int) -> int:
        event = min(max(event, 0), n_events - 1)
        return offset_of[event]

    segments, drifts, start = [], [], 0
    for i, seg in enumerate(sc.segments):
        segments.append({"generator": seg.generator, "event": start, "offset": at(start)})
        if seg.generator == "ConceptDriftStream":
            position = int(seg.params.get("position", 5000))
            width = int(seg.params.get("width", 1000))
            drifts.append(
                {
                    "segment": i,
                    "event": start + position,
                    "offset": at(start + position),
                    "width": width,
                }
            )
        start += seg.length
    return {"segments": segments, "drifts": drifts}


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def generate(sc: Scenario, out_dir: str | Path) -> Generated:
    """Write ``events.<format>`` and ``truth.json`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    records, truth = build_log(sc)
    log = out / ("events.jsonl" if sc.format == "jsonl" else "events.msgpack")
    data = b"".join(r + b"\n" for r in records) if sc.format == "jsonl" else b"".join(records)
    _write_atomic(log, data)
    truth = {"log": log.name, "log_sha256": hashlib.sha256(data).hexdigest(), **truth}
    truth_path = out / "truth.json"
    _write_atomic(truth_path, json.dumps(truth, indent=1, sort_keys=True).encode() + b"\n")
    return Generated(log, truth_path, truth)


def add_scenario_arguments(parser: argparse.ArgumentParser) -> None:
    """``SCENARIO --scale --length --seed``, shared by generate and run."""
    parser.add_argument("scenario", help="scenario TOML file (see simulators/scenarios/)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scale", type=float, default=1.0, help="multiply segment lengths")
    group.add_argument("--length", type=int, help="total generated events (segments keep shares)")
    parser.add_argument("--seed", type=int, help="replace the scenario's seed")


def main(argv: list[str] | None = None) -> int:
    """Generate a scenario's event log and ground truth."""
    parser = argparse.ArgumentParser(
        prog="python -m simulators.generate",
        description=main.__doc__,
        epilog="example:\n  python -m simulators.generate "
        "simulators/scenarios/sea_abrupt_drift.toml --out /tmp/sea --scale 0.1",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_arguments(parser)
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    try:
        sc = load_scenario(args.scenario, scale=args.scale, length=args.length, seed=args.seed)
    except ScenarioError as exc:
        print(f"simulators: error: {exc}", file=sys.stderr)
        return 2
    gen = generate(sc, args.out)
    c = gen.truth["counts"]
    print(f"{gen.log}: {c['records']:,} records, {len(gen.truth['malformed'])} malformed")
    print(f"{gen.truth_path}: ground truth")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
