"""Kernel-matrix quality (alignment, FSM), kernel selection, and kernel drift detection (MMD).

* :func:`alignment` — kernel-target alignment (Shawe-Taylor & Cristianini, Def. 3.20).
* :func:`fsm`, :func:`fsm_error_bound` — the feature-space measure of Nguyen & Ho, "An efficient
  kernel matrix evaluation measure", Pattern Recognition 41 (2008), eqs. (14)-(17); smaller is
  better (the paper's text swaps its best and worst cases: the definition is what we implement).
* :func:`centered_alignment` — centred kernel-target alignment (Cortes, Mohri & Rostamizadeh 2012).
* :func:`select_kernel` — the candidate kernel with the best held-out accuracy of a small
  C-SVC validation (or centred alignment; FSM kept for comparison: it degenerates to K = I).
* :class:`MMDDrift` — a river drift detector on the linear-time MMD statistic (Gretton et al.,
  "A kernel two-sample test", JMLR 13, 2012, §6).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
from river import base

from ..errors import ConfigError, InvalidInput, SnapshotError
from ..learners.features import FeatureIndex
from ..randomness import generator_from_state, generator_state
from .base import RBF, Kernel
from .scale import ScaleEstimator
from .specs import kernel_from_spec

__all__ = [
    "alignment",
    "centered_alignment",
    "fsm",
    "fsm_error_bound",
    "fsm_parts",
    "select_kernel",
    "validation_accuracy",
    "MMDDrift",
    "MMD_STATE_LIMITS",
]

#: What a restored :class:`MMDDrift` may hold: its windows are ``window_size`` rows of at
#: most ``width`` features, and their product bounds the memory a snapshot can imply.
MMD_STATE_LIMITS = {"window_size": 1_000_000, "width": 100_000, "cells": 50_000_000}


def _square(K: Any) -> np.ndarray:
    K = np.asarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] == 0:
        raise InvalidInput(f"K must be a non-empty square matrix, got shape {K.shape}")
    if not np.isfinite(K).all():
        raise InvalidInput("K has non-finite entries (nan or inf); check the kernel and inputs")
    return K


def alignment(K: Any, other: Any) -> float:
    """Alignment ``<K1, K2>_F / sqrt(<K1, K1>_F <K2, K2>_F)`` (Def. 3.20).

    ``other`` is a second Gram matrix of the same shape, or a label vector ``y`` (then
    ``K2 = y y'``, and for ``y`` in {-1, +1} this is ``y'Ky / (l ||K||_F)``). Returns 0 when
    either matrix is zero.
    """
    K = _square(K)
    other = np.asarray(other, dtype=np.float64)
    if not np.isfinite(other).all():
        raise InvalidInput("the second matrix (or y) has non-finite entries (nan or inf)")
    if other.ndim == 1:
        if other.shape[0] != K.shape[0]:
            raise InvalidInput(f"y has {other.shape[0]} entries but K has {K.shape[0]} rows")
        num = float(other @ K @ other)
        den = float(np.linalg.norm(K) * (other @ other))
    else:
        if other.shape != K.shape:
            raise InvalidInput(f"K1 {K.shape} and K2 {other.shape} differ in shape")
        num = float(np.vdot(K, other))
        den = float(np.linalg.norm(K) * np.linalg.norm(other))
    return num / den if den > 0 else 0.0


def _binary_masks(y: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y).ravel()
    if y.shape[0] != n:
        raise InvalidInput(f"y has {y.shape[0]} entries but K has {n} rows")
    values = np.unique(y)
    if values.shape[0] != 2:
        raise InvalidInput(f"FSM is defined for two classes, got {values.shape[0]}")
    pos = y == values[-1]  # the larger label (+1, True, 1) is the positive class
    return pos, ~pos


def fsm_parts(K: Any, y: Any) -> dict[str, float]:
    """The quantities of Nguyen & Ho (2008), Fig. 2 and eqs. (14)-(16), from ``K`` in O(n^2).

    Returns ``A = <m+, m+>``, ``B = <m+, m->``, ``C = <m-, m+>``, ``D = <m-, m->``,
    ``dist2 = A + D - B - C = ||m- - m+||^2``, ``std_pos``, ``std_neg`` (within-class standard
    deviations along ``e = (m- - m+)/||m- - m+||`` with ``n -/+ 1`` denominators) and ``fsm``.
    Labels need not be sorted (masks are used); the larger label value is the positive class.
    """
    K = _square(K)
    pos, neg = _binary_masks(y, K.shape[0])
    n_pos, n_neg = int(pos.sum()), int(neg.sum())
    if n_pos < 2 or n_neg < 2:
        raise InvalidInput(f"FSM needs >= 2 examples per class, got {n_pos} and {n_neg}")
    Kp, Kn = K[pos], K[neg]
    a = Kp[:, pos].mean(axis=1)  # <phi(x_i), m+>, i positive
    b = Kp[:, neg].mean(axis=1)  # <phi(x_i), m->, i positive
    c = Kn[:, pos].mean(axis=1)  # <phi(x_i), m+>, i negative
    d = Kn[:, neg].mean(axis=1)  # <phi(x_i), m->, i negative
    A, B, C, D = float(a.mean()), float(b.mean()), float(c.mean()), float(d.mean())
    dist2 = A + D - B - C
    scale = max(abs(A), abs(D), abs(B), abs(C), 1e-300)
    if not dist2 > 1e-12 * scale:  # coincident centres (or rounding below 0): FSM = +inf
        return dict(A=A, B=B, C=C, D=D, dist2=0.0, std_pos=math.nan, std_neg=math.nan, fsm=math.inf)
    std_pos = math.sqrt(float(np.sum((b - a + A - B) ** 2)) / ((n_pos - 1) * dist2))  # (14)
    std_neg = math.sqrt(float(np.sum((c - d + D - C) ** 2)) / ((n_neg - 1) * dist2))  # (15)
    value = (std_pos + std_neg) / math.sqrt(dist2)  # (16)
    return dict(A=A, B=B, C=C, D=D, dist2=dist2, std_pos=std_pos, std_neg=std_neg, fsm=value)


def fsm(K: Any, y: Any) -> float:
    """Feature-space measure ``(std+ + std-) / ||m- - m+||`` (Nguyen & Ho 2008, eq. 16).

    ``>= 0``, smaller is better; invariant to translation, rotation and scaling in feature space
    (their Thm. 2). ``+inf`` when the class centres coincide (the paper's "worst case"; its text
    calls it 0 — an erratum). Two classes, at least two examples each.
    """
    return fsm_parts(K, y)["fsm"]


def fsm_error_bound(value: float) -> float:
    """``FSM^2 / (1 + FSM^2)``: a hyperplane with at most this training error exists (Thm. 3)."""
    if math.isinf(value):
        return 1.0
    return value * value / (1.0 + value * value)


def _multi_fsm(K: np.ndarray, y: np.ndarray) -> float:
    classes = np.unique(y)
    if classes.shape[0] == 2:
        return fsm(K, y)
    return float(np.mean([fsm(K, np.where(y == c, 1, -1)) for c in classes]))


def _centre(K: np.ndarray) -> np.ndarray:
    """``H K H`` with ``H = I - 11'/n`` (the Gram of the centred features)."""
    return K - K.mean(axis=0)[None, :] - K.mean(axis=1)[:, None] + K.mean()


