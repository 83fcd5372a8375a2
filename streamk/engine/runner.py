"""Build an :class:`~streamk.engine.Engine` from a configuration dict.

The keys and their defaults are in :mod:`streamk.engine.config`.

Kept apart from the command line so that tests, the demo and ``streamk run`` assemble
engines the same way.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..learners.features import NameLimits
from ..sources.base import Source
from .deadletter import DeadLetterFile, DeadLetterLog
from .loop import Engine, EngineConfig
from .metrics import Metrics

log = logging.getLogger("streamk.engine.runner")

__all__ = [
    "model_factory",
    "build_engine",
    "kafka_settings",
    "prediction_sink",
    "install_signal_handlers",
    "topic_peers",
]


def model_factory(config: dict[str, Any]) -> Callable[[], Any]:
    """A zero-argument callable building the configured learner (checked once, now)."""
    from .registry import build_learner

    def build() -> Any:
        learner = build_learner(
            config["learner"],
            config["kernel"],
            config["budget"],
            config["policy"],
            ranks=config.get("ranks"),
        )
        if scaling(config, learner) == "standard":
            from ..learners.scaling import standard_scaled

            learner = standard_scaled(learner)
        return consolidated(config)(learner)

    build()  # fail at start-up, not at the first event
    return build


def scaling(config: dict[str, Any], learner: Any) -> str:
    """``standard`` or ``none``: the ``scale`` key, with ``auto`` resolved for ``learner``.

    ``auto`` standardises a classifier or regressor unless consolidation is on (its
    window holds raw rows); rankers and novelty detectors are left as they are, and so
    is a learner on strings or trees.
    """
    from river import base

    from .schema import input_schema

    if input_schema(learner) is not None:  # strings or trees: nothing to standardise
        if config["scale"] == "standard":
            raise ConfigError(
                f"scale = standard needs numeric features; kernel {config['kernel']!r} takes "
                "strings or trees: set scale = none (or auto)"
            )
        return "none"
    if config["scale"] != "auto":
        return config["scale"]
    plain = isinstance(learner, base.Classifier | base.Regressor)
    return "standard" if plain and not config["consolidate_every"] else "none"


def consolidated(config: dict[str, Any]) -> Callable[[Any], Any]:
    """Wraps a learner in periodic batch consolidation when the config asks for it.

    Also the engine's ``wrap_restored``: a snapshot holds the whole wrapped model (window,
    counters and trigger state included) and is kept as restored when its consolidation
    settings match the config; a guard of another size (or none: a snapshot from before
    guards) is replaced by a fresh one around the learner that served. An older snapshot
    (the inner learner only), or one whose settings differ from the config, is
    (re-)wrapped with a fresh window, and a snapshot of a wrapped model under a config
    without consolidation gives the learner that served back (see docs/operations.md).
    """
    from ..consolidation import Consolidated, ConsolidatedClassifier, ConsolidatedRegressor
    from ..learners.scaling import StandardScaledClassifier, StandardScaledRegressor

    def wrap(model: Any) -> Any:
        wrapped = isinstance(model, ConsolidatedClassifier | ConsolidatedRegressor)
        restored = model if wrapped else None
        learner = model.served_model if restored is not None else model
        if not config["consolidate_every"]:
            if restored is not None:
                log.warning("consolidation is off: dropping the snapshot's consolidation state")
            return learner
        if isinstance(learner, StandardScaledClassifier | StandardScaledRegressor):
            raise ConfigError(
                f"consolidate_every = {config['consolidate_every']}, but the snapshot of "
                f"{config['model_name']!r} holds a model that standardises its features "
                "(scale = standard, what scale = auto chose without consolidation), and "
                "consolidation cannot wrap it (its window holds the raw rows). Keep "
                "consolidate_every = 0 for this model, or start the consolidated one afresh "
                "under another model_name (or streamk snapshot reset)"
            )
        guard = config["consolidate_guard"]
        fresh = Consolidated(  # the guard (a copy of the learner) only once it is needed
            learner,
            every=config["consolidate_every"],
            window_size=config["consolidate_window"],
            mode=config["consolidate_mode"],
            guard=0,
        )
        if restored is not None and restored.same_setup(fresh):
            if restored.guard != guard:
                log.warning(
                    "consolidate_guard is %d, the snapshot's guard %d: the learner that "
                    "served goes on under a fresh guard, with the window and counters kept",
                    guard,
                    restored.guard,
                )
                restored.set_guard(guard)
            return restored
        if restored is not None:
            log.warning(
                "consolidation settings differ from the snapshot's: its window and counters "
                "are dropped and consolidation restarts with an empty window"
            )
        fresh.set_guard(guard)
        return fresh

    return wrap


def check_consolidation_sizes(config: dict[str, Any]) -> None:
    """Refuse at start-up a consolidation whose window could outgrow what a snapshot may
    hold, or whose solve would allocate a Gram past :data:`MAX_GRAM_BYTES`: either was found
    only later (exit 2 at a checkpoint, the solve refused at every trigger), and the first
    again after every restart."""
    from math import isqrt

    from ..consolidation.limits import DEFAULT_WINDOW_LIMITS, MAX_GRAM_BYTES, MiB, gram_bytes

    window, names = config["consolidate_window"], config["max_feature_names"]
    need = DEFAULT_WINDOW_LIMITS.window_bytes(window, names)
    if need > DEFAULT_WINDOW_LIMITS.max_bytes:
        raise ConfigError(
            f"consolidate_window = {window} rows of up to max_feature_names = {names} "
            f"features would take {need / MiB:,.0f} MiB, above the "
            f"{DEFAULT_WINDOW_LIMITS.max_bytes // MiB} MiB a snapshot's window may hold: "
            "lower consolidate_window or max_feature_names"
        )
    rows = window + config["budget"]
    if config["budget"] and gram_bytes(rows) > MAX_GRAM_BYTES:  # (unbounded: each solve's own)
        raise ConfigError(
            f"consolidate_window + budget = {rows} training rows: each consolidation's Gram "
            f"would take {gram_bytes(rows) / MiB:,.0f} MiB, above the {MAX_GRAM_BYTES // MiB} "
            f"MiB it may allocate ({isqrt(MAX_GRAM_BYTES // 8):,} rows); lower "
            "consolidate_window or budget"
        )


def check_support_sizes(config: dict[str, Any]) -> None:
    """Refuse at start-up a budget whose full support set no snapshot could hold (the
    configuration itself caps it at ``max_support``), and warn where there is no budget.
    Either was found only at the checkpoint after the set outgrew the snapshot's limits
    (exit 2), and again after every restart, which re-learns the same events to the same
    size."""
    from ..consolidation.limits import MiB
    from ..kernels.specs import kernel_from_string
    from ..snapshot.limits import DEFAULT_LIMITS

    budget, names = config["budget"], config["max_feature_names"]
    most, max_bytes = DEFAULT_LIMITS.max_support, DEFAULT_LIMITS.max_bytes  # (budget <= most)
    if getattr(kernel_from_string(config["kernel"]), "takes_objects", False):
        return  # strings and trees: their sizes are bounded per support vector, not by names
    rows = max_bytes // (8 * names)  # the support rows alone, each max_feature_names wide
    if budget > rows:
        raise ConfigError(
            f"budget = {budget:,} support vectors of up to max_feature_names = {names:,} "
            f"features would take {8 * budget * names / MiB:,.0f} MiB, above the "
            f"{max_bytes // MiB} MiB a snapshot may hold: lower budget, or max_feature_names "
            "to the features your events carry"
        )
    if not budget and config["policy"] != "Projectron":  # (the Projectron bounds itself)
        log.warning(
            "budget = 0: the support set has no bound; the engine stops at the first "
            "checkpoint after it outgrows what a snapshot may hold (%s vectors, and %s MiB: "
            "%s vectors of max_feature_names = %s features); give a budget for an endless "
            "stream",
            f"{most:,}",
            max_bytes // MiB,
            f"{min(rows, most):,}",
            f"{names:,}",
        )


#: settings naming files a Kafka client reads when it connects
SSL_FILES = ("ssl_cafile", "ssl_certfile", "ssl_keyfile")


def kafka_settings(config: dict[str, Any]) -> dict[str, Any]:
    """Security settings passed through to every Kafka client (kafka-python names).

    A file setting (:data:`SSL_FILES`) that names no readable file is a
    :class:`ConfigError` naming the key, here, before any client tries to connect with it
    (where it fails as an SSL error, or a retried connection)."""
    out: dict[str, Any] = {"security_protocol": config["security_protocol"]}
    for key in SSL_FILES:
        path = config[key]
        if path and not (os.path.isfile(path) and os.access(path, os.R_OK)):
            raise ConfigError(
                f"{key} = {path!r} is not a file streamk can read; give the PEM file's path "
                f"(--{key.replace('_', '-')}, STREAMK_{key.upper()})"
            )
    for key in ("sasl_mechanism", *SSL_FILES, "ssl_password"):
        if config[key]:
            out[key] = config[key]
    if config["sasl_username"]:
        out["sasl_plain_username"] = config["sasl_username"]
        out["sasl_plain_password"] = config["sasl_password"]
    return out


def kafka_source(config: dict[str, Any]) -> Source:
    """The configured Kafka source (kafka-python or confluent transport)."""
    # The past-the-end probe runs inside the assignment callback: well inside the rebalance
    # timeout, or the member is evicted while it waits.
    probe = min(5.0, config["max_poll_interval_ms"] / 3000)
    # The group's timing, in kafka-python's names; the confluent source translates them.
    consumer_config = {
        **kafka_settings(config),
        "session_timeout_ms": config["session_timeout_ms"],
        "heartbeat_interval_ms": config["heartbeat_interval_ms"],
    }
    source_class: type[Source]
    if config["transport"] == "confluent":
        from ..sources.kafka_confluent import ConfluentKafkaSource as source_class
    else:
        from ..sources.kafka import KafkaSource as source_class
    return source_class(
        config["bootstrap_servers"],
        config["topic"],
        config["group"],
        consumer_config=consumer_config,
        max_poll_interval_ms=config["max_poll_interval_ms"],
        probe_timeout_s=probe,
    )


def prediction_sink(config: dict[str, Any]) -> Any:
    """The sink of ``predictions_topic``, on the configured transport's producer, in the
    configured ``predictions_layout``.

    With ``transport = "confluent"`` (the ``[kafka-fast]`` extra) predictions go out
    through librdkafka, about 25x cheaper per record than kafka-python's producer; the
    records, keys and partitions are the same.
    """
    topic, security = config["predictions_topic"], kafka_settings(config)
    layout = config["predictions_layout"]
    if config["transport"] == "confluent":
        from ..sinks import ConfluentPredictionSink

        return ConfluentPredictionSink(
            config["bootstrap_servers"], topic, producer_config=security, layout=layout
        )
    from ..sinks import KafkaPredictionSink

    return KafkaPredictionSink(
        config["bootstrap_servers"], topic, producer_config=security, layout=layout
    )


def dead_letter_sink(config: dict[str, Any]) -> Any:
    """Where rejected records go: ``dead_letter_topic``, the ``dead-letters.jsonl`` of
    ``dead_letter_dir``, or (neither set) the log, rate-limited
    (:class:`~streamk.engine.deadletter.DeadLetterLog`: their positions and reasons, not
    their bytes)."""
    if config["dead_letter_topic"] and config["dead_letter_dir"]:
        raise ConfigError("give dead_letter_topic or dead_letter_dir, not both")
    if config["dead_letter_topic"]:
        from ..sinks import KafkaDeadLetterSink

        return KafkaDeadLetterSink(
            config["bootstrap_servers"],
            config["dead_letter_topic"],
            producer_config=kafka_settings(config),
        )
    if config["dead_letter_dir"]:
        directory = Path(config["dead_letter_dir"])
        directory.mkdir(parents=True, exist_ok=True)
        return DeadLetterFile(directory / "dead-letters.jsonl")
    return DeadLetterLog()


def writable_directory(config: dict[str, Any], key: str) -> Path:
    """``config[key]`` as a directory this process can write, created if missing, or a
    :class:`ConfigError` naming the key: found at start-up, not at the first snapshot
    (inside the consumer group's assignment callback, a traceback about the callback)."""
    path = Path(config[key])
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".streamk-write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"{key} = {str(path)!r} is not a directory streamk can write: "
            f"{exc.strerror or exc}; give a writable directory (--{key.replace('_', '-')})"
        ) from None
    return path


