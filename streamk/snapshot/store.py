"""A directory of snapshots per model: atomic writes, a LATEST pointer, retention, healing.

A damaged file never blocks the store: ``latest`` moves it aside (``<file>.corrupt``)
and falls back to the next older snapshot; files that are not regular files are
skipped without being opened; new seqs continue above every seq ever seen. A model
whose every snapshot is damaged stops with a message naming ``streamk snapshot
reset``, which sets the files aside so the next start is a fresh model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, SnapshotError, StreamkError
from .format import Snapshot, dumps, loads, verify_bytes
from .limits import DEFAULT_LIMITS, CorruptSnapshot, Limits, SnapshotOverLimit, is_intact

__all__ = [
    "SnapshotStore",
    "SnapshotInfo",
    "read_file",
    "list_dir",
    "list_set_aside",
    "LATEST",
    "SUFFIX",
    "CORRUPT_SUFFIX",
    "QUARANTINE",
    "SET_ASIDE",
    "NO_SNAPSHOT_FILES",
]

log = logging.getLogger("streamk.snapshot")

#: :meth:`SnapshotStore.newest_readable`'s reason for a model with no snapshot file at all
NO_SNAPSHOT_FILES = "no snapshot files"

LATEST = "LATEST"
SUFFIX = ".snapshot"
#: Appended to a snapshot file that ``latest`` found damaged (kept for inspection).
CORRUPT_SUFFIX = ".corrupt"
#: Sub-directory of a model's directory where ``reset`` sets files aside.
QUARANTINE = "quarantine"
_FILE = re.compile(r"(\d{12,19})\.snapshot")
_SEEN = re.compile(r"(\d{12,19})\.snapshot(?:\.corrupt(?:-\d+)?)?")
#: A file the store set aside as damaged: ``<seq>.snapshot.corrupt[-k]`` (groups: seq, k).
SET_ASIDE = re.compile(r"(\d{12,19})\.snapshot\.corrupt(?:-(\d+))?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class SnapshotInfo:
    """One stored snapshot file: its seq, path, size in bytes and mtime (Unix s).

    ``regular`` is False for a FIFO, directory, socket, device or dangling symlink
    named like a snapshot: such an entry is never opened. ``set_aside`` is True for a
    file ``latest`` found damaged and renamed ``<file>.corrupt`` (see :func:`list_set_aside`).
    """

    seq: int
    path: Path
    size: int
    mtime: float
    regular: bool = True
    set_aside: bool = False


def read_file(path: str | os.PathLike[str], limits: Limits = DEFAULT_LIMITS) -> bytes:
    """Read a snapshot file, refusing one larger than ``limits.max_bytes`` before reading it.

    The file is opened non-blocking and must be a regular file, so a FIFO or a
    device named like a snapshot cannot hang the reader.

    Raises
    ------
    CorruptSnapshot
        If the file is too large or not a regular file. ``OSError`` propagates
        (missing, unreadable).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with open(fd, "rb", closefd=True) as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CorruptSnapshot(f"{path}: not a regular file ({_kind(st.st_mode)})")
        if st.st_size > limits.max_bytes:
            raise CorruptSnapshot(
                f"{path}: {st.st_size} bytes exceeds max_bytes={limits.max_bytes}"
            )
        data = f.read(limits.max_bytes + 1)
    if len(data) > limits.max_bytes:
        raise CorruptSnapshot(f"{path}: file grew past max_bytes={limits.max_bytes} while read")
    return data


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a dangling symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


