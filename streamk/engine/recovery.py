"""Where each assigned partition resumes: the exactly-once recovery rule (design §7).

**Durable snapshots, not commits, are the record of what has been learned.** An event
belongs to the model whose newest durable snapshot covers it, and to no other. So a
partition resumes after the newest durable snapshot that covers it, whichever worker of
the group wrote it:

- our own restored snapshot says where *our* model stopped (``own``);
- another worker's newest durable snapshot (``peers``, read from the shared file store or
  the snapshot topic) says which events are in *its* model: we resume after them, even
  past its last commit (a worker killed between its snapshot and its commit);
- a commit is only a hint. One by *our* model that is ahead of the restored snapshot means
  a newer snapshot of ours was lost (damaged, deleted): those events are in no durable
  model, so they are learned again from the snapshot's offset. One by *another* model
  whose snapshots we cannot see is taken as that model's coverage (it commits only after
  its snapshot is durable). A commit without our metadata (another tool, an older streamk)
  is trusted as before, with a warning.

Commits carry ``{"model": name, "seq": n, "store": id}`` as their metadata (Kafka's
``OffsetAndMetadata.metadata``), which is how the two kinds of commit are told apart. The
store id (a random token kept in the model's store directory) tells two engines apart
that were given the same model name but write to different stores. Some brokers accept
commit metadata and drop it (tansu 0.6 returns it empty), so the engine also keeps a
journal of the offsets it committed beside its snapshots (:class:`CommitJournal`): a
commit without metadata at an offset in our journal is ours.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "commit_metadata",
    "parse_commit_metadata",
    "Resume",
    "resume_offsets",
    "peer_offsets",
    "other_group",
    "writer_id",
    "CommitJournal",
    "Mark",
    "mark_of",
    "marks_meta",
    "marks_from_meta",
    "recreated",
    "anchors",
    "LogCheck",
    "ReplacedTopic",
]

#: the file beside a model's snapshots that holds its store id
WRITER_FILE = ".store-id"

#: Kafka's default ``offset.metadata.max.bytes`` is 4096; ours is far below it.
_MAX_METADATA = 1024


def commit_metadata(model_name: str, seq: int, store_id: str = "") -> str:
    """The metadata stored with every commit: which model's snapshot covers the offsets."""
    fields: dict[str, Any] = {"model": model_name, "seq": int(seq)}
    if store_id:
        fields["store"] = store_id
    text = json.dumps(fields, separators=(",", ":"))
    if len(text) > _MAX_METADATA:
        raise ValueError(f"model name too long for commit metadata: {model_name[:40]!r}...")
    return text


def parse_commit_metadata(text: str | None) -> tuple[str, int, str] | None:
    """``(model name, seq, store id)`` from a commit's metadata, or ``None`` if it is not
    ours (the store id is ``""`` when the writer had none)."""
    if not text or len(text) > _MAX_METADATA:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    name, seq, store = data.get("model"), data.get("seq"), data.get("store", "")
    if not isinstance(name, str) or type(seq) is not int or not isinstance(store, str):
        return None
    return name, seq, store


@dataclass
class Resume:
    """The offset each partition resumes at, and why (one line per partition that needs one)."""

    offsets: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(
        default_factory=list
    )  # WARNING lines: a rewind, a peer, a legacy commit
    sources: dict[int, str] = field(default_factory=dict)  # partition -> what decided it
    rewinds: int = 0  # partitions resumed before a commit of ours


def resume_offsets(
    partitions: list[int],
    *,
    model_name: str,
    own: Mapping[int, int],
    committed: Mapping[int, tuple[int, str | None]],
    peers: Mapping[str, Mapping[int, int]],
    store_id: str = "",
    journal: Mapping[int, Sequence[int]] | None = None,
) -> Resume:
    """Apply the rule to each partition.

    Parameters
    ----------
    partitions
        The partitions just assigned.
    model_name
        This engine's model.
    own
        Partition -> next offset in our restored snapshot (absent: our model never read it).
    committed
        Partition -> ``(next offset, metadata)`` of the group's commit, where there is one.
    store_id
        Our store's id: a commit by our model name from another store is another writer's.
    journal
        Partition -> offsets we committed lately (:class:`CommitJournal`): a commit with
        no metadata at one of them is ours.
    peers
        Other models' newest durable snapshots: model -> partition -> next offset. A model
        listed with no offsets is known to hold none of these events: its commits are not
        taken as coverage.
    """
    out = Resume()
    for p in partitions:
        target, why = own.get(p, 0), "snapshot" if p in own else "start"
        for peer, offsets in peers.items():
            if peer != model_name and offsets.get(p, -1) > target:
                target, why = offsets[p], f"snapshot of {peer}"
        if p in committed:
            offset, meta = committed[p]
            author = parse_commit_metadata(meta)
            if author is None and journal is not None and offset in journal.get(p, ()):
                author = (model_name, -1, store_id)  # the broker dropped our metadata
            if author is None:
                if offset > target:
                    out.notes.append(
                        f"partition {p}: commit at {offset} carries no streamk metadata; "
                        f"trusting it over {why} at {target}"
                    )
                    target, why = offset, "commit without metadata"
            elif author[0] == model_name and (
                not author[2] or not store_id or author[2] == store_id
            ):
                if offset > own.get(p, 0):
                    out.rewinds += 1
                    out.notes.append(
                        f"partition {p}: our commit at {offset}"
                        + (f" (seq {author[1]})" if author[1] >= 0 else "")
                        + " is ahead of "
                        f"the restored snapshot at {own.get(p, 0)}: a newer snapshot was lost, "
                        f"so events {own.get(p, 0)}..{offset - 1} are learned again"
                    )
            elif (author[0] not in peers or author[0] == model_name) and offset > target:
                target, why = offset, f"commit by {author[0]}"
        if why.startswith(("snapshot of", "commit by")):
            out.notes.append(f"partition {p}: resuming at {target}, after the {why}")
        out.offsets[p] = target
        out.sources[p] = why
    return out


