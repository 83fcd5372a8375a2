"""The score role (``streamk score``): predictions for an unlabelled topic with the merged model.

A scorer follows the merged model (``merge_name``) with :class:`~streamk.snapshot.HotSwapModel`
— on the snapshot topic, or in the file store when there is no topic — and publishes a
prediction for every event of ``score_topic`` (labels, if any, are ignored: a scorer never
learns), tagged with the merged model's seq. It reads in its own consumer group
(``score_group``), so it takes no partitions from the workers. Predictions are
at-least-once: the group's offsets are committed after the sink has flushed them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.metrics import DEFINITIONS, Metrics
from ..errors import ConfigError, InvalidEvent

__all__ = [
    "MERGE_METRICS",
    "SCORE_METRICS",
    "ScoreResult",
    "Scorer",
    "StoreFollower",
    "role_metrics",
    "serve_metrics",
]

log = logging.getLogger("streamk.merge")


#: the engine's metrics a scorer keeps (streamk.engine.metrics.DEFINITIONS)
SCORE_METRICS = ("events_in", "events_scored", "events_dead_lettered", "model_seq")

#: the merger's own metrics: name -> (type, help)
MERGE_METRICS: dict[str, tuple[str, str]] = {
    "merge_passes_total": ("counter", "Merge passes run (published, unchanged or failed)"),
    "merge_published_total": ("counter", "Merged models published"),
    "merge_failures_total": ("counter", "Merge passes that failed (retried next interval)"),
    "merge_seq": ("gauge", "Seq of the newest published merged model (-1: none yet)"),
    "merge_last_pass_seconds": ("gauge", "Duration of the last merge pass"),
    "merge_workers": ("gauge", "Worker snapshots in the last pass"),
    "merge_excluded": ("gauge", "Models of the file store left out of the last pass (unreadable)"),
}


def role_metrics(
    shown: tuple[str, ...] = (), own: dict[str, tuple[str, str]] | None = None
) -> Metrics:
    """The metrics of the merge or score role, served like the engine's (``/metrics``,
    ``/healthz``, ``/ready``): the engine's metrics in ``shown`` (those the role updates: the
    others would read 0 and mislead) and the role's ``own``, ``name -> (type, help)``."""
    return Metrics(definitions={**{name: DEFINITIONS[name] for name in shown}, **(own or {})})


def serve_metrics(config: dict[str, Any], metrics: Metrics, role: str) -> int | None:
    """Serve ``metrics`` on ``metrics_host:metrics_port`` when the port is set; the bound port.

    Raises
    ------
    ConfigError
        If the port cannot be bound (in use, unknown host, no permission), naming the key.
    """
    if not config["metrics_port"]:
        return None
    try:
        port = metrics.serve(config["metrics_port"], host=config["metrics_host"])
    except OSError as exc:
        raise ConfigError(
            f"metrics_port {config['metrics_port']} on metrics_host {config['metrics_host']!r} "
            f"cannot be served: {exc.strerror or exc}; choose a free port (or 0 for no "
            "metrics) and an address of this machine"
        ) from exc
    log.info("%s: metrics on http://%s:%d/metrics", role, config["metrics_host"], port)
    return port


class StoreFollower:
    """``SnapshotReader.follow`` over a file store: calls back with each newer snapshot."""

    def __init__(self, directory: str | Path) -> None:
        from ..snapshot import SnapshotStore

        self.store = SnapshotStore(directory)

    def follow(
        self,
        name: str,
        callback: Callable[[Any], Any],
        stop_event: threading.Event | None = None,
        poll_timeout: float = 1.0,
    ) -> None:
        stop = stop_event or threading.Event()
        seq = -1
        while not stop.is_set():
            infos = self.store.list(name)
            if infos and infos[-1].seq > seq:
                snap = self.store.latest(name)
                if snap is not None and snap.seq > seq:
                    seq = snap.seq
                    callback(snap)
            stop.wait(poll_timeout)


@dataclass
class ScoreResult:
    records: int = 0
    scored: int = 0
    dead_lettered: int = 0
    seconds: float = 0.0
    model_seqs: list[int] = field(default_factory=list)  # every merged seq that scored
    positions: dict[int, int] = field(default_factory=dict)
    busy_seconds: float = 0.0  # from the first record polled to the last one processed

    @property
    def events_per_second(self) -> float:
        """Events scored per second while records were flowing (the wait for the first
        merged model, for records, and ``stop_when_idle`` excluded), as the engine's."""
        return self.scored / self.busy_seconds if self.busy_seconds > 0 else 0.0


