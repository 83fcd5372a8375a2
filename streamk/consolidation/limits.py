"""Load limits for consolidation state: what a snapshot's window may make a reader allocate.

The pattern of :mod:`streamk.snapshot.limits`: a frozen dataclass of positive bounds, checked
against the *declared* sizes (``window_size``, row width) before any array is allocated, so a
small hostile snapshot cannot make the reader allocate gigabytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError, SolverError

__all__ = [
    "WindowLimits",
    "DEFAULT_WINDOW_LIMITS",
    "MAX_GRAM_BYTES",
    "gram_bytes",
    "check_gram_rows",
]

MiB = 1 << 20
#: the most bytes a consolidation's dense Gram (its training rows squared, 8 bytes each) may
#: take: 16,384 rows. A solve on 29,000 rows (6.7 GB) ended in a segfault inside the BLAS,
#: which a restored window would repeat at every restart; one past this bound is not tried.
MAX_GRAM_BYTES = 2048 * MiB


@dataclass(frozen=True)
class WindowLimits:
    """Bounds on a training window rebuilt from a snapshot.

    Parameters
    ----------
    max_rows
        Largest ``window_size`` (rows the window allocates). Default 2**20.
    max_width
        Widest row (features). Default 2**20.
    max_bytes
        Most bytes the window's buffers may take once allocated:
        ``window_size * (8 * width + 16)`` (rows, labels, arrival indices). Default 512 MiB.
    """

    max_rows: int = 1 << 20
    max_width: int = 1 << 20
    max_bytes: int = 512 * MiB

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"WindowLimits.{name} must be a positive int, got {value!r}")

    def window_bytes(self, size: int, width: int) -> int:
        """Bytes a window of ``size`` rows of ``width`` features allocates."""
        return size * (8 * width + 16)


DEFAULT_WINDOW_LIMITS = WindowLimits()


def gram_bytes(rows: int) -> int:
    """Bytes of the dense float64 Gram a solve on ``rows`` training rows allocates."""
    return 8 * rows * rows


def check_gram_rows(rows: int, limit: int | None = None) -> None:
    """Refuse a solve on ``rows`` training rows whose Gram would take more than ``limit``
    bytes (default :data:`MAX_GRAM_BYTES`) with a :class:`~streamk.errors.SolverError`: the
    consolidator keeps the on-line model, logs it and counts a failed consolidation."""
    limit = MAX_GRAM_BYTES if limit is None else limit
    need = gram_bytes(rows)
    if need > limit:
        raise SolverError(
            f"its Gram of {rows:,} training rows would take {need / MiB:,.0f} MiB, above the "
            f"{limit // MiB:,} MiB a consolidation may allocate; lower consolidate_window "
            "(the rows are the window plus the support set)"
        )
