"""Workers that adopt the merged model (``adopt_merged = true``): iterative parameter mixing.

At a checkpoint a worker replaces its model by

    ``f_adopted = f_merged + (f_now - f_base)``,

``f_base`` being its own snapshot that went into the merge (named in the merged snapshot's
``sources``) and ``f_now - f_base`` what it learned since: the support vectors it added after
that snapshot (support-set ids at or above the base's ``next_id``), with their coefficients.
This is McDonald et al.'s iterative parameter mixing (2010) for kernel expansions: every worker
starts its next stretch from the mixture, so the next merge ``sum_i w_i f_i`` is the previous
mixture plus the weighted mixture of the workers' fresh updates. The result is compressed to the
budget as a merge is (:mod:`streamk.merge.compress`).

The worker's **stream offsets are untouched**: only the model object changes, the snapshot
written at that checkpoint holds the same offsets it would have held, and the merged snapshot
keeps no offsets at all, so the recovery rule (``streamk/engine/recovery.py``) still reads
every worker's coverage from that worker's own snapshots. ``n_learned`` stays the worker's own
count of learned events (the exactly-once accounting, and its weight in the next merge).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import MergeError, StreamkError
from .compress import compress_state
from .expansions import union_state
from .models import default_method

__all__ = ["Adopter", "adopt_merged", "learned_since"]

log = logging.getLogger("streamk.merge")

#: snapshot metadata key: which merged model the worker's model was mixed with
ADOPTED = "adopted"

#: a run of checkpoints without a merged snapshot repeats its WARNING every this many
WARN_EVERY = 10

#: what one checkpoint's adoption came to (the keys of :attr:`Adopter.counts`)
OUTCOMES = ("adopted", "no_merged", "not_newer", "no_base", "stale_base", "failed")


def learned_since(model: Any, base_next_id: int) -> Any:
    """A learner holding only the support vectors ``model`` added at or after id
    ``base_next_id`` (its update since a snapshot whose support set had that ``next_id``)."""
    state = model.state()
    sup = dict(state["support"])
    ids = np.asarray(sup["ids"], dtype=np.int64)
    keep = np.flatnonzero(ids >= int(base_next_id))
    sup["X"] = np.ascontiguousarray(np.asarray(sup["X"])[keep])
    sup["coef"] = np.ascontiguousarray(np.asarray(sup["coef"])[keep])
    sup["ids"] = ids[keep]
    state["support"] = sup
    for key in ("sv_class", "sv_target"):
        if key in state:
            state[key] = [state[key][i] for i in keep.tolist()]
    return type(model).from_state(state)


def adopt_merged(
    current: Any, merged: Any, base_next_id: int, *, compress: str = "auto"
) -> tuple[Any, int]:
    """``(merged + what current learned since base_next_id, number of rows added)``.

    The update is evaluated in the merged model's kernel (the workers' ``gamma="auto"`` widths
    were pooled into it); the result keeps ``current``'s ``n_learned`` and counters, and the
    merged model's SVR offset and ranking thresholds (the mixture's, like its coefficients).
    """
    if type(current) is not type(merged):
        raise MergeError(
            f"cannot adopt a merged {type(merged).__name__} into a {type(current).__name__}: "
            "the merger and the workers must run one learner"
        )
    if type(current).__name__ == "KernelNovelty":
        raise MergeError("adopt_merged does not apply to the novelty detector (not additive)")
    delta = learned_since(current, base_next_id)
    m_state = merged.state()
    d_state = delta.state()
    d_state["support"] = {**d_state["support"], "kernel": m_state["support"]["kernel"]}
    d_state["scale"] = None  # the merged kernel is resolved already: keep its statistics
    delta = type(current).from_state(d_state)
    added = int(delta.n_support)
    # weights 1/2 each, coefficients doubled below: f = f_merged + delta exactly
    u = union_state([merged, delta], [0.5, 0.5], "strict")
    state = u.state
    sup = dict(state["support"])
    sup["coef"] = np.ascontiguousarray(np.asarray(sup["coef"]) * 2.0)
    state["support"] = sup
    own = current.state()
    state["n_learned"] = int(own["n_learned"])
    for key in ("n_mistakes", "n_updates"):
        if key in own:
            state[key] = own[key]
    for key in ("thresholds", "target_stats"):
        if key in m_state:
            state[key] = m_state[key]
    budget = current.budget
    if budget and u.n_rows > int(budget):
        method = default_method(type(current)) if compress == "auto" else compress
        state = compress_state(type(current), state, int(budget), method, {})
    return type(current).from_state(state), added


class Adopter:
    """The engine's checkpoint hook: mixes in a newer merged model when there is one.

    Parameters
    ----------
    model_name, merge_name
        This worker's model name and the merged model's.
    store
        This worker's :class:`~streamk.snapshot.SnapshotStore` (its own base snapshots).
    merged
        Returns the newest merged :class:`~streamk.snapshot.Snapshot` or ``None`` (read from
        the snapshot topic, or from the file store when the merger shares it).
    compress
        How the mixture is brought back to the budget (``merge_compress``).
    """

    def __init__(
        self,
        model_name: str,
        merge_name: str,
        store: Any,
        merged: Callable[[], Any],
        compress: str = "auto",
    ) -> None:
        self.model_name = model_name
        self.merge_name = merge_name
        self.store = store
        self._merged = merged
        self.compress = compress
        self.last: dict[str, Any] | None = None  # what was adopted last (snapshot metadata)
        self._loaded = False
        #: checkpoints by outcome (:data:`OUTCOMES`), for an operator or a metrics exporter
        self.counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self._missing = 0  # consecutive checkpoints that found no merged snapshot

    def _load_last(self) -> None:
        """What our newest snapshot says we adopted (a restarted worker adopts nothing twice)."""
        self._loaded = True
        try:
            snap = self.store.latest(self.model_name, build=False)
        except StreamkError:
            snap = None
        if snap is not None and isinstance((snap.meta or {}).get(ADOPTED), dict):
            self.last = dict(snap.meta[ADOPTED])

    def _base_next_id(self, merged: Any) -> tuple[int | None, str]:
        """``(next_id, "")`` of our snapshot that went into ``merged`` (0 if none of ours
        did and we never adopted), or ``(None, outcome)`` when it cannot be the base:
        ``"no_base"`` (no longer in our store), ``"stale_base"`` (taken before our last
        adoption: that adoption renumbered our support ids, so ids at or above its
        ``next_id`` are not what we learned since, but rows of the merge we adopted, which
        ``merged`` holds already; the merger scanned while we checkpointed)."""
        mine = [s for s in (merged.meta or {}).get("sources", []) if s["name"] == self.model_name]
        if not mine:
            return (0, "") if self.last is None else (None, "no_base")
        seq = int(mine[0]["seq"])
        for info in self.store.list(self.model_name):
            if info.seq == seq:
                base = self.store.load(info.path)
                then = (base.meta or {}).get(ADOPTED)
                then_seq = then.get("seq") if isinstance(then, dict) else None
                if then_seq != (None if self.last is None else self.last["seq"]):
                    log.warning(
                        "adopt_merged: merged seq %d was built from our snapshot seq %d, "
                        "taken before we adopted merged seq %s; waiting for the next merge",
                        merged.seq,
                        seq,
                        None if self.last is None else self.last["seq"],
                    )
                    return None, "stale_base"
                learner = getattr(base.model, "_wrapped_model", base.model)
                return int(learner.state()["support"]["next_id"]), ""
        log.warning(
            "adopt_merged: our snapshot seq %d that went into merged seq %d is no longer in "
            "the store (raise snapshot_keep); waiting for the next merge",
            seq,
            merged.seq,
        )
        return None, "no_base"

    def __call__(self, model: Any) -> tuple[Any, dict[str, Any]]:
        """``(model to snapshot, snapshot metadata)``: the mixture when a newer merge
        exists, else ``model`` unchanged; the metadata names the last merge adopted."""
        if not self._loaded:
            self._load_last()
        try:
            merged = self._merged()
            if merged is None:
                return self._no_merged(model)
            self._missing = 0
            if self.last is not None and merged.seq <= self.last["seq"]:
                log.debug("adopt_merged: %r seq %d adopted already", self.merge_name, merged.seq)
                return self._keep(model, "not_newer")
            base, outcome = self._base_next_id(merged)
            if base is None:
                return self._keep(model, outcome)
            if merged.model is None:
                from ..snapshot.kafka_scheme import build_model

                build_model(merged)
            adopted, added = adopt_merged(model, merged.model, base, compress=self.compress)
        except (StreamkError, OSError, ValueError) as exc:
            log.warning("adopt_merged: keeping our own model this checkpoint: %s", exc)
            return self._keep(model, "failed")
        self.counts["adopted"] += 1
        self.last = {"name": self.merge_name, "seq": int(merged.seq), "base_next_id": base}
        log.info(
            "adopted %r seq %d plus %d support vectors learned since (support %d)",
            self.merge_name,
            merged.seq,
            added,
            adopted.n_support,
        )
        return adopted, self._meta()

    def _keep(self, model: Any, outcome: str) -> tuple[Any, dict[str, Any]]:
        """Count `outcome` and continue with our own model."""
        self.counts[outcome] += 1
        return model, self._meta()

    def _no_merged(self, model: Any) -> tuple[Any, dict[str, Any]]:
        """No merged snapshot to read: say so (WARNING at the first checkpoint of a run of
        them and every :data:`WARN_EVERY` after), never a silent no-op."""
        self._missing += 1
        level = logging.WARNING if self._missing % WARN_EVERY == 1 else logging.INFO
        log.log(
            level,
            "adopt_merged: found no merged snapshot %r (checkpoint %d in a row): none was "
            "published yet, or the snapshot source could not be read to its end (see any "
            "warning above); keeping our own model",
            self.merge_name,
            self._missing,
        )
        return self._keep(model, "no_merged")

    def _meta(self) -> dict[str, Any]:
        return {} if self.last is None else {ADOPTED: dict(self.last)}
