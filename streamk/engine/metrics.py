"""Counters and gauges of a running engine, and their Prometheus text exposition.

One :class:`Metrics` object per engine. Counters only go up; gauges hold the latest
value. ``render()`` gives the Prometheus text format; ``serve(port)`` exposes it on
``http://127.0.0.1:PORT/metrics`` from a daemon thread, with two probes for orchestrators:

- ``/healthz`` (liveness): 200 while the engine's loop turned within ``stall_seconds``
  (:meth:`Metrics.beat` each turn), 503 once it stalls — restart the process;
- ``/ready`` (readiness): 200 once the model is restored and partitions are assigned
  (:meth:`Metrics.set_ready`), 503 before and after.
"""

from __future__ import annotations

import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

__all__ = ["Metrics", "RollingScore"]

#: name -> (type, help)
DEFINITIONS: dict[str, tuple[str, str]] = {
    "events_in": ("counter", "Records polled from the source"),
    "events_learned": ("counter", "Labelled events learned"),
    "events_scored": ("counter", "Unlabelled events scored and published"),
    "events_flagged": ("counter", "Events a novelty detector flagged as novel before learning"),
    "events_dead_lettered": ("counter", "Records rejected to the dead-letter destination"),
    "snapshots_written": ("counter", "Checkpoints whose snapshot is durable"),
    "commit_failures_total": (
        "counter",
        "Offset commits that failed after a durable snapshot (the snapshot's offsets hold)",
    ),
    "snapshot_seconds_total": ("counter", "Time spent writing snapshots and committing"),
    "consolidations": ("counter", "Consolidations adopted"),
    "consolidation_seconds_total": ("counter", "Time spent consolidating"),
    "consolidation_failures_total": (
        "counter",
        "Consolidations whose solve failed (the on-line model kept learning; a WARNING says why)",
    ),
    "consolidation_serving_online": (
        "gauge",
        "1 while the guard's unconsolidated copy serves (it erred less recently), else 0",
    ),
    "events_per_second": ("gauge", "Events per second over the last progress interval"),
    "support_size": ("gauge", "Support vectors held by the model"),
    "lag": ("gauge", "Records behind the source's end, where known"),
    "rolling_metric": ("gauge", "Prequential metric over the recent window"),
    "model_seq": ("gauge", "Sequence number of the last snapshot"),
    "broker_reconnects_total": ("counter", "Outages: times the connection to the broker was lost"),
    "rewinds_total": ("counter", "Partitions resumed before a commit of ours (a lost snapshot)"),
    "evictions_total": (
        "counter",
        "Times partitions were lost to an eviction (the model returned to its last snapshot)",
    ),
}


