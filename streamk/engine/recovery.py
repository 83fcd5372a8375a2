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

Commits carry ``{"model": name, "seq": n}`` as their metadata (Kafka's
``OffsetAndMetadata.metadata``), which is how the two kinds of commit are told apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["commit_metadata", "parse_commit_metadata", "Resume", "resume_offsets"]

#: Kafka's default ``offset.metadata.max.bytes`` is 4096; ours is far below it.
_MAX_METADATA = 1024


def commit_metadata(model_name: str, seq: int) -> str:
    """The metadata stored with every commit: which model's snapshot covers the offsets."""
    text = json.dumps({"model": model_name, "seq": int(seq)}, separators=(",", ":"))
    if len(text) > _MAX_METADATA:
        raise ValueError(f"model name too long for commit metadata: {model_name[:40]!r}...")
    return text


def parse_commit_metadata(text: str | None) -> tuple[str, int] | None:
    """``(model name, seq)`` from a commit's metadata, or ``None`` if it is not ours."""
    if not text or len(text) > _MAX_METADATA:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    name, seq = data.get("model"), data.get("seq")
    if not isinstance(name, str) or type(seq) is not int:
        return None
    return name, seq


@dataclass
class Resume:
    """The offset each partition resumes at, and why (one line per partition that needs one)."""

    offsets: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(
        default_factory=list
    )  # WARNING lines: a rewind, a peer, a legacy commit
    sources: dict[int, str] = field(default_factory=dict)  # partition -> what decided it


def resume_offsets(
    partitions: list[int],
    *,
    model_name: str,
    own: Mapping[int, int],
    committed: Mapping[int, tuple[int, str | None]],
    peers: Mapping[str, Mapping[int, int]],
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
            if author is None:
                if offset > target:
                    out.notes.append(
                        f"partition {p}: commit at {offset} carries no streamk metadata; "
                        f"trusting it over {why} at {target}"
                    )
                    target, why = offset, "commit without metadata"
            elif author[0] == model_name:
                if offset > own.get(p, 0):
                    out.notes.append(
                        f"partition {p}: our commit at {offset} (seq {author[1]}) is ahead of "
                        f"the restored snapshot at {own.get(p, 0)}: a newer snapshot was lost, "
                        f"so events {own.get(p, 0)}..{offset - 1} are learned again"
                    )
            elif author[0] not in peers and offset > target:
                target, why = offset, f"commit by {author[0]}"
        if why.startswith(("snapshot of", "commit by")):
            out.notes.append(f"partition {p}: resuming at {target}, after the {why}")
        out.offsets[p] = target
        out.sources[p] = why
    return out


def peer_offsets(snapshots: Mapping[str, Any], stream: str) -> dict[str, dict[int, int]]:
    """Model -> partition -> next offset, for ``stream``, from ``{model: Snapshot or None}``.

    A model with no readable snapshot stays in, with no offsets: it holds no durable
    events, so a commit it made is not taken as coverage.
    """
    return {
        name: {}
        if snap is None
        else {int(p): int(o) for p, o in snap.offsets.get(stream, {}).items()}
        for name, snap in snapshots.items()
    }