class SnapshotStore:
    """Snapshots under ``<directory>/<name>/<seq:012d>.snapshot``, newest named by ``LATEST``.

    Writes are atomic (temp file in the same directory, fsync, ``os.replace``,
    fsync of the directory), so a reader sees either the old set of files or
    the new one, never a partial file. One writer per model name at a time is
    expected; saves are also serialised with an advisory lock file, and a save
    that meets a valid snapshot at or above its own seq (a second engine writing
    the same model) is refused with a message saying so.

    The store heals: ``latest`` moves a damaged file aside as
    ``<file>.corrupt`` and falls back to the next older one; entries that are not
    regular files are skipped without being opened; :meth:`next_seq` stays above
    every seq ever seen, so a damaged or stray file never blocks a later save.

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
        self._warned: set[Path] = set()  # entries already reported, to log each once

    # -- writing -----------------------------------------------------------------

    def save(
        self,
        data_or_model: Any,
        name: str,
        offsets: dict[str, dict[int, int]] | None = None,
        seq: int | None = None,
        metrics: dict[str, float] | None = None,
        after: int | None = None,
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
            Defaults to :meth:`next_seq`. Any seq >= ``next_seq(name)`` is accepted.
            A lower one is accepted only if every stored file at or above it is
            damaged (those are moved aside first).
        after
            The seq this writer last wrote or restored (0: none). A valid snapshot
            stored above it was written by someone else: the save is refused, as for
            one at or above `seq` (an engine saves above every stored seq, so that check
            alone never fires between two engines).

        Returns
        -------
        Path
            The snapshot file written.

        Raises
        ------
        SnapshotError
            If a valid snapshot with a seq at or above `seq`, or above `after`, is
            stored: another engine writes the same model name to this directory.
        """
        model_dir = self._model_dir(name)
        if after and not model_dir.is_dir():  # it wrote or restored a snapshot here before
            log.warning(
                "the directory of model %r (%s) was deleted while its engine ran (it last "
                "wrote or restored seq %d): made again for this snapshot of the model in "
                "memory. Deleting a model's directory starts a fresh model only while its "
                "engine is stopped (docs/operations.md, How to start over)",
                name,
                model_dir,
                after,
            )
        model_dir.mkdir(parents=True, exist_ok=True)
        with self._lock(model_dir):
            if isinstance(data_or_model, bytes | bytearray | memoryview):
                if offsets is not None or metrics is not None or meta:
                    raise SnapshotError("save(bytes, ...) takes no offsets, metrics or meta")
                data = bytes(data_or_model)
                snap = loads(data, self.limits, build=False)
                if seq is not None and seq != snap.seq:
                    raise SnapshotError(f"seq={seq} given, but the snapshot's seq is {snap.seq}")
                seq = snap.seq
            else:
                seq = self.next_seq(name) if seq is None else seq
                data = dumps(data_or_model, offsets, seq, metrics, limits=self.limits, **meta)
            self._clear_way(name, model_dir, seq, seq if after is None else after + 1)
            for stray in model_dir.glob(".*.tmp"):  # left by a crashed save; we hold the lock
                stray.unlink(missing_ok=True)
            path = model_dir / f"{seq:012d}{SUFFIX}"
            _atomic_write(path, data)
            _atomic_write(model_dir / LATEST, f"{path.name}\n".encode())
            for old in [i for i in self.list(name) if i.regular][: -self.keep]:
                if old.path != path:
                    old.path.unlink(missing_ok=True)
        return path

    def _clear_way(self, name: str, model_dir: Path, seq: int, low: int) -> None:
        """Refuse a save below a valid stored snapshot or above ``low``; move damaged files
        at or above ``seq`` aside (those between ``low`` and ``seq`` stay where they are)."""
        for info in reversed(self.list(name)):
            if info.seq < min(seq, low):
                break
            if info.seq < seq:  # between what this writer saved last and what it saves
                if info.regular and self._check(info.path) is None:
                    raise SnapshotError(self._other_writer(name, info, seq))
                continue
            if not info.regular:
                if info.seq == seq:
                    raise SnapshotError(
                        f"cannot write seq {seq} of {name!r}: {info.path} is "
                        f"{_kind(_lstat_mode(info.path))}; remove it, or save with a seq "
                        f"of at least {self.next_seq(name)} (SnapshotStore.next_seq)"
                    )
                continue
            reason = self._check(info.path)
            if reason is None:
                raise SnapshotError(self._other_writer(name, info, seq))
            self._quarantine(info.path, reason, "before saving above it")

    def _other_writer(self, name: str, info: SnapshotInfo, seq: int) -> str:
        return (
            f"another engine is writing model {name!r} to {self.directory}: it stored "
            f"seq {info.seq} ({info.path.name}), which this engine did not write, and this "
            f"engine is saving seq {seq}. Give each worker its own model_name (config key "
            "model_name, or --model-name), or run one engine per model"
        )

    def next_seq(self, name: str) -> int:
        """One above every seq ever seen for `name`: valid, damaged, stray or set aside.

        The engine saves at ``max(its seq + 1, next_seq(name))``, so a stray
        ``999999999999.snapshot`` or a file moved aside never blocks a save.
        """
        model_dir = self._model_dir(name)
        top = -1
        for directory in (model_dir, *_subdirs(model_dir / QUARANTINE)):
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            for entry in names:
                m = _SEEN.fullmatch(entry)
                if m is not None:
                    top = max(top, int(m.group(1)))
        return top + 1

    def reset(self, name: str, *, force: bool = False) -> list[Path]:
        """Set every snapshot file of `name` aside so the next start is a fresh model.

        Files (``*.snapshot``, ``*.corrupt``, stray entries named like snapshots,
        and ``LATEST``) move to ``<dir>/<name>/quarantine/<UTC time>/``; nothing is
        deleted. Seqs continue above them (see :meth:`next_seq`).

        Parameters
        ----------
        force
            Also set aside valid snapshots. Without it, a model that still has a
            valid snapshot is refused (it would start over for no reason).

        Returns
        -------
        list of Path
            The new paths of the files moved.
        """
        model_dir = self._model_dir(name)
        if not model_dir.is_dir():
            return []
        with self._lock(model_dir):
            entries = sorted(
                p for p in model_dir.iterdir() if _SEEN.fullmatch(p.name) or (p.name == LATEST)
            )
            if not force:
                for p in entries:
                    if _FILE.fullmatch(p.name) and _is_regular(p) and self._check(p) is None:
                        raise SnapshotError(
                            f"model {name!r} in {self.directory} has a valid snapshot "
                            f"({p.name}); reset would discard it. Pass --force to set it "
                            "aside anyway"
                        )
            if not entries:
                return []
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            target = model_dir / QUARANTINE / stamp
            k = 1
            while target.exists():
                target = model_dir / QUARANTINE / f"{stamp}-{k}"
                k += 1
            target.mkdir(parents=True)
            moved = []
            for p in entries:
                os.rename(p, target / p.name)
                moved.append(target / p.name)
            _fsync_dir(model_dir)
        log.warning(
            "reset model %r in %s: moved %d file(s) to %s; the next start is a fresh model",
            name,
            self.directory,
            len(moved),
            target,
        )
        return moved

    # -- reading -----------------------------------------------------------------

    def names(self) -> list[str]:
        """Model names with a directory in the store."""
        if not self.directory.is_dir():
            return []
        return sorted(
            p.name for p in self.directory.iterdir() if p.is_dir() and _NAME.fullmatch(p.name)
        )

    def list(self, name: str) -> list[SnapshotInfo]:
        """Entries of `name` named like snapshots, oldest first (see ``SnapshotInfo.regular``)."""
        return list_dir(self._model_dir(name))

    def latest(self, name: str, *, build: bool = True) -> Snapshot | None:
        """Load the newest valid snapshot of `name`, or None if the model has no files.

        A damaged or unreadable file (bad checksum, truncated, malformed, over a
        decoding limit) is renamed ``<file>.corrupt`` with one WARNING on the
        ``streamk.snapshot`` logger naming it and the reason, and the next older
        one is tried. An entry that is not a regular file is skipped unopened
        (one WARNING). Errors that an older file would repeat (class not
        importable, ``from_state`` rejecting the state) propagate.

        Raises
        ------
        SnapshotError
            If the model's directory holds snapshot files but none is valid: the
            message names ``streamk snapshot reset``, the documented fresh start.
        SnapshotOverLimit
            If the newest well-formed file declares more than the limits allow
            rebuilding (it is left in place: it may be a trusted, larger model).
        """
        stuck: set[Path] = set()  # damaged files that could not be moved aside
        for _ in range(100):  # retention may delete files between listing and reading
            vanished = False
            for info in reversed(self.list(name)):
                if not info.regular:
                    self._warn_once(
                        info.path,
                        "skipping %s: %s named like a snapshot (not opened)",
                        info.path,
                        _kind(_lstat_mode(info.path)),
                    )
                    continue
                try:
                    data = read_file(info.path, self.limits)
                    return self._loads(info.path, data, build)
                except FileNotFoundError:
                    vanished = True
                    break
                except OSError as exc:
                    if not self._quarantine(info.path, f"cannot read: {exc}", "falling back"):
                        stuck.add(info.path)
                except SnapshotOverLimit as exc:  # not damage: maybe a model over the limits
                    raise SnapshotOverLimit(
                        f"{exc}. It is not set aside as damaged; if it is not a snapshot you "
                        f"trust, move it away or run: streamk snapshot reset --dir "
                        f"{self.directory} --model {name} --force"
                    ) from None
                except CorruptSnapshot as exc:
                    if not self._quarantine(info.path, str(exc), "falling back"):
                        stuck.add(info.path)
            left = self._damaged(name)
            fresh = [p for p in left if _FILE.fullmatch(p.name) and p not in stuck]
            if not vanished and not any(_is_regular(p) for p in fresh):
                break  # else a writer replaced files while we read: look again
        else:
            raise SnapshotError(
                f"snapshots of {name!r} in {self.directory} kept changing while being read "
                "(another process saving and deleting them?); retry"
            )
        if left:
            shown = ", ".join(p.name for p in left[:5]) + (" ..." if len(left) > 5 else "")
            raise SnapshotError(
                f"model {name!r} in {self.directory} has no valid snapshot: {len(left)} "
                f"damaged or stray file(s) ({shown}), none loadable. Not starting from "
                "nothing silently. Inspect them (streamk snapshot verify "
                f"{self._model_dir(name)}), then start fresh with: streamk snapshot reset "
                f"--dir {self.directory} --model {name}"
            )
        return None

    def newest_readable(self, name: str) -> tuple[Snapshot | None, str]:
        """The newest snapshot of ``name`` this process can read (unbuilt); no file changed.

        Unlike :meth:`latest`, a damaged file is not set aside: for a reader of other models'
        snapshots (the merger, an engine reading its peers' positions), whose own engine sets
        its damaged files aside when it restarts. A file this reader cannot load (damaged, over
        the limits, or from a newer format version) is skipped for the next older one, with one
        WARNING.

        Parameters
        ----------
        name
            The model's name in the store.

        Returns
        -------
        tuple
            ``(Snapshot, "")``, or ``(None, why)`` when no file of the model can be read.
        """
        infos = self.list(name)
        unreadable: list[str] = []
        for info in reversed(infos):
            if not info.regular:
                unreadable.append(f"{info.path.name}: not a regular file")
                continue
            try:
                snap = self.load(info.path, build=False)
            except (StreamkError, OSError) as exc:  # FileNotFoundError: retention deleted it
                unreadable.append(str(exc).removeprefix(f"{info.path}: ") + f" ({info.path.name})")
                continue
            if unreadable:
                log.warning(
                    "model %r: reading its seq %d; %d newer snapshot(s) unreadable, newest: %s",
                    name,
                    snap.seq,
                    len(unreadable),
                    unreadable[0],
                )
            return snap, ""
        if not infos:
            return None, NO_SNAPSHOT_FILES
        return None, f"no readable snapshot ({len(infos)} file(s)); newest: {unreadable[0]}"

    def _damaged(self, name: str) -> list[Path]:
        """Entries left in the model directory that are snapshots-to-be but unusable."""
        model_dir = self._model_dir(name)
        try:
            names = sorted(os.listdir(model_dir))
        except OSError:
            return []
        return [model_dir / n for n in names if _SEEN.fullmatch(n)]

    def load(self, path: str | os.PathLike[str], *, build: bool = True) -> Snapshot:
        """Load one snapshot file (see :func:`loads`); ``FileNotFoundError`` if it is gone."""
        try:
            data = read_file(path, self.limits)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise SnapshotError(f"{path}: cannot read: {exc}") from exc
        return self._loads(path, data, build)

    def _loads(self, path: str | os.PathLike[str], data: bytes, build: bool) -> Snapshot:
        try:
            return loads(data, self.limits, build=build)
        except SnapshotError as exc:
            raise type(exc)(f"{path}: {exc}") from exc.__cause__

    def verify(self, path: str | os.PathLike[str]) -> tuple[bool, str]:
        """Run exactly :func:`loads`' validation on a file (learner built): ``(ok, reason)``."""
        try:
            data = read_file(path, self.limits)
        except (OSError, SnapshotError) as exc:
            return False, str(exc)
        return verify_bytes(data, self.limits)

    def _check(self, path: Path) -> str | None:
        """None if `path` holds a valid snapshot (not built), else why not."""
        try:
            loads(read_file(path, self.limits), self.limits, build=False)
        except FileNotFoundError as exc:
            return f"vanished: {exc}"
        except OSError as exc:
            return str(exc)
        except SnapshotError as exc:  # over the limits, a newer format: intact, not damage
            return None if is_intact(exc) else str(exc)
        return None

    def _quarantine(self, path: Path, reason: str, then: str) -> bool:
        """Rename a damaged file to ``<file>.corrupt`` (kept) and log it once.

        Returns False if it is still there under its name (the rename failed).
        """
        reason = reason.removeprefix(f"{path}: ")
        target = path.with_name(path.name + CORRUPT_SUFFIX)
        k = 1
        while target.exists():
            target = path.with_name(f"{path.name}{CORRUPT_SUFFIX}-{k}")
            k += 1
        try:
            os.rename(path, target)
        except FileNotFoundError:
            return True
        except OSError as exc:
            self._warn_once(
                path,
                "snapshot %s is damaged (%s) and could not be moved aside: %s; %s",
                path,
                reason,
                exc,
                then,
            )
            return False
        _fsync_dir(path.parent)
        log.warning(
            "snapshot %s is damaged (%s); moved it aside to %s; %s", path, reason, target.name, then
        )
        return True

    def _warn_once(self, path: Path, fmt: str, *args: Any) -> None:
        if path not in self._warned:
            self._warned.add(path)
            log.warning(fmt, *args)

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


