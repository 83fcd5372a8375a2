"""The merge role (``streamk merge``): the workers' newest snapshots -> one published model.

One pass reads the newest durable snapshot of every worker (from the snapshot topic, or the
file store when there is no topic), merges them with :func:`~streamk.merge.merge_snapshots`
and publishes the result under its own name (``merge_name``, default ``"merged"``) with the
next seq. The merged snapshot carries **no stream offsets**: every model of the group (or
naming none) on the snapshot topic or in a store counts as a worker of the group (design §7,
``streamk/engine/recovery.py``), and
offsets on it would read as a worker's coverage of the events topic. Which worker snapshots
went in (name, seq, offsets, checksum, n_learned) is its metadata (``sources``) instead.

Idempotent and restartable: a pass whose set of worker snapshots (name, seq, checksum) equals
the one the newest published merge came from publishes nothing, so a restarted merger, or one
that wakes up to unchanged workers, never republishes a merge.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine.recovery import other_group
from ..errors import MergeError, StreamkError
from .models import merge_snapshots

__all__ = [
    "MergePass",
    "Merger",
    "is_merged",
    "other_groups",
    "worker_snapshots",
]

log = logging.getLogger("streamk.merge")

#: metadata keys of a merged snapshot
SOURCES, ROLE = "sources", "role"


def is_merged(snap: Any) -> bool:
    """Whether a snapshot was written by a merger (it names its sources) rather than a worker."""
    meta = getattr(snap, "meta", None) or {}
    return meta.get(ROLE) == "merge" or SOURCES in meta


def worker_snapshots(found: dict[str, Any], topic: str, merge_name: str) -> dict[str, Any]:
    """The workers among ``{name: Snapshot}``: models that learned from ``topic``.

    Left out: the merger's own name, any merged snapshot (it names sources), snapshots with
    no offsets on the events topic (another stream's models) and models that learned nothing.
    """
    learned_from = _stream_matcher(topic)
    out = {}
    for name, snap in found.items():
        if snap is None or name == merge_name or is_merged(snap):
            continue
        if not any(offsets and learned_from(key) for key, offsets in snap.offsets.items()):
            continue
        if int((snap.state or {}).get("n_learned", 1)) <= 0:
            continue
        out[name] = snap
    return out


def other_groups(found: dict[str, Any], group: str, merge_name: str) -> dict[str, str]:
    """Take the workers of other consumer groups out of ``found``: ``{name: their group}``.

    A second group on the same snapshot topic or store (a canary, a backfill) is not a
    worker of this group's merge: its model would be mixed into the model this group's
    workers adopt. Snapshots that name no group (older ones, a replay's) stay in, as
    :func:`streamk.engine.recovery.peer_offsets` keeps them as peers.
    """
    out = {}
    for name, snap in list(found.items()):
        theirs = other_group(snap, group)
        if name == merge_name or theirs is None or is_merged(snap):
            continue  # (another group's merge is no worker of anyone's: not listed)
        del found[name]
        out[name] = theirs
    return out


def _stream_matcher(topic: str) -> Callable[[str], bool]:
    """Whether a snapshot's stream key is ``topic``: the name itself, or, for a recorded log
    given by path, any name the log answers to (its content fingerprint, old spellings)."""
    if not os.path.isfile(topic):
        return lambda key: key == topic
    from ..sources.replay import ReplaySource

    log = ReplaySource(topic)
    return lambda key: key == topic or log.answers_to(key)


def check_mergeable(workers: dict[str, Any]) -> None:
    """Refuse worker models that standardise their features, naming the fix.

    With ``scale = "standard"`` (or ``"auto"`` for a classifier or regressor) each worker
    keeps its own running mean and variance: the workers' kernel expansions live in
    different feature spaces, so their union is not any one function of the raw features.
    """
    from ..learners.scaling import StandardScaledClassifier, StandardScaledRegressor

    wrapped = (StandardScaledClassifier, StandardScaledRegressor)
    scaled = sorted(n for n, s in workers.items() if isinstance(s.model, wrapped))
    if scaled:
        raise MergeError(
            f"workers {scaled} standardise their features, each with its own running scaler "
            "(scale = standard, or auto for a classifier or regressor): their models live in "
            'different feature spaces and cannot be merged; run the workers with scale = "none"'
        )


def _identity(sources: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return sorted((str(s["name"]), int(s["seq"]), str(s.get("checksum", ""))) for s in sources)


@dataclass
class MergePass:
    """What one pass did: published a merge (``seq``), or why not (``skipped``).

    ``other_groups`` names the models other consumer groups learned (``{name: group}``),
    not merged here (:func:`other_groups`). ``excluded`` lists the models of the file store
    left out because none of their
    snapshots could be read (``{"name": ..., "reason": ...}``): the merge covers the rest.
    """

    published: bool
    seq: int | None
    workers: list[dict[str, Any]] = field(default_factory=list)
    skipped: str = ""
    n_learned: int = 0
    n_union: int = 0
    n_support: int = 0
    method: str = ""
    merge_seconds: float = 0.0
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)
    excluded: list[dict[str, str]] = field(default_factory=list)
    other_groups: dict[str, str] = field(default_factory=dict)
    pass_seconds: float = 0.0

    def line(self, name: str) -> str:
        """The progress line of this pass."""
        who = ", ".join(f"{w['name']}:{w['seq']}" for w in self.workers) or "none"
        left_out = ""
        if self.excluded:
            left_out = "; excluded " + ", ".join(
                f"{e['name']} ({e['reason']})" for e in self.excluded
            )
        if self.other_groups and not self.workers:  # a merger given the wrong group?
            left_out += "; models of other consumer groups: " + ", ".join(
                f"{n} ({g!r})" for n, g in sorted(self.other_groups.items())
            )
        if not self.published:
            return f"merge {name!r}: {self.skipped}; workers {who}{left_out}"
        return (
            f"merge {name!r}: published seq {self.seq} from {len(self.workers)} workers "
            f"({who}), {self.n_learned:,} events, support {self.n_union:,} -> "
            f"{self.n_support:,} ({self.method}), {self.merge_seconds:.2f} s{left_out}"
        )

    def as_dict(self) -> dict[str, Any]:
        """The pass as plain data (the ``last`` entry of ``streamk merge --json``)."""
        return dict(self.__dict__)


@dataclass
class _Read:
    """What :meth:`Merger._read` found: ``{worker: Snapshot}``, the newest published merge
    (or ``None``), the newest seq used locally, the models of the file store left out
    (unreadable) and those of other consumer groups (see :class:`MergePass`)."""

    workers: dict[str, Any]
    previous: Any
    local_seq: int
    excluded: list[dict[str, str]]
    other_groups: dict[str, str]


class Merger:
    """Reads the workers' snapshots, merges, publishes; one :meth:`run_once` per pass.

    Parameters
    ----------
    config
        The effective configuration (:func:`streamk.engine.config.load_config`): ``topic``
        (the events topic the workers learn from), ``snapshot_topic`` (read and publish
        there when set), ``snapshot_dir`` (the file store: read when there is no topic;
        the merged model is always saved there too), ``merge_name``, ``merge_every``,
        ``merge_compress``.
    scan
        Reads ``{name: Snapshot}`` (unbuilt) from the snapshot topic; default: a
        :class:`~streamk.snapshot.SnapshotReader` scan (tests may pass another source).
    """

    def __init__(
        self, config: dict[str, Any], *, scan: Callable[[], dict[str, Any]] | None = None
    ) -> None:
        from ..snapshot import SnapshotStore
        from ..snapshot.kafka_scheme import check_name

        self.config = config
        self.name = check_name(config["merge_name"])
        self.topic = config["topic"]
        self.store = SnapshotStore(config["snapshot_dir"], keep=config["snapshot_keep"])
        self.publisher: Any = None
        self._scan = scan
        if config["snapshot_topic"]:
            from ..engine.runner import kafka_settings, topic_peers
            from ..snapshot.kafka import SnapshotPublisher

            self._scan = scan or topic_peers(config)
            self.publisher = SnapshotPublisher(
                config["bootstrap_servers"],
                config["snapshot_topic"],
                producer_config=kafka_settings(config),
            )
            self.publisher.sweep(self.name)  # the one writer of this name: drop stray chunks

    # -- reading -----------------------------------------------------------------------

    def _read(self) -> _Read:
        """The workers' snapshots, the newest published merge and what was left out (see
        :class:`_Read`).

        With a snapshot topic the topic is the record of what was published (a merge saved
        locally but not acknowledged by Kafka was not published); without one, the store.
        """
        found: dict[str, Any] = {}
        excluded: list[dict[str, str]] = []
        # the seqs used locally, damaged or set-aside files too: never read, so a damaged
        # local copy of a merge cannot stop the merger (the topic holds what was published)
        local_top = self.store.next_seq(self.name) - 1
        if self._scan is not None:
            found = dict(self._scan())
        else:
            for name in self.store.names():
                # read-only: another model's damaged files are its own engine's to set aside
                found[name], why = self.store.newest_readable(name)
                if found[name] is None and name != self.name:
                    log.warning("model %r left out of this merge: %s", name, why)
                    excluded.append({"name": name, "reason": why})
        others = other_groups(found, self.config["group"], self.name)
        workers = worker_snapshots(found, self.topic, self.name)
        return _Read(workers, found.get(self.name), local_top, excluded, others)

    # -- one pass ----------------------------------------------------------------------

    def run_once(self) -> MergePass:
        """Merge and publish if the workers' snapshots changed since the newest merge."""
        t0 = time.monotonic()
        done = self._pass()
        done.pass_seconds = time.monotonic() - t0
        return done

    def _pass(self) -> MergePass:
        from ..snapshot import dumps
        from ..snapshot.kafka_scheme import build_model
        from .provenance import snapshot_sources

        read = self._read()
        workers, previous, excluded = read.workers, read.previous, read.excluded
        sources = snapshot_sources(workers)
        left_out = {"excluded": excluded, "other_groups": read.other_groups}
        if not workers:
            return MergePass(False, None, sources, skipped="no worker snapshots yet", **left_out)
        prev_sources = list((previous.meta or {}).get(SOURCES, [])) if previous else []
        if previous is not None and _identity(prev_sources) == _identity(sources):
            return MergePass(
                False,
                previous.seq,
                sources,
                skipped=f"unchanged since seq {previous.seq}",
                **left_out,
            )
        for snap in workers.values():
            if snap.model is None:
                build_model(snap)
        check_mergeable(workers)
        compress = self.config["merge_compress"]
        result = merge_snapshots(workers, compress=compress)
        seq = max(-1 if previous is None else previous.seq, read.local_seq) + 1
        n_learned = sum(int(s["n_learned"]) for s in result.sources)
        data = dumps(
            result.model,
            {},  # no offsets: the merged model is not a worker (see the module docstring)
            seq,
            {
                "workers": float(len(result.sources)),
                "n_learned": float(n_learned),
                "n_union": float(result.n_union),
                "n_support": float(result.n_support),
                "merge_seconds": float(result.seconds),
            },
            role="merge",
            sources=result.sources,
            weights=[float(w) for w in result.weights],
            method=result.method,
            events_topic=self.topic,
            group=self.config["group"],
        )
        self.store.save(data, self.name)
        if self.publisher is not None:
            self.publisher.publish(self.name, data)
        return MergePass(
            True,
            seq,
            result.sources,
            n_learned=n_learned,
            n_union=result.n_union,
            n_support=result.n_support,
            method=result.method,
            merge_seconds=result.seconds,
            coverage=coverage(result.sources, self.topic),
            **left_out,
        )

    # -- the loop ----------------------------------------------------------------------

    def run(
        self,
        stop: threading.Event,
        on_pass: Callable[[MergePass], None] | None = None,
    ) -> list[MergePass]:
        """A pass every ``merge_every`` seconds until ``stop`` is set; the published passes.

        A pass that fails (a merge error, the broker away) is logged and retried at the next
        interval: the previous merged model stays published meanwhile.
        """
        published: list[MergePass] = []
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                done = self.run_once()
            except (StreamkError, OSError) as exc:
                log.error(
                    "merge pass failed (retrying in %g s): %s", self.config["merge_every"], exc
                )
                done = MergePass(False, None, skipped=f"failed: {exc}")
                done.pass_seconds = time.monotonic() - t0
            if on_pass is not None:
                on_pass(done)
            if done.published:
                published.append(done)
            stop.wait(max(0.0, self.config["merge_every"] - (time.monotonic() - t0)))
        return published

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()


def coverage(sources: list[dict[str, Any]], topic: str) -> dict[str, dict[str, Any]]:
    """Per partition of ``topic``: the furthest next offset among the sources, and whose."""
    out: dict[str, dict[str, Any]] = {}
    for s in sources:
        for p, o in s["offsets"].get(topic, {}).items():
            if p not in out or o > out[p]["next_offset"]:
                out[p] = {"next_offset": int(o), "worker": s["name"]}
    return out
