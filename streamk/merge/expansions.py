"""The weighted union of several workers' kernel expansions, as one learner state.

Each worker ``i`` holds ``f_i(x) = sum_j c_ij k(x_ij, x)``; the union holds every row with its
coefficient scaled by the worker's weight, so its function is ``sum_i w_i f_i`` exactly (for the
novelty detector, the weighted mean of the workers' centres: see :func:`coef_scales`). No
compression happens here (see :mod:`streamk.merge.compress`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..budget import make_policy
from ..errors import MergeError
from .align import (
    check_compatible,
    column_map,
    feature_union,
    label_union,
    merged_kernel,
    place_columns,
    pool_scales,
    remap_coef,
)

__all__ = ["Union", "normalise_weights", "coef_scales", "union_state"]

#: Per-support-row extras a learner keeps beside its coefficients (state key -> meaning).
ROW_EXTRAS = ("sv_class", "sv_target")
#: Counters that add up over workers.
COUNTERS = ("n_mistakes", "n_updates")


@dataclass
class Union:
    """The merged state before compression, with what the merge decided on the way."""

    state: dict[str, Any]
    weights: np.ndarray
    gamma_spread: float
    n_rows: int


def normalise_weights(models: Sequence[Any], weights: Sequence[float] | None) -> np.ndarray:
    """Weights summing to 1: given ones, or each model's count of learned events.

    Summing to 1 keeps the merged function on the scale of one worker's (an average), so a
    regressor predicts in the target's units and a perceptron's next ``±1`` step weighs as
    much against it as against a worker's function. All-zero counts give equal weights.
    """
    if weights is None:
        w = np.array([float(m.n_learned) for m in models])
        if not w.sum() > 0:
            w = np.ones(len(models))
    else:
        w = np.asarray(list(weights), dtype=np.float64)
        if w.shape != (len(models),):
            raise MergeError(
                f"weights must hold one number per model ({len(models)}), got {w.shape}"
            )
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise MergeError(f"weights must be finite, >= 0 and not all 0, got {w.tolist()}")
    return w / w.sum()


def coef_scales(states: Sequence[dict[str, Any]], w: np.ndarray, novelty: bool) -> np.ndarray:
    """Factor applied to each worker's coefficients.

    ``w_i`` for the linear learners (the merged function is ``sum_i w_i f_i``). The novelty
    detector's function is not linear in its coefficients: its centre is
    ``sum_j c_j phi(x_j) / W`` with ``W = sum_j c_j``. Scaling worker ``i`` by
    ``w_i W_tot / W_i`` (``W_tot = sum_i W_i``) makes the merged centre ``sum_i w_i centre_i``
    while the total weight stays ``W_tot``, so a new event (weight 1) counts against the
    merged set as much as against the union of the workers' sets. With the default weights and
    unbudgeted workers every factor is 1: the union is the set of all events.
    """
    if not novelty:
        return w.copy()
    W = np.array([float(np.sum(np.asarray(s["support"]["coef"])[:, 0])) for s in states])
    total = W[w > 0].sum()
    return np.where(W > 0, w * total / np.where(W > 0, W, 1.0), 0.0)


def _age_order(ids_list: list[np.ndarray]) -> np.ndarray:
    """Global order of the union's rows by each worker's relative age (oldest first).

    A row's age is its rank in its own worker's insertion order divided by that worker's row
    count, so the workers' histories interleave evenly (age-based budget policies, such as
    ``RemoveOldest``, then evict from every worker's oldest first).
    """
    keys, owner = [], []
    for i, ids in enumerate(ids_list):
        n = ids.shape[0]
        rank = np.empty(n)
        rank[np.argsort(ids, kind="stable")] = np.arange(n)
        keys.append((rank + 1.0) / max(n, 1))
        owner.append(np.full(n, i))
    key = np.concatenate(keys) if keys else np.zeros(0)
    own = np.concatenate(owner) if owner else np.zeros(0)
    return np.lexsort((own, key))


def _pooled_targets(stats: Sequence[Sequence[float]], w: np.ndarray) -> list[float]:
    """``[n, mean, m2]`` of the SVR's targets for the merged model.

    The mean is the weighted one, ``sum w_i mean_i``, so that the offset it gives keeps the
    merged function exactly ``sum w_i f_i``; the spread (behind ``epsilon="auto"`` and
    ``C="auto"``) pools each worker's squares about that mean.
    """
    n = [int(s[0]) for s in stats]
    means = [float(s[1]) for s in stats]
    mean = float(sum(wi * mi for wi, mi in zip(w, means)))
    m2 = sum(float(s[2]) + ni * (mi - mean) ** 2 for s, ni, mi in zip(stats, n, means))
    return [sum(n), mean, float(m2)]


def union_state(
    models: Sequence[Any],
    weights: Sequence[float] | None,
    gamma: str,
    names: Sequence[str] | None = None,
) -> Union:
    """The merged learner state: the weighted union of the workers' expansions (``names``:
    the workers', for a refusal to name them)."""
    if not models:
        raise MergeError("merge_models needs at least one model")
    states = [m.state() for m in models]
    check_compatible(models, states, names)
    w = normalise_weights(models, weights)
    names = feature_union(states)
    width = len(names)
    cols = [column_map(s["features"], names) for s in states]
    scale = pool_scales(states, cols, width)
    kernel, spread = merged_kernel(states, scale, gamma)
    novelty = type(models[0]).__name__ == "KernelNovelty"
    factors = coef_scales(states, w, novelty)

    first = states[0]
    coders = [s["labels"] for s in states] if "labels" in first else None
    union = label_union(coders) if coders is not None else None

    X_parts, C_parts, ids_parts = [], [], []
    extras: dict[str, list[np.ndarray]] = {k: [] for k in ROW_EXTRAS if k in first}
    for i, s in enumerate(states):
        sup = s["support"]
        if factors[i] == 0:
            continue
        X = np.asarray(sup["X"], dtype=np.float64)
        C = np.asarray(sup["coef"], dtype=np.float64)
        if union is not None:
            C = remap_coef(C, coders[i], union)
        X_parts.append(place_columns(X, cols[i], width) if X.size else np.zeros((0, width)))
        C_parts.append(C * factors[i])
        ids_parts.append(np.asarray(sup["ids"], dtype=np.int64))
        for key in extras:
            vals = np.asarray(s[key], dtype=np.float64).reshape(X.shape[0], -1)
            if key == "sv_class":  # class index into the worker's classes -> the union's
                vals = _remap_class_index(vals, s["labels"]["classes"], union.classes)
            extras[key].append(vals)
    n_out = union.n_outputs if union is not None else np.asarray(first["support"]["coef"]).shape[1]
    order = _age_order(ids_parts)
    X = np.vstack(X_parts)[order] if X_parts else np.zeros((0, width))
    C = np.vstack(C_parts)[order] if C_parts else np.zeros((0, n_out))
    X, C, firsts = _sum_duplicates(X, C)
    live = np.flatnonzero(C.any(axis=1))  # rows whose terms cancelled add nothing to f
    X, C, firsts = X[live], C[live], firsts[live]
    n = X.shape[0]

    state = dict(first)
    state["features"] = list(names)
    state["scale"] = scale
    state["policy"] = make_policy(models[0].budget).to_spec()  # a fresh policy: no stale state
    state["n_learned"] = int(sum(int(s["n_learned"]) for s in states))
    state["support"] = {
        "kernel": kernel.to_spec(),
        "X": np.ascontiguousarray(X),
        "coef": np.ascontiguousarray(C),
        "ids": np.arange(n, dtype=np.int64),
        "next_id": n,
        "keep_gram": bool(first["support"]["keep_gram"]),
    }
    for key in extras:
        vals = np.vstack(extras[key])[order][firsts] if extras[key] else np.zeros((0, 1))
        state[key] = vals.tolist()
    for key in COUNTERS:
        if key in first:
            state[key] = int(sum(int(s[key]) for s in states))
    if union is not None:
        state["labels"] = union.state()
    if "target_stats" in first:  # the SVR's offset (the running mean): f = sum w_i f_i
        state["target_stats"] = _pooled_targets([s["target_stats"] for s in states], w)
    if "thresholds" in first:  # ranker: f = sum w_i f_i, so b = sum w_i b_i keeps each decision
        B = np.array([np.asarray(s["thresholds"], dtype=np.float64) for s in states])
        state["thresholds"] = (w @ B).tolist()
    return Union(state=state, weights=w, gamma_spread=spread, n_rows=n)


