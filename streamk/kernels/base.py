"""Kernel objects: small immutable values that evaluate whole Gram blocks with NumPy.

Every kernel has ``gram(A, B)`` (a ``len(A) x len(B)`` block), ``diag(A)`` (``k(a, a)``
without forming the block) and ``to_spec()`` (plain data for snapshots; rebuilt by
:func:`kernel_from_spec`). Kernels combine with ``+`` (:class:`Sum`), ``*`` (:class:`Product`)
and scalar ``*`` (:class:`Scaled`), which are kernels again by the closure properties of
Shawe-Taylor & Cristianini, Prop. 3.22.

``RBF(gamma="auto")`` and ``Laplacian(gamma="auto")`` resolve their width from the data a
learner sees first (see :class:`ScaleEstimator`) and are then frozen; the resolved kernel,
with its number, is what a snapshot records.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.spatial.distance import cdist

from ..accel import fsum_rows, rbf_from_dots, scaled_exp
from ..errors import ConfigError, InvalidInput

if TYPE_CHECKING:  # annotations only: the estimator imports this module
    from .scale import ScaleEstimator

__all__ = [
    "Kernel",
    "Linear",
    "Polynomial",
    "RBF",
    "Laplacian",
    "Constant",
    "Sum",
    "Product",
    "Scaled",
    "Normalized",
    "Cosine",
    "VALUE_RANGE",
    "sqnorm_window",
]

AUTO = "auto"
#: the sizes of ``k(x, x)`` the learners compute with: past ``1e150`` a kernel row times the
#: coefficients, summed over the support set, can overflow (and a stored ``k(x, x)`` of
#: infinity can never be written to a snapshot); below ``1e-150`` (but not 0) a step divided
#: by ``k(x, x)`` (the adatron's, the SVR's) can overflow
VALUE_RANGE = (1e-150, 1e150)


def _as_2d(A: Any) -> np.ndarray:
    A = np.asarray(A, dtype=np.float64)
    if A.ndim == 1:
        A = A[None, :]
    if A.ndim != 2:
        raise ValueError(f"expected a 2-D block of rows, got an array of shape {A.shape}")
    return A


def _pad_to(A: np.ndarray, width: int) -> np.ndarray:
    if A.shape[1] == width:
        return A
    out = np.zeros((A.shape[0], width))
    out[:, : A.shape[1]] = A
    return out


def _align(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Give two blocks the same width; absent trailing features read as 0."""
    w = max(A.shape[1], B.shape[1])
    return _pad_to(A, w), _pad_to(B, w)


def _check_positive(name: str, value: Any, allow_auto: bool = False) -> None:
    if allow_auto and value == AUTO:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        also = ' or "auto"' if allow_auto else ""
        raise ConfigError(f"{name} must be a finite number{also}, got {value!r}")
    if value <= 0:
        raise ConfigError(f"{name} must be > 0, got {value!r}")


def check_utf8(s: str, what: str) -> str:
    """``s`` when UTF-8 can encode it, else :class:`InvalidInput`.

    A lone surrogate (``"\\ud800"``, what ``surrogateescape`` decoding leaves) is a ``str``
    but not text: a model holding one could never be written to a snapshot again.
    """
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"{what} needs valid UTF-8 text: {exc}") from None
    return s


def _as_objects(A: Any) -> list[Any]:
    """A block of strings or trees as a list (kernels on objects take lists, not arrays)."""
    if isinstance(A, (list, tuple)):
        return list(A)
    raise InvalidInput(
        f"a kernel on strings or trees takes a list of them, got {type(A).__name__}; "
        "for one pair call kernel(a, b)"
    )


