"""Put several workers' learners on one footing: parameters, features, labels, kernel width.

Everything here works on the learners' plain-data ``state()`` (docs/snapshot-format.md), the
same public contract snapshots and consolidation use, so no learner internals are read.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ..errors import MergeError
from ..kernels import RBF, Kernel, ScaleEstimator, kernel_from_spec
from ..learners.labels import LabelCoder

__all__ = [
    "check_compatible",
    "feature_union",
    "column_map",
    "place_columns",
    "pool_scales",
    "label_union",
    "remap_coef",
    "merged_kernel",
]


def check_compatible(
    models: Sequence[Any],
    states: Sequence[dict[str, Any]],
    names: Sequence[str] | None = None,
) -> None:
    """Raise :class:`MergeError` unless every model has the first one's class and parameters.

    Parameters are compared as plain data (kernels by spec, so an unresolved ``"auto"``
    compares equal to ``"auto"``); the kernels actually in use are checked by
    :func:`merged_kernel`.

    Parameters
    ----------
    models, states
        The learners and their ``state()``, in one order.
    names
        The workers' names in that order, when the caller knows them: the refusal names
        them (``worker 'w1'``) instead of their positions (``model 1``).
    """

    def who(i: int) -> str:
        return f"worker {names[i]!r}" if names is not None else f"model {i}"

    first = type(models[0])
    for i, m in enumerate(models[1:], start=1):
        if type(m) is not first:
            raise MergeError(
                f"{who(i)} is a {type(m).__name__}, {who(0)} a {first.__name__}: only models "
                "of one learner class merge (their kernel expansions mean different things)"
            )
    p0 = _comparable(states[0]["params"])
    for i, s in enumerate(states[1:], start=1):
        pi = _comparable(s["params"])
        for name in sorted(set(p0) | set(pi)):
            a, b = p0.get(name), pi.get(name)
            if a != b:
                raise MergeError(
                    f"{who(i)} has {name}={b!r} where {who(0)} has {name}={a!r}: workers that "
                    "merge must share their learner configuration (one config for the group)"
                )
    seen0 = states[0].get("ranks_seen")  # a ranker with ranks=None: the ranks it has met
    for i, s in enumerate(states[1:], start=1):
        if s.get("ranks_seen") != seen0:
            raise MergeError(
                f"{who(i)} has seen ranks {s.get('ranks_seen')!r:.200} where {who(0)} has "
                f"seen {seen0!r:.200}: rankers with discovered ranks merge only over the same "
                "ranks; give the group fixed ranks=(lowest, ..., highest)"
            )


def _comparable(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters without a budget policy's mutable state (a Projectron's inverse Gram
    matrix, an RNG): the configuration, not what the worker learned."""
    out = {}
    for name, value in params.items():
        if isinstance(value, dict) and "__budget__" in value:
            value = {k: v for k, v in value["__budget__"].items() if k != "state"}
        out[name] = value
    return out


def feature_union(states: Sequence[dict[str, Any]]) -> list[Hashable]:
    """Feature names of the merged model: the first model's order, then new names as met."""
    names: list[Hashable] = []
    seen: set = set()
    for s in states:
        for n in s["features"]:
            key = tuple(n) if isinstance(n, list) else n
            if key not in seen:
                seen.add(key)
                names.append(key)
    return names


def column_map(names: Sequence[Any], union: Sequence[Hashable]) -> np.ndarray:
    """Column of each of a model's features in the merged order."""
    index = {n: j for j, n in enumerate(union)}
    return np.array([index[tuple(n) if isinstance(n, list) else n] for n in names], dtype=np.intp)


def place_columns(A: np.ndarray, cols: np.ndarray, width: int) -> np.ndarray:
    """``A``'s columns moved to ``cols`` of a ``width``-wide block (absent features read 0)."""
    A = np.atleast_2d(np.asarray(A, dtype=np.float64))
    out = np.zeros((A.shape[0], width))
    out[:, cols[: A.shape[1]]] = A
    return out


def pool_scales(
    states: Sequence[dict[str, Any]], cols: Sequence[np.ndarray], width: int
) -> dict[str, Any] | None:
    """The workers' ``gamma="auto"`` estimators combined (Chan et al.'s parallel formula).

    The result is exactly the mean and variance of all the rows the workers folded in, as if
    one estimator had seen them all: the statistic ``"auto"`` widths are resolved from.
    ``None`` when no worker keeps an estimator (a fixed kernel).
    """
    parts = [(s["scale"], c) for s, c in zip(states, cols) if s.get("scale") is not None]
    if not parts:
        return None
    n = 0
    mean = np.zeros(width)
    m2 = np.zeros(width)
    for scale, c in parts:
        k = int(scale["n"])
        if k == 0:
            continue
        mk = place_columns(np.asarray(scale["mean"])[None, :], c, width)[0]
        m2k = place_columns(np.asarray(scale["m2"])[None, :], c, width)[0]
        total = n + k
        delta = mk - mean
        mean = mean + delta * (k / total)
        m2 = m2 + m2k + delta**2 * (n * k / total)
        n = total
    return {"n": n, "mean": mean, "m2": m2}


