"""Decoding limits for snapshots (what a reader will allocate), and the corruption error."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError, SnapshotError

__all__ = ["Limits", "DEFAULT_LIMITS", "CorruptSnapshot", "SnapshotOverLimit", "is_intact"]

MiB = 1 << 20


class CorruptSnapshot(SnapshotError):
    """The bytes are not a valid snapshot: size, envelope, checksum, body or schema.

    A subclass of :class:`streamk.errors.SnapshotError`, so callers may catch either.
    The file store skips snapshots raising this and falls back to an older one;
    other ``SnapshotError`` (unknown class, learner rejecting its state) propagate,
    because an older file would fail the same way.
    """


class SnapshotOverLimit(CorruptSnapshot):
    """A well-formed snapshot declares more than the limits allow rebuilding.

    Support size, feature or output count, or the bytes ``from_state`` would
    allocate (see :mod:`streamk.snapshot.implied`) is over its limit. Readers that
    skip corrupt snapshots (the Kafka reader) skip it too; the file store does
    **not** set it aside as damaged, since it may be a trusted model larger than
    the limits: it stops with this error, naming the limit to raise.
    """


def is_intact(exc: SnapshotError) -> bool:
    """Whether a snapshot that failed to load with ``exc`` is intact, not damaged: over this
    reader's limits, from a newer format version, of a class this process does not allow.
    Such a file is never set aside as damaged, and ``streamk snapshot verify`` says so: a
    newer streamk (or larger limits) loads it, and resetting it would lose the model."""
    return not isinstance(exc, CorruptSnapshot) or isinstance(exc, SnapshotOverLimit)


@dataclass(frozen=True)
class Limits:
    """Bounds a snapshot reader enforces before it allocates anything.

    Every limit is checked against the bytes actually present, so a hostile
    snapshot can neither claim a huge size nor make the reader allocate much
    more than the bytes it was handed.

    Parameters
    ----------
    max_bytes
        Largest accepted snapshot, in bytes (whole payload). Default 256 MiB.
    max_depth
        Deepest nesting of maps and lists inside the body (the body map itself
        is depth 1). Default 64.
    max_objects
        Most msgpack objects (scalars, strings, maps, lists; a packed array
        counts as a handful) in the body. Bounds the memory of the decoded
        Python tree, since even an empty map costs ~64 bytes. Default 2**20.
    max_str_len
        Longest UTF-8 string, in bytes. Default 1 MiB.
    max_container_len
        Most entries in one list or one map. Default 2**20.
    max_array_elements
        Most elements in one NumPy array (product of its shape). Default 2**28.
    max_ndim
        Most dimensions of one NumPy array. Default 32.
    max_support
        Most support vectors (rows of a support set, entries of a policy's
        inverse Gram) a snapshot may declare. Default 2**20.
    max_features
        Most features (columns of the support rows, feature names, scaler
        statistics) a snapshot may declare. Default 2**20.
    max_outputs
        Most coefficient columns, class labels or ranks. Default 2**16.
    max_text_len
        Longest support string (or str tree label) of a string/tree model, in
        characters. Default 10,000, the string kernels' own limit.
    max_tree_depth
        Deepest support tree (root at depth 1). Default 64, the tree kernels' limit.
    max_tree_nodes
        Most nodes in one support tree. Default 5,000, the tree kernels' limit.
    max_implied_bytes
        Most bytes that rebuilding the learner (``from_state``) may allocate,
        estimated from the declared shapes before anything is allocated: the
        support set's growable buffers, its Gram matrix ``n x n`` when
        ``keep_gram`` (counted twice: the kept matrix and the one computed to
        fill it), a policy's inverse Gram. Default ``2 * max_bytes`` (512 MiB),
        so a support set with ``keep_gram`` may hold about 5,700 rows; raise it
        for larger budgets.

    Every array dimension, even of an empty array, must also be at most
    ``max(max_support, max_features)``, and the product of its non-zero
    dimensions at most ``max_array_elements``: an empty array cannot declare a
    shape a learner would then allocate.
    """

    max_bytes: int = 256 * MiB
    max_depth: int = 64
    max_objects: int = 1 << 20
    max_str_len: int = 1 * MiB
    max_container_len: int = 1 << 20
    max_array_elements: int = 1 << 28
    max_ndim: int = 32
    max_support: int = 1 << 20
    max_features: int = 1 << 20
    max_outputs: int = 1 << 16
    max_text_len: int = 10_000
    max_tree_depth: int = 64
    max_tree_nodes: int = 5_000
    max_implied_bytes: int = None  # type: ignore[assignment]  # set in __post_init__

    def __post_init__(self) -> None:
        if self.max_implied_bytes is None and isinstance(self.max_bytes, int):
            object.__setattr__(self, "max_implied_bytes", 2 * self.max_bytes)
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"Limits.{name} must be a positive int, got {value!r}")

    @property
    def max_dim(self) -> int:
        """Largest single array dimension a snapshot may declare."""
        return max(self.max_support, self.max_features)


DEFAULT_LIMITS = Limits()