def _check_same_domain(name: str, kernels: tuple[Kernel, ...]) -> None:
    """Refuse combining kernels no single input can satisfy: kernels on strings/trees with
    kernels on vectors (``Constant`` works with both), and a string kernel with a tree
    kernel (an event is a ``str`` or a tree, never both, so every event would be refused)."""
    objects = [k for k in kernels if k.takes_objects]
    vectors = [k for k in kernels if not k.takes_objects and not isinstance(k, Constant)]
    if objects and vectors:
        raise ConfigError(
            f"{name} cannot combine kernels on strings/trees {objects!r} with kernels on "
            f"vectors {vectors!r}"
        )
    strings = [k for k in objects if k.object_kind == "strings"]
    trees = [k for k in objects if k.object_kind == "trees"]
    if strings and trees:
        raise ConfigError(
            f"{name} cannot combine string kernels {strings!r} with tree kernels {trees!r}: "
            "an event is either a str or a tree, so no input could be evaluated by both; "
            "learn strings and trees in two models"
        )


class Kernel:
    """Base class. Subclasses implement ``_gram`` and ``diag`` and list their parameters."""

    _param_names: tuple[str, ...] = ()
    #: True for kernels on strings or trees (see :mod:`streamk.kernels.strings`): ``gram`` then
    #: takes lists of objects instead of blocks of float rows.
    takes_objects: bool = False
    #: What a kernel on objects takes: ``"strings"`` or ``"trees"`` (``None`` for vectors,
    #: ``Constant``, and combinations of those); combinations report their parts'.
    object_kind: str | None = None

    @property
    def max_abs(self) -> float | None:
        """An upper bound on ``|k(a, b)|`` when one holds for all inputs, else ``None``."""
        return None

    def size_at(self, sq: float) -> float | None:
        """``k(x, x)`` as a function of ``sq = ||x||²`` (for :func:`sqnorm_window`): the size
        of the values computing the kernel on ``x`` involves; ``None`` where it is not a
        function of the norm alone (strings, trees, a user's kernel)."""
        return None

    def diag_one(self, row: np.ndarray) -> float:
        """``k(row, row)`` for one row (hot path of support-set updates)."""
        if self.takes_objects:
            return float(self.diag([row])[0])
        return float(self.diag(row[None, :])[0])

    # -- evaluation ---------------------------------------------------------------------------
    def gram(
        self,
        A: Any,
        B: Any,
        *,
        a_sqnorm: np.ndarray | None = None,
        b_sqnorm: np.ndarray | None = None,
    ) -> np.ndarray:
        """Kernel block ``K[i, j] = k(A[i], B[j])``.

        Blocks of different widths are aligned by reading absent trailing features as 0.
        ``a_sqnorm``/``b_sqnorm`` are optional cached squared Euclidean norms of the rows,
        used by distance-based kernels to skip recomputing them.
        """
        if self.takes_objects:
            return self._gram(_as_objects(A), _as_objects(B), None, None)
        A, B = _align(_as_2d(A), _as_2d(B))
        if not self.is_resolved:
            raise ConfigError(
                f"{self!r} has a data-dependent parameter that is not resolved yet; "
                "call kernel.resolve(ScaleEstimator) or let a learner resolve it from data"
            )
        return self._gram(A, B, a_sqnorm, b_sqnorm)

    def _gram(self, A, B, a_sq, b_sq) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def diag(self, A: Any) -> np.ndarray:
        """``k(a, a)`` for every row of ``A``."""
        raise NotImplementedError

    def __call__(self, a: Any, b: Any) -> float:
        """``k(a, b)`` for two single rows (convenience, not a fast path)."""
        if self.takes_objects:
            return float(self.gram([a], [b])[0, 0])
        return float(self.gram(a, b)[0, 0])

    # -- data-dependent parameters --------------------------------------------------------------
    @property
    def is_resolved(self) -> bool:
        """False while a parameter is still ``"auto"``."""
        return all(k.is_resolved for k in self._children())

    def resolve(self, scale: ScaleEstimator) -> Kernel:
        """A copy with every ``"auto"`` parameter set from the data summarised by ``scale``."""
        return self

    def _children(self) -> tuple[Kernel, ...]:
        return ()

    # -- plain data -----------------------------------------------------------------------------
    def to_spec(self) -> dict[str, Any]:
        """Plain data (names, numbers, nested specs) that :func:`kernel_from_spec` rebuilds."""
        spec: dict[str, Any] = {"name": type(self).__name__}
        for name in self._param_names:
            spec[name] = getattr(self, name)
        return spec

    # -- value semantics --------------------------------------------------------------------------
    def __repr__(self) -> str:
        args = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._param_names)
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.to_spec() == other.to_spec()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(repr(self))

    def __add__(self, other: Kernel) -> Kernel:
        return Sum(self, other)

    def __mul__(self, other: Kernel | float) -> Kernel:
        if isinstance(other, Kernel):
            return Product(self, other)
        return Scaled(self, float(other))

    __rmul__ = __mul__