def peer_offsets(
    snapshots: Mapping[str, Any],
    stream: Callable[[Mapping[str, Any]], Mapping[Any, Any]],
    group: str | None = None,
) -> dict[str, dict[int, int]]:
    """Model -> partition -> next offset, from ``{model: Snapshot or None}``; ``stream``
    picks a snapshot's offsets of our stream out of its ``offsets`` (under our stream's
    name, or a name it answers to: a replayed log that grew since the peer's snapshot).

    A model with no readable snapshot stays in, with no offsets: it holds no durable
    events, so a commit it made is not taken as coverage. A model whose snapshot names
    another consumer ``group`` (its ``meta["group"]``) is no worker of ours and is left
    out: a second group on the same snapshot topic (a canary) resumed after the first
    group's snapshots and learned nothing. Snapshots without a group (older ones) count.
    """
    out: dict[str, dict[int, int]] = {}
    for name, snap in snapshots.items():
        if snap is None:
            out[name] = {}
            continue
        if group is not None and other_group(snap, group) is not None:
            continue
        out[name] = {int(p): int(o) for p, o in stream(snap.offsets).items()}
    return out


def other_group(snap: Any, group: str) -> str | None:
    """The consumer group ``snap`` names (its ``meta["group"]``) when it is not ``group``;
    ``None`` for ours, or for a snapshot that names none (older ones, a replay's: those
    count as ours, a peer of the engine and a worker of the merger)."""
    theirs = (getattr(snap, "meta", None) or {}).get("group")
    return None if theirs is None or theirs == group else str(theirs)


def writer_id(model_dir: Path) -> str:
    """The store id of ``model_dir``: read from its ``.store-id``, created on first use.

    Kept when the store is reset (``streamk snapshot reset``), so that our own commits
    are still recognised as ours and a fresh model re-learns what they covered.
    """
    path = Path(model_dir) / WRITER_FILE
    try:
        text = path.read_text().strip()
        if text and len(text) <= 64 and text.isalnum():
            return text
    except FileNotFoundError:
        pass
    except OSError:
        return ""
    token = secrets.token_hex(8)
    Path(model_dir).mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(token + "\n")
    os.replace(tmp, path)
    return token


class CommitJournal:
    """The offsets this model committed lately, per stream and partition, kept beside its
    snapshots (``.commits.json``) and written before each commit.

    It lets the engine recognise its own commits on a broker that does not keep commit
    metadata. Like ``.store-id`` it survives ``streamk snapshot reset``, so a fresh model
    still knows which commits were its predecessor's and re-learns what they covered.
    """

    FILE = ".commits.json"
    KEEP = 32  # offsets remembered per partition (a few failed commits' worth)

    def __init__(self, model_dir: Path | None):
        self.path = None if model_dir is None else Path(model_dir) / self.FILE
        self._data: dict[str, dict[str, list[int]]] | None = None

    def _load(self) -> dict[str, dict[str, list[int]]]:
        if self._data is None:
            self._data = {}
            if self.path is not None:
                try:
                    raw = json.loads(self.path.read_text())
                    self._data = {
                        str(stream): {
                            str(p): [int(o) for o in offs][-self.KEEP :]
                            for p, offs in parts.items()
                        }
                        for stream, parts in raw.items()
                    }
                except FileNotFoundError:
                    pass
                except (OSError, ValueError, TypeError, AttributeError):
                    self._data = {}  # unreadable: no commit is recognised by its offset
        return self._data

    def offsets(self, stream: str) -> dict[int, list[int]]:
        """Partition -> offsets committed lately on ``stream``."""
        return {int(p): offs for p, offs in self._load().get(stream, {}).items()}

    def record(self, stream: str, positions: Mapping[int, int]) -> None:
        """Remember ``positions`` as committed (called before the commit itself)."""
        if self.path is None or not positions:
            return
        parts = self._load().setdefault(stream, {})
        for p, offset in positions.items():
            offs = parts.setdefault(str(p), [])
            if not offs or offs[-1] != int(offset):
                offs.append(int(offset))
                del offs[: -self.KEEP]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.FILE + ".tmp")
        tmp.write_text(json.dumps(self._data, separators=(",", ":")))
        os.replace(tmp, self.path)