def _scan(model_dir: Path, pattern: re.Pattern[str]) -> list[tuple[re.Match[str], SnapshotInfo]]:
    """Entries directly in `model_dir` whose name matches `pattern` (group 1: the seq), each
    ``stat``-ed (following symlinks; a dangling one reported unopened) and marked
    ``regular=False`` if it is not a regular file. Nothing is opened."""
    out = []
    try:
        entries = list(os.scandir(model_dir))
    except (FileNotFoundError, NotADirectoryError):
        return []
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:
            try:  # a dangling symlink: report it, unopened
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
        regular = stat.S_ISREG(st.st_mode)
        info = SnapshotInfo(int(m.group(1)), Path(entry.path), st.st_size, st.st_mtime, regular)
        out.append((m, info))
    return out


def list_dir(model_dir: Path) -> list[SnapshotInfo]:
    """Entries directly in `model_dir` named like snapshot files, oldest seq first (see
    :func:`_scan`)."""
    return sorted((info for _, info in _scan(model_dir, _FILE)), key=lambda info: info.seq)


def list_set_aside(model_dir: Path) -> list[SnapshotInfo]:
    """Files in `model_dir` that ``latest`` set aside as damaged, oldest seq first.

    That is ``<seq>.snapshot.corrupt`` and ``<seq>.snapshot.corrupt-<k>`` (a seq damaged
    again after the first was set aside), each with ``set_aside=True``. They are kept for a
    person to inspect (``streamk snapshot verify`` checks them again) and never loaded.
    Nothing is opened.
    """
    found = [
        (info.seq, int(m.group(2) or 0), dataclasses.replace(info, set_aside=True))
        for m, info in _scan(model_dir, SET_ASIDE)
    ]
    return [info for _, _, info in sorted(found, key=lambda item: item[:2])]


def _lstat_mode(path: Path) -> int:
    try:
        return os.stat(path).st_mode
    except OSError:
        try:
            return os.lstat(path).st_mode
        except OSError:
            return 0


def _is_regular(path: Path) -> bool:
    return stat.S_ISREG(_lstat_mode(path))


def _subdirs(directory: Path) -> list[Path]:
    try:
        return [p for p in directory.iterdir() if p.is_dir()]
    except OSError:
        return []


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