class Metrics:
    """Thread-safe counters and gauges keyed by the names in ``definitions``.

    Parameters
    ----------
    prefix
        Put before every name in the exposition.
    definitions
        ``name -> (type, help)`` of the values kept and exported: the engine's
        (:data:`DEFINITIONS`) by default; the merge and score roles export their own.
    """

    def __init__(
        self, prefix: str = "streamk_", definitions: dict[str, tuple[str, str]] | None = None
    ) -> None:
        self.prefix = prefix
        self.definitions = DEFINITIONS if definitions is None else dict(definitions)
        self._values: dict[str, float] = {name: 0.0 for name in self.definitions}
        if "rolling_metric" in self._values:  # no value before the first labelled event
            self._values["rolling_metric"] = math.nan
        self._reasons: dict[str, int] = {}
        self._adoptions: dict[str, int] = {}  # adopt_merged checkpoints by outcome
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.started = time.time()
        self.stall_seconds = 120.0
        self._beat = time.monotonic()
        self._ready = False

    def beat(self) -> None:
        """The loop made progress (called once per loop turn)."""
        self._beat = time.monotonic()

    def set_ready(self, ready: bool) -> None:
        """Restored and assigned (True), or stopping (False)."""
        self._ready = ready

    def health(self) -> tuple[bool, str]:
        """Liveness: whether the loop turned within ``stall_seconds``, and a line saying so."""
        since = time.monotonic() - self._beat
        if since <= self.stall_seconds:
            return True, f"ok: loop turned {since:.1f} s ago\n"
        return False, f"stalled: loop last turned {since:.1f} s ago\n"

    def inc(self, name: str, value: float = 1.0) -> None:
        with self._lock:
            self._values[name] += value

    def set(self, name: str, value: float | None) -> None:
        if value is None:
            return
        with self._lock:
            self._values[name] = float(value)

    def dead_letter(self, code: str | None) -> None:
        """Count one rejected record, also by its reason code."""
        with self._lock:
            self._values["events_dead_lettered"] += 1
            key = code or "unknown"
            self._reasons[key] = self._reasons.get(key, 0) + 1

    def set_adoptions(self, counts: dict[str, int]) -> None:
        """The ``adopt_merged`` hook's checkpoints by outcome (adopted, no merged snapshot,
        ...): its own running counts, mirrored."""
        with self._lock:
            self._adoptions = {str(k): int(v) for k, v in counts.items()}

    def get(self, name: str) -> float:
        return self._values[name]

    def snapshot(self) -> dict[str, Any]:
        """A plain dict of every value (for ``--json`` output and snapshot metadata)."""
        with self._lock:
            out: dict[str, Any] = dict(self._values)
            out["dead_letter_reasons"] = dict(self._reasons)
            if self._adoptions:
                out["adoptions"] = dict(self._adoptions)
        return out

    def render(self) -> str:
        """Prometheus text exposition format (version 0.0.4)."""
        lines = []
        with self._lock:
            for name, (kind, help_text) in self.definitions.items():
                full = self.prefix + name
                lines += [
                    f"# HELP {full} {help_text}",
                    f"# TYPE {full} {kind}",
                    f"{full} {self._values[name]:.17g}",
                ]
            if "events_dead_lettered" in self._values:
                lines += self._labelled(
                    "dead_letter_reasons_total",
                    "Dead-lettered records by reason code",
                    "reason",
                    self._reasons,
                )
            if self._adoptions:
                lines += self._labelled(
                    "adoptions_total",
                    "adopt_merged checkpoints by outcome",
                    "outcome",
                    self._adoptions,
                )
        return "\n".join(lines) + "\n"

    def _labelled(self, name: str, help_text: str, label: str, counts: dict[str, int]) -> list[str]:
        """A counter with one sample per value of ``label``, in the exposition format."""
        full = self.prefix + name
        lines = [f"# HELP {full} {help_text}", f"# TYPE {full} counter"]
        lines += [f'{full}{{{label}="{key}"}} {count}' for key, count in sorted(counts.items())]
        return lines

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Expose ``/metrics`` over HTTP from a daemon thread; returns the bound port."""
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                path = self.path.rstrip("/")
                status, content_type = 200, "text/plain; version=0.0.4"
                if path == "/healthz":
                    ok, text = metrics.health()
                    status, body = (200 if ok else 503), text.encode()
                    content_type = "text/plain"
                elif path == "/ready":
                    ready = metrics._ready
                    status = 200 if ready else 503
                    body = b"ready\n" if ready else b"not ready: restoring or not assigned\n"
                    content_type = "text/plain"
                elif path in ("/metrics", ""):
                    body = metrics.render().encode()
                else:
                    self.send_error(404)
                    return
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self._server.server_address[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class RollingScore:
    """Prequential accuracy (classifiers) or MAE (regressors) over the last ``window`` events.

    The same figure as ``river.utils.Rolling(Accuracy | MAE)``, but updated a run at a
    time with array operations: river's per-event update cost about as much as decoding
    the event.
    """

    def __init__(self, window: int, regression: bool) -> None:
        self.window = int(window)
        self.regression = regression
        self._scores = np.zeros(self.window)
        self._count = 0  # events seen; the ring position is count % window

    def update_many(self, ys: list[Any], predictions: list[Any]) -> None:
        """Score a run's predictions against its labels, in order."""
        if not ys:
            return
        if self.regression:
            scores = np.abs(np.asarray(ys, dtype=np.float64) - np.asarray(predictions, np.float64))
        else:  # labels compare by Python equality, as river's Accuracy does
            truth, guess = np.empty(len(ys), object), np.empty(len(ys), object)
            truth[:], guess[:] = ys, predictions
            scores = (truth == guess).astype(np.float64)
        scores = scores[-self.window :]
        start = self._count % self.window
        head = min(len(scores), self.window - start)
        self._scores[start : start + head] = scores[:head]
        self._scores[: len(scores) - head] = scores[head:]
        self._count += len(scores)

    def get(self) -> float | None:
        """The mean over the window; None before the first event.

        No value, rather than river's 0.0: an engine that learned nothing (a resumed replay
        with nothing new) would otherwise report a perfect MAE. Summaries show None as
        ``-`` (JSON ``null``); a Prometheus gauge keeps its last value
        (:meth:`Metrics.set` ignores None).
        """
        n = min(self._count, self.window)
        return float(self._scores[:n].mean()) if n else None
