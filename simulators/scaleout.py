"""A scenario's stream learned by a simulated consumer group: workers, a crash, a rebalance.

A scenario with a ``[scaleout]`` table runs here instead of through one engine. The log is
split round-robin into ``partitions`` (event ``i`` -> partition ``i % P``, offset ``i // P``);
``workers`` production engines (:func:`streamk.engine.runner.build_engine`, one shared file
store, one model name each) share them as a Kafka group would: range assignment, and on a
rebalance every member is first revoked (it snapshots and commits) and then assigned (it
resumes after the newest durable snapshot that covers each partition, design §7). The engines
run in threads that take turns, one poll batch at a time, so a run is deterministic.

Events, at shares of the stream: ``crash_at`` the worker ``crash_worker`` dies like a
``kill -9`` (no checkpoint: what it learned since its last snapshot is lost); the group
rebalances its partitions to the survivors; at ``restart_at`` it comes back (same name, same
store) and the group rebalances again; at ``join_at`` (optional) one more worker joins.

The report's timeline, every ``[report] every`` records handed out: each worker's accuracy,
the merged model's (:func:`streamk.merge.merge_snapshots` over each worker's newest durable
snapshot, what ``streamk merge`` would publish at that moment) and one engine's that learned
the stream in order up to the same point, all on the next ``every`` events of the stream after
the group's frontier (the least position over partitions). At the end: whether every event was
learned by exactly one worker's durable model (learned counts sum to the labelled events, every
partition's furthest snapshot offset is its end).
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from streamk.engine.config import load_config
from streamk.engine.events import decode
from streamk.engine.runner import build_engine, model_factory
from streamk.errors import StreamkError
from streamk.sources.base import Committed, Record, Source
from streamk.sources.replay import ReplaySource

__all__ = ["run_scaleout", "SCALEOUT_KEYS"]

log = logging.getLogger("simulators.scaleout")

#: the [scaleout] table: key -> type
SCALEOUT_KEYS = {
    "workers": int,
    "partitions": int,
    "crash_worker": int,
    "crash_at": float,
    "restart_at": float,
    "join_at": float,
}


class SimulatedCrash(BaseException):
    """A ``kill -9``: raised in the worker's thread, nothing more is written."""


class _Group:
    """The partitions, the committed offsets, the members and whose turn it is."""

    def __init__(self, records: list[Record], partitions: int, name: str):
        self.name = name
        self.parts: dict[int, list[Record]] = {p: [] for p in range(partitions)}
        for i, r in enumerate(records):
            p = i % partitions
            self.parts[p].append(Record(r.payload, p, len(self.parts[p]), r.timestamp_ms))
        self.committed: dict[int, Committed] = {}
        self.owner: dict[int, str] = {}
        self.actions: dict[str, list[tuple[str, Any]]] = {}
        self.handed_out = 0
        self.finished = False
        self.lock = threading.Lock()

    def assign(self, members: list[str]) -> dict[str, list[int]]:
        """Range assignment over the sorted members."""
        members = sorted(members)
        out: dict[str, list[int]] = {m: [] for m in members}
        n = len(self.parts)
        for i, m in enumerate(members):
            lo, hi = i * n // len(members), (i + 1) * n // len(members)
            out[m] = list(range(lo, hi))
        return out


class _GroupSource(Source):
    """One member's view of the group: polls its partitions when its turn comes."""

    def __init__(self, group: _Group, member: str, batch: int):
        super().__init__()
        self.name = group.name
        self.group = group
        self.member = member
        self.batch = batch
        self.assigned: list[int] = []
        self.pos: dict[int, int] = {}
        self.turn = threading.Event()
        self.done = threading.Event()
        self._rr = 0

    def _take_turn(self) -> None:
        self.done.set()  # the previous turn (if any) is over
        self.turn.wait()
        self.turn.clear()

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        self._take_turn()
        todo = self.group.actions.get(self.member) or []
        if todo:
            what, arg = todo.pop(0)
            if what == "crash":
                raise SimulatedCrash(self.member)
            if what == "revoke":
                if self.assigned and self._on_revoked is not None:
                    self._on_revoked(list(self.assigned))
                self.assigned = []
            elif what == "assign":
                self.assigned = list(arg)
                for p in arg:
                    self.group.owner[p] = self.member
                    self.pos.setdefault(p, 0)
                if arg and self._on_assigned is not None:
                    self._on_assigned(list(arg))
            return []
        out: list[Record] = []
        live = [p for p in self.assigned if self.pos[p] < len(self.group.parts[p])]
        while live and len(out) < min(max_records, self.batch):
            p = live[self._rr % len(live)]
            self._rr += 1
            out.append(self.group.parts[p][self.pos[p]])
            self.pos[p] += 1
            live = [q for q in live if self.pos[q] < len(self.group.parts[q])]
        self.group.handed_out += len(out)
        return out

    def seek(self, partition: int, offset: int) -> None:
        self.pos[partition] = offset

    def committed(self, partitions: list[int]) -> dict[int, Committed]:
        return {p: self.group.committed[p] for p in partitions if p in self.group.committed}

    def commit(self, positions: dict[int, int], metadata: str | None = None) -> None:
        for p, o in positions.items():
            self.group.committed[p] = Committed(int(o), metadata or "")

    def assignment(self) -> list[int]:
        return list(self.assigned)

    def exhausted(self) -> bool:
        return self.group.finished


