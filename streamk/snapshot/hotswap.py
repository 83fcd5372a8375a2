"""Hot-swapping a scorer's model when a newer snapshot arrives (from Kafka or any follower)."""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from ..errors import SnapshotError
from .format import Snapshot
from .kafka_scheme import check_name

__all__ = ["HotSwapModel"]

log = logging.getLogger("streamk.snapshot.kafka")


class Follower(Protocol):
    """What ``HotSwapModel`` needs: ``SnapshotReader.follow``'s signature."""

    def follow(
        self, name: str, callback: Any, stop_event: threading.Event | None, poll_timeout: float
    ) -> None: ...


class HotSwapModel:
    """A scorer's view of the newest snapshot of `name`, swapped atomically as new ones arrive.

    ``predict_one`` uses whichever model is current when it is called; a background
    thread runs ``reader.follow`` and replaces the model when a higher seq arrives.

    Examples
    --------
    >>> with HotSwapModel(SnapshotReader(servers, "snapshots"), "fraud") as live:  # doctest: +SKIP
    ...     live.wait_for(0, timeout=30)
    ...     live.predict_one(x)
    """

    def __init__(self, reader: Follower, name: str, *, poll_timeout: float = 0.5) -> None:
        self.reader, self.name, self.poll_timeout = reader, check_name(name), poll_timeout
        self._snap: Snapshot | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._following = False
        self.error: BaseException | None = None

    def start(self) -> HotSwapModel:
        """Start following in a daemon thread."""
        if self._thread is None:
            self._following = True
            self._thread = threading.Thread(
                target=self._run, name=f"hotswap-{self.name}", daemon=True
            )
            self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.reader.follow(self.name, self._swap, self._stop, self.poll_timeout)
        except BaseException as exc:  # keep serving the current model; report the failure
            self.error = exc
            log.error("following snapshots of %r stopped: %s", self.name, exc)
        finally:
            with self._cond:
                self._following = False
                self._cond.notify_all()  # waiters stop waiting for what will not come

    def _swap(self, snap: Snapshot) -> None:
        with self._cond:
            if self._snap is None or snap.seq > self._snap.seq:
                self._snap = snap  # one reference assignment: readers see old or new, whole
                log.info("hot-swapped %r to seq %d", self.name, snap.seq)
            self._cond.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop following (the current model stays usable)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_for(self, seq: int, timeout: float) -> bool:
        """Block until a snapshot with seq >= `seq` is current (True), at most `timeout` s.

        Returns False at once if following has stopped (see ``error``) and it is not.
        """

        def reached() -> bool:
            return self._snap is not None and self._snap.seq >= seq

        with self._cond:
            self._cond.wait_for(lambda: reached() or not self._following, timeout)
            return reached()

    @property
    def snapshot(self) -> Snapshot | None:
        """The current snapshot (model, offsets, seq, metrics), or None before the first."""
        return self._snap

    @property
    def seq(self) -> int | None:
        """The current snapshot's seq, or None before the first."""
        snap = self._snap
        return None if snap is None else snap.seq

    @property
    def model(self) -> Any:
        """The current learner; raises ``SnapshotError`` before the first snapshot."""
        snap = self._snap
        if snap is None:
            raise SnapshotError(f"no snapshot of {self.name!r} has arrived yet")
        return snap.model

    def predict_one(self, x: Any) -> Any:
        return self.model.predict_one(x)

    def predict_proba_one(self, x: Any) -> Any:
        return self.model.predict_proba_one(x)

    def __enter__(self) -> HotSwapModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
