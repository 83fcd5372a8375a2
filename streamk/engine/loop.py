"""The engine: poll, validate, score, learn, snapshot, and only then commit.

One engine runs one model over one source (design.md §1). Each loop turn:

1. poll a batch of records;
2. decode and validate each; a bad record goes to the dead-letter sink with its
   reason and position, and is counted;
3. in stream order, runs of unlabelled events are scored (``predict_many``) and
   published with the model's snapshot sequence number; runs of labelled events are
   first scored for the rolling metric, then learned (``learn_many``: the same model as
   ``learn_one`` on each event in order); a novelty detector (``learner = "novelty"``)
   flags every event, labelled or not, before it learns it (the label is not used), and
   publishes the flags of unlabelled ones;
4. when a snapshot is due (every N events, every T seconds, on revocation and on
   shutdown): flush the sinks, write the snapshot with the next offset of every
   partition learned, and only then commit those offsets to the source.

**Exactly-once model state.** A snapshot records, per partition, the offset of the next
event it has not learned; durable snapshots, not commits, are the record of what has been
learned (:mod:`~streamk.engine.recovery`). On start the engine restores the newest valid
snapshot; on every assignment each partition resumes after the newest durable snapshot
that covers it, ours or another worker's. A commit (tagged with the model name and
snapshot seq) ahead of our restored snapshot means a newer snapshot was lost: those
events are learned again. Predictions and dead letters are at-least-once: after a crash,
events since the last snapshot are scored (or rejected) again.
"""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

from river import base

from ..consolidation.wrapper import served_learner
from ..errors import BrokerError, ConfigError, InvalidEvent, OffsetOutOfRange, StreamkError
from ..learners.features import NameLimits, limited_names
from ..snapshot.store import NO_SNAPSHOT_FILES
from ..sources.base import Record, Source
from .deadletter import DeadLetter, DeadLetterLog
from .metrics import Metrics, RollingScore
from .recovery import (
    CommitJournal,
    LogCheck,
    Mark,
    ReplacedTopic,
    anchors,
    commit_metadata,
    mark_of,
    marks_from_meta,
    marks_meta,
    peer_offsets,
    recreated,
    resume_offsets,
    writer_id,
)
from .runs import BLOCK_MIN, Run, split_runs
from .schema import DEFAULT_LIMITS, Limits, Schema, input_schema
from .scoring import REFUSALS, as_invalid, kept_run, score_run

__all__ = ["Engine", "EngineConfig", "EngineResult"]

log = logging.getLogger("streamk.engine")

#: Seconds a source may take to be assigned its first partitions before ``stop_when_idle``
#: starts counting anyway (a worker that never gets a partition still stops).
JOIN_GRACE = 60.0


@dataclass
class EngineConfig:
    """How an engine runs. Every field has a default.

    Attributes
    ----------
    model_name
        Name of the model in snapshots (file store directory, Kafka key).
    max_records
        Records per poll (the micro-batch size).
    poll_timeout
        Seconds a poll waits for the first record.
    snapshot_every
        Snapshot after this many records since the last one (``None``: never by count).
    snapshot_seconds
        Snapshot when this many seconds passed since the last one (``None``: never by time).
    stop_when_idle
        Stop after this many seconds without a record (``None``: run until stopped).
    max_events
        Stop after this many records (``None``: no limit).
    progress_seconds
        Seconds between progress callbacks.
    rolling_window
        Events in the rolling prequential metric.
    on_offset_beyond_end
        A partition whose log is not the one the model learned (the topic was deleted and
        recreated: a resume offset past its end or a record that differs from the
        snapshot's mark, at assignment; the topic's id changed, checked before every
        snapshot while the engine runs): ``"fail"`` stops with a message naming the
        remedy and writes no snapshot, ``"earliest"`` learns the partition from its first
        offset on top of the last snapshot, with a WARNING. Never skipped silently.
    publish_proba
        Publish each scored event's class probabilities (``predict_proba_many``) with its
        prediction. A second pass over the run's kernel rows: opt-in.
    name_limits
        Most distinct feature names the model may meet, and the longest name
        (:class:`~streamk.learners.features.NameLimits`; ``None``: no limit): an event past
        them is a dead letter, where it would widen every support vector until no snapshot
        of the model could be written.
    freeze_heap
        While :meth:`Engine.run` loops, leave the objects that existed when it started
        (modules, the model, clients) out of Python's cyclic garbage collection
        (``gc.freeze``; undone when it returns). Full collections then walk only what
        the loop allocated: 5-10% less CPU time per event at ~100k events/s
        (``benchmarks/engine.py``). Skipped when something else froze the heap first.
    """

    model_name: str = "model"
    max_records: int = 500
    poll_timeout: float = 0.5
    snapshot_every: int | None = 10_000
    snapshot_seconds: float | None = 60.0
    stop_when_idle: float | None = None
    max_events: int | None = None
    progress_seconds: float = 1.0
    rolling_window: int = 1000
    publish_proba: bool = False
    on_offset_beyond_end: str = "fail"
    freeze_heap: bool = True
    limits: Limits = DEFAULT_LIMITS
    #: what the model's feature index may grow to (None: no limit; see NameLimits)
    name_limits: NameLimits | None = None
    #: None: the generic schema, or text/tree when the model's kernel takes objects
    schema: Schema | None = None


@dataclass
class EngineResult:
    """What a run did."""

    records: int
    learned: int
    scored: int
    dead_lettered: int
    snapshots: int
    seconds: float
    seq: int
    positions: dict[int, int]
    metrics: dict[str, Any] = field(default_factory=dict)
    busy_seconds: float = 0.0  # from the first record polled to the last one processed

    @property
    def events_per_second(self) -> float | None:
        """Records per second while records were flowing (start-up and idle time excluded)."""
        return self.records / self.busy_seconds if self.busy_seconds > 0 else None


@dataclass
class PendingSnapshot:
    """A snapshot encoded at a checkpoint, saved once its log's check answers
    (:meth:`Engine.checkpoint`)."""

    reason: str
    check: LogCheck | ReplacedTopic | None
    data: bytes | None  # None: no store nor publisher (only the commit is made)
    saved: int  # the seq this engine had written or restored when it was encoded
    seq: int
    positions: dict[int, int]
    records: int  # records it covers since the snapshot before it
    seconds: float = 0.0  # spent encoding it

    def ready(self) -> bool:
        """Whether its check has answered (or there is none)."""
        return self.check is None or self.check.done()