class Linear(Kernel):
    """``k(a, b) = <a, b>`` — the algorithm run in input space."""

    def _gram(self, A, B, a_sq, b_sq):
        return A @ B.T

    def diag(self, A):
        A = _as_2d(A)
        return np.einsum("ij,ij->i", A, A)

    def size_at(self, sq):
        return sq


class Polynomial(Kernel):
    """``k(a, b) = (scale * <a, b> + offset) ** degree`` (Shawe-Taylor & Cristianini, Def. 9.1)."""

    _param_names = ("degree", "scale", "offset")

    def __init__(self, degree: int = 3, scale: float = 1.0, offset: float = 1.0):
        if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
            raise ConfigError(f"degree must be an integer >= 1, got {degree!r}")
        _check_positive("scale", scale)
        if not (isinstance(offset, (int, float)) and math.isfinite(offset) and offset >= 0):
            raise ConfigError(f"offset must be a finite number >= 0, got {offset!r}")
        self.degree = int(degree)
        self.scale = float(scale)
        self.offset = float(offset)

    def _gram(self, A, B, a_sq, b_sq):
        return (self.scale * (A @ B.T) + self.offset) ** self.degree

    def diag(self, A):
        A = _as_2d(A)
        return (self.scale * np.einsum("ij,ij->i", A, A) + self.offset) ** self.degree

    def size_at(self, sq):
        try:
            return (self.scale * sq + self.offset) ** self.degree
        except OverflowError:
            return math.inf


class _Stationary(Kernel):
    """Shared parts of the distance-based kernels with a ``gamma`` that may be ``"auto"``."""

    _param_names = ("gamma",)

    def __init__(self, gamma: float | str = AUTO):
        _check_positive("gamma", gamma, allow_auto=True)
        self.gamma = gamma if gamma == AUTO else float(gamma)

    @property
    def is_resolved(self) -> bool:
        return self.gamma != AUTO

    def resolve(self, scale: ScaleEstimator) -> Kernel:
        if self.gamma != AUTO:
            return self
        return self._with_gamma(self._auto_gamma(scale))

    def resolve_each(self, counts: list[int], m2: np.ndarray) -> list[Kernel]:
        """:meth:`resolve` for estimators of ``counts[r]`` rows whose sums of squared
        deviations are ``m2[r]`` (the width depends on nothing else), with one NumPy
        division for all: the same kernels, to the bit (the gamma="auto" warm-up resolves
        some thirty per fresh model)."""
        if self.gamma != AUTO:
            return [self] * len(counts)
        n = np.asarray(counts, dtype=np.float64)
        variances = m2 / n[:, None]  # ScaleEstimator.variance, row by row
        variances[n < 2] = 0.0
        return [self._with_gamma(gamma) for gamma in self._auto_gammas(variances)]

    def _with_gamma(self, gamma: float) -> Kernel:
        """This kernel with ``gamma`` set: the constructor, or for a finite positive float
        and a class whose constructor sets nothing else, what it makes without its checks."""
        if type(self) in _PLAIN_STATIONARY and type(gamma) is float and 0.0 < gamma < math.inf:
            kernel = object.__new__(type(self))
            kernel.gamma = gamma
            return kernel
        return type(self)(gamma=gamma)

    def _auto_gamma(self, scale: ScaleEstimator) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _auto_gammas(self, variances: np.ndarray) -> list[float]:  # pragma: no cover
        """:meth:`_auto_gamma` of each row of per-feature variances."""
        raise NotImplementedError

    def diag(self, A):
        return np.ones(_as_2d(A).shape[0])

    def diag_one(self, row):
        return 1.0

    def size_at(self, sq):
        return 1.0

    @property
    def max_abs(self):
        return 1.0


