"""String kernels (Shawe-Taylor & Cristianini, §11.5–11.6) on Python ``str`` values.

* :class:`GapWeightedSubsequences` — every length-``p`` subsequence, weighted by
  ``lam ** span`` (Alg. 11.38, the dynamic programme of Code Fragment 11.3, corrected:
  see ``reference/kernels-and-measures.md`` §5.4), O(p |s| |t|) per pair.
* :class:`Spectrum` — counts of contiguous ``p``-grams (Alg. 11.46).
* :class:`Mismatch` — ``p``-grams matched with up to ``m`` substitutions over a declared
  alphabet (Alg. 11.51).
* :class:`RestrictedGapWeighted` — subsequences of span at most ``p + m``, weighted by
  ``lam ** gaps`` (Alg. 11.54).

The last three are trie kernels with a finite, sparse feature map. Each string's trie
walk ends at the leaves it reaches, with their weights; :meth:`_TrieKernel.feature_map`
returns that leaf map, and a kernel value is the dot product of two leaf maps. That is
the book's traversal with the pair pruning replaced by a hash join of the leaves
(Remark 11.47: process each string once and keep it at the leaves), and it gives a
whole row ``K(s, S)`` at the cost of the leaves. The same map, weighted by the dual
coefficients, is the primal weight map of Remark 11.55 a learner can keep.

Every input string is validated: a ``str`` (or UTF-8 ``bytes``) of at most
:data:`MAX_STRING_LENGTH` characters; anything else raises
:class:`~streamk.errors.InvalidInput`.
"""

from __future__ import annotations

import itertools
import math
import os
from collections import Counter
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import sparse

from ..errors import ConfigError, InvalidInput
from .base import Kernel, _as_objects, check_utf8


def _load_compiled() -> Any:
    """:mod:`streamk.kernels._strings` (compiled rows), or ``None``: not built, or
    ``STREAMK_NO_ACCEL=1`` (then the NumPy path runs, with the same values)."""
    if os.environ.get("STREAMK_NO_ACCEL", "").strip() not in ("", "0"):
        return None
    try:
        from . import _strings  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _strings


#: The compiled rows of the gap-weighted family, or ``None`` (NumPy path).
compiled = _load_compiled()

__all__ = [
    "MAX_STRING_LENGTH",
    "GapWeightedSubsequences",
    "Spectrum",
    "Mismatch",
    "RestrictedGapWeighted",
    "CharacterWeightedSubsequences",
    "SoftMatchingSubsequences",
    "GapNumberWeightedSubsequences",
    "check_string",
    "subsequence_levels",
    "subsequence_dp",
    "gap_number_levels",
    "maps_gram",
]

#: Longest string a string kernel accepts (characters).
MAX_STRING_LENGTH = 10_000
#: Largest alphabet :class:`Mismatch` accepts (its cost grows as ``|alphabet| ** m``).
MAX_ALPHABET = 128


def check_string(s: Any) -> str:
    """``s`` as a ``str``, or :class:`InvalidInput` saying why it cannot be one.

    ``bytes`` must be valid UTF-8 and a ``str`` encodable as UTF-8; the length limit is
    :data:`MAX_STRING_LENGTH`.
    """
    if isinstance(s, (bytes, bytearray)):
        try:
            s = bytes(s).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"a string kernel needs valid UTF-8 text: {exc}") from None
    if not isinstance(s, str):
        raise InvalidInput(
            f"a string kernel needs a str, got {type(s).__name__} ({s!r:.60}); "
            "pass text, or use a vector kernel for numeric features"
        )
    if len(s) > MAX_STRING_LENGTH:
        raise InvalidInput(
            f"string of {len(s)} characters is longer than the limit of "
            f"{MAX_STRING_LENGTH}; truncate or split it before learning"
        )
    return check_utf8(s, "a string kernel")


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{name} must be {bound}, got {value!r}")
    return int(value)


def _check_lam(lam: Any) -> float:
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam):
        raise ConfigError(f"lam must be a finite number in (0, 1], got {lam!r}")
    if not 0 < lam <= 1:
        raise ConfigError(f"lam must be in (0, 1], got {lam!r}")
    return float(lam)


class _StringKernel(Kernel):
    """Shared parts: object inputs, validation, spec."""

    takes_objects = True
    object_kind = "strings"

    def check_object(self, s: Any) -> str:
        """``s`` validated as this kernel's input (see :func:`check_string`)."""
        return check_string(s)

    def _strings(self, A: list[Any]) -> list[str]:
        return [check_string(s) for s in A]


# -- gap-weighted subsequences ------------------------------------------------------------------

#: A pair of strings both at most this long takes the dense closed form of the dynamic
#: programme (a few BLAS calls a level); a longer one the O(p |s| |t|) recursion itself.
DENSE_MAX = 128
#: Cells of the ``(|s|, |t|)`` table a block of :func:`gap_number_levels` holds at once.
_BLOCK_CELLS = 1 << 18


