"""Connection state of a Kafka source: one WARNING per change, a count of outages, backoff.

Both transports retry connections on their own; what they do not do is keep a broker
outage out of the engine's loop (kafka-python can raise ``KafkaConnectionError`` out of
``poll`` once the broker is back; librdkafka hands transport errors to the application)
or say, once, that the stream stopped and resumed. :class:`ConnectionHealth` is the
small state machine each source feeds with what it observes:

* :meth:`~ConnectionHealth.failed` - a connection error was raised or reported: the
  link is down now (certain evidence);
* :meth:`~ConnectionHealth.observe` - a cheap, local look at the client's connections
  (no network call): down only after ``grace_s`` of continuous disconnection, so an idle
  connection being recycled is not an outage;
* :meth:`~ConnectionHealth.ok` - records arrived or a request succeeded: up.

Each change logs one WARNING line; :attr:`~ConnectionHealth.outages` counts outage
episodes begun and :attr:`~ConnectionHealth.reconnects` those ended, for the metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["ConnectionHealth"]


class ConnectionHealth:
    """Up/down state of one source's link to Kafka, with a bounded exponential backoff.

    Parameters
    ----------
    what : str
        How the log lines name the link, e.g. ``"Kafka at host:9092 (topic 'events')"``.
    log : logging.Logger
        Where the two WARNING lines per outage go.
    grace_s : float
        Continuous disconnection seen by :meth:`observe` before it counts as an outage.
        Default: 1.0.
    min_backoff_s, max_backoff_s : float
        First and largest pause between attempts while down (doubling). Callers bound
        each pause by their own timeout too, so a stop request is seen promptly.
        Defaults: 0.1 and 2.0.
    clock : callable
        Monotonic seconds; for tests. Default: :func:`time.monotonic`.
    """

    def __init__(
        self,
        what: str,
        log: logging.Logger,
        *,
        grace_s: float = 1.0,
        min_backoff_s: float = 0.1,
        max_backoff_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.log = log
        self.grace_s = grace_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.clock = clock
        self.up = True
        self.outages = 0
        self.reconnects = 0
        self.down_since: float | None = None
        self._disconnected_since: float | None = None
        self._backoff = min_backoff_s

    def failed(self, reason: object) -> float:
        """A connection error happened: mark down (logging once); return the pause to take."""
        self._go_down(reason)
        pause = self._backoff
        self._backoff = min(self.max_backoff_s, self._backoff * 2)
        return pause

    def observe(self, connected: bool, reason: str = "no broker connection") -> None:
        """Feed a local look at the client's connections (see the module docstring)."""
        now = self.clock()
        if connected:
            self._disconnected_since = None
            return
        if self._disconnected_since is None:
            self._disconnected_since = now
        if now - self._disconnected_since >= self.grace_s:
            self._go_down(f"{reason} for {now - self._disconnected_since:.1f} s")

    def ok(self) -> None:
        """The link works (records arrived, a request succeeded): mark up, logging once."""
        self._disconnected_since = None
        self._backoff = self.min_backoff_s
        if self.up:
            return
        self.up = True
        self.reconnects += 1
        since = self.down_since if self.down_since is not None else self.clock()
        self.down_since = None
        self.log.warning(
            "connection to %s restored after %.1f s (outage %d); resuming",
            self.what,
            self.clock() - since,
            self.outages,
        )

    def _go_down(self, reason: object) -> None:
        if not self.up:
            return
        self.up = False
        self.outages += 1
        self.down_since = self.clock()
        self.log.warning(
            "lost the connection to %s (%s); retrying with backoff, nothing is lost "
            "(positions are kept; the client reconnects by itself)",
            self.what,
            reason,
        )