class RBF(_Stationary):
    """Gaussian kernel ``k(a, b) = exp(-gamma * ||a - b||^2)`` (Def. 9.8; gamma = 1 / (2 sigma^2)).

    ``gamma="auto"`` resolves to ``2 / sum_j Var(x_j)`` over the rows seen so far (see
    :class:`ScaleEstimator`): two typical points, at squared distance ``2 sum_j Var(x_j)``,
    then have ``k = exp(-4)``. For standardised data that is twice scikit-learn's
    ``gamma="scale"``. Measured with the kernel perceptron (budget 500, prequential):
    against ``1 / sum_j Var`` it gains on Bananas (0.834 -> 0.858) and ImageSegments
    (0.758 -> 0.809) and gives up < 0.005 on Phishing and Hyperplane; the median-distance
    heuristic is smoother still and was the least accurate (design.md §3).
    """

    def _gram(self, A, B, a_sq, b_sq):
        if a_sq is None or len(a_sq) != A.shape[0]:
            a_sq = np.einsum("ij,ij->i", A, A)
        if b_sq is None or len(b_sq) != B.shape[0]:
            b_sq = np.einsum("ij,ij->i", B, B)
        # ||a||^2 + ||b||^2 - 2ab loses about eps * (||a||^2 + ||b||^2) to cancellation; on
        # features of large magnitude (e.g. dates as day numbers) that can move k by more
        # than 1e-10. Then compute the distances directly (exact, slower).
        if not self.expansion_exact(a_sq.max(initial=0.0) + b_sq.max(initial=0.0)):
            return scaled_exp(cdist(A, B, "sqeuclidean"), -self.gamma)
        return rbf_from_dots(A @ B.T, a_sq, b_sq, self.gamma)

    def expansion_exact(self, sq_bound: float) -> bool:
        """Whether ``||a||^2 + ||b||^2 - 2ab`` is exact to 1e-10 in ``k`` for rows whose
        squared norms add up to at most ``sq_bound`` (the rule every RBF path applies;
        ``streamk/_core.pyx``'s ``rbf_row`` repeats it in C)."""
        return not sq_bound * 1e-15 * self.gamma > 1e-10

    def _auto_gamma(self, scale: ScaleEstimator) -> float:
        # exactly rounded: the same for any feature order (and for floats or NumPy scalars)
        total_var = math.fsum(scale.variance.tolist())
        return 2.0 / total_var if total_var > 0 else 1.0

    def _auto_gammas(self, variances: np.ndarray) -> list[float]:
        totals = fsum_rows(variances)  # each math.fsum's (a compiled loop for all)
        return [2.0 / total if total > 0 else 1.0 for total in totals]


class Laplacian(_Stationary):
    """Laplacian kernel ``k(a, b) = exp(-gamma * ||a - b||_1)``.

    ``gamma="auto"`` resolves to ``2 / E||x - x'||_1`` estimated as ``sum_j 2 sigma_j / sqrt(pi)``
    (exact for Gaussian features), so typical pairs have ``k = exp(-2)`` as with :class:`RBF`.
    """

    def _gram(self, A, B, a_sq, b_sq):
        return scaled_exp(cdist(A, B, "cityblock"), -self.gamma)

    def _auto_gamma(self, scale: ScaleEstimator) -> float:
        mean_l1 = math.fsum((2.0 * np.sqrt(scale.variance) / math.sqrt(math.pi)).tolist())
        return 2.0 / mean_l1 if mean_l1 > 0 else 1.0

    def _auto_gammas(self, variances: np.ndarray) -> list[float]:
        totals = fsum_rows(2.0 * np.sqrt(variances) / math.sqrt(math.pi))
        return [2.0 / mean_l1 if mean_l1 > 0 else 1.0 for mean_l1 in totals]


#: The stationary kernels whose constructor sets ``gamma`` alone (a subclass may do more).
_PLAIN_STATIONARY = (RBF, Laplacian)