def build_engine(
    config: dict[str, Any],
    source: Source | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> Engine:
    """An engine with the configured model, snapshot store, publisher and sinks."""
    from ..snapshot import SnapshotStore

    factory = model_factory(config)
    check_support_sizes(config)
    if config["consolidate_every"]:
        check_consolidation_sizes(config)
    source = source if source is not None else kafka_source(config)
    store = SnapshotStore(writable_directory(config, "snapshot_dir"), keep=config["snapshot_keep"])
    publisher = predictions = None
    bootstrap, security = config["bootstrap_servers"], kafka_settings(config)
    if config["snapshot_topic"]:
        from ..snapshot.kafka import SnapshotPublisher

        publisher = SnapshotPublisher(bootstrap, config["snapshot_topic"], producer_config=security)
        # This engine is the model's only writer: clean up chunks a predecessor left behind.
        publisher.sweep(config["model_name"])
    if config["predictions_topic"] and config["predictions_file"]:
        raise ConfigError("give predictions_topic or predictions_file, not both")
    if config["predictions_topic"]:
        predictions = prediction_sink(config)
    elif config["predictions_file"]:
        from ..sinks import FilePredictionSink

        path = Path(config["predictions_file"])
        predictions = FilePredictionSink(
            path,
            "msgpack" if path.suffix == ".msgpack" else "jsonl",
            layout=config["predictions_layout"],
        )
    dead_letters = dead_letter_sink(config)
    engine_config = EngineConfig(
        model_name=config["model_name"],
        max_records=config["max_records"],
        poll_timeout=config["poll_timeout"],
        snapshot_every=config["snapshot_every"] or None,
        snapshot_seconds=config["snapshot_seconds"] or None,
        stop_when_idle=config["stop_when_idle"] or None,
        max_events=config["max_events"] or None,
        publish_proba=config["predictions_proba"],
        on_offset_beyond_end=config["on_offset_beyond_end"],
        name_limits=NameLimits(config["max_feature_names"], config["max_feature_name_chars"]),
    )
    if config["predictions_proba"] and not hasattr(factory(), "predict_proba_many"):
        raise ConfigError(
            f"predictions_proba needs a classifier; learner {config['learner']!r} has no "
            "class probabilities"
        )
    metrics = Metrics()
    # Liveness: a healthy loop turns at least once per max_poll_interval_ms.
    metrics.stall_seconds = max(120.0, 2 * config["max_poll_interval_ms"] / 1000)
    if config["metrics_port"]:
        try:
            metrics.serve(config["metrics_port"], host=config["metrics_host"])
        except OSError as exc:  # port in use, unknown host, no permission
            raise ConfigError(
                f"metrics_port {config['metrics_port']} on metrics_host "
                f"{config['metrics_host']!r} cannot be served: {exc.strerror or exc}; choose "
                "a free port (or 0 for no metrics) and an address of this machine"
            ) from exc
    return Engine(
        source,
        factory,
        adopt=adopter(config, store, factory) if config["adopt_merged"] else None,
        wrap_restored=consolidated(config),
        peer_snapshots=topic_peers(config) if config["snapshot_topic"] else None,
        store=store,
        publisher=publisher,
        predictions=predictions,
        dead_letters=dead_letters,
        config=engine_config,
        metrics_registry=metrics,
        on_progress=on_progress,
    )


def adopter(config: dict[str, Any], store: Any, factory: Callable[[], Any]) -> Any:
    """The ``adopt_merged`` checkpoint hook (:class:`streamk.merge.adopt.Adopter`): reads the
    newest merged model from the snapshot topic, or from the file store without one."""
    from ..merge.adopt import Adopter

    learner = factory()
    if hasattr(learner, "_wrapped_model") or hasattr(getattr(learner, "model", None), "learn_one"):
        raise ConfigError(
            f"adopt_merged needs a plain learner, but this config builds {type(learner).__name__}"
            ": set scale = none (each worker's scaler is its own feature space) and "
            "consolidate_every = 0"
        )
    name = config["merge_name"]
    if config["snapshot_topic"]:
        from ..snapshot.kafka import SnapshotReader

        reader = SnapshotReader(
            config["bootstrap_servers"],
            config["snapshot_topic"],
            consumer_config=kafka_settings(config),
        )
        timeout = max(1.0, min(30.0, config["max_poll_interval_ms"] / 3000))

        def merged() -> Any:
            return reader.latest(name, timeout, build=False)
    else:

        def merged() -> Any:  # read-only: the merger's damaged files are its own
            return store.newest_readable(name)[0]

    return Adopter(config["model_name"], name, store, merged, config["merge_compress"])


def topic_peers(config: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """Reads the newest snapshot of every model on the snapshot topic in one scan.

    The engine calls it on each assignment to see which events the other workers of the
    group hold in their durable models (their file stores are usually not shared).
    """
    from ..snapshot.kafka import SnapshotReader
    from ..snapshot.kafka_scheme import Assembler

    reader = SnapshotReader(
        config["bootstrap_servers"],
        config["snapshot_topic"],
        consumer_config=kafka_settings(config),
    )
    # Well inside the rebalance timeout: the assignment callback runs in the poll loop.
    timeout = max(1.0, min(30.0, config["max_poll_interval_ms"] / 3000))

    def read() -> dict[str, Any]:
        assembler = Assembler(None, reader.limits)
        reader.scan(assembler, timeout)
        return dict(assembler.best)

    return read


def install_signal_handlers(engine: Engine) -> None:
    """SIGTERM and SIGINT ask the engine to snapshot, commit and exit 0."""

    def handler(signum: int, frame: Any) -> None:
        print(
            f"streamk: {signal.Signals(signum).name}: finishing the batch, snapshotting",
            file=sys.stderr,
        )
        engine.stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