@lru_cache(maxsize=256)
def _decay_matrix(n: int, lam: float) -> np.ndarray:
    """``L[i, i'] = lam ** (i - i')`` for ``i' <= i``, else 0."""
    d = np.subtract.outer(np.arange(n), np.arange(n))
    return np.where(d >= 0, lam ** np.maximum(d, 0).astype(np.float64), 0.0)


def gap_weighted_levels(s: str, t: str, p: int, lam: float) -> np.ndarray:
    """``[kappa_1, ..., kappa_p](s, t)`` of the gap-weighted subsequences kernel.

    The corrected Code Fragment 11.3: ``DPS[i, j]`` is the suffix kernel
    ``kappa^S_l(s(1:i), t(1:j))`` and
    ``DP(i,j) = DPS(i,j) + lam DP(i-1,j) + lam DP(i,j-1) - lam^2 DP(i-1,j-1)``.
    Strings longer than :data:`DENSE_MAX` characters run that recursion along the
    table's anti-diagonals (:func:`subsequence_dp`: O(p |s| |t|) time, O(p |s|) memory);
    shorter ones take its closed form ``DP = L_n DPS L_m^T`` (two triangular products a
    level, O(p (|s|^2 |t| + |s| |t|^2)), fewer NumPy calls when that is small).
    """
    out = np.zeros(p)
    n, m = len(s), len(t)
    if n == 0 or m == 0:
        return out
    a = np.fromiter(map(ord, s), dtype=np.int64, count=n)
    b = np.fromiter(map(ord, t), dtype=np.int64, count=m)
    if max(n, m) > DENSE_MAX:
        return subsequence_dp(a, b, p, lam, lam, lam * lam)
    match = a[:, None] == b[None, :]
    lam2 = lam * lam
    dps = np.where(match, lam2, 0.0)
    out[0] = dps.sum()
    if p == 1:
        return out
    ln, lm = _decay_matrix(n, lam), _decay_matrix(m, lam)
    for level in range(1, p):
        if level >= min(n, m):
            break  # no subsequence that long: the rest stay 0
        dp = ln @ dps @ lm.T
        new = np.zeros((n, m))
        new[1:, 1:] = np.where(match[1:, 1:], lam2 * dp[:-1, :-1], 0.0)
        dps = new
        out[level] = dps.sum()
    return out


# -- the gap-weighted variants (Alg. 11.40-11.42) ----------------------------------------------


def subsequence_levels(M: np.ndarray, P: np.ndarray, Q: np.ndarray, p: int) -> np.ndarray:
    """``[kappa_1, ..., kappa_p]`` of a gap-weighted family from its three matrices.

    Every kernel of §11.5 has suffix kernels ``DPS_1 = M`` and
    ``DPS_{l+1} = M * (P @ DPS_l @ Q.T)`` (elementwise ``*``), where ``M[i, j]`` is the
    weight of matching ``s_i`` with ``t_j`` and ``P[i, i']`` (``i' < i``, strictly lower
    triangular) the weight of the stretch of ``s`` between two consecutive matched
    positions ``i' < i``; ``kappa_l = sum(DPS_l)``. The DP recursions of Code Fragment
    11.3 and Alg. 11.40-11.42 are this product solved one cell at a time.

    Dense: O(p (|s|^2 |t| + |s| |t|^2)) time and O(|s|^2 + |t|^2) memory. The kernels use
    it for strings of at most :data:`DENSE_MAX` characters and :func:`subsequence_dp` or
    :func:`gap_number_levels` beyond.
    """
    out = np.zeros(p)
    if M.size == 0:
        return out
    dps = M
    out[0] = dps.sum()
    for level in range(1, min(p, *M.shape)):
        dps = M * (P @ dps @ Q.T)
        out[level] = dps.sum()
    return out