class Constant(Kernel):
    """``k(a, b) = c``: a constant feature. ``Sum(k, Constant(c))`` gives the book's
    bias-free learners an offset (Shawe-Taylor & Cristianini, §3.4.2)."""

    _param_names = ("c",)

    def __init__(self, c: float = 1.0):
        _check_positive("c", c)
        self.c = float(c)

    def _gram(self, A, B, a_sq, b_sq):
        return np.full((len(A), len(B)), self.c)  # len: rows or objects (strings, trees)

    def diag(self, A):
        return np.full(len(A) if isinstance(A, list) else _as_2d(A).shape[0], self.c)

    def size_at(self, sq):
        return self.c

    @property
    def max_abs(self):
        return self.c


class _Combinator(Kernel):
    """A kernel built from other kernels."""

    def __init__(self, *kernels: Kernel):
        kernels = tuple(kernels)
        if len(kernels) < 2 or not all(isinstance(k, Kernel) for k in kernels):
            raise ConfigError(
                f"{type(self).__name__} needs two or more Kernel objects, got {kernels!r}"
            )
        _check_same_domain(type(self).__name__, kernels)
        self.kernels = kernels

    @property
    def takes_objects(self) -> bool:
        return any(k.takes_objects for k in self.kernels)

    @property
    def object_kind(self) -> str | None:
        return next((k.object_kind for k in self.kernels if k.object_kind), None)

    def _children(self):
        return self.kernels

    def resolve(self, scale):
        return type(self)(*(k.resolve(scale) for k in self.kernels))

    def to_spec(self):
        return {"name": type(self).__name__, "kernels": [k.to_spec() for k in self.kernels]}

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(repr(k) for k in self.kernels)})"


class Sum(_Combinator):
    """``k(a, b) = sum_i k_i(a, b)`` (Prop. 3.22 (i))."""

    def _gram(self, A, B, a_sq, b_sq):
        out = self.kernels[0]._gram(A, B, a_sq, b_sq)
        for k in self.kernels[1:]:
            out = out + k._gram(A, B, a_sq, b_sq)
        return out

    def diag(self, A):
        return np.sum([k.diag(A) for k in self.kernels], axis=0)

    def size_at(self, sq):
        sizes = [k.size_at(sq) for k in self.kernels]
        return None if None in sizes else math.fsum(sizes)

    @property
    def max_abs(self):
        bounds = [k.max_abs for k in self.kernels]
        return None if None in bounds else float(sum(bounds))


class Product(_Combinator):
    """``k(a, b) = prod_i k_i(a, b)`` (Schur product, Prop. 3.22 (iii))."""

    def _gram(self, A, B, a_sq, b_sq):
        out = self.kernels[0]._gram(A, B, a_sq, b_sq)
        for k in self.kernels[1:]:
            out = out * k._gram(A, B, a_sq, b_sq)
        return out

    def diag(self, A):
        return np.prod([k.diag(A) for k in self.kernels], axis=0)

    def size_at(self, sq):
        sizes = [k.size_at(sq) for k in self.kernels]
        if None in sizes:
            return None
        if math.inf in sizes:  # so that 0 * inf reads as too large, not NaN
            return math.inf
        return math.prod(sizes)

    @property
    def max_abs(self):
        bounds = [k.max_abs for k in self.kernels]
        return None if None in bounds else float(np.prod(bounds))


class Scaled(Kernel):
    """``k(a, b) = c * k0(a, b)`` with ``c > 0`` (Prop. 3.22 (ii))."""

    def __init__(self, kernel: Kernel, c: float):
        if not isinstance(kernel, Kernel):
            raise ConfigError(f"Scaled needs a Kernel, got {kernel!r}")
        _check_positive("c", c)
        self.kernel = kernel
        self.c = float(c)

    def _children(self):
        return (self.kernel,)

    @property
    def takes_objects(self) -> bool:
        return self.kernel.takes_objects

    @property
    def object_kind(self) -> str | None:
        return self.kernel.object_kind

    def resolve(self, scale):
        return Scaled(self.kernel.resolve(scale), self.c)

    def _gram(self, A, B, a_sq, b_sq):
        return self.c * self.kernel._gram(A, B, a_sq, b_sq)

    def diag(self, A):
        return self.c * self.kernel.diag(A)

    def size_at(self, sq):
        inner = self.kernel.size_at(sq)
        return None if inner is None else self.c * inner

    @property
    def max_abs(self):
        inner = self.kernel.max_abs
        return None if inner is None else self.c * inner

    def to_spec(self):
        return {"name": "Scaled", "kernel": self.kernel.to_spec(), "c": self.c}

    def __repr__(self):
        return f"Scaled({self.kernel!r}, c={self.c!r})"