class Engine:
    """Runs a learner over a source with snapshots, predictions and dead letters.

    Parameters
    ----------
    source
        Where records come from (:mod:`streamk.sources`).
    model_factory
        Builds a fresh learner when no snapshot exists: a streamk learner or wrapper, or
        any river estimator with ``learn_one`` and ``predict_one`` (refused at start-up
        otherwise). A model without ``n_learned`` (a river pipeline) learns each run one
        event at a time: it could not say how far a block it refused got, and a retry
        would learn the events before the refused one twice.
    store
        A :class:`~streamk.snapshot.SnapshotStore`; restores on start, saves snapshots.
    publisher
        Optional :class:`~streamk.snapshot.kafka.SnapshotPublisher` (``publish(name, data)``;
        closed, as the sinks are, when :meth:`run` ends).
    predictions, dead_letters
        Sinks with ``write(record)``, ``flush()`` and ``close()``; ``None`` drops
        predictions, while dead letters without a sink are logged (never dropped silently).
        A prediction sink with ``write_many`` (every :mod:`streamk.sinks` one) gets each
        run of scored events in one call.
    on_progress
        Called with :meth:`progress` every ``config.progress_seconds``.
    wrap_restored
        Applied to a restored model (e.g. to wrap an old inner-learner snapshot).
    peer_snapshots
        Returns the other workers' newest snapshots (``{model: Snapshot}``, e.g. read from
        the snapshot topic), consulted on every assignment beside the file store's.
    adopt
        Called at each checkpoint with the model, returns ``(model, snapshot metadata)``:
        the model to continue from (``adopt_merged``: the merged model plus what this worker
        learned since, :class:`streamk.merge.adopt.Adopter`). Offsets are not its business.
    """

    def __init__(
        self,
        source: Source,
        model_factory: Callable[[], base.Estimator],
        *,
        store: Any = None,
        publisher: Any = None,
        predictions: Any = None,
        dead_letters: Any = None,
        config: EngineConfig | None = None,
        metrics_registry: Metrics | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        wrap_restored: Callable[[Any], Any] | None = None,
        peer_snapshots: Callable[[], dict[str, Any]] | None = None,
        adopt: Callable[[Any], tuple[Any, dict[str, Any]]] | None = None,
    ):
        self.source = source
        self.model_factory = model_factory
        self.store = store
        self.publisher = publisher
        self.predictions = predictions
        # no destination: the log, rate-limited (their position and reason, not their bytes)
        self.dead_letters = dead_letters if dead_letters is not None else DeadLetterLog()
        self.config = config or EngineConfig()
        self.metrics = metrics_registry or Metrics()
        self.on_progress = on_progress
        self.wrap_restored = wrap_restored
        self.peer_snapshots = peer_snapshots
        self.adopt = adopt
        self._stop = threading.Event()
        self.model: base.Estimator | None = None
        self.seq = 0
        self.positions: dict[int, int] = {}  # partition -> next offset learned/handled
        self._since_snapshot = 0
        self._last_snapshot = time.monotonic()
        self._rolling: RollingScore | None = None
        self._novelty = False  # an anomaly detector: every event is flagged, then learned
        self._labels_only = False  # predictions are labels alone (see _frame)
        #: what :meth:`restore` found: ``None`` (fresh model) or seq, class and offsets
        self.restored: dict[str, Any] | None = None
        self._active_since: float | None = None  # idle time counts from here
        self._ever_assigned = False  # whether any partition was ever ours (see run)
        self._durable: dict[int, int] = {}  # positions covered by our newest durable snapshot
        self._marks: dict[int, Mark] = {}  # the last record our durable snapshot covers
        self._last: dict[int, Record] = {}  # the last record handled per partition since
        self._first: dict[int, Record] = {}  # the first one since (see _changed_logs)
        self._last_check = time.monotonic()  # when the log was last checked (_same_log)
        self._topic_id: str | None = None  # the topic's id at assignment (_note_topic_id)
        self._writer: str | None = None  # see _store_id
        self._commits: CommitJournal | None = None  # see _journal
        self._fatal: StreamkError | None = None  # an assignment that must stop the engine
        self._pending: PendingSnapshot | None = None  # encoded, its log's check running

    # -- control --------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the loop to finish its batch, snapshot, commit and return (signal-safe)."""
        self._stop.set()

    # -- start-up -------------------------------------------------------------------------
    def restore(self) -> None:
        """Load the newest valid snapshot, or build a fresh model."""
        snap = self.store.latest(self.config.model_name) if self.store is not None else None
        if snap is None:
            self.model = self.model_factory()
            self.seq = 0
            self.positions = {}
            self._durable = {}
            self._marks, self._last = {}, {}
            self._first = {}
            self.restored = None
            log.info("no snapshot for %r: starting a fresh model", self.config.model_name)
        else:
            self.model = (
                snap.model if self.wrap_restored is None else self.wrap_restored(snap.model)
            )
            self.seq = snap.seq
            self.positions = {
                int(p): int(o) for p, o in _offsets_of(self.source, snap.offsets).items()
            }
            self._durable = dict(self.positions)
            self._marks, self._last = marks_from_meta(snap.meta, self.source.name), {}
            self._first = {}
            self.restored = {
                "seq": snap.seq,
                "class": _model_name(snap.model),
                "offsets": dict(self.positions),
            }
            log.info("restored %r seq %d at %s", self.config.model_name, self.seq, self.positions)
            self._warn_if_not_configured(self.model)
        _check_runnable(self.model, self.predictions is not None and self.config.publish_proba)
        self._novelty = isinstance(_unwrapped(self.model), base.AnomalyDetector)
        publish_proba = self.predictions is not None and self.config.publish_proba
        self._labels_only = isinstance(self.model, base.Classifier) and not publish_proba
        # MAE, else accuracy; for a novelty detector the mean |0 - flag|: the fraction flagged
        regression = self._novelty or isinstance(self.model, base.Regressor)
        self._rolling = RollingScore(self.config.rolling_window, regression)

    def _warn_if_not_configured(self, restored: Any) -> None:
        """Say so when the snapshot's model is not the configured one (learner, kernel,
        budget): the snapshot wins, since starting over would drop what it learned."""
        configured = self.model_factory()
        have, want = _model_spec(restored), _model_spec(configured)
        if have != want:
            log.warning(
                "model %r: the configuration asks for %s but the snapshot holds %s; "
                "continuing the snapshot's model (to start the configured one, use another "
                "model_name or reset the store: streamk snapshot reset)",
                self.config.model_name,
                want,
                have,
            )

    def _on_assigned(self, partitions: list[int]) -> None:
        # A group join can take as long as the rebalance timeout; idle time starts now.
        self._active_since = time.monotonic()
        self._ever_assigned = self._ever_assigned or bool(partitions)
        self._note_topic_id()
        resume = resume_offsets(
            partitions,
            model_name=self.config.model_name,
            own=self._restored_offsets(),
            committed=_committed_pairs(self.source.committed(partitions)),
            peers=self._peers(),
            store_id=self._store_id(),
            journal=self._journal().offsets(self.source.name),
        )
        for note in resume.notes:
            log.warning("%s", note)
        try:
            self._check_beyond_end(resume.offsets)
            self._check_marks(resume.offsets, resume.sources)
        except StreamkError as exc:
            # Raised here it would surface as the client's "rebalance callback failed":
            # stop the loop instead, and raise it from run() with nothing learned.
            self._fatal = exc
            self._stop.set()
            return
        for p in partitions:
            target = resume.offsets[p]
            self.source.seek(p, target)
            self.positions[p] = target
        self.metrics.inc("rewinds_total", resume.rewinds)
        self.metrics.set_ready(True)
        log.info(
            "assigned %s, positions %s", partitions, {p: self.positions[p] for p in partitions}
        )

    def _check_beyond_end(self, offsets: dict[int, int]) -> None:
        """A resume offset past the partition's end is never skipped silently."""
        beyond = getattr(self.source, "beyond_end", None)
        past = beyond(dict(offsets)) if beyond is not None else {}
        if past:
            where = ", ".join(f"{p} at {offsets[p]}" for p in sorted(past))
            self._never_skipped(
                offsets,
                f"the resume offsets of partitions {where} are past the partitions' ends",
                {
                    p: (f"resume offset {offsets[p]} is past its end", first, str(first))
                    for p, first in past.items()
                },
            )

    def _check_marks(self, offsets: dict[int, int], sources: dict[int, str]) -> None:
        """A partition resuming after our snapshot whose record before the resume offset is
        not the one the snapshot learned last: the topic was deleted and recreated, and
        refilled up to that offset at least (past it, :meth:`_check_beyond_end` answers).
        Never skipped silently either."""
        read = getattr(self.source, "records_before", None)
        asked = {
            p: t
            for p, t in offsets.items()
            if sources.get(p) == "snapshot" and p in self._marks and self._marks[p][0] == t - 1
        }
        changed = recreated(self._marks, read(asked)) if read is not None and asked else {}
        if changed:
            where = "; ".join(f"partition {p}: {why}" for p, why in sorted(changed.items()))
            self._never_skipped(
                offsets,
                f"the record before the resume offset is not the one the snapshot learned "
                f"last ({where})",
                # 0: below the log start, the client starts at the log start
                {p: (why, 0, "its start") for p, why in changed.items()},
            )

    def _never_skipped(
        self, offsets: dict[int, int], found: str, starts: dict[int, tuple[str, int, str]]
    ) -> None:
        """What a resume offset the snapshot cannot vouch for comes to (``found`` says why):
        by default (``on_offset_beyond_end = fail``) a :class:`StreamkError` naming the
        remedies; with ``earliest`` each partition of ``starts`` (partition -> what happened,
        its first offset, how to say it) is learned from there, with a WARNING."""
        if self.config.on_offset_beyond_end != "earliest":
            raise StreamkError(
                f"{self.source.name}: {found}: the stream was probably recreated since the "
                f"snapshot of {self.config.model_name!r} was written (a topic deleted and "
                "recreated, a log truncated, a log rewritten). Start a fresh model (streamk "
                "snapshot reset, or a new model_name), or set on_offset_beyond_end = earliest "
                "to learn these partitions from their start"
            )
        for p, (what, first, where) in sorted(starts.items()):
            log.warning(
                "partition %d: %s (topic recreated, log truncated or rewritten?); learning it "
                "from %s (on_offset_beyond_end = earliest)",
                p,
                what,
                where,
            )
            offsets[p] = first
            self._marks.pop(p, None)

    # -- a topic recreated while it is read ----------------------------------------------
    def _same_log(self, reason: str, check: LogCheck | ReplacedTopic | None) -> bool:
        """Whether every owned partition's log still holds the record it is checked by
        (``check``, from :meth:`_start_check`); if not, what a restart would do is done
        (:meth:`_recreated_while_running`) and ``False`` is returned. Called before each
        snapshot is saved, so that no snapshot mixes two logs, and every
        ``snapshot_seconds`` while idle."""
        self._last_check = time.monotonic()
        changed = self._changed_logs(check)
        if changed:
            self._recreated_while_running(changed, reassign=reason not in ("revoked", "shutdown"))
        return not changed

    def _start_check(self) -> LogCheck | ReplacedTopic | None:
        """The check of the owned partitions' log, made before a snapshot is encoded.

        First the topic's id (:meth:`_note_topic_id`; ~1 ms): the one read at assignment
        means the same log, from which every record since was read, and ``None`` is
        returned (nothing to wait for); another means the topic was recreated
        (:class:`~streamk.engine.recovery.ReplacedTopic`). Only without an id to compare
        (none at assignment or now) is each owned partition's checked record
        (:func:`~streamk.engine.recovery.anchors`) read back, on a helper thread
        (:class:`~streamk.engine.recovery.LogCheck`). ``None`` too when there is nothing
        to check (a source that cannot be recreated under its reader, nothing read yet).
        """
        source = self.source
        read = getattr(source, "records_before", None)
        if read is None or not getattr(source, "may_be_recreated", False):
            return None
        now = source.topic_id() if self._topic_id is not None else None
        if now is not None:
            if now == self._topic_id:
                return None  # the same log
            return ReplacedTopic(
                {
                    p: f"the topic's id is {now}, not {self._topic_id} as at assignment"
                    for p in source.assignment()
                }
            )
        marks = anchors(self._marks, self._first, source.assignment())
        if not marks:
            return None
        return LogCheck(read, marks)

    def _note_topic_id(self) -> None:
        """Read the topic's id at assignment, before the start-up checks read the log
        (:meth:`_check_marks`): while it stays the same, so does the log they checked
        (KIP-516: a recreated topic gets a new id). Kept as it was while records read
        under it wait for their check (partitions added to a running assignment): the
        next check compares with the id they were read under."""
        if self._since_snapshot == 0 and self._pending is None:
            self._topic_id = self._read_topic_id()

    def _read_topic_id(self) -> str | None:
        """The source's topic id now, if it is one that can be recreated under us."""
        read = getattr(self.source, "topic_id", None)
        recreatable = getattr(self.source, "may_be_recreated", False)
        return read() if read is not None and recreatable else None

    def _changed_logs(self, check: LogCheck | ReplacedTopic | None) -> dict[int, str]:
        """Owned partitions whose log holds another record at the checked offset, or none
        and ends before it, with what differs (``check``'s answer, waited for)."""
        if check is None:
            return {}
        if isinstance(check, ReplacedTopic):
            return dict(check.changed)
        marks, found = check.marks, check.result()
        changed = recreated(marks, found)
        missing = {p: mark[0] + 1 for p, mark in marks.items() if p not in found}
        beyond = getattr(self.source, "beyond_end", None)
        if missing and beyond is not None:  # (else: removed by retention, not recreated)
            for p in beyond(missing):
                changed[p] = f"offset {marks[p][0]} is past the partition's end"
        return changed

    def _out_of_range(self, exc: OffsetOutOfRange) -> None:
        """The broker refused our read positions as past the log's end: the topic was
        recreated shorter while we read it. Answered as :meth:`_same_log` answers."""
        if self._pending is not None and not self._complete():
            return  # its own check found the change and answered it
        changed = self._changed_logs(self._start_check()) or {
            p: f"read position {offset} is past the partition's end"
            for p, offset in exc.positions.items()
        }
        self._recreated_while_running(changed, reassign=True)

    def _recreated_while_running(self, changed: dict[int, str], reassign: bool) -> None:
        """A topic deleted and recreated (or truncated) while this engine read it. The
        records read since our last snapshot may come from the old log, the new one or
        both, and the old topic is gone: they are dropped, never written. By default
        (``on_offset_beyond_end = fail``) the engine stops (:attr:`_fatal`, exit 2) naming
        the remedies; with ``earliest`` it returns to its last snapshot and resumes each
        partition as a restart would (``reassign``: now; else at the next assignment), so
        each changed partition is learned from its start on top of that snapshot."""
        where = "; ".join(f"partition {p}: {why}" for p, why in sorted(changed.items()))
        found = (
            f"{self.source.name}: the topic was deleted and recreated (or truncated) while "
            f"this engine read it ({where})"
        )
        unsaved = self._since_snapshot + (0 if self._pending is None else self._pending.records)
        self._pending = None  # (it may mix the two logs)
        dropped = (
            f"the {unsaved} records read since snapshot seq {self.seq} are "
            "dropped, not written to any snapshot (they may mix the two logs, and the old "
            "topic is gone)"
        )
        if self.config.on_offset_beyond_end != "earliest":
            self._fatal = StreamkError(
                f"{found}; {dropped}. Start a fresh model (streamk snapshot reset, or a new "
                "model_name), or set on_offset_beyond_end = earliest to learn these "
                "partitions from their start on top of the last snapshot, and restart"
            )
            self._stop.set()
            return
        log.warning(
            "%s; %s: back to snapshot seq %d, and each changed partition resumes as after "
            "a restart (on_offset_beyond_end = earliest)",
            found,
            dropped,
            self.seq,
        )
        if self.store is None:  # no snapshot to return to: the changed partitions restart
            self._topic_id = self._read_topic_id()  # (the new topic's, read from its start)
            for p in changed:
                self._marks.pop(p, None)
                self._first.pop(p, None)
                self.source.seek(p, 0)  # below the log start: the source starts there
                self.positions[p] = 0
            return
        self.restore()
        self._since_snapshot = 0
        if reassign:
            self._on_assigned(self.source.assignment())

    def _group(self) -> str | None:
        """The consumer group this engine reads in (``None`` outside a group)."""
        group = getattr(self.source, "group_id", None)
        return group if isinstance(group, str) and group else None

    def _restored_offsets(self) -> dict[int, int]:
        """Where our durable model stands: the positions of the last snapshot we wrote or
        restored (a partition we never learned from is absent)."""
        return dict(self._durable)

    def _store_id(self) -> str:
        """A random token kept beside our snapshots, written with every commit, so that a
        commit by another engine that was given our model name but writes elsewhere is
        not mistaken for ours (``""`` without a file store)."""
        if self._writer is None:
            directory = getattr(self.store, "directory", None)
            self._writer = (
                "" if directory is None else writer_id(Path(directory) / self.config.model_name)
            )
        return self._writer

    def _journal(self) -> CommitJournal:
        """Our recent commits, beside our snapshots (none without a file store)."""
        if self._commits is None:
            directory = getattr(self.store, "directory", None)
            model_dir = None if directory is None else Path(directory) / self.config.model_name
            self._commits = CommitJournal(model_dir)
        return self._commits

    def _peers(self) -> dict[str, dict[int, int]]:
        """Other models' newest durable snapshots in our store: model -> partition -> offset.

        Every model in the same store that learned from this stream counts as a worker of
        the group (design §7); one whose snapshots cannot be read holds no durable events
        (a warning says so), so its commits are not taken as coverage.
        """
        store, own = self.store, self.config.model_name
        found: dict[str, Any] = {}
        if self.peer_snapshots is not None:
            try:
                found.update(
                    (name, snap) for name, snap in self.peer_snapshots().items() if name != own
                )
            except StreamkError as exc:
                log.warning("could not read other workers' snapshots from the topic: %s", exc)
        if store is None or not hasattr(store, "names"):
            return peer_offsets(found, self._our_offsets, self._group())
        for name in store.names():
            if name == own:
                continue
            # read-only: a peer's damaged files are its own engine's to set aside
            snap, why = store.newest_readable(name)
            if snap is None and why != NO_SNAPSHOT_FILES:  # it holds no durable events
                log.warning("model %r of the same store has no readable snapshot: %s", name, why)
            if snap is not None or name not in found:
                newer = found.get(name)
                found[name] = snap if newer is None or snap.seq >= newer.seq else newer
        return peer_offsets(found, self._our_offsets, self._group())

    def _our_offsets(self, offsets: dict[str, dict[int, int]]) -> dict[int, int]:
        """A peer's snapshot offsets of our stream (see :func:`_offsets_of`)."""
        return _offsets_of(self.source, offsets, said=False)

    def _on_revoked(self, partitions: list[int]) -> None:
        log.info("partitions %s revoked: snapshot and commit first", partitions)
        # A rejoin is in flight from here: stopping for idleness in the middle of it can leave
        # a broker's group with a departed leader (tansu 0.6), so idle time restarts now.
        self._active_since = time.monotonic()
        self.checkpoint(reason="revoked")

    def _on_lost(self, partitions: list[int]) -> None:
        """Partitions lost by eviction (a batch outlasted ``max_poll_interval_ms``): nothing
        is committed, and whoever owns them next, this worker included, resumes after the
        newest durable snapshot. The model in memory has learned past it, so it returns to
        that snapshot, and the events learned since are learned again once, not twice."""
        self._active_since = time.monotonic()
        self.metrics.inc("evictions_total")
        if self._since_snapshot == 0 and self._pending is None:
            return  # the model in memory is the durable one
        if self.store is None:
            log.warning(
                "partitions %s of %s lost (this worker was evicted): without a snapshot "
                "store the model keeps the events it learned since its last commit, which "
                "are read again",
                partitions,
                self.source.name,
            )
            return
        dropped = self._since_snapshot + (0 if self._pending is None else self._pending.records)
        if self._pending is not None:  # never saved: its offsets are no longer ours to commit
            if self._pending.check is not None:
                self._pending.check.wait()  # (the probe serves one read at a time)
            self._pending = None
        self.restore()
        self._since_snapshot = 0
        log.warning(
            "partitions %s of %s lost (this worker was evicted: a batch took longer than "
            "max_poll_interval_ms): the model returns to its snapshot seq %d and the %d "
            "records read since are read again",
            partitions,
            self.source.name,
            self.seq,
            dropped,
        )
        kept = [p for p in self.source.assignment() if p not in partitions]
        if kept:  # (a cooperative rebalance) they too resume after the snapshot
            self._on_assigned(kept)

    def _warn_if_never_assigned(self, waited: float) -> None:
        """An idle stop of a worker that never owned a partition learned nothing: say so,
        rather than exit 0 in silence (more workers than partitions, or a group stuck)."""
        if not self._ever_assigned:
            log.warning(
                "stopping idle after %.0f s without ever being assigned a partition of %s: "
                "this worker learned nothing (more workers than partitions, or the group "
                "is stuck in a rebalance)",
                waited,
                self.source.name,
            )

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> EngineResult:
        """Process records until stopped, idle, exhausted or ``max_events``; then checkpoint.

        The model's feature names are held to ``name_limits`` meanwhile: an event that
        would pass them is a dead letter (:func:`~streamk.learners.features.limited_names`).
        """
        with limited_names(self.config.name_limits):
            return self._run()

    def _run(self) -> EngineResult:
        if self.model is None:
            self.restore()
        self.source.on_rebalance(self._on_assigned, self._on_revoked)
        on_lost = getattr(self.source, "on_lost", None)  # Kafka's sources (KIP-429)
        if on_lost is not None:
            on_lost(self._on_lost)
        cfg = self.config
        frozen = cfg.freeze_heap and gc.get_freeze_count() == 0
        if frozen:
            gc.freeze()
        start = last_progress = time.monotonic()
        last_record = start
        # Idle time counts from the latest record or assignment, never from start-up: a
        # group join can take longer than stop_when_idle.
        self._active_since = None if self.source.assignment() == [] else start
        self._ever_assigned = self._ever_assigned or self._active_since is not None
        first_record: float | None = None
        records = 0
        rate_mark = (start, 0)
        try:
            while not self._stop.is_set():
                budget = cfg.max_records
                if cfg.max_events is not None:
                    budget = min(budget, cfg.max_events - records)
                    if budget <= 0:
                        break
                try:
                    batch = self.source.poll(budget, cfg.poll_timeout)
                except OffsetOutOfRange as exc:  # a topic recreated shorter under us
                    if self._fatal is None:
                        self._out_of_range(exc)
                    batch = []
                if self._fatal is not None:  # an assignment refused to go on: learn nothing
                    break
                now = time.monotonic()
                self.metrics.beat()
                if batch:
                    if first_record is None:
                        first_record = now
                    records += len(batch)
                    self.metrics.inc("events_in", len(batch))
                    self._process(batch)
                    self._since_snapshot += len(batch)
                    last_record = self._active_since = time.monotonic()
                elif self.source.exhausted():
                    break
                elif (
                    cfg.stop_when_idle is not None
                    and now - (self._active_since or start + JOIN_GRACE) >= cfg.stop_when_idle
                    and getattr(self.source, "connected", True)  # an outage is not idleness
                ):
                    self._warn_if_never_assigned(now - start)
                    break
                if self._pending is not None and self._pending.ready():
                    self._complete()
                if self._snapshot_due(now):
                    self.checkpoint(reason="due", wait=False)
                elif self._check_due(now):
                    self._same_log("idle", self._start_check())
                if now - last_progress >= cfg.progress_seconds:
                    rate = (records - rate_mark[1]) / max(now - rate_mark[0], 1e-9)
                    rate_mark = (now, records)
                    last_progress = now
                    self.metrics.set("events_per_second", rate)
                    self.metrics.set("rolling_metric", self._rolling.get())
                    self._consolidation_figures()
                    self.metrics.set("lag", self.source.lag())
                    self.metrics.set("broker_reconnects_total", getattr(self.source, "outages", 0))
                    if self.on_progress is not None:
                        self.on_progress(self.progress())
        finally:
            self.metrics.set_ready(False)
            try:
                if self.model is not None and self._fatal is None:
                    self.checkpoint(reason="shutdown")
            finally:
                try:
                    self._close_outputs()
                    self.source.close()  # after the last snapshot and commit
                finally:
                    if frozen:
                        gc.unfreeze()  # start-up objects are collectable again
        if self._fatal is not None:
            raise self._fatal
        secs = time.monotonic() - start
        m = self.metrics.snapshot()
        busy = last_record - first_record if first_record is not None else 0.0
        return EngineResult(
            records,
            int(m["events_learned"]),
            int(m["events_scored"]),
            int(m["events_dead_lettered"]),
            int(m["snapshots_written"]),
            secs,
            self.seq,
            dict(self.positions),
            m,
            busy,
        )

    def _support_size(self) -> int:
        learner = served_learner(self.model)  # e.g. inside Consolidated
        return int(getattr(learner, "n_support", 0))

    def _consolidation_figures(self) -> None:
        figures = getattr(self.model, "metrics", None)
        if callable(figures):
            values = figures()
            self.metrics.set("consolidations", values.get("consolidations"))
            seconds = values.get("consolidation_seconds_total")
            self.metrics.set("consolidation_seconds_total", seconds)
            self.metrics.set("consolidation_failures_total", values.get("consolidations_failed"))
            self.metrics.set(
                "consolidation_serving_online", values.get("consolidation_serving_online", 0.0)
            )

    def progress(self) -> dict[str, Any]:
        """A status line's worth of figures."""
        m = self.metrics.snapshot()
        return {
            "records": int(m["events_in"]),
            "events_per_second": m["events_per_second"],
            "learned": int(m["events_learned"]),
            "scored": int(m["events_scored"]),
            "dead_lettered": int(m["events_dead_lettered"]),
            "lag": self.source.lag(),
            "support": self._support_size(),
            "rolling_metric": self._rolling.get() if self._rolling is not None else None,
            "snapshots": int(m["snapshots_written"]),
            "seq": self.seq,
        }

    def _check_due(self, now: float) -> bool:
        """Whether to check the log while nothing is read (every ``snapshot_seconds``): a
        topic recreated shorter than our position gives no record and, on some brokers
        (tansu), no error either."""
        seconds = self.config.snapshot_seconds
        return (
            self._since_snapshot == 0
            and self._pending is None
            and seconds is not None
            and now - self._last_check >= seconds
            and getattr(self.source, "may_be_recreated", False)
        )

    def _snapshot_due(self, now: float) -> bool:
        if self._since_snapshot == 0:
            return False
        cfg = self.config
        if cfg.snapshot_every is not None and self._since_snapshot >= cfg.snapshot_every:
            return True
        return (
            cfg.snapshot_seconds is not None and now - self._last_snapshot >= cfg.snapshot_seconds
        )

    # -- one batch ------------------------------------------------------------------------
    def _process(self, batch: list[Record]) -> None:
        cfg = self.config
        schema = cfg.schema if cfg.schema is not None else input_schema(self.model)
        for run in split_runs(batch, cfg.limits, schema, self._reject):
            self._flush_run(run)

    def _reject(self, record: Record, exc: InvalidEvent) -> None:
        self._dead_letter(record, exc)
        self._advance(record)

    def _dead_letter(self, record: Record, exc: Exception) -> None:
        payload = record.payload
        if payload is None:
            payload = repr(record.value).encode()
        letter = DeadLetter.from_error(
            payload, exc, self.source.name, record.partition, record.offset, record.timestamp_ms
        )
        self.metrics.dead_letter(letter.code)
        self.dead_letters.write(letter)

    def _advance(self, record: Record) -> None:
        self.positions[record.partition] = record.offset + 1
        self._last[record.partition] = record
        self._first.setdefault(record.partition, record)

    def _flush_run(self, run: Run) -> None:
        import pandas as pd

        X = self._frame(run)
        if self._novelty:
            self._flag_and_learn(run, X)
        elif run.labelled:

            def block() -> list[Any]:
                learn_predict = getattr(self.model, "learn_predict_many", None)
                if learn_predict is not None:  # per-event test-then-train in one pass
                    return list(learn_predict(X, run.ys))
                predictions = self.model.predict_many(X).tolist()
                self.model.learn_many(X, pd.Series(run.ys, dtype=object))
                return predictions

            predictions = self._learn_run(run, None if X is None else block)
            ys, predictions = run.ys, list(predictions)
            if None in predictions or _REJECTED in predictions:  # rare: score only the rest
                learned = len(predictions) - predictions.count(_REJECTED)
                kept = [(y, p) for y, p in zip(ys, predictions) if p not in (None, _REJECTED)]
                ys, predictions = [y for y, _ in kept], [p for _, p in kept]
            else:
                learned = len(predictions)
            self._rolling.update_many(ys, predictions)
            self.metrics.inc("events_learned", learned)
        else:
            self._score(run, X)
        self.positions[run.partition] = run.next_offset  # runs never span partitions
        self._last[run.partition] = run.records[-1]
        if run.partition not in self._first:
            self._first[run.partition] = run.records[0]
        self.metrics.set("support_size", self._support_size())

    def _frame(self, run: Run) -> Any:
        """The run's frame, or ``None`` for a run shorter than ``BLOCK_MIN`` that goes event
        by event: a labelled run (``learn_one`` learns as ``learn_predict_many`` does), or
        a run to score where predictions are labels. A regressor's ``predict_one`` can
        differ from its ``predict_many`` in the last bit, and so can probabilities: their
        runs keep the block, so that a replay publishes one answer whatever its batches."""
        if len(run) < BLOCK_MIN and (run.labelled or self._novelty or self._labels_only):
            return None
        return run.frame()

    def _flag_and_learn(self, run: Run, X: Any) -> None:
        """A novelty detector's run: flag each event, then learn it (labels unused).

        With the detector's ``learn_predict_many`` each event is flagged by the model that
        has learned every event before it, as one event at a time would: the flags do not
        depend on how the stream is cut into runs. A model without it has the run flagged
        before any of it is learned (``predict_many`` then ``learn_many``). A run the
        model refuses goes event by event, dead-lettering the bad events.
        """

        def block() -> list[Any]:
            learn_flag = getattr(self.model, "learn_predict_many", None)
            if learn_flag is not None:
                return [bool(f) for f in learn_flag(X)]
            flags = [bool(f) for f in self.model.predict_many(X).tolist()]
            self.model.learn_many(X)
            return flags

        flags = self._learn_run(run, None if X is None else block)
        learned = len(flags) - flags.count(_REJECTED)
        keep = [i for i, f in enumerate(flags) if f is not _REJECTED and f is not None]
        kept = [bool(flags[i]) for i in keep]
        # RollingScore in its MAE form over |0 - flag|: the fraction flagged in the window
        self._rolling.update_many([0.0] * len(kept), [float(f) for f in kept])
        self.metrics.inc("events_learned", learned)
        self.metrics.inc("events_flagged", sum(kept))
        if not run.labelled:
            if self.predictions is not None and kept:
                self._publish(kept_run(run, keep), kept)
            self.metrics.inc("events_scored", len(kept))

    def _score(self, run: Run, X: Any) -> None:
        """An unlabelled run: predicted and published; the events the model refuses are
        dead-lettered (:func:`~streamk.engine.scoring.score_run`)."""
        proba = self.predictions is not None and self.config.publish_proba
        run, predictions, probas = score_run(self.model, run, X, proba, self._dead_letter)
        if self.predictions is not None and predictions:
            self._publish(run, predictions, probas)
        self.metrics.inc("events_scored", len(predictions))

    def _publish(
        self, run: Run, predictions: list[Any], probas: list[dict[Any, float]] | None = None
    ) -> None:
        """Hand a run's predictions to the sink: in one ``write_many`` call when it has one."""
        sink, offsets = self.predictions, list(map(_OFFSET, run.records))
        write_many = getattr(sink, "write_many", None)
        if write_many is not None:
            write_many(
                predictions,
                ids=run.ids,
                offsets=offsets,
                model_seq=self.seq,
                partition=run.partition,
                probas=probas,
            )
            return
        for i, (event_id, offset, p) in enumerate(zip(run.ids, offsets, predictions)):
            proba = None if probas is None else probas[i]
            sink.write(
                p,
                id=event_id,
                proba=proba,
                model_seq=self.seq,
                partition=run.partition,
                offset=offset,
            )

    def _learn_run(self, run: Run, block: Callable[[], list[Any]] | None) -> list[Any]:
        """Learn a run with ``block`` (one call for the run: its predictions or flags); if
        the model refuses it, event by event from the first event it did not learn, the
        refused ones dead-lettered (``_REJECTED``; ``None``: learned, not predicted). With
        no ``block`` (a run too short for its frame: :meth:`_frame`), event by event.

        A model that cannot say how far a refused block got (no ``n_learned``: a river
        pipeline, whose scaler learns a block its learner then refuses) goes event by
        event from the start, so that no event is learned twice."""
        before = getattr(self.model, "n_learned", None)
        if before is None or block is None:
            return self._learn_one_by_one(run)
        try:
            return block()
        except REFUSALS:
            done = self.model.n_learned - before  # learned already: never twice
            return [None] * done + self._learn_one_by_one(run, start=done)

    def _learn_one_by_one(self, run: Run, start: int = 0) -> list[Any]:
        """A run the model refused as a block: event by event from ``start``, dead-lettering
        the bad ones."""
        out = []
        for i in range(start, len(run)):
            record, y, x = run.records[i], run.ys[i], run.row(i)
            try:
                p = self.model.predict_one(x)
                if self._novelty:
                    self.model.learn_one(x)
                else:
                    self.model.learn_one(x, y)
                out.append(p)
            except REFUSALS as exc:
                self._dead_letter(record, as_invalid(exc))
                out.append(_REJECTED)
        return out

    # -- snapshots ------------------------------------------------------------------------
    def checkpoint(self, reason: str = "due", wait: bool = True) -> None:
        """Flush sinks, write a snapshot covering ``positions``, then commit them.

        Does nothing when no record arrived since the last checkpoint (its commit stands).
        Before the snapshot is saved, the log is checked (:meth:`_start_check`: the topic's
        id, else each owned partition's log read back at one record): a topic recreated
        under the engine is never written into a snapshot. With ``wait=False`` (the loop's
        due checkpoints) a snapshot whose check is a read-back is encoded now and saved once
        that read answers, while the loop goes on (:meth:`_complete`): the read is a wait on
        the broker, and the loop need not wait with it.
        """
        if self._pending is not None:
            self._complete()  # an earlier snapshot first: snapshots are saved in order
        if self._since_snapshot == 0 or self._fatal is not None:
            return
        self._pending = self._prepare(reason)
        if wait or self._pending.ready():
            self._complete()

    def _prepare(self, reason: str) -> PendingSnapshot:
        """Flush the sinks, encode the snapshot of the model as it is, and start the log's
        check (before the marks move to the records just read)."""
        t0 = time.perf_counter()
        check = self._start_check()
        for sink in (self.predictions, self.dead_letters):
            if sink is not None and hasattr(sink, "flush"):
                sink.flush()
        saved, seq = self.seq, self._next_seq()  # what this engine last wrote or restored
        self._consolidation_figures()
        if self._rolling is not None:  # the gauge as the snapshot's metrics record it
            self.metrics.set("rolling_metric", self._rolling.get())
        offsets = {self.source.name: dict(self.positions)}
        meta: dict[str, Any] = {}
        if self.adopt is not None:  # the model may change here; the offsets never do
            self.model, meta = self.adopt(self.model)
            counts = getattr(self.adopt, "counts", None)  # an Adopter's outcomes so far
            if counts is not None:
                self.metrics.set_adoptions(counts)
        for p, record in self._last.items():
            mark = mark_of(record)
            if mark is not None and record.offset + 1 == self.positions.get(p):
                self._marks[p] = mark
        self._last, self._first = {}, {}
        meta = {**meta, "marks": marks_meta(self._marks, self.source.name)}
        if self._group() is not None:  # whose worker this model is (see peer_offsets)
            meta["group"] = self._group()
        data = None
        if self.store is not None or self.publisher is not None:
            from .. import snapshot

            data = snapshot.dumps(
                _snapshotted(self.model),
                offsets=offsets,
                seq=seq,
                metrics=_numbers(self.metrics.snapshot()),
                reason=reason,
                **meta,
            )
        pending = PendingSnapshot(
            reason, check, data, saved, seq, dict(self.positions), self._since_snapshot
        )
        self._since_snapshot = 0
        self._last_snapshot = time.monotonic()
        pending.seconds = time.perf_counter() - t0
        return pending

    def _complete(self) -> bool:
        """Save the pending snapshot once its log's check answered (waiting for it), then
        commit its offsets, and say so; a log that changed gets
        :meth:`_recreated_while_running`'s answer instead, and nothing is saved."""
        pending = self._pending
        assert pending is not None
        if not self._same_log(pending.reason, pending.check):
            return False  # nothing written: the records it covers may come from two logs
        t0 = time.perf_counter()
        self._pending = None
        if pending.data is not None:
            if self.store is not None:  # (refused if another engine writes this model)
                self.store.save(pending.data, self.config.model_name, after=pending.saved)
            if self.publisher is not None:
                self.publisher.publish(self.config.model_name, pending.data)
        self.seq = pending.seq
        self._durable = dict(pending.positions)
        owned = set(self.source.assignment())
        committing = {p: o for p, o in pending.positions.items() if p in owned}
        self._journal().record(self.source.name, committing)
        try:
            self.source.commit(
                committing,
                metadata=commit_metadata(self.config.model_name, self.seq, self._store_id()),
            )
        except BrokerError as exc:
            # The snapshot is durable and holds these offsets, and assignment resumes after
            # the newest durable snapshot: a refused commit (e.g. after a rebalance) loses
            # nothing.
            log.warning("offset commit failed after snapshot seq %d: %s", self.seq, exc)
            self.metrics.inc("commit_failures_total")
        self.metrics.inc("snapshots_written")
        self.metrics.inc("snapshot_seconds_total", pending.seconds + time.perf_counter() - t0)
        self.metrics.set("model_seq", self.seq)
        log.info("snapshot seq %d (%s) at %s", self.seq, pending.reason, pending.positions)
        return True

    def _next_seq(self) -> int:
        """One above every seq this model has used, including snapshots the store set aside
        as corrupt, so a new snapshot never hides behind a damaged one."""
        next_seq = getattr(self.store, "next_seq", None)
        floor = next_seq(self.config.model_name) if callable(next_seq) else 0
        return max(self.seq + 1, floor)

    def _close_outputs(self) -> None:
        """Close the sinks and the snapshot publisher after the last checkpoint. A publisher's
        producer left open kept its connections, and stopping a broker waited on them."""
        for output in (self.predictions, self.dead_letters, self.publisher):
            close = getattr(output, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing must not mask the real outcome
                    log.exception("closing %s failed", type(output).__name__)


_REJECTED = object()
_OFFSET = attrgetter("offset")


def _check_runnable(model: Any, proba: bool) -> None:
    """Refuse, at start-up, a model the loop cannot run: it calls ``predict_one`` (a
    prediction or a novelty flag) before ``learn_one`` of each event, and with ``proba``
    ``predict_proba_one`` (or ``_many``) of each event it scores."""
    if proba and not callable(getattr(model, "predict_proba_one", None)):
        raise ConfigError(
            f"publish_proba needs a classifier's probabilities; {type(model).__name__} has "
            "no predict_proba_one"
        )
    missing = [m for m in ("learn_one", "predict_one") if not callable(getattr(model, m, None))]
    if missing:
        raise ConfigError(
            f"the engine runs a model with learn_one and predict_one; {type(model).__name__} "
            f"has no {' or '.join(missing)} (a river anomaly detector scores events with "
            "score_one: use streamk's KernelNovelty, which flags them)"
        )


def _unwrapped(model: Any) -> Any:
    """The learner inside a wrapper (consolidation, scaling), else the model."""
    inner = getattr(model, "_wrapped_model", None)
    if inner is None and hasattr(getattr(model, "model", None), "learn_one"):
        inner = model.model
    return model if inner is None else inner


def _model_name(model: Any) -> str:
    """The class names of a model and the learners it wraps: ``Outer(Inner)``."""
    inner = _unwrapped(model)  # e.g. the learner behind the feature standardiser
    name = type(model).__name__
    return name if inner is model else f"{name}({_model_name(inner)})"


def _model_spec(model: Any) -> str:
    """Class chain, kernel and budget of a model, as a short comparable text."""
    learner = model
    while (inner := _unwrapped(learner)) is not learner:
        learner = inner
    kernel = getattr(learner, "kernel", None)
    budget = getattr(learner, "budget", None)
    return f"{_model_name(model)} kernel={kernel!r} budget={budget!r}"


def _committed_pairs(committed: dict[int, Any]) -> dict[int, tuple[int, str | None]]:
    """``{partition: (offset, metadata)}`` from a source's ``committed()``."""
    return {
        int(p): (int(c), None) if isinstance(c, int) else (int(c.offset), c.metadata)
        for p, c in committed.items()
    }


def _offsets_of(
    source: Source, stream: dict[str, dict[int, int]], said: bool = True
) -> dict[int, int]:
    """The snapshot's offsets for ``source``: under its name, else under a name it answers
    to (a replayed log's legacy path spelling or an earlier fingerprint of the same file);
    ``said``: log at INFO that we resume from such a name (our own snapshot's)."""
    if source.name in stream:
        return stream[source.name]
    answers_to = getattr(source, "answers_to", None)
    for key, offsets in stream.items():
        if callable(answers_to) and answers_to(key):
            if said:
                log.info("resuming %s from the offsets recorded as %r", source.name, key)
            return offsets
    return {}


def _snapshotted(model: Any) -> Any:
    """What a snapshot holds: the whole model (a Consolidated wrapper with its window and
    counters included) when its class is allow-listed, else the learner a wrapper holds."""
    from ..snapshot.registry import class_name_of

    try:
        class_name_of(model)
    except StreamkError:
        return getattr(model, "_wrapped_model", model)
    if not getattr(model, "state_is_plain", True):  # e.g. a river drift detector inside
        log.warning("%s holds state a snapshot cannot; saving its learner only", model)
        return model._wrapped_model
    return model


def _numbers(values: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of ``values`` (what a snapshot's metrics hold: a gauge with no
    value yet, NaN, is left out)."""
    return {
        k: float(v) for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)
    }