def subsequence_dp(
    a: np.ndarray,
    b: np.ndarray,
    p: int,
    ga: float | np.ndarray,
    gb: float | np.ndarray,
    wa: float | np.ndarray | None,
    sim: np.ndarray | None = None,
) -> np.ndarray:
    """``[kappa_1, ..., kappa_p]`` of the Alg. 11.38/11.40/11.41 family by its dynamic
    programme, in O(p |s| |t|) time and O(p |s|) memory.

    The recursion of Code Fragment 11.3 (corrected) in its Alg. 11.40 form,

        DP_l(i, j) = DPS_l(i, j) + ga[i] DP_l(i-1, j)
                     + gb[j] (DP_l(i, j-1) - ga[i] DP_l(i-1, j-1)),
        DPS_{l+1}(i, j) = M(i, j) DP_l(i-1, j-1),     DPS_1 = M,   kappa_l = sum DPS_l,

    where a cell depends only on the two anti-diagonals ``i + j`` before its own: the
    table is swept one anti-diagonal at a time, each a few whole-array operations (a
    Python loop over the ``|s| + |t| - 1`` diagonals, NumPy along each), all levels
    together, keeping three diagonals a level.

    Parameters
    ----------
    a, b
        Symbol codes of ``s`` and ``t`` (for ``sim``: rows and columns of it).
    ga, gb
        Gap weight of each position of ``s`` and ``t`` (a float: the same everywhere).
    wa
        Exact matching: ``M(i, j) = [a_i = b_j] wa[i]`` (a float: the same everywhere).
    sim
        Soft matching instead: ``M(i, j) = sim[a_i, b_j]`` (``wa`` is ignored).
    """
    n, m = len(a), len(b)
    out = np.zeros(p)
    if n == 0 or m == 0:
        return out
    levels = min(p, n, m)  # no subsequence is longer than either string
    rb = np.ascontiguousarray(b[::-1])  # t reversed: along a diagonal, j falls as i rises
    g_b = gb if np.ndim(gb) == 0 else np.ascontiguousarray(np.asarray(gb)[::-1])
    # DP_1 .. DP_{levels-1} on diagonals d, d-1, d-2 (rotating); entry 0 is row -1 (zero).
    # A buffer keeps an older diagonal's entries outside the rows it is rewritten on; the
    # reads never reach them: a diagonal's rows never start lower than the one before,
    # and the rows read past a diagonal's end (column -1 of the table) were never written
    table = np.zeros((max(levels - 1, 0), 3, n + 1))
    for d in range(n + m - 1):
        lo, hi = max(0, d - m + 1), min(d, n - 1) + 1  # rows i of diagonal d
        r = m - 1 - d  # column j = d - i is entry r + i of the reversed t
        if sim is not None:
            M = sim[a[lo:hi], rb[r + lo : r + hi]]
        else:
            M = a[lo:hi] == rb[r + lo : r + hi]
            M = M * (wa if np.ndim(wa) == 0 else wa[lo:hi])
        gs = ga if np.ndim(ga) == 0 else ga[lo:hi]
        gt = g_b if np.ndim(g_b) == 0 else g_b[r + lo : r + hi]
        out[0] += M.sum()
        dps = M
        cur, up, diag = d % 3, (d - 1) % 3, (d - 2) % 3
        for level in range(levels - 1):
            D = table[level]
            above, corner = D[up], D[diag]  # diagonal d-1 and d-2 of DP at this level
            nxt = M * corner[lo:hi]  # DPS_{level+2}(i, j) = M(i, j) DP(i-1, j-1)
            D[cur, lo + 1 : hi + 1] = (
                dps + gs * above[lo:hi] + gt * (above[lo + 1 : hi + 1] - gs * corner[lo:hi])
            )
            out[level + 1] += nxt.sum()
            dps = nxt
    return out