class Normalized(Kernel):
    """Cosine normalisation ``k(a, b) / sqrt(k(a, a) k(b, b))`` (Alg. 5.1); 0 where a norm is 0."""

    def __init__(self, kernel: Kernel):
        if not isinstance(kernel, Kernel):
            raise ConfigError(f"Normalized needs a Kernel, got {kernel!r}")
        self.kernel = kernel

    def _children(self):
        return (self.kernel,)

    @property
    def takes_objects(self) -> bool:
        return self.kernel.takes_objects

    @property
    def object_kind(self) -> str | None:
        return self.kernel.object_kind

    def resolve(self, scale):
        return Normalized(self.kernel.resolve(scale))

    def _gram(self, A, B, a_sq, b_sq):
        K = self.kernel._gram(A, B, a_sq, b_sq)
        da = self.kernel.diag(A)
        db = self.kernel.diag(B)
        with np.errstate(divide="ignore", invalid="ignore"):
            ia = np.where(da > 0, 1.0 / np.sqrt(np.where(da > 0, da, 1.0)), 0.0)
            ib = np.where(db > 0, 1.0 / np.sqrt(np.where(db > 0, db, 1.0)), 0.0)
        return K * ia[:, None] * ib[None, :]

    def diag(self, A):
        return (self.kernel.diag(A) > 0).astype(np.float64)

    def size_at(self, sq):  # its own k(x, x) is 1; dividing by the inner one is the risk
        return self.kernel.size_at(sq)

    @property
    def max_abs(self):
        return 1.0  # Cauchy-Schwarz

    def to_spec(self):
        return {"name": "Normalized", "kernel": self.kernel.to_spec()}

    def __repr__(self):
        return f"Normalized({self.kernel!r})"


def sqnorm_window(kernel: Kernel) -> tuple[float, float]:
    """``(lo, hi)``: the squared norms ``||x||²`` of the rows whose ``k(x, x)`` lies in
    :data:`VALUE_RANGE` (``lo <= ||x||² <= hi``; ``x = 0`` is always taken).

    A learner refuses a row outside it instead of storing a vector whose kernel values
    overflow (a model no snapshot could then hold, and an engine that stops at every
    checkpoint). Found by bisection on :meth:`Kernel.size_at`, which is non-decreasing in
    ``||x||²`` for every shipped kernel; ``(0, inf)`` for kernels whose ``k(x, x)`` is bounded
    (RBF, Laplacian) or not a function of the norm (strings, trees).
    """
    size = kernel.size_at
    low, high = VALUE_RANGE
    biggest = sys.float_info.max  # a Python float: its overflow raises, NumPy's warns
    if size(0.0) is None:
        return 0.0, math.inf
    lo = 0.0 if size(0.0) >= low else _edge(lambda s: size(s) >= low, true_above=True)
    hi = math.inf if size(biggest) <= high else _edge(lambda s: size(s) <= high, true_above=False)
    return lo, hi


def _edge(holds: Any, true_above: bool) -> float:
    """The ``2**t`` (``t`` from -1074 to 1023, to 1e-9 in ``t``) where the monotone ``holds``
    turns: the least where it holds if it holds above the edge, else the greatest."""
    a, b = -1074.0, 1023.0
    while b - a > 1e-9:
        t = (a + b) / 2
        if holds(2.0**t) == true_above:
            b = t
        else:
            a = t
    return 2.0 ** (b if true_above else a)


def Cosine() -> Kernel:
    """Cosine similarity: ``Normalized(Linear())``."""
    return Normalized(Linear())