#: A partition's mark: ``(offset, timestamp_ms, crc32 of the payload)`` of the last record a
#: snapshot covers. Offsets alone cannot tell a topic deleted and recreated from the one the
#: snapshot learned once the new one holds as many records: the record before the resume
#: offset can (another payload, another time).
Mark = tuple[int, int | None, int]


def mark_of(record: Any) -> Mark | None:
    """The :data:`Mark` of ``record`` (``None`` without its bytes: an in-memory source)."""
    if record.payload is None:
        return None
    return int(record.offset), record.timestamp_ms, zlib.crc32(record.payload)


def marks_meta(marks: Mapping[int, Mark], stream: str) -> dict[str, list[list[Any]]]:
    """Snapshot ``meta["marks"]``: ``{stream: [[partition, offset, timestamp_ms, crc], ...]}``."""
    return {stream: [[p, *marks[p]] for p in sorted(marks)]}


def marks_from_meta(meta: Mapping[str, Any], stream: str) -> dict[int, Mark]:
    """The marks ``meta`` holds for ``stream``; rows of another shape are left out (a mark is
    a check: without one, the partition resumes as before)."""
    rows = meta.get("marks")
    rows = rows.get(stream) if isinstance(rows, dict) else None
    out: dict[int, Mark] = {}
    for row in rows if isinstance(rows, list) else []:
        if not (isinstance(row, list) and len(row) == 4):
            continue
        p, offset, stamp, crc = row
        if all(type(v) is int for v in (p, offset, crc)) and (stamp is None or type(stamp) is int):
            out[p] = (offset, stamp, crc)
    return out


def recreated(
    marks: Mapping[int, Mark], found: Mapping[int, tuple[int | None, bytes]]
) -> dict[int, str]:
    """Partitions whose record before the resume offset (``found``: timestamp and payload,
    read from the source) is not the one their mark describes, with what differs."""
    out: dict[int, str] = {}
    for p, (stamp, payload) in found.items():
        offset, want_stamp, want_crc = marks[p]
        if zlib.crc32(payload) != want_crc:
            out[p] = f"offset {offset} holds other bytes"
        elif stamp is not None and want_stamp is not None and stamp != want_stamp:
            out[p] = f"offset {offset} was written at {stamp}, not {want_stamp} (ms)"
    return out


def anchors(
    marks: Mapping[int, Mark], first: Mapping[int, Any], owned: Sequence[int]
) -> dict[int, Mark]:
    """The record each owned partition is checked by while the engine runs: the mark of our
    durable snapshot (the log as it was when that snapshot was written), else the first
    record read since (a partition the snapshot never learned, or without a mark).

    A topic deleted and recreated after that record was read holds another record at its
    offset, or none: whatever was learned since may come from two logs (see
    :meth:`streamk.engine.loop.Engine.checkpoint`).
    """
    out = {p: marks[p] for p in owned if p in marks}
    for p in owned:
        if p not in out and p in first and (mark := mark_of(first[p])) is not None:
            out[p] = mark
    return out


class LogCheck:
    """``read`` (a source's ``records_before``) of the records ``marks`` describe, run on a
    helper thread from construction, so that the engine encodes its snapshot meanwhile:
    the read is mostly a wait on the broker. :meth:`result` waits for it.

    Only the source's probe consumer is used meanwhile, never the one the engine polls.
    """

    def __init__(
        self,
        read: Callable[[dict[int, int]], dict[int, tuple[int | None, bytes]]],
        marks: Mapping[int, Mark],
    ):
        self.marks = dict(marks)
        self._found: dict[int, tuple[int | None, bytes]] = {}
        self._error: BaseException | None = None
        targets = {p: mark[0] + 1 for p, mark in self.marks.items()}
        self._thread = threading.Thread(
            target=self._read, args=(read, targets), name="streamk-log-check", daemon=True
        )
        self._thread.start()

    def _read(self, read: Callable[..., Any], targets: dict[int, int]) -> None:
        try:
            self._found = read(targets)
        except BaseException as exc:  # noqa: BLE001 - raised again by result()
            self._error = exc

    def done(self) -> bool:
        """Whether the read has answered (:meth:`result` would not wait)."""
        return not self._thread.is_alive()

    def wait(self) -> None:
        """Wait for the read to end, whatever its outcome (its answer is not wanted)."""
        self._thread.join()

    def result(self) -> dict[int, tuple[int | None, bytes]]:
        """Partition -> ``(timestamp_ms, payload)`` of the record read at each mark's offset
        (missing where none was); the read's error, if it failed."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._found


class ReplacedTopic:
    """A check answered by the topic's id alone: the id is not the one read at assignment,
    so the topic was deleted and recreated and every owned partition holds another log
    (``changed``: partition -> what differs). Has :class:`LogCheck`'s ``done`` and
    ``wait``, already answered: nothing is read back."""

    def __init__(self, changed: Mapping[int, str]):
        self.changed = dict(changed)

    def done(self) -> bool:
        """Always: the answer came with the id."""
        return True

    def wait(self) -> None:
        """Nothing to wait for."""
