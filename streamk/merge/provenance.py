"""Which worker snapshots went into a merged model (the merged snapshot's metadata)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["snapshot_sources"]


def snapshot_sources(
    snapshots: Mapping[str, Any] | Iterable[tuple[str, Any]],
) -> list[dict[str, Any]]:
    """One plain-data entry per worker snapshot: ``name``, ``seq``, ``offsets``, ``checksum``,
    ``created_at``, ``n_learned``.

    ``snapshots`` maps each worker's model name to its :class:`streamk.snapshot.Snapshot` (a
    snapshot does not carry its own name: the store or topic key does). Offsets are
    ``{source: {partition: next_offset}}`` as in the snapshot (partitions as decimal strings, so
    the list is plain data for snapshot metadata and JSON alike), so it says exactly which
    events the merged model has learned from. Entries are sorted by name; pass the list as
    snapshot metadata (``snapshot.dumps(model, ..., sources=entries)``).
    """
    items = snapshots.items() if isinstance(snapshots, Mapping) else snapshots
    out = []
    for name, snap in items:
        state = getattr(snap, "state", None) or {}
        while "model_class" in state and isinstance(state.get("model"), dict):
            state = state["model"]  # a wrapper's learner (consolidation, scaling)
        out.append(
            {
                "name": str(name),
                "seq": int(snap.seq),
                "offsets": {
                    str(src): {str(p): int(o) for p, o in parts.items()}
                    for src, parts in (snap.offsets or {}).items()
                },
                "checksum": str(snap.checksum),
                "created_at": float(snap.created_at),
                "n_learned": int(state.get("n_learned", 0)),
            }
        )
    out.sort(key=lambda e: e["name"])
    return out