class _CrashableStore:
    """The worker's snapshot store; after its crash, nothing more reaches the disk."""

    def __init__(self, store: Any):
        self._store = store
        self.crashed = False

    def save(self, *args: Any, **kwargs: Any) -> Any:
        if self.crashed:
            raise SimulatedCrash("store")
        return self._store.save(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _Worker:
    """One engine in a thread."""

    def __init__(self, name: str, group: _Group, config: dict[str, Any], batch: int):
        self.name = name
        self.source = _GroupSource(group, name, batch)
        self.engine = build_engine({**config, "model_name": name}, source=self.source)
        self.store = _CrashableStore(self.engine.store)
        self.engine.store = self.store
        self.engine.restore()
        self.crashed = False
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"worker-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.engine.run()
        except SimulatedCrash:
            self.crashed = True
        except BaseException as exc:  # noqa: BLE001 - reported, not swallowed
            self.error = exc
        finally:
            self.source.done.set()

    def step(self) -> None:
        """Give this worker one turn and wait until it is back at its next poll (or gone)."""
        if not self.thread.is_alive():
            return
        self.source.done.clear()
        self.source.turn.set()
        while not self.source.done.wait(0.5):
            if not self.thread.is_alive():
                return


def _events(records: list[Record]) -> list[tuple[Any, Any]]:
    out = []
    for r in records:
        try:
            e = decode(r.payload)
        except StreamkError:
            out.append((None, None))
            continue
        out.append((getattr(e, "x", None), getattr(e, "y", None)))
    return out


def _accuracy(model: Any, window: list[tuple[Any, Any]]) -> float | None:
    pairs = [(x, y) for x, y in window if x is not None and y is not None]
    if model is None or not pairs:
        return None
    return sum(model.predict_one(x) == y for x, y in pairs) / len(pairs)


def run_scaleout(sc: Any, log_path: Path, out: Path) -> dict[str, Any]:
    """Run the scenario ``sc`` (with a ``scaleout`` table) over ``log_path``; write the report."""
    from streamk.merge import merge_snapshots
    from streamk.merge.role import worker_snapshots
    from streamk.snapshot import SnapshotStore

    so = sc.scaleout
    n_workers, partitions = int(so.get("workers", 3)), int(so.get("partitions", 6))
    src = ReplaySource(log_path)
    records: list[Record] = []
    while not src.exhausted():
        records.extend(src.poll(10_000, 0))
    src.close()
    events = _events(records)
    total = len(records)
    group = _Group(records, partitions, src.name)
    config = load_config(
        overrides={
            **sc.engine_config(),
            "snapshot_dir": str(out / "snapshots"),
            "dead_letter_dir": str(out / "dead-letters"),
        },
        environ={},
    )
    store = SnapshotStore(out / "snapshots")
    batch = min(sc.report_every, 100)
    every = sc.report_every
    crash_name = f"w{int(so.get('crash_worker', 1))}"
    plan = sorted(
        (float(so[k]) * total, k)
        for k in ("crash_at", "restart_at", "join_at")
        if so.get(k) is not None
    )
    workers: dict[str, _Worker] = {}
    landmarks: list[dict[str, Any]] = []

    def rebalance(why: str) -> None:
        alive = [n for n, w in workers.items() if w.thread.is_alive() and not w.crashed]
        plan_ = group.assign(alive)
        for n in alive:
            group.actions.setdefault(n, []).append(("revoke", None))
        for n in alive:  # every member revokes before any is assigned (eager protocol)
            workers[n].step()
        for n in alive:
            group.actions[n].append(("assign", plan_[n]))
            workers[n].step()
        landmarks.append({"records": group.handed_out, "event": why, "assignment": plan_})

    for i in range(n_workers):
        workers[f"w{i}"] = _Worker(f"w{i}", group, config, batch)
    rebalance("start")
    one = model_factory(config)()
    one_seen = 0
    timeline: list[dict[str, Any]] = []
    next_mark = every
    guard = 0
    while True:
        guard += 1
        if guard > 10 * total + 1000:
            raise RuntimeError("the simulated group made no progress")
        while plan and group.handed_out >= plan[0][0]:
            _, what = plan.pop(0)
            if what == "crash_at":
                w = workers[crash_name]
                w.store.crashed = True
                group.actions.setdefault(crash_name, []).insert(0, ("crash", None))
                w.step()
                landmarks.append({"records": group.handed_out, "event": f"kill -9 {crash_name}"})
                rebalance(f"rebalance: {crash_name} gone")
            elif what == "restart_at":
                workers[crash_name] = _Worker(crash_name, group, config, batch)
                rebalance(f"rebalance: {crash_name} restarted")
            else:
                name = f"w{len(workers)}"
                workers[name] = _Worker(name, group, config, batch)
                rebalance(f"rebalance: {name} joined")
        alive = [w for w in workers.values() if w.thread.is_alive()]
        busy = any(
            w.source.pos.get(p, 0) < len(group.parts[p]) for w in alive for p in w.source.assigned
        )
        if not busy and not plan:
            break
        for w in alive:
            w.step()
        if group.handed_out >= next_mark:
            next_mark += every
            frontier = (
                min(
                    (workers[group.owner[p]].source.pos.get(p, 0) for p in group.parts),
                    default=0,
                )
                * partitions
            )
            for x, y in events[one_seen:frontier]:
                if x is not None and y is not None:
                    one.learn_one(x, y)
            one_seen = max(one_seen, frontier)
            window = events[frontier : frontier + every]
            if not window:  # the stream is learned to its end: nothing ahead to score
                continue
            point: dict[str, Any] = {
                "records": group.handed_out,
                "frontier": frontier,
                "workers": {
                    n: _accuracy(w.engine.model, window)
                    for n, w in workers.items()
                    if w.thread.is_alive()
                },
                "one_engine": _accuracy(one, window),
            }
            found = {n: store.latest(n) for n in store.names()}
            peers = worker_snapshots(found, group.name, "merged")
            point["merged"] = (
                _accuracy(merge_snapshots(peers).model, window) if len(peers) >= 2 else None
            )
            timeline.append(point)
    group.finished = True
    for w in workers.values():
        w.step()
        w.thread.join(timeout=60)
    errors = {n: repr(w.error) for n, w in workers.items() if w.error is not None}
    final = {n: store.latest(n) for n in store.names()}
    snaps = worker_snapshots(final, group.name, "merged")
    learned = {n: int(s.model.n_learned) for n, s in snaps.items()}
    labelled = sum(1 for x, y in events if x is not None and y is not None)
    reach = {p: 0 for p in group.parts}
    for s in snaps.values():
        for p, o in s.offsets.get(group.name, {}).items():
            reach[int(p)] = max(reach[int(p)], int(o))
    ends = {p: len(rs) for p, rs in group.parts.items()}
    report = {
        "scenario": {"name": sc.name, "description": sc.description, "seed": sc.seed},
        "scaleout": dict(so),
        "events": total,
        "every": every,
        "landmarks": landmarks,
        "timeline": timeline,
        "exactly_once": {
            "learned": learned,
            "labelled_events": labelled,
            "reach_equals_ends": reach == ends,
            "ok": sum(learned.values()) == labelled and reach == ends and not errors,
        },
        "errors": errors,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "report.md").write_text(_markdown(report))
    return report


def _markdown(rep: dict[str, Any]) -> str:
    names = sorted({n for p in rep["timeline"] for n in p["workers"]})
    lines = [
        f"# {rep['scenario']['name']}: scale-out with a crash and rebalances",
        "",
        rep["scenario"]["description"],
        "",
        "Accuracy on the next events of the stream after the group's frontier; merged = "
        "the merge of every worker's newest durable snapshot at that moment.",
        "",
        "| records | " + " | ".join(names) + " | merged | one engine | event |",
        "|---" * (len(names) + 4) + "|",
    ]
    marks = list(rep["landmarks"])

    def fmt(v: Any) -> str:
        return "" if v is None else f"{v:.3f}"

    for p in rep["timeline"]:
        said = [m["event"] for m in marks if m["records"] <= p["records"]]
        marks = [m for m in marks if m["records"] > p["records"]]
        cells = [fmt(p["workers"].get(n)) for n in names]
        lines.append(
            f"| {p['records']} | "
            + " | ".join(cells)
            + f" | {fmt(p['merged'])} | {fmt(p['one_engine'])} | {'; '.join(said)} |"
        )
    eo = rep["exactly_once"]
    lines += [
        "",
        f"Exactly once: {'yes' if eo['ok'] else 'NO'} (learned {eo['learned']}, "
        f"{eo['labelled_events']} labelled events; offsets reach every partition's end: "
        f"{eo['reach_equals_ends']}).",
    ]
    if rep["errors"]:
        lines.append(f"Errors: {rep['errors']}")
    return "\n".join(lines) + "\n"