def centered_alignment(K: Any, other: Any) -> float:
    """Centred alignment ``<K_c, L_c>_F / (||K_c||_F ||L_c||_F)`` with ``K_c = H K H``.

    Cortes, Mohri & Rostamizadeh, "Algorithms for learning kernels based on centered
    alignment", JMLR 13 (2012), Def. 1-2. ``other`` is a Gram matrix or labels ``y`` (then
    ``L = y y'``; more than two classes: one-hot columns, ``L = Y Y'``). Unlike the plain
    alignment (Def. 3.20) it does not reward a large constant component, and unlike FSM it
    cannot prefer ``K = I``: centred, the identity aligns with any labelling only as
    ``1/sqrt(n - 1)``. Returns 0 when a centred matrix is zero.
    """
    K = _square(K)
    other = np.asarray(other)
    if other.ndim == 1:
        if other.shape[0] != K.shape[0]:
            raise InvalidInput(f"y has {other.shape[0]} entries but K has {K.shape[0]} rows")
        classes = np.unique(other)
        if classes.shape[0] <= 2 and np.issubdtype(other.dtype, np.number):
            Y = other.astype(np.float64)[:, None]
        else:
            Y = (other[:, None] == classes[None, :]).astype(np.float64)
        L = Y @ Y.T
    else:
        L = _square(other)
        if L.shape != K.shape:
            raise InvalidInput(f"K1 {K.shape} and K2 {L.shape} differ in shape")
    Kc, Lc = _centre(K), _centre(L)
    den = float(np.linalg.norm(Kc) * np.linalg.norm(Lc))
    return float(np.vdot(Kc, Lc)) / den if den > 0 else 0.0