class Scorer:
    """Poll, decode, predict with the current merged model, publish, commit.

    Parameters
    ----------
    config
        The effective configuration; uses ``score_topic`` (or ``topic``), ``score_group``,
        ``merge_name``, ``snapshot_topic`` / ``snapshot_dir`` (where the merged model is
        followed), ``predictions_topic`` / ``predictions_file``, ``dead_letter_topic`` /
        ``dead_letter_dir``, ``max_records``, ``poll_timeout``, ``stop_when_idle``,
        ``max_events``.
    source, live, predictions, dead_letters
        Injected parts (tests); built from ``config`` when ``None``.
    """

    def __init__(
        self,
        config: dict[str, Any],
        *,
        source: Any = None,
        live: Any = None,
        predictions: Any = None,
        dead_letters: Any = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        from ..engine import runner

        self.config = config
        if predictions is None and not (config["predictions_topic"] or config["predictions_file"]):
            raise ConfigError(
                "streamk score needs predictions_topic or predictions_file: where would the "
                "predictions go?"
            )
        scoring = {**config, "topic": config["score_topic"] or config["topic"]}
        scoring["group"] = config["score_group"]
        self.source = source if source is not None else runner.kafka_source(scoring)
        if live is None:
            from ..snapshot import HotSwapModel, SnapshotReader

            follower: Any
            if config["snapshot_topic"]:
                follower = SnapshotReader(
                    config["bootstrap_servers"],
                    config["snapshot_topic"],
                    consumer_config=runner.kafka_settings(config),
                )
            else:
                follower = StoreFollower(config["snapshot_dir"])
            live = HotSwapModel(follower, config["merge_name"])
        self.live = live
        self.predictions = predictions if predictions is not None else _prediction_sink(config)
        if dead_letters is None:
            dead_letters = runner.dead_letter_sink(config)
        self.dead_letters = dead_letters
        self.on_progress = on_progress
        self.metrics = metrics if metrics is not None else role_metrics(SCORE_METRICS)
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def _dead_letter(self, record: Any, exc: InvalidEvent, result: ScoreResult) -> None:
        from ..engine.deadletter import DeadLetter

        result.dead_lettered += 1
        letter = DeadLetter.from_error(
            record.payload if record.payload is not None else repr(record.value).encode(),
            exc,
            self.source.name,
            record.partition,
            record.offset,
            record.timestamp_ms,
        )
        self.metrics.dead_letter(letter.code)
        self.dead_letters.write(letter)

    def run(self) -> ScoreResult:
        """Score until stopped, idle for ``stop_when_idle`` s or ``max_events`` records."""
        from ..engine.runs import split_runs
        from ..engine.schema import DEFAULT_LIMITS
        from ..engine.scoring import score_run

        cfg, result, limits = self.config, ScoreResult(), DEFAULT_LIMITS
        engine = self.metrics
        self.live.start()
        start = time.monotonic()
        try:
            while not self._stop.is_set() and not self.live.wait_for(0, timeout=0.5):
                engine.beat()  # alive, waiting for the first merged model: not ready
                if getattr(self.live, "error", None) is not None:
                    raise self.live.error
            engine.set_ready(True)
            last_record = last_progress = time.monotonic()
            first_record: float | None = None
            while not self._stop.is_set():
                engine.beat()
                budget = cfg["max_records"]
                if cfg["max_events"]:
                    budget = min(budget, cfg["max_events"] - result.records)
                    if budget <= 0:
                        break
                batch = self.source.poll(budget, cfg["poll_timeout"])
                now = time.monotonic()
                if not batch:
                    if cfg["stop_when_idle"] and now - last_record >= cfg["stop_when_idle"]:
                        break
                    continue
                last_record = now
                if first_record is None:
                    first_record = now
                result.records += len(batch)
                self.metrics.inc("events_in", len(batch))
                snap = self.live.snapshot  # one model for the whole batch
                self.metrics.set("model_seq", snap.seq)
                if not result.model_seqs or result.model_seqs[-1] != snap.seq:
                    result.model_seqs.append(snap.seq)
                positions: dict[int, int] = {}
                dead = lambda r, e: self._dead_letter(r, e, result)  # noqa: E731
                runs = split_runs(batch, limits, None, dead)
                for run in runs:  # an event the model refuses is dead-lettered, not fatal
                    run, predictions, _ = score_run(snap.model, run, run.frame(), False, dead)
                    if predictions:
                        self.predictions.write_many(
                            predictions,
                            ids=run.ids,
                            offsets=[r.offset for r in run.records],
                            model_seq=snap.seq,
                            partition=run.partition,
                        )
                    result.scored += len(predictions)
                    self.metrics.inc("events_scored", len(predictions))
                for record in batch:
                    positions[record.partition] = record.offset + 1
                self.predictions.flush()
                self.dead_letters.flush()
                self.source.commit(positions)  # after the predictions are durable
                result.positions.update(positions)
                result.busy_seconds = time.monotonic() - first_record
                if self.on_progress is not None and now - last_progress >= 1.0:
                    last_progress = now
                    self.on_progress(
                        {"records": result.records, "rate": result.events_per_second,
                         "seq": snap.seq, "dead": result.dead_lettered}
                    )  # fmt: skip
        finally:
            engine.set_ready(False)
            result.seconds = time.monotonic() - start
            self.live.stop()
            try:
                self.predictions.close()
                self.dead_letters.close()
            finally:
                self.source.close()
        return result


def _prediction_sink(config: dict[str, Any]) -> Any:
    from ..engine.runner import prediction_sink

    if config["predictions_topic"]:
        return prediction_sink(config)
    from ..sinks import FilePredictionSink

    path = Path(config["predictions_file"])
    return FilePredictionSink(
        path,
        "msgpack" if path.suffix == ".msgpack" else "jsonl",
        layout=config["predictions_layout"],
    )