def _sum_duplicates(X: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One row per distinct support vector, coefficients summed (the same function, fewer rows).

    Rows keep the position of their first (oldest) occurrence; returns ``(X, C, firsts)`` with
    ``firsts`` the kept positions. Merging copies of one model thus gives back its own set.
    """
    if X.shape[0] < 2:
        return X, C, np.arange(X.shape[0])
    _, first, inv = np.unique(X, axis=0, return_index=True, return_inverse=True)
    if first.shape[0] == X.shape[0]:
        return X, C, np.arange(X.shape[0])
    inv = inv.ravel()
    summed = np.zeros((first.shape[0], C.shape[1]))
    np.add.at(summed, inv, C)
    keep = np.sort(first)
    slot = np.empty(first.shape[0], dtype=np.intp)  # unique index -> position among kept rows
    slot[np.argsort(first)] = np.arange(first.shape[0])
    out = np.zeros_like(summed)
    out[slot] = summed
    return X[keep], out, keep


def _remap_class_index(vals: np.ndarray, classes: list[Any], union: list[Any]) -> np.ndarray:
    """A worker's class indices (``sv_class``) as the union's; NaN where none."""
    where = {c: j for j, c in enumerate(union)}
    table = np.array([float(where[c]) for c in classes] + [np.nan])
    idx = np.where((vals >= 0) & (vals < len(classes)) & (vals == np.floor(vals)), vals, -1)
    return table[np.nan_to_num(idx, nan=-1).astype(np.intp)]