def _folds(y: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Stratified fold index of each row (seeded)."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(y), dtype=np.intp)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        fold[rng.permutation(idx)] = np.arange(len(idx)) % k
    return fold


def validation_accuracy(K: np.ndarray, y: np.ndarray, *, C: float = 1.0, folds: int = 3,
                        seed: int = 0) -> float:  # fmt: skip
    """Mean held-out accuracy of C-SVC (one-vs-rest for > 2 classes) over stratified folds,
    with the batch solver consolidation uses (:func:`streamk.solvers.svc`) on ``K``."""
    from ..solvers import svc  # local: the solvers need not load for the measures

    classes = np.unique(y)
    fold = _folds(y, folds, seed)
    cols = classes[-1:] if classes.shape[0] == 2 else classes
    accs = []
    for f in range(folds):
        tr, va = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        Ktr, Kva = K[np.ix_(tr, tr)], K[np.ix_(va, tr)]
        F = np.empty((len(va), len(cols)))
        for c, label in enumerate(cols):
            t = np.where(y[tr] == label, 1.0, -1.0)
            r = svc(Ktr, t, C=C)
            F[:, c] = Kva @ (r.alpha * t) + r.b
        pred = np.where(F[:, 0] >= 0, cols[0], classes[0]) if len(cols) == 1 else cols[F.argmax(1)]
        accs.append(float(np.mean(pred == y[va])))
    return float(np.mean(accs))


def select_kernel(
    X: Any,
    y: Any,
    candidates: Sequence[Kernel],
    method: str = "validation",
    *,
    C: float = 1.0,
    folds: int = 3,
    seed: int = 0,
) -> Kernel:
    """The best candidate kernel for the labelled block ``(X, y)``.

    ``method``:

    * ``"validation"`` (default): the largest held-out accuracy of C-SVC over ``folds``
      stratified, seeded folds (:func:`validation_accuracy`) — a small validation of the model
      consolidation would build. Measured against 5-fold cross-validated scikit-learn SVC over
      an RBF gamma grid, it picks the same gamma within one grid step (tests/test_measures.py).
    * ``"alignment"``: the largest :func:`centered_alignment` (cheaper: no solve).
    * ``"fsm"``: the smallest FSM. Kept for comparison only: FSM(K = I) = 0 by the paper's
      definition, so on a gamma grid it always picks the largest gamma (it agreed with
      cross-validated SVC on 0 of 3 data sets).

    ``gamma="auto"`` candidates are resolved from ``X`` first. The first of equals wins. With
    fewer than ``folds`` examples of some class, ``"validation"`` falls back to ``"alignment"``.
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    y = np.asarray(y).ravel()
    if not candidates:
        raise ConfigError("select_kernel needs at least one candidate kernel")
    if method not in ("validation", "alignment", "fsm"):
        raise ConfigError(f"method must be 'validation', 'alignment' or 'fsm', got {method!r}")
    if y.shape[0] != X.shape[0]:
        raise InvalidInput(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows")
    classes, counts = np.unique(y, return_counts=True)
    if classes.shape[0] < 2:
        raise InvalidInput("kernel selection needs at least two classes")
    scale = ScaleEstimator()
    scale.update(X)
    resolved = [k if k.is_resolved else k.resolve(scale) for k in candidates]
    if len(resolved) == 1:
        return resolved[0]
    if method == "validation" and counts.min() < folds:
        method = "alignment"
    if method == "fsm":
        values = [_multi_fsm(k.gram(X, X), y) for k in resolved]
        return resolved[int(np.argmin(values))]  # FSM = inf loses to any finite
    if method == "alignment":
        scores = [centered_alignment(k.gram(X, X), y) for k in resolved]
    else:
        scores = [validation_accuracy(k.gram(X, X), y, C=C, folds=folds, seed=seed)
                  for k in resolved]  # fmt: skip
    return resolved[int(np.argmax(scores))]


def _exchangeable_binary_p(ones_ref: int, ones_cur: int, m: int) -> float:
    """Two-sided p-value of ``ones_cur`` ones in ``m`` draws without replacement from ``2m``
    values holding ``ones_ref + ones_cur`` ones (Fisher's exact test on the 2 x 2 table)."""
    from scipy.stats import hypergeom

    t = ones_ref + ones_cur
    dist = hypergeom(2 * m, t, m)
    k = np.arange(max(0, t - m), min(t, m) + 1)
    pk = dist.pmf(k)
    return float(min(1.0, pk[pk <= dist.pmf(ones_cur) * (1 + 1e-9)].sum()))


class MMDDrift(base.DriftDetector):
    """Drift detector on the linear-time kernel MMD between consecutive windows.

    The stream is cut into windows of ``window_size`` values. Each window is tested against the
    previous one with the linear statistic of Gretton et al. (2012, §6): pair the new window's
    values ``(y_2i-1, y_2i)`` with the reference window's ``(x_2i-1, x_2i)`` (reference pairs in a
    seeded random order) and average ``h = k(x, x') + k(y, y') - k(x, y') - k(x', y)`` over the
    ``m/2`` pairs; ``E h = MMD^2 >= 0`` with equality iff no change (characteristic kernel).
    Work is O(d) per value (one 2x2 kernel block per pair), memory O(window_size d).

    Threshold: by the CLT the mean of the ``m/2`` i.i.d. ``h`` is approximately normal, so
    ``z = mean(h) / (sd(h) / sqrt(m/2))`` (variance estimated from the same ``h``, Gretton et
    al. §6) is compared with the one-sided normal quantile ``z_{1-alpha}``. ``threshold`` instead
    fixes a value for ``MMD^2_l`` directly. After every test (drift or not) the tested window
    becomes the reference, so each test uses fresh data; a change is flagged at the end of the
    first window that contains it, i.e. within ``window_size`` values. Slow drift that never
    differs between adjacent windows is not what this detects, and the linear statistic trades
    power for O(d) work per value: a 1-sd shift in 2-D needs windows of a few hundred.

    Parameters
    ----------
    kernel
        A :mod:`streamk.kernels` kernel; ``None`` means an RBF with the median heuristic
        ``gamma = 1 / (2 sum_j Var x_j)`` (``1 / E||x - x'||^2``) from the first window, then
        frozen. It is 4x smaller than the learners' ``gamma="auto"``; on a 2-sd mean shift in 2-D
        (windows of 100) it detected within two windows in 20/20 runs, the learners' value 12/20.
    window_size
        Values per window (even, >= 4).
    alpha
        Nominal false-alarm probability per test (ignored when ``threshold`` is given).
    threshold
        Fixed threshold on ``MMD^2_l`` (optional).
    seed
        Seed of the pairing order.

    0/1 input (the learner's errors, ``drift_input="error"``): the normal approximation is
    poor for the few distinct values ``h`` then takes (measured: 10% false alarms at
    ``alpha = 0.01``), so when both windows hold only scalars 0 and 1 the test is exact instead.
    For such data every MMD is a multiple of ``(p_ref - p_cur)^2``, and under no change the
    windows are exchangeable: given the ``t`` ones of both, the current window's count is
    hypergeometric. The two-sided p-value of that count is compared with ``alpha`` (at most
    ``alpha`` false alarms per test, exactly; see ``benchmarks/drift.py``).

    Attributes
    ----------
    statistic_, z_, p_value_ : the last test's ``MMD^2_l``, standardised value and p-value.
    n_tests, n_detections : counters.
    """

    def __init__(
        self,
        kernel: Kernel | None = None,
        window_size: int = 100,
        alpha: float = 0.01,
        threshold: float | None = None,
        seed: int | None = 0,
    ):
        super().__init__()
        if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 4:
            raise ConfigError(f"window_size must be an int >= 4, got {window_size!r}")
        if window_size % 2:
            raise ConfigError(f"window_size must be even (values are paired), got {window_size}")
        if not 0.0 < alpha < 1.0:
            raise ConfigError(f"alpha must be in (0, 1), got {alpha!r}")
        if threshold is not None and not threshold >= 0:
            raise ConfigError(f"threshold must be >= 0, got {threshold!r}")
        self.kernel = kernel
        self.window_size = window_size
        self.alpha = alpha
        self.threshold = threshold
        self.seed = seed
        self._reset()

    def _reset(self) -> None:
        super()._reset()
        self._kernel = self.kernel if self.kernel is not None else RBF()
        self._features = FeatureIndex()
        self._rng = np.random.default_rng(self.seed)
        self._ref: np.ndarray | None = None  # reference window rows
        self._order = np.zeros(0, dtype=np.intp)
        self._cur: list[np.ndarray] = []
        self._h: list[float] = []
        self._z_crit = NormalDist().inv_cdf(1.0 - self.alpha)
        self.statistic_ = math.nan
        self.z_ = math.nan
        self.p_value_ = math.nan
        self.n_tests = 0
        self.n_detections = 0

    def _row(self, x: Any) -> np.ndarray:
        if isinstance(x, dict):
            return self._features.row(x, grow=True)
        return np.atleast_1d(np.asarray(x, dtype=np.float64)).ravel()

    def update(self, x: Any) -> None:
        """Add one value (a number, a vector or a river feature dict)."""
        self._drift_detected = False
        self._cur.append(self._row(x))
        m = self.window_size
        if self._ref is None:
            if len(self._cur) == m:
                self._start_reference()
            return
        if len(self._cur) % 2 == 0:
            j = len(self._cur) // 2 - 1
            i = self._order[j]
            width = max(self._ref.shape[1], self._cur[-1].shape[0], self._cur[-2].shape[0])
            P = np.zeros((2, width))
            Q = np.zeros((2, width))
            P[0, : self._ref.shape[1]] = self._ref[2 * i]
            P[1, : self._cur[-2].shape[0]] = self._cur[-2]
            Q[0, : self._ref.shape[1]] = self._ref[2 * i + 1]
            Q[1, : self._cur[-1].shape[0]] = self._cur[-1]
            G = self._kernel.gram(P, Q)  # [[k(x,x'), k(x,y')], [k(y,x'), k(y,y')]]
            self._h.append(float(G[0, 0] + G[1, 1] - G[0, 1] - G[1, 0]))
        if len(self._cur) == m:
            self._test()
            self._start_reference()

    def _start_reference(self) -> None:
        width = max(r.shape[0] for r in self._cur)
        ref = np.zeros((len(self._cur), width))
        for i, r in enumerate(self._cur):
            ref[i, : r.shape[0]] = r
        if not self._kernel.is_resolved:
            scale = ScaleEstimator()
            scale.update(ref)
            if self.kernel is None:  # the median heuristic: gamma = 1 / E||x - x'||^2
                total = float(np.sum(scale.variance))
                self._kernel = RBF(gamma=1.0 / (2.0 * total) if total > 0 else 1.0)
            else:
                self._kernel = self._kernel.resolve(scale)
        self._ref = ref
        self._order = self._rng.permutation(len(self._cur) // 2)
        self._cur, self._h = [], []

    def _binary_counts(self) -> tuple[int, int] | None:
        """Ones in the reference and the current window when both hold only scalars 0/1."""
        ref = self._ref
        if ref is None or ref.shape[1] != 1 or any(r.shape[0] != 1 for r in self._cur):
            return None
        a = ref[:, 0]
        b = np.array([r[0] for r in self._cur])
        if not (np.all((a == 0) | (a == 1)) and np.all((b == 0) | (b == 1))):
            return None
        return int(a.sum()), int(b.sum())

    def _test(self) -> None:
        h = np.asarray(self._h)
        self.statistic_ = float(h.mean())
        sd = float(h.std(ddof=1))
        n = h.shape[0]
        if sd > 0:
            self.z_ = self.statistic_ / (sd / math.sqrt(n))
        else:
            self.z_ = math.inf if self.statistic_ > 0 else 0.0
        self.n_tests += 1
        counts = self._binary_counts() if self.threshold is None else None
        if counts is not None:
            self.p_value_ = _exchangeable_binary_p(*counts, len(self._cur))
            drift = self.p_value_ <= self.alpha
        elif self.threshold is not None:
            drift = self.statistic_ > self.threshold
        else:
            self.p_value_ = 1.0 - NormalDist().cdf(self.z_) if math.isfinite(self.z_) else 0.0
            drift = self.z_ > self._z_crit
        if drift:
            self._drift_detected = True
            self.n_detections += 1

    # -- plain data (snapshots) -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything the next test depends on, as plain data: the parameters, the resolved
        kernel, the feature names, both windows, the pair order, the ``h`` values so far, the
        counters and the generator. A restored detector flags exactly where this one would."""
        width = max(
            [0 if self._ref is None else self._ref.shape[1]] + [r.shape[0] for r in self._cur]
        )
        cur = np.zeros((len(self._cur), width))
        for i, r in enumerate(self._cur):
            cur[i, : r.shape[0]] = r
        return {
            "params": {
                "kernel": None if self.kernel is None else self.kernel.to_spec(),
                "window_size": self.window_size,
                "alpha": self.alpha,
                "threshold": self.threshold,
                "seed": self.seed,
            },
            "kernel": self._kernel.to_spec(),
            "features": self._features.state(),
            "ref": self._ref,
            "order": self._order.astype(np.int64),
            "cur": cur,
            "cur_widths": [int(r.shape[0]) for r in self._cur],
            "h": np.asarray(self._h, dtype=np.float64),
            "last": [self.statistic_, self.z_, self.p_value_],
            "n_tests": self.n_tests,
            "n_detections": self.n_detections,
            "drift_detected": bool(self._drift_detected),
            "rng": generator_state(self._rng),
        }

    @classmethod
    def from_state(cls, state: Any) -> MMDDrift:
        """Rebuild a detector from :meth:`state`; sizes are checked against
        :data:`MMD_STATE_LIMITS` before anything is allocated.

        Raises
        ------
        SnapshotError
            On a malformed state or one that implies more than the limits allow.
        """
        if not isinstance(state, dict) or not isinstance(state.get("params"), dict):
            raise SnapshotError("MMDDrift state must be a map with a 'params' map")
        params = dict(state["params"])
        m = params.get("window_size")
        if isinstance(m, int) and not isinstance(m, bool) and m > MMD_STATE_LIMITS["window_size"]:
            raise SnapshotError(
                f"MMDDrift state: window_size {m} exceeds {MMD_STATE_LIMITS['window_size']}"
            )
        try:
            if params.get("kernel") is not None:
                params["kernel"] = kernel_from_spec(params["kernel"])
            detector = cls(**params)
            kernel = kernel_from_spec(state.get("kernel"))
        except (ConfigError, TypeError) as exc:
            raise SnapshotError(f"MMDDrift state: {exc}") from None
        m = detector.window_size
        ref, order, cur, h = (state.get(k) for k in ("ref", "order", "cur", "h"))
        widths = state.get("cur_widths")
        for name, value, dims in (("cur", cur, 2), ("h", h, 1), ("order", order, 1)):
            if not isinstance(value, np.ndarray) or value.ndim != dims:
                raise SnapshotError(f"MMDDrift state: {name} must be a {dims}-D array")
        ref_ok = isinstance(ref, np.ndarray) and ref.ndim == 2 and ref.shape[0] == m
        if ref is not None and not (ref_ok and ref.dtype == np.float64):
            raise SnapshotError(f"MMDDrift state: ref must be a float64 array of {m} rows")
        width = max(cur.shape[1], 0 if ref is None else ref.shape[1])
        if width > MMD_STATE_LIMITS["width"] or 2 * m * width > MMD_STATE_LIMITS["cells"]:
            raise SnapshotError(
                f"MMDDrift state: windows of {m} x {width} exceed the limits {MMD_STATE_LIMITS}"
            )
        held = cur.shape[0]
        widths_ok = isinstance(widths, list) and len(widths) == held < m
        if not (widths_ok and all(isinstance(w, int) and 0 <= w <= cur.shape[1] for w in widths)):
            raise SnapshotError("MMDDrift state: cur_widths must give each held row's width")
        pairs = 0 if ref is None else m // 2
        if order.shape[0] != pairs or (pairs and not (0 <= order.min() and order.max() < pairs)):
            raise SnapshotError(f"MMDDrift state: order must be a permutation of {pairs} pairs")
        if h.shape[0] != (0 if ref is None else cur.shape[0] // 2):
            raise SnapshotError("MMDDrift state: one h value per completed pair expected")
        last = state.get("last")
        counters = [state.get("n_tests"), state.get("n_detections")]
        if not isinstance(last, list) or [isinstance(v, (int, float)) for v in last] != [True] * 3:
            raise SnapshotError("MMDDrift state: last must be three numbers")
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counters):
            raise SnapshotError("MMDDrift state: n_tests and n_detections must be ints >= 0")
        names = state.get("features")
        if not isinstance(names, list) or len(names) > MMD_STATE_LIMITS["width"]:
            raise SnapshotError("MMDDrift state: features must be a list of names")
        detector._kernel = kernel
        detector._features = FeatureIndex.from_state(names)
        detector._ref = None if ref is None else ref.copy()
        detector._order = order.astype(np.intp)
        detector._cur = [cur[i, :w].copy() for i, w in enumerate(widths)]
        detector._h = [float(v) for v in h]
        detector.statistic_, detector.z_, detector.p_value_ = (float(v) for v in last)
        detector.n_tests, detector.n_detections = counters
        detector._drift_detected = bool(state.get("drift_detected", False))
        detector._rng = generator_from_state(state.get("rng"), "MMDDrift state: rng")
        return detector

    @classmethod
    def _unit_test_params(cls):
        yield {"window_size": 20, "alpha": 0.01}