def merged_kernel(
    states: Sequence[dict[str, Any]],
    scale: dict[str, Any] | None,
    gamma: str,
) -> tuple[Any, float]:
    """The one kernel the merged expansion uses, and the relative spread of the workers' widths.

    Workers with one fixed kernel: that kernel. Workers with ``gamma="auto"`` resolve their
    width from their own first rows, so they usually differ slightly. ``gamma="pool"``
    resolves the ``"auto"`` kernel once more from the pooled estimator (:func:`pool_scales`)
    and keeps every coefficient, which is what a learner itself does each time it
    re-estimates ``"auto"`` during its warm-up; ``gamma="strict"`` raises instead.
    Identical resolved kernels are kept as they are (no re-resolution, so merging copies of
    one model is exact).
    """
    kernels = [kernel_from_spec(s["support"]["kernel"]) for s in states]
    specs = [k.to_spec() for k in kernels]
    spread = _gamma_spread(specs)
    if all(sp == specs[0] for sp in specs[1:]):
        return kernels[0], spread
    param = _kernel_param(states[0])
    auto = scale is not None and not param.is_resolved
    if not auto:
        other = next(k for k in kernels if k != kernels[0])
        raise MergeError(
            f"the workers' kernels differ ({kernels[0]!r} vs {other!r}) "
            "and are not gamma='auto': configure one kernel for the group"
        )
    if gamma == "strict":
        raise MergeError(
            f"the workers resolved gamma='auto' differently (relative spread {spread:.3g}): "
            "merge with gamma='pool' (re-resolve from the pooled warm-up statistics) or fix "
            "gamma in the config, e.g. to one worker's kernel_"
        )
    if gamma != "pool":
        raise MergeError(f"gamma must be 'pool' or 'strict', got {gamma!r}")
    return param.resolve(ScaleEstimator.from_state(scale)), spread


def _kernel_param(state: dict[str, Any]) -> Kernel:
    """The learner's ``kernel`` parameter (``None`` means ``RBF(gamma="auto")``)."""
    value = state["params"].get("kernel")
    if isinstance(value, dict) and "__kernel__" in value:
        return kernel_from_spec(value["__kernel__"])
    return RBF(gamma="auto")


def _gamma_spread(specs: list[dict[str, Any]]) -> float:
    """``(max - min) / min`` over the workers' top-level ``gamma`` (0 when there is none)."""
    gammas = [sp.get("gamma") for sp in specs]
    if not all(isinstance(g, (int, float)) and g > 0 for g in gammas):
        return 0.0
    lo, hi = min(gammas), max(gammas)
    return (hi - lo) / lo if math.isfinite(lo) and lo > 0 else 0.0


# -- labels ------------------------------------------------------------------------------------
def label_union(label_states: Sequence[dict[str, Any]]) -> LabelCoder:
    """The merged model's classes: the first model's coder, other models' new classes added
    in the order met, by the learners' own rule (``LabelCoder.register``)."""
    coder = LabelCoder.from_state(label_states[0])
    for st in label_states[1:]:
        for c in st["classes"]:
            coder.register(c)  # (a known class changes nothing)
    return coder


def remap_coef(C: np.ndarray, worker: dict[str, Any], union: LabelCoder) -> np.ndarray:
    """A worker's coefficient columns ``C`` as the union's columns.

    The worker's coder first gains the classes it never saw, by the rule a learner applies
    when a new class arrives (binary -> one-vs-rest: ``+f`` / ``-f`` columns, a new class
    starts at 0), then its columns are permuted (one-vs-rest) or its sign flipped (binary)
    to the union's order. This is the function the worker itself would hold had those
    classes arrived with no mistake on them.

    Each column is kept as a combination of ``C``'s columns (one term, or up to three while
    the coder is binary) instead of a product with a dense remap matrix per new class: that
    cost O(C^3) per class, 15 s for a merge of two 400-class workers.
    """
    coder = LabelCoder.from_state(worker)
    cols: list[dict[int, float]] = [{i: 1.0} for i in range(coder.n_outputs)]
    for c in union.classes:
        change = coder.register(c)
        if isinstance(change, int):  # one-vs-rest: the new class's column starts at 0
            cols.extend({} for _ in range(change))
        elif change is not None:  # a binary coder's change: at most three columns
            cols = [_combine(cols, change[:, j]) for j in range(change.shape[1])]
    sign = 1.0
    if union.multiclass:
        where = {c: j for j, c in enumerate(coder.classes)}
        cols = [cols[where[c]] for c in union.classes]
    elif union.classes:
        same = coder.signs[coder.classes.index(union.classes[0])] == union.signs[0]
        sign = 1.0 if same else -1.0
    out = np.zeros((C.shape[0], len(cols)))
    for j, col in enumerate(cols):
        for i, w in col.items():
            out[:, j] += (sign * w) * C[:, i]
    return out


def _combine(cols: list[dict[int, float]], weights: np.ndarray) -> dict[int, float]:
    """``sum_k weights[k] cols[k]``, each column a map of source column to weight."""
    out: dict[int, float] = {}
    for k, w in enumerate(weights):
        if w:
            for i, v in cols[k].items():
                out[i] = out.get(i, 0.0) + float(w) * v
    return out
