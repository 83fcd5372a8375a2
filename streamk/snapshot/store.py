"""A directory of snapshots per model: atomic writes, a LATEST pointer, retention, fallback."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, SnapshotError
from .format import Snapshot, dumps, loads, verify_bytes
from .limits import DEFAULT_LIMITS, CorruptSnapshot, Limits

__all__ = ["SnapshotStore", "SnapshotInfo", "read_file", "LATEST", "SUFFIX"]

log = logging.getLogger("streamk.snapshot")

LATEST = "LATEST"
SUFFIX = ".snapshot"
_FILE = re.compile(r"(\d{12,19})\.snapshot")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class SnapshotInfo:
    """One stored snapshot file: its seq, path, size in bytes and mtime (Unix s)."""

    seq: int
    path: Path
    size: int
    mtime: float


def read_file(path: str | os.PathLike[str], limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Read a snapshot file, refusing one larger than ``limits.max_bytes`` before reading it.

    Raises
    ------
    CorruptSnapshot
        If the file is too large. ``OSError`` propagates (missing, unreadable).
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limits.max_bytes:
            raise CorruptSnapshot(f"{path}: {size} bytes exceeds max_bytes={limits.max_bytes}")
        data = f.read(limits.max_bytes + 1)
    if len(data) > limits.max_bytes:
        raise CorruptSnapshot(f"{path}: file grew past max_bytes={limits.max_bytes} while read")
    return data


class SnapshotStore:
    """Snapshots under ``<directory>/<name>/<seq:012d>.snapshot``, newest named by ``LATEST``.

    Writes are atomic (temp file in the same directory, fsync, ``os.replace``,
    fsync of the directory), so a reader sees either the old set of files or
    the new one, never a partial file. One writer per model name at a time is
    expected; saves are also serialised with an advisory lock file.

    Parameters
    ----------
    directory
        Root directory; created on first save.
    keep
        How many snapshots to retain per model (the newest, by seq). At least 1.
    limits
        Decoding limits used by ``latest``, ``load`` and ``verify``.
    """

    def __init__(
        self, directory: str | os.PathLike[str], keep: int = 5, limits: Limits = DEFAULT_LIMITS
    ) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigError(f"SnapshotStore keep must be an int >= 1, got {keep!r}")
        self.directory = Path(directory)
        self.keep = keep
        self.limits = limits

    # -- writing -----------------------------------------------------------------

    def save(
        self,
        data_or_model: Any,
        name: str,
        offsets: dict[str, dict[int, int]] | None = None,
        seq: int | None = None,
        metrics: dict[str, float] | None = None,
        **meta: Any,
    ) -> Path:
        """Write a snapshot atomically, move ``LATEST`` to it, and apply retention.

        Parameters
        ----------
        data_or_model
            Snapshot bytes from :func:`dumps` (verified before writing; the other
            arguments must then be left out, except a matching `seq`) or a learner.
        name
            Model name: letters, digits, ``.``, ``_``, ``-``; at most 128 chars.
        seq
            Defaults to one past the newest stored seq (0 for a new model). Must not
            be below the newest stored seq; an equal seq replaces that file.

        Returns
        -------
        Path
            The snapshot file written.
        """
        model_dir = self._model_dir(name)
        model_dir.mkdir(parents=True, exist_ok=True)
        with self._lock(model_dir):
            stored = self.list(name)
            newest = stored[-1].seq if stored else -1
            if isinstance(data_or_model, bytes | bytearray | memoryview):
                if offsets is not None or metrics is not None or meta:
                    raise SnapshotError("save(bytes, ...) takes no offsets, metrics or meta")
                data = bytes(data_or_model)
                snap = loads(data, self.limits, build=False)
                if seq is not None and seq != snap.seq:
                    raise SnapshotError(f"seq={seq} given, but the snapshot's seq is {snap.seq}")
                seq = snap.seq
            else:
                seq = newest + 1 if seq is None else seq
                data = dumps(data_or_model, offsets, seq, metrics, limits=self.limits, **meta)
            if seq < newest:
                raise SnapshotError(
                    f"seq {seq} is below the newest stored seq {newest} for {name!r}; "
                    "snapshots in a store only move forward"
                )
            for stray in model_dir.glob(".*.tmp"):  # left by a crashed save; we hold the lock
                stray.unlink(missing_ok=True)
            path = model_dir / f"{seq:012d}{SUFFIX}"
            _atomic_write(path, data)
            _atomic_write(model_dir / LATEST, f"{path.name}\n".encode())
            for old in self.list(name)[: -self.keep]:
                if old.path != path:
                    old.path.unlink(missing_ok=True)
        return path

    # -- reading -----------------------------------------------------------------

    def names(self) -> list[str]:
        """Model names with a directory in the store."""
        if not self.directory.is_dir():
            return []
        return sorted(
            p.name for p in self.directory.iterdir() if p.is_dir() and _NAME.fullmatch(p.name)
        )

    def list(self, name: str) -> list[SnapshotInfo]:
        """Stored snapshots of `name`, oldest first (temp files and others ignored)."""
        return list_dir(self._model_dir(name))

    def latest(self, name: str, *, build: bool = True) -> Snapshot | None:
        """Load the newest valid snapshot of `name`, or None if there is none.

        A corrupt file (bad checksum, truncated, malformed) is skipped with a
        warning on the ``streamk.snapshot`` logger naming the file and the reason,
        and the next older one is tried. Errors that an older file would repeat
        (class not importable, ``from_state`` rejecting the state) propagate.
        """
        skipped: set[Path] = set()
        for _ in range(3):  # retention may delete files between listing and reading
            vanished = False
            for info in reversed(self.list(name)):
                if info.path in skipped:
                    continue
                try:
                    return self.load(info.path, build=build)
                except FileNotFoundError:
                    vanished = True
                    break
                except CorruptSnapshot as exc:
                    log.warning("skipping corrupt snapshot %s: %s", info.path, exc)
                    skipped.add(info.path)
            if not vanished:
                break
        if skipped:
            log.error("no valid snapshot for %r: all %d files are corrupt", name, len(skipped))
        return None

    def load(self, path: str | os.PathLike[str], *, build: bool = True) -> Snapshot:
        """Load one snapshot file (see :func:`loads`); ``FileNotFoundError`` if it is gone."""
        try:
            data = read_file(path, self.limits)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise SnapshotError(f"{path}: cannot read: {exc}") from exc
        try:
            return loads(data, self.limits, build=build)
        except SnapshotError as exc:
            raise type(exc)(f"{path}: {exc}") from exc.__cause__

    def verify(self, path: str | os.PathLike[str]) -> tuple[bool, str]:
        """Check a file's envelope, checksum, body and schema: ``(ok, reason)``."""
        try:
            data = read_file(path, self.limits)
        except (OSError, SnapshotError) as exc:
            return False, str(exc)
        return verify_bytes(data, self.limits)

    def _model_dir(self, name: str) -> Path:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise SnapshotError(
                f"model name {name!r} must be 1-128 letters, digits, '.', '_' or '-' "
                "and start with a letter or digit"
            )
        return self.directory / name

    @contextlib.contextmanager
    def _lock(self, model_dir: Path) -> Iterator[None]:
        try:
            import fcntl
        except ImportError:  # not POSIX: rely on the single-writer rule
            yield
            return
        with open(model_dir / ".lock", "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def list_dir(model_dir: Path) -> list[SnapshotInfo]:
    """Snapshot files directly in `model_dir`, oldest seq first."""
    out = []
    try:
        entries = list(os.scandir(model_dir))
    except FileNotFoundError:
        return []
    for entry in entries:
        m = _FILE.fullmatch(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        out.append(SnapshotInfo(int(m.group(1)), Path(entry.path), st.st_size, st.st_mtime))
    out.sort(key=lambda info: info.seq)
    return out


def _atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old or the new file, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with open(fd, "wb", closefd=True) as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise SnapshotError(f"cannot write {path}: {exc}") from exc
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