def gap_number_levels(s: str, t: str, p: int, lam: float) -> np.ndarray:
    """``[kappa_1, ..., kappa_p]`` of the gap-number weighted kernel (Alg. 11.42), in
    O(p |s| |t|) time and O(p |t|) memory beyond a bounded block.

    Its stretch weight is 1 between adjacent matched positions and ``lam`` across any
    gap, so ``DPS_{l+1} = M * (P DPS_l Q^T)`` (see :func:`subsequence_levels`) with
    ``(P X)(i) = X(i-1) + lam sum_{i' <= i-2} X(i')``: a shift plus a prefix sum along
    each string. Rows of the ``(|s|, |t|)`` table go in blocks of at most
    ``_BLOCK_CELLS`` cells: along ``t`` within the block (one ``cumsum``), along ``s``
    with the prefix sum carried from block to block. Only sums of non-negative terms,
    as in the closed form (the book's ``lam = 1`` table with its ``(lam - 1)``
    corrections would subtract large, nearly equal sums).
    """
    n, m = len(s), len(t)
    out = np.zeros(p)
    if n == 0 or m == 0:
        return out
    a, b = _codes(s), _codes(t)
    levels = min(p, n, m)
    rows = max(1, min(n, _BLOCK_CELLS // m))
    # per level: sum of the rows of Q-applied DPS up to the block's row - 2, and row - 1
    carried = np.zeros((max(levels - 1, 0), 2, m))
    for r0 in range(0, n, rows):
        M = (a[r0 : r0 + rows, None] == b[None, :]).astype(np.float64)
        X = M
        out[0] += X.sum()
        for level in range(levels - 1):
            Z = np.zeros_like(X)  # X Q^T: the shift and prefix sum along t
            Z[:, 1:] = X[:, :-1]
            if m > 2:
                Z[:, 2:] += lam * np.cumsum(X[:, :-2], axis=1)
            # P Z: rows r0 - 2 and r0 - 1 of the prefix sum come from the block before
            ext = np.concatenate([carried[level], Z], axis=0)
            prefix = np.cumsum(ext[:-1], axis=0)  # prefix[k]: rows <= r0 - 2 + k
            X = M * (ext[1:-1] + lam * prefix[:-1])
            carried[level, 0], carried[level, 1] = prefix[-1], ext[-1]
            out[level + 1] += X.sum()
    return out


def _codes(s: str) -> np.ndarray:
    return np.fromiter(map(ord, s), dtype=np.int64, count=len(s))


def _stretch_weights(weights: np.ndarray) -> np.ndarray:
    """``P[i, i'] = prod(weights[i'+1 : i])`` for ``i' < i`` (the skipped characters), else 0."""
    n = len(weights)
    P = np.zeros((n, n))
    for i in range(1, n):
        P[i, i - 1] = 1.0
        if i > 1:  # P[i, i'] = P[i-1, i'] * weights[i-1] for i' < i-1
            P[i, : i - 1] = P[i - 1, : i - 1] * weights[i - 1]
    return P


def _check_weight(what: str, w: Any) -> float:
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
        raise ConfigError(f"{what} must be a finite number, got {w!r}")
    return float(w)


def _check_char_weights(name: str, weights: Any, low: float, high: float) -> dict[str, float]:
    if not isinstance(weights, dict):
        raise ConfigError(f"{name} must be a dict of one-character str -> weight, got {weights!r}")
    out = {}
    for c, w in sorted(weights.items()):
        if not isinstance(c, str) or len(c) != 1:
            raise ConfigError(f"{name} keys must be single characters, got {c!r}")
        w = _check_weight(f"{name}[{c!r}]", w)
        if not low < w <= high:
            raise ConfigError(f"{name}[{c!r}] must be in ({low}, {high}], got {w!r}")
        out[c] = w
    return out


def _per_code(codes: np.ndarray, weights: dict[str, float], default: float) -> np.ndarray:
    """``weights[chr(c)]`` (``default`` when absent) for every code ``c``."""
    out = np.full(len(codes), default)
    for c, w in weights.items():
        out[codes == ord(c)] = w
    return out


class _Subsequences(_StringKernel):
    """Shared parts of the gap-weighted family.

    A pair goes through :func:`subsequence_levels` (NumPy); a row ``K(s, B)`` goes
    through one call of the compiled :func:`streamk.kernels._strings.subsequence_row`
    when it is built and the kernel has the Alg. 11.40 form (per-position gap weights,
    exact or soft matching), else pair by pair in NumPy: the fallback and the oracle.
    """

    p: int
    #: The compiled row computes this kernel (Alg. 11.40's recursion covers it).
    _compiled_form = True

    def _matrices(self, s: str, t: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError  # pragma: no cover - abstract

    def _levels(self, s: str, t: str) -> np.ndarray:
        """``[kappa_1, ..., kappa_p](s, t)`` by :func:`subsequence_dp`."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _pair(self, s: str, t: str) -> float:
        """``k(s, t)``: the dense closed form up to :data:`DENSE_MAX` characters, the
        dynamic programme beyond (O(p |s| |t|) time and O(p |s|) memory)."""
        if max(len(s), len(t)) <= DENSE_MAX:
            return float(subsequence_levels(*self._matrices(s, t), self.p)[-1])
        return float(self._levels(s, t)[-1])

    def __call__(self, a: Any, b: Any) -> float:
        return self._pair(self.check_object(a), self.check_object(b))

    # -- the compiled form: per-position codes, gap weights and match weights -------------
    def _gaps(self, codes: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _match(self, codes: np.ndarray) -> np.ndarray:
        return np.ones(len(codes))

    def _symbols(self, codes: np.ndarray) -> np.ndarray:
        return codes

    def _similarity(self) -> np.ndarray | None:
        return None

    def _encode(self, strings: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Codes, gap weights and offsets of ``strings`` concatenated (checked already)."""
        codes = np.frombuffer("".join(strings).encode("utf-32-le"), dtype=np.uint32)
        offsets = np.zeros(len(strings) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in strings], out=offsets[1:])
        return self._symbols(codes), self._gaps(codes), offsets

    def rows(self, A: list[Any], B: list[Any], use_compiled: bool = True) -> np.ndarray:
        """``K(A, B)``, each row ``K(s, B)`` in one compiled call when possible.

        ``use_compiled=False`` forces the NumPy pair-by-pair path (the oracle).
        """
        A = [self.check_object(s) for s in A]
        B = [self.check_object(t) for t in B]
        if not (use_compiled and compiled is not None and self._compiled_form) or not B:
            return np.array([[self._pair(s, t) for t in B] for s in A], dtype=np.float64).reshape(
                len(A), len(B)
            )
        b_all, gb_all, offsets = self._encode(B)
        sim = self._similarity()
        out = np.empty((len(A), len(B)))
        for i, s in enumerate(A):
            raw = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32)
            out[i] = compiled.subsequence_row(
                self._symbols(raw),
                self._gaps(raw),
                self._match(raw),
                b_all,
                gb_all,
                offsets,
                self.p,
                sim,
            )
        return out

    def _gram(self, A, B, a_sq, b_sq):
        return self.rows(list(A), list(B))

    def diag(self, A):
        items = [self.check_object(s) for s in _as_objects(A)]
        if compiled is not None and self._compiled_form:
            return np.array([self.rows([s], [s])[0, 0] for s in items], dtype=np.float64)
        return np.array([self._pair(s, s) for s in items], dtype=np.float64)


class GapWeightedSubsequences(_Subsequences):
    """Gap-weighted subsequences kernel (Shawe-Taylor & Cristianini, §11.5, Alg. 11.38).

    ``phi_u(s) = sum over index vectors i with s(i) = u of lam ** span(i)`` for every
    ``u`` of length ``p``; ``k(s, t) = <phi(s), phi(t)>``. ``lam -> 0`` approaches the
    ``p``-spectrum kernel, ``lam = 1`` counts common subsequences. O(p |s| |t|) per pair;
    a row ``K(s, B)`` is one compiled call when :mod:`streamk.kernels._strings` is built.
    """

    _param_names = ("p", "lam")

    def __init__(self, p: int = 2, lam: float = 0.5):
        self.p = _check_int("p", p, 1, 64)
        self.lam = _check_lam(lam)

    def _pair(self, s: str, t: str) -> float:
        return float(gap_weighted_levels(s, t, self.p, self.lam)[-1])

    def _gaps(self, codes: np.ndarray) -> np.ndarray:
        return np.full(len(codes), self.lam)

    def _match(self, codes: np.ndarray) -> np.ndarray:
        return np.full(len(codes), self.lam * self.lam)


class CharacterWeightedSubsequences(_Subsequences):
    """Gap-weighted subsequences with character weightings (Shawe-Taylor & Cristianini,
    §11.5.2, Alg. 11.40).

    ``phi_u(s) = sum over index vectors i with s(i) = u of
    prod_k match[u_k] * prod over the skipped characters c of s (inside the span of i,
    not in i) of gap[c]``, and ``k(s, t) = <phi(s), phi(t)>``. A character missing from
    ``match`` / ``gap`` weighs ``default_match`` / ``default_gap``. With every weight
    equal to ``lam`` this is :class:`GapWeightedSubsequences`. Why: a gap of vowels or of
    whitespace can cost less than a gap of consonants, and rare symbols can count more.
    O(p |s| |t|) per pair, like Alg. 11.38.
    """

    _param_names = ("p", "gap", "match", "default_gap", "default_match")

    def __init__(
        self,
        p: int = 2,
        gap: dict[str, float] | None = None,
        match: dict[str, float] | None = None,
        default_gap: float = 0.5,
        default_match: float = 0.5,
    ):
        self.p = _check_int("p", p, 1, 64)
        self.gap = _check_char_weights("gap", gap or {}, 0.0, 1.0)
        self.match = _check_char_weights("match", match or {}, 0.0, math.inf)
        self.default_gap = _check_lam(default_gap)
        dm = _check_weight("default_match", default_match)
        if dm <= 0:
            raise ConfigError(f"default_match must be > 0, got {default_match!r}")
        self.default_match = dm

    def _matrices(self, s: str, t: str):
        gs = np.array([self.gap.get(c, self.default_gap) for c in s])
        gt = np.array([self.gap.get(c, self.default_gap) for c in t])
        ms = np.array([self.match.get(c, self.default_match) for c in s])
        M = np.where(_codes(s)[:, None] == _codes(t)[None, :], (ms * ms)[:, None], 0.0)
        return M, _stretch_weights(gs), _stretch_weights(gt)

    def _levels(self, s, t):
        a, b = _codes(s), _codes(t)
        return subsequence_dp(a, b, self.p, self._gaps(a), self._gaps(b), self._match(a))

    def _gaps(self, codes):
        return _per_code(codes, self.gap, self.default_gap)

    def _match(self, codes):
        return _per_code(codes, self.match, self.default_match) ** 2


class SoftMatchingSubsequences(_Subsequences):
    """Gap-weighted subsequences with soft matching (Shawe-Taylor & Cristianini, §11.5.2,
    Alg. 11.41).

    ``k(s, t) = sum over index vectors i of s and j of t, both of length p, of
    lam ** (span(i) + span(j)) * prod_k A[s_{i_k}, t_{j_k}]``, where ``A = similarity``
    (rows and columns in the order of ``alphabet``) scores how alike two symbols are.
    ``A`` must be symmetric positive semi-definite (it is the kernel of one-character
    strings): then ``A = B B^T`` and ``phi(s) = sum_i lam ** span(i) B[s_{i_1}] (x) ...
    (x) B[s_{i_p}]`` is a feature map, so ``k`` is a kernel. ``A = I`` gives
    :class:`GapWeightedSubsequences`. Why: amino acids or phonemes that substitute for
    one another still match. A symbol outside ``alphabet`` raises
    :class:`~streamk.errors.InvalidInput`.
    """

    _param_names = ("p", "lam", "alphabet", "similarity")

    def __init__(
        self,
        p: int = 2,
        lam: float = 0.5,
        alphabet: str = "acgt",
        similarity: list[list[float]] | None = None,
    ):
        self.p = _check_int("p", p, 1, 64)
        self.lam = _check_lam(lam)
        if not isinstance(alphabet, str) or not alphabet or len(set(alphabet)) != len(alphabet):
            raise ConfigError(
                f"alphabet must be a non-empty str of distinct symbols, got {alphabet!r}"
            )
        if len(alphabet) > MAX_ALPHABET:
            raise ConfigError(f"alphabet has more than {MAX_ALPHABET} symbols: {len(alphabet)}")
        self.alphabet = alphabet
        n = len(alphabet)
        if similarity is None:
            A = np.eye(n)
        else:
            try:
                A = np.array(similarity, dtype=np.float64)
            except (TypeError, ValueError):
                raise ConfigError(f"similarity must be a {n}x{n} matrix of numbers") from None
        if A.shape != (n, n) or not np.all(np.isfinite(A)):
            raise ConfigError(f"similarity must be a finite {n}x{n} matrix (one row per symbol)")
        if not np.allclose(A, A.T):
            raise ConfigError("similarity must be symmetric")
        low = float(np.linalg.eigvalsh(A)[0])
        if low < -1e-10 * max(1.0, float(np.abs(A).max())):
            raise ConfigError(
                f"similarity must be positive semi-definite (smallest eigenvalue {low:.3g}): "
                "otherwise the soft-matching kernel is not a kernel"
            )
        self.similarity = A.tolist()
        self._A = A
        self._index = {c: i for i, c in enumerate(alphabet)}
        self._lookup = np.zeros(max(map(ord, alphabet)) + 1, dtype=np.uint32)
        self._lookup[[ord(c) for c in alphabet]] = np.arange(n, dtype=np.uint32)
        self._sim = np.ascontiguousarray(self.lam * self.lam * A)

    def check_object(self, s: Any) -> str:
        s = check_string(s)
        bad = set(s) - self._index.keys()
        if bad:
            raise InvalidInput(
                f"soft-matching kernel over alphabet {self.alphabet!r} got symbols "
                f"{''.join(sorted(bad))!r:.60}; declare them in alphabet= or clean the input"
            )
        return s

    def _matrices(self, s: str, t: str):
        i = np.array([self._index[c] for c in s], dtype=np.int64)
        j = np.array([self._index[c] for c in t], dtype=np.int64)
        lam = self.lam
        M = lam * lam * self._A[np.ix_(i, j)]
        return M, _stretch_weights(np.full(len(s), lam)), _stretch_weights(np.full(len(t), lam))

    def _levels(self, s, t):
        a, b = self._symbols(_codes(s)), self._symbols(_codes(t))
        return subsequence_dp(a, b, self.p, self.lam, self.lam, None, self._sim)

    def _gaps(self, codes):
        return np.full(len(codes), self.lam)

    def _symbols(self, codes):
        return self._lookup[codes] if len(codes) else codes

    def _similarity(self):
        return self._sim


class GapNumberWeightedSubsequences(_Subsequences):
    """Subsequences weighted by their number of gaps (Shawe-Taylor & Cristianini, §11.5.2,
    Alg. 11.42).

    ``phi_u(s) = sum over index vectors i with s(i) = u of lam ** g(i)``, where
    ``g(i) = #{k : i_{k+1} > i_k + 1}`` counts the gaps, however long each is, and
    ``k(s, t) = <phi(s), phi(t)>``. Why: an insertion costs the same whatever its
    length (a word split by a clause, a read with an inserted stretch), where
    :class:`GapWeightedSubsequences` decays with the span. ``lam = 1`` counts common
    subsequences; ``lam -> 0`` keeps only contiguous ones (the ``p``-spectrum).
    O(p |s| |t|) per pair.
    """

    _param_names = ("p", "lam")
    _compiled_form = False  # its gap weight is not a product over skipped characters

    def __init__(self, p: int = 2, lam: float = 0.5):
        self.p = _check_int("p", p, 1, 64)
        self.lam = _check_lam(lam)

    def _pair(self, s: str, t: str) -> float:
        return float(gap_number_levels(s, t, self.p, self.lam)[-1])

    def _matrices(self, s: str, t: str):
        """The closed form's matrices (:func:`subsequence_levels`; a reference: the
        kernel computes :func:`gap_number_levels`)."""
        M = (_codes(s)[:, None] == _codes(t)[None, :]).astype(np.float64)
        return M, self._gaps(len(s)), self._gaps(len(t))

    def _gaps(self, n: int) -> np.ndarray:
        """``P[i, i-1] = 1`` (adjacent), ``P[i, i'] = lam`` for ``i' < i - 1`` (one gap)."""
        return np.tril(np.full((n, n), self.lam), -2) + np.eye(n, k=-1)


# -- trie kernels: leaf maps ---------------------------------------------------------------------


def maps_gram(MA: list[dict[str, float]], MB: list[dict[str, float]]) -> np.ndarray:
    """``K[i, j] = sum_u MA[i][u] MB[j][u]``: leaf maps joined through one sparse product."""
    vocab: dict[str, int] = {}
    rows, cols, vals = [], [], []
    for j, mp in enumerate(MB):
        for u, w in mp.items():
            rows.append(j)
            cols.append(vocab.setdefault(u, len(vocab)))
            vals.append(w)
    if not vocab:
        return np.zeros((len(MA), len(MB)))
    SB = sparse.csr_matrix((vals, (rows, cols)), shape=(len(MB), len(vocab)))
    rows, cols, vals = [], [], []
    for i, mp in enumerate(MA):
        for u, w in mp.items():
            c = vocab.get(u)
            if c is not None:
                rows.append(i)
                cols.append(c)
                vals.append(w)
    SA = sparse.csr_matrix((vals, (rows, cols)), shape=(len(MA), len(vocab)))
    return np.asarray((SA @ SB.T).todense(), dtype=np.float64)


def _dot(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return math.fsum(w * b[u] for u, w in a.items() if u in b)


class _TrieKernel(_StringKernel):
    """A string kernel with a finite sparse feature map: the leaves of its trie."""

    def check_object(self, s: Any) -> str:
        s = check_string(s)
        self.feature_map(s)  # e.g. Mismatch's alphabet; the map is cached for later
        return s

    def feature_map(self, s: Any) -> dict[str, float]:
        """The leaves ``{u: phi_u(s)}`` the trie walk of ``s`` reaches (do not mutate)."""
        s = check_string(s)
        if len(s) > CACHED_LENGTH:  # a long string's map is not kept (memory)
            return self._build(s)
        return _leaf_map(self._key(), s)

    def _key(self) -> tuple:
        return (type(self).__name__, *(getattr(self, n) for n in self._param_names))

    def _build(self, s: str) -> dict[str, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, a: Any, b: Any) -> float:
        return _dot(self.feature_map(a), self.feature_map(b))

    def _gram(self, A, B, a_sq, b_sq):
        return maps_gram([self.feature_map(s) for s in A], [self.feature_map(t) for t in B])

    def diag(self, A):
        return np.array(
            [math.fsum(w * w for w in self.feature_map(s).values()) for s in _as_objects(A)],
            dtype=np.float64,
        )


_BUILDERS: dict[str, type[_TrieKernel]] = {}


#: Strings up to this length have their leaf maps cached (4,096 of them at most).
CACHED_LENGTH = 1_000


@lru_cache(maxsize=4096)
def _leaf_map(key: tuple, s: str) -> dict[str, float]:
    """Leaf maps, cached by kernel parameters and string: a support string's map is
    built once, not at every kernel row."""
    kernel = _BUILDERS[key[0]](*key[1:])
    return kernel._build(s)


class Spectrum(_TrieKernel):
    """``p``-spectrum kernel: ``k(s, t) = sum_u occ_u(s) occ_u(t)`` over contiguous
    ``p``-grams ``u`` (Shawe-Taylor & Cristianini, Alg. 11.46).

    The leaves of the trie of ``s`` at depth ``p`` are its ``p``-grams with their counts;
    ``f(s)`` for a learner can be a weight map over them (Remark 11.55), O(|s| p).
    """

    _param_names = ("p",)

    def __init__(self, p: int = 3):
        self.p = _check_int("p", p, 1, 1024)

    def _build(self, s: str) -> dict[str, float]:
        p = self.p
        return {
            u: float(c) for u, c in Counter(s[i : i + p] for i in range(len(s) - p + 1)).items()
        }


class Mismatch(_TrieKernel):
    """``(k, m)``-mismatch kernel (Shawe-Taylor & Cristianini, Def. 11.50, Alg. 11.51).

    ``phi_u(s)`` counts the ``k``-grams of ``s`` within Hamming distance ``m`` of ``u``,
    for every ``u`` in ``alphabet ** k``; the value depends on the declared alphabet, and
    a character outside it raises :class:`~streamk.errors.InvalidInput`. Each ``k``-gram
    reaches ``sum_{j<=m} C(k, j) (|alphabet|-1)^j`` leaves: keep ``m`` at 1 or 2 and the
    alphabet small (DNA, proteins).
    """

    _param_names = ("k", "m", "alphabet")

    def __init__(self, k: int = 5, m: int = 1, alphabet: str = "acgt"):
        self.k = _check_int("k", k, 1, 64)
        self.m = _check_int("m", m, 0, min(self.k, 3))
        if not isinstance(alphabet, str) or not alphabet:
            raise ConfigError(f"alphabet must be a non-empty str of symbols, got {alphabet!r}")
        if len(set(alphabet)) != len(alphabet) or len(alphabet) > MAX_ALPHABET:
            raise ConfigError(
                f"alphabet must list at most {MAX_ALPHABET} distinct symbols, got {alphabet!r}"
            )
        self.alphabet = alphabet

    def _build(self, s: str) -> dict[str, float]:
        bad = set(s) - set(self.alphabet)
        if bad:
            raise InvalidInput(
                f"Mismatch kernel over alphabet {self.alphabet!r} got symbols "
                f"{''.join(sorted(bad))!r:.60}; declare them in alphabet= or clean the input"
            )
        k, m, alphabet = self.k, self.m, self.alphabet
        out: dict[str, float] = {}
        grams = Counter(s[i : i + k] for i in range(len(s) - k + 1))

        def walk(g: str, depth: int, prefix: str, used: int, count: float) -> None:
            # descend the trie along g, spending at most m substitutions
            if depth == k:
                out[prefix] = out.get(prefix, 0.0) + count
                return
            c = g[depth]
            walk(g, depth + 1, prefix + c, used, count)
            if used < m:
                for a in alphabet:
                    if a != c:
                        walk(g, depth + 1, prefix + a, used + 1, count)

        for g, count in grams.items():
            walk(g, 0, "", 0, float(count))
        return out


class RestrictedGapWeighted(_TrieKernel):
    """Restricted gap-weighted subsequences kernel (Shawe-Taylor & Cristianini, Def. 11.53,
    Alg. 11.54): subsequences of length ``p`` with at most ``m`` gaps (span <= p + m),
    weighted by ``lam ** gaps``. Approximates :class:`GapWeightedSubsequences` when
    ``lam`` is small, at O(|s| (p + m)^m) per string.
    """

    _param_names = ("p", "m", "lam")

    def __init__(self, p: int = 3, m: int = 1, lam: float = 0.5):
        self.p = _check_int("p", p, 1, 64)
        self.m = _check_int("m", m, 0, 8)
        self.lam = _check_lam(lam)

    def _build(self, s: str) -> dict[str, float]:
        """Every start ``i`` and gap pattern: the leaf is ``s`` read along the pattern's runs.

        The trie walk of Alg. 11.54 visits the same leaves; the patterns (which positions
        after ``i`` are taken) are enumerated once per ``(p, m)``, so a string costs one
        slice-and-join per leaf instead of one call per trie node.
        """
        n = len(s)
        out: dict[str, float] = {}
        get = out.get
        for runs, last, weight in _gap_patterns(self.p, self.m, self.lam):
            if len(runs) == 1:  # contiguous: the p-grams themselves
                for i in range(n - last):
                    u = s[i : i + last + 1]
                    out[u] = get(u, 0.0) + weight
                continue
            if len(runs) == 2:  # one gap (every pattern when m = 1)
                (a, b), (c, d) = runs
                for i in range(n - last):
                    u = s[i + a : i + b] + s[i + c : i + d]
                    out[u] = get(u, 0.0) + weight
                continue
            for i in range(n - last):
                u = "".join([s[i + a : i + b] for a, b in runs])
                out[u] = get(u, 0.0) + weight
        return out


@lru_cache(maxsize=64)
def _gap_patterns(
    p: int, m: int, lam: float
) -> tuple[tuple[tuple[tuple[int, int], ...], int, float], ...]:
    """``(runs, last offset, lam ** gaps)`` for every choice of ``p`` positions ``0 = o_1 <
    ... < o_p <= p - 1 + m``: the index vectors of Def. 11.53 starting at 0, as slices."""
    out = []
    for rest in itertools.combinations(range(1, p + m), p - 1):
        offsets = (0, *rest)
        gaps = offsets[-1] - (p - 1)
        runs: list[list[int]] = [[0, 1]]
        for o in offsets[1:]:
            if o == runs[-1][1]:
                runs[-1][1] = o + 1
            else:
                runs.append([o, o + 1])
        out.append((tuple((a, b) for a, b in runs), offsets[-1], lam**gaps))
    return tuple(out)


_BUILDERS.update(Spectrum=Spectrum, Mismatch=Mismatch, RestrictedGapWeighted=RestrictedGapWeighted)
