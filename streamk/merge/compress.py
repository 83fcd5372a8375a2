"""Compress a merged expansion to a budget: projection, the batch solver, or the budget policy.

* ``"project"``: choose rows greedily (:func:`greedy_rows`, matching pursuit in the RKHS) and
  replace the whole function by its RKHS projection onto their span (the closest function the
  kept rows can express). For the novelty detector the projection keeps the total weight, so
  the centre it describes is the projected centre.
* ``"solve"``: consolidation's batch solver (:func:`streamk.consolidation.solve_learner`) on
  the pooled support vectors, warm-started from the union's coefficients, then the projection
  above if its solution is still over the budget (the solver's own truncation to the largest
  coefficients keeps the box-bound, mostly mislabelled rows of a soft-margin solution, and
  fell to chance on the adatron). Classifiers and the SVR only: support rows of a ranker carry no
  rank, and the novelty detector has no batch problem there.
* ``"policy"``: the rows are replayed, oldest first, through the learner's own budget policy
  (``RemoveOldest`` keeps the newest, ``Projectron`` projects, ``Merge`` merges pairs, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from ..budget import policy_from_spec
from ..consolidation import solve_learner
from ..errors import MergeError
from ..kernels import kernel_from_spec

__all__ = ["METHODS", "compress_state", "greedy_rows", "project_rows"]

METHODS = ("project", "solve", "policy")


def project_rows(
    kernel: Any, X: np.ndarray, coef: np.ndarray, keep: np.ndarray, keep_total: bool = False
) -> np.ndarray:
    """Coefficients on rows ``keep`` of the RKHS projection of ``sum_j coef_j k(x_j, .)``.

    ``beta = (K_kk + lam I)^-1 K_k. coef`` with a tiny ridge ``lam = 1e-10 tr(K_kk)/|k|``
    against a singular block (as :func:`streamk.consolidation.compress_project`, without forming
    the full ``K``: only ``K(kept, all)``, O(budget · n) memory). ``keep_total``: the projection
    under ``sum(beta) = sum(coef)`` per column (a Lagrange multiplier on the same system).
    """
    Xk = X[keep]
    Kka = kernel.gram(Xk, X)
    Kkk = Kka[:, keep]
    lam = 1e-10 * max(float(np.trace(Kkk)) / max(len(keep), 1), 1e-300)
    A = Kkk + lam * np.eye(len(keep))
    factor = scipy.linalg.cho_factor(A)
    beta = scipy.linalg.cho_solve(factor, Kka @ coef)
    if keep_total:
        u = scipy.linalg.cho_solve(factor, np.ones(len(keep)))
        gap = (beta.sum(axis=0) - coef.sum(axis=0)) / u.sum()
        beta = beta - u[:, None] * gap[None, :]
    return beta


def greedy_rows(kernel: Any, X: np.ndarray, coef: np.ndarray, budget: int) -> np.ndarray:
    """``budget`` rows chosen greedily to minimise ``||f - P f||`` in the RKHS (orthogonal
    matching pursuit over the support vectors), returned in row order.

    ``f = sum_j coef_j k(x_j, .)``; each step adds the row whose feature vector, made orthogonal
    to those already chosen (pivoted, incremental Cholesky: ``L``), removes the most of the
    residual: ``argmax_j ||g_j - L_j a||^2 / d_j`` with ``g = K coef`` (``f`` at every row),
    ``a`` the residual's coordinates on the chosen basis and ``d_j`` the squared distance of
    ``phi(x_j)`` from the chosen span. O(n · budget²) time, O(n · budget) memory; ``K coef``
    is formed in blocks. Keeping the largest ``||coef_j||`` instead loses on perceptrons, whose
    coefficients all have the same size (measured in docs/operations.md, *Merging models*).
    """
    n = X.shape[0]
    R = np.zeros((n, coef.shape[1]))  # g - L a: the residual's inner products with each phi(x_j)
    for s in range(0, n, 1024):
        R[s : s + 1024] = kernel.gram(X[s : s + 1024], X) @ coef
    d = np.array(kernel.diag(X), dtype=np.float64)
    scale = max(float(d.max(initial=0.0)), 1e-300)
    L = np.zeros((n, budget))
    chosen: list[int] = []
    live = np.ones(n, dtype=bool)
    for t in range(budget):
        ok = live & (d > 1e-10 * scale)
        if not ok.any():
            break
        gain = np.where(ok, np.einsum("ij,ij->i", R, R) / np.where(ok, d, 1.0), -1.0)
        j = int(np.argmax(gain))
        col = kernel.gram(X[j : j + 1], X)[0] - L[:, :t] @ L[j, :t]
        piv = np.sqrt(d[j])
        L[:, t] = col / piv
        a = R[j] / piv  # <residual, e_t>
        R -= L[:, t, None] * a[None, :]
        d = np.maximum(d - L[:, t] ** 2, 0.0)
        live[j] = False
        chosen.append(j)
    return np.sort(np.asarray(chosen, dtype=np.intp))


def _select(state: dict[str, Any], rows: np.ndarray, coef: np.ndarray) -> dict[str, Any]:
    """``state`` with only support ``rows`` (ids kept, so the age order stays), new ``coef``."""
    sup = dict(state["support"])
    sup["X"] = np.ascontiguousarray(np.asarray(sup["X"])[rows])
    sup["coef"] = np.ascontiguousarray(coef)
    sup["ids"] = np.asarray(sup["ids"])[rows]
    out = dict(state, support=sup)
    for key in ("sv_class", "sv_target"):
        if key in state:
            out[key] = [state[key][int(r)] for r in rows]
    return out


def compress_state(
    cls: type, state: dict[str, Any], budget: int, method: str, solve_options: dict[str, Any]
) -> dict[str, Any]:
    """``state`` with at most ``budget`` support rows, by ``method`` (see the module doc)."""
    sup = state["support"]
    X = np.asarray(sup["X"], dtype=np.float64)
    coef = np.asarray(sup["coef"], dtype=np.float64)
    if X.shape[0] <= budget:
        return state
    kernel = kernel_from_spec(sup["kernel"])
    novelty = cls.__name__ == "KernelNovelty"
    if method == "project":
        keep = greedy_rows(kernel, X, coef, budget)
        return _select(state, keep, project_rows(kernel, X, coef, keep, keep_total=novelty))
    if method == "solve":
        return _solve(cls, state, budget, solve_options)
    if method == "policy":
        return _replay(cls, state, budget)
    raise MergeError(f"compress must be one of {METHODS} or 'auto', got {method!r}")


def _solve(
    cls: type, state: dict[str, Any], budget: int, options: dict[str, Any]
) -> dict[str, Any]:
    if cls.__name__ not in ("KernelPerceptron", "MarginPerceptron", "KernelAdatron", "OnlineSVR"):
        raise MergeError(
            f"compress='solve' needs a classifier or OnlineSVR, not {cls.__name__} (its support "
            "rows carry no training label): use compress='project' or 'policy'"
        )
    union = cls.from_state(state)
    opts = dict(options)
    opts["fill"] = None  # the whole solution; the projection below brings it to the budget
    width = union.support_.X.shape[1]
    out = solve_learner(union, np.zeros((0, width)), [], **opts)
    if out.state is None:
        raise MergeError(f"the batch solver skipped the merged problem: {out.skipped}")
    return compress_state(cls, out.state, budget, "project", options)


def _replay(cls: type, state: dict[str, Any], budget: int) -> dict[str, Any]:
    """Insert the rows oldest first through a fresh copy of the learner's policy."""
    spec = dict(state["policy"])
    if spec.get("budget") is None:
        raise MergeError(
            "compress='policy' needs a bounded budget policy in the learner's budget; "
            "use compress='project'"
        )
    spec["budget"] = budget
    policy = policy_from_spec(spec)
    empty = dict(state)
    sup = state["support"]
    width = np.asarray(sup["X"]).shape[1]
    n_out = np.asarray(sup["coef"]).shape[1]
    empty["support"] = dict(
        sup, X=np.zeros((0, width)), coef=np.zeros((0, n_out)), ids=np.zeros(0, np.int64), next_id=0
    )
    for key in ("sv_class", "sv_target"):
        if key in state:
            empty[key] = []
    model = cls.from_state(empty)
    S = model.support_
    X = np.asarray(sup["X"], dtype=np.float64)
    C = np.asarray(sup["coef"], dtype=np.float64)
    for j in np.argsort(np.asarray(sup["ids"]), kind="stable"):
        k_row = S.kernel_row(X[j]) if S.n else np.zeros(0)
        policy.insert(S, X[j], C[j], k_row)
    out = model.state()
    ids = np.asarray(out["support"]["ids"], dtype=np.int64)
    for key in ("sv_class", "sv_target"):  # replay ids are the rows' positions in age order
        if key in state:
            order = np.argsort(np.asarray(sup["ids"]), kind="stable")
            out[key] = [state[key][int(order[i])] for i in ids]
    out["policy"] = state["policy"]
    return out
