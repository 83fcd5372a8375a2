"""Engine configuration: one table of defaults, a TOML file, ``STREAMK_*`` variables, flags.

Precedence, lowest first: :data:`DEFAULTS`, the TOML file (``streamk run --config``),
environment variables (``STREAMK_<KEY>`` upper-cased, e.g. ``STREAMK_BOOTSTRAP_SERVERS``),
command-line flags. Unknown keys and ill-typed values raise :class:`ConfigError` naming
the key, the value and what was expected. ``streamk run --help`` and
``docs/configuration.md`` are built from the same table, so they cannot drift apart.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import re
import socket
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..consolidation.limits import DEFAULT_WINDOW_LIMITS
from ..consolidation.wrapper import NOVELTY_NOT_CONSOLIDATED
from ..errors import ConfigError
from ..snapshot.limits import DEFAULT_LIMITS
from .registry import LEARNERS, RANKS_HELP, parse_ranks

__all__ = ["Option", "DEFAULTS", "load_config", "render_table", "default_model_name"]

log = logging.getLogger(__name__)


_INT_MAX = 2**63 - 1
_MS_MAX = 2**31 - 1  # Kafka's millisecond settings are 32-bit


@dataclass(frozen=True)
class Option:
    default: Any
    kind: type
    help: str
    #: the accepted values, when they are a fixed list
    choices: tuple[str, ...] | None = None
    #: inclusive bounds of a number
    low: float | None = None
    high: float | None = None

    def accepted(self) -> str:
        """The accepted values in words, for error messages and ``--help``."""
        if self.choices is not None:
            *head, last = self.choices
            return f"{', '.join(head)} or {last}" if head else last
        if self.kind is bool:
            return "true or false"
        low = "" if self.low is None else f">= {_number(self.low)}"
        high = "" if self.high is None else f"<= {_number(self.high)}"
        return " and ".join(x for x in (low, high) if x) or f"a {self.kind.__name__}"


def _number(value: float) -> str:
    """A bound as a reader checks it: ``1048576``, not ``1.04858e+06``; ``0.5`` as it is."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


#: every key a config may set: default, type and meaning
DEFAULTS: dict[str, Option] = {
    # source
    "bootstrap_servers": Option("127.0.0.1:9092", str, "Kafka bootstrap servers, comma-separated"),
    "topic": Option("events", str, "topic the events are read from"),
    "group": Option("streamk", str, "consumer group id (engines in one group share partitions)"),
    "transport": Option(
        "kafka-python",
        str,
        "kafka-python, or confluent (extra [kafka-fast])",
        choices=("kafka-python", "confluent"),
    ),
    "max_poll_interval_ms": Option(
        300_000, int, "Kafka max.poll.interval.ms (rebalance timeout)", low=1, high=_MS_MAX
    ),
    "session_timeout_ms": Option(
        10_000, int, "Kafka session.timeout.ms (a dead engine's leave)", low=1, high=_MS_MAX
    ),
    "heartbeat_interval_ms": Option(
        3_000, int, "Kafka heartbeat.interval.ms (< session / 3)", low=1, high=_MS_MAX
    ),
    "security_protocol": Option(
        "PLAINTEXT",
        str,
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    ),
    "sasl_mechanism": Option(
        "",
        str,
        "SASL mechanism, e.g. PLAIN or SCRAM-SHA-512",
        choices=("", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"),
    ),
    "sasl_username": Option("", str, "SASL user name"),
    "sasl_password": Option("", str, "SASL password (prefer STREAMK_SASL_PASSWORD)"),
    "ssl_cafile": Option("", str, "CA certificate file for SSL"),
    "ssl_certfile": Option(
        "", str, "client certificate file (PEM) for SSL with client authentication (mTLS)"
    ),
    "ssl_keyfile": Option("", str, "the client certificate's private key file (PEM)"),
    "ssl_password": Option(
        "", str, "password of ssl_keyfile, if it has one (prefer STREAMK_SSL_PASSWORD)"
    ),
    # learner
    "learner": Option(
        "perceptron",
        str,
        "perceptron, margin-perceptron, adatron (classifiers), svr (regression), ranker "
        "(ordinal labels) or novelty (flags novel events; labels are not needed)",
        choices=tuple(LEARNERS),
    ),
    "ranks": Option("", str, RANKS_HELP + "; learner = ranker only"),
    "kernel": Option(
        "rbf",
        str,
        "rbf[:gamma], laplacian[:gamma], linear, cosine or poly[:degree[:scale[:offset]]], "
        "each optionally +bias; on text or trees: [norm-]spectrum:p, mismatch:k:m[:alphabet], "
        "gap:p[:lam], rgap:p:m[:lam], subtree, corooted",
    ),
    "budget": Option(
        500,
        int,
        "maximum support vectors (0: unbounded); at most what a snapshot may hold: "
        f"{DEFAULT_LIMITS.max_support:,} vectors, and budget x max_feature_names x 8 bytes "
        f"at most {DEFAULT_LIMITS.max_bytes >> 20} MiB",
        low=0,
        high=DEFAULT_LIMITS.max_support,
    ),
    "policy": Option("RemoveOldest", str, "budget policy class name"),
    "scale": Option(
        "auto",
        str,
        "on-line feature standardisation in front of the learner, kept in its snapshots: "
        "standard, none, or auto (standard for a classifier or regressor without "
        "consolidation, whose window holds raw rows; none otherwise)",
        choices=("auto", "standard", "none"),
    ),
    "consolidate_every": Option(
        0,
        int,
        "re-solve the model by batch SMO every N labelled events "
        "and when the support set fills (0: off)",
        low=0,
        high=_INT_MAX,
    ),
    "consolidate_window": Option(
        1000,
        int,
        "recent labelled events the batch solver sees (with budget, at most 16384 rows: "
        "the Gram's 2 GiB; times max_feature_names x 8 bytes, at most 512 MiB)",
        low=1,
        high=DEFAULT_WINDOW_LIMITS.max_rows,  # (a snapshot may hold no larger window)
    ),
    "consolidate_guard": Option(
        500,
        int,
        "keep an unconsolidated copy of the learner learning beside the consolidated one and "
        "serve whichever erred less over the last N labelled events (0: always the "
        "consolidated one; the copy doubles the learning work and the snapshot)",
        low=0,
        high=1 << 20,
    ),
    "consolidate_mode": Option(
        "sync",
        str,
        "sync (deterministic points) or background (thread)",
        choices=("sync", "background"),
    ),
    # snapshots
    "model_name": Option(
        "model",
        str,
        "model name in snapshot stores and topics, one per worker; auto: the pod name "
        "(HOSTNAME), else the host name, made a valid name (stable only where that name "
        "is, as for a StatefulSet pod)",
    ),
    "snapshot_dir": Option("./snapshots", str, "directory of the file snapshot store"),
    "snapshot_keep": Option(
        5, int, "snapshots kept per model in the file store", low=1, high=100_000
    ),
    "snapshot_every": Option(
        10_000, int, "snapshot after this many records (0: off)", low=0, high=_INT_MAX
    ),
    "snapshot_seconds": Option(
        60.0, float, "snapshot after this many seconds (0: off)", low=0, high=1e9
    ),
    "snapshot_topic": Option("", str, "Kafka topic snapshots are also published to"),
    # outputs
    "predictions_topic": Option("", str, "topic predictions of unlabelled events go to"),
    "predictions_file": Option("", str, "file (.jsonl or .msgpack) predictions go to"),
    "predictions_layout": Option(
        "record",
        str,
        "record (a message per prediction) or block (a message per poll batch; read "
        "either with streamk.sinks.decode_predictions)",
        choices=("record", "block"),
    ),
    "predictions_proba": Option(
        False, bool, "publish each prediction's class probabilities too (classifiers)"
    ),
    "dead_letter_topic": Option("", str, "topic rejected records go to"),
    "dead_letter_dir": Option("", str, "directory whose dead-letters.jsonl gets rejected records"),
    "on_offset_beyond_end": Option(
        "fail",
        str,
        "when a partition's log is not the one the model learned (the topic was deleted and "
        "recreated, at start-up or while the engine reads it; checked before every snapshot): "
        "fail (stop with exit 2, naming the remedy, no snapshot written) or earliest (learn "
        "the partition from its start, on top of the last snapshot)",
        choices=("fail", "earliest"),
    ),
    # loop
    "max_records": Option(500, int, "records per poll (micro-batch size)", low=1, high=1_000_000),
    "max_feature_names": Option(
        10_000,
        int,
        "most distinct feature names the model may meet (every support vector is as wide as "
        "them); an event bringing more is a dead letter",
        low=1,
        high=10_000_000,
    ),
    "max_feature_name_chars": Option(
        1000,
        int,
        "longest feature name (characters); a longer one is a dead letter",
        low=1,
        high=1 << 20,
    ),
    "poll_timeout": Option(0.5, float, "seconds a poll waits for a record", low=0, high=3600),
    "max_events": Option(
        0, int, "stop after this many records (0: no limit)", low=0, high=_INT_MAX
    ),
    "stop_when_idle": Option(
        0.0, float, "stop after this many idle seconds (0: never)", low=0, high=1e9
    ),
    "metrics_port": Option(
        0,
        int,
        "serve Prometheus metrics, /healthz and /ready on METRICS_HOST:PORT (0: off)",
        low=0,
        high=65535,
    ),
    "metrics_host": Option(
        "127.0.0.1", str, "address the metrics endpoint binds (0.0.0.0 in a container)"
    ),
    # scale-out roles (streamk merge, streamk score)
    "merge_name": Option(
        "merged", str, "name the merger publishes the merged model under (streamk merge)"
    ),
    "merge_every": Option(
        60.0,
        float,
        "seconds between the merger's passes (a pass whose worker snapshots are unchanged "
        "publishes nothing)",
        low=0.1,
        high=1e9,
    ),
    "merge_compress": Option(
        "auto",
        str,
        "how the merged support set is brought to the budget (see docs/operations.md, "
        "Merging models)",
        choices=("auto", "project", "solve", "policy"),
    ),
    "adopt_merged": Option(
        False,
        bool,
        "a worker continues from the newest merged model (merge_name) plus what it learned "
        "since, at each checkpoint after a new merge; offsets unchanged (needs scale = none, "
        "no consolidation; see docs/operations.md, Adopting the merged model)",
    ),
    "score_topic": Option(
        "", str, "topic streamk score reads unlabelled events from (empty: `topic`)"
    ),
    "score_group": Option(
        "streamk-score", str, "consumer group of the scorers (not the workers' `group`)"
    ),
}


_BOOLEANS = {"true": True, "1": True, "yes": True, "on": True}
_BOOLEANS.update({"false": False, "0": False, "no": False, "off": False})


def _coerce(key: str, value: Any, source: str) -> Any:
    kind = DEFAULTS[key].kind
    if key == "ranks":  # TOML may write a number or a list: kept as its text form
        return _ranks_text(value, source)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    if kind is bool:
        spelling = value.strip().lower() if isinstance(value, str) else None
        if spelling in _BOOLEANS:
            return _BOOLEANS[spelling]
    elif isinstance(value, str):
        try:
            return _finite(kind(value.strip()) if kind is not str else value)
        except (ValueError, OverflowError):
            pass
    elif kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    raise ConfigError(
        f"{source}: {key} must be {kind.__name__} ({DEFAULTS[key].help}), got {value!r}"
    )


def _ranks_text(value: Any, source: str) -> str:
    """``ranks`` as text (``5``, ``[1, 2, 3]`` and ``"1,2,3"`` alike), checked now."""
    if isinstance(value, list) and all(isinstance(v, int | str) for v in value):
        words = [str(v).lower() if isinstance(v, bool) else str(v).strip() for v in value]
        if any("," in w for w in words):
            raise ConfigError(f"{source}: ranks labels may not contain a comma, got {value!r}")
        text = ",".join(words) + ("," if len(words) < 2 else "")  # one label is not a count
    elif isinstance(value, int | str) and not isinstance(value, bool):
        text = str(value)
    else:
        raise ConfigError(f"{source}: ranks must be {RANKS_HELP}; got {value!r:.100}")
    try:
        parse_ranks(text)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return text


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(value)
    return value


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The effective configuration: defaults, then file, then environment, then overrides."""
    config = {k: opt.default for k, opt in DEFAULTS.items()}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"no config file at {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
        flat = _flatten(data)
        unknown = sorted(set(flat) - set(DEFAULTS))
        if unknown:
            close = {k: difflib.get_close_matches(k, DEFAULTS, n=1) for k in unknown}
            hints = [f"{k!r}: did you mean {c[0]!r}?" for k, c in close.items() if c]
            hint = f" ({'; '.join(hints)})" if hints else ""
            raise ConfigError(
                f"{path}: unknown keys {unknown}{hint}; known keys: {sorted(DEFAULTS)}"
            )
        for key, value in flat.items():
            config[key] = _coerce(key, value, str(path))
    env = os.environ if environ is None else environ
    for key in DEFAULTS:
        name = "STREAMK_" + key.upper()
        if name in env:
            config[key] = _coerce(key, env[name], name)
    _warn_unknown_env(env)
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in DEFAULTS:
            raise ConfigError(f"unknown setting {key!r}")
        config[key] = _coerce(key, value, f"--{key.replace('_', '-')}")
    if config["model_name"] in ("", "auto"):
        config["model_name"] = default_model_name(dict(env))
    _check(config)
    return config


#: ``STREAMK_*`` variables that are not settings: the pure-NumPy switch, the broker binary
OTHER_ENV = ("STREAMK_NO_ACCEL", "STREAMK_TANSU_BIN")

_warned_env: set[str] = set()


def _warn_unknown_env(env: Any) -> None:
    """Warn, once per name, about a ``STREAMK_*`` variable that is no setting.

    A misspelt one (``STREAMK_BUDJET``) would otherwise be ignored in silence and the
    default used; the warning names the closest known variable.
    """
    known = ["STREAMK_" + key.upper() for key in DEFAULTS] + list(OTHER_ENV)
    for name in sorted(env):
        if not name.startswith("STREAMK_") or name in known or name in _warned_env:
            continue
        _warned_env.add(name)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        log.warning(
            "ignoring environment variable %s: it is not a streamk setting%s "
            "(every setting and its variable: docs/configuration.md)",
            name,
            hint,
        )


_NOT_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def default_model_name(environ: dict[str, str] | None = None) -> str:
    """This worker's model name when none is configured: unique and stable per worker.

    Kubernetes sets ``HOSTNAME`` to the pod name (stable across restarts in a StatefulSet:
    ``streamk-0``, ``streamk-1``, ...); elsewhere the host name. Characters outside the
    store's name rule (letters, digits, ``.``, ``_``, ``-``; 1-128, starting with a letter
    or digit) become ``-``. Workers started from one config then write distinct models
    instead of clashing on one name (issue 18). ``"model"`` if nothing usable is left.
    """
    env = os.environ if environ is None else environ
    raw = env.get("HOSTNAME", "").strip() or socket.gethostname()
    name = _NOT_NAME.sub("-", raw).lstrip("._-")[:128]
    return name or "model"


def _flatten(data: dict[str, Any]) -> dict[str, Any]:
    """Sections are for readers only: ``[snapshots] every = 5`` is not special; keys are flat."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(_flatten(value))
        else:
            flat[key] = value
    return flat


def _check(config: dict[str, Any]) -> None:
    for key, opt in DEFAULTS.items():
        value = config[key]
        bad = (
            (opt.choices is not None and value not in opt.choices)
            or (opt.low is not None and value < opt.low)
            or (opt.high is not None and value > opt.high)
            or (isinstance(value, float) and not math.isfinite(value))
        )
        if bad:
            raise ConfigError(f"{key} must be {opt.accepted()}, got {value!r}")
    if parse_ranks(config["ranks"]) is not None and config["learner"] != "ranker":
        raise ConfigError(
            f"ranks applies to learner = ranker only, got learner = {config['learner']!r}; "
            "leave ranks empty or choose learner = ranker"
        )
    if config["learner"] == "novelty" and config["consolidate_every"]:
        raise ConfigError(
            f"consolidate_every must be 0 with learner = novelty: {NOVELTY_NOT_CONSOLIDATED}"
        )
    if config["scale"] == "standard" and config["consolidate_every"]:
        raise ConfigError(
            "scale = standard cannot be combined with consolidate_every: consolidation "
            "re-solves on raw rows; set scale = none (or auto) to consolidate"
        )
    directory = Path(config["snapshot_dir"])
    if directory.exists() and not directory.is_dir():
        raise ConfigError(
            f"snapshot_dir {str(directory)!r} is a file, not a directory: give a directory "
            "(it is created if missing)"
        )
    if (
        config["transport"] == "confluent"
        and config["session_timeout_ms"] > config["max_poll_interval_ms"]
    ):  # librdkafka's rule (kafka-python has none): say it with our keys' names
        raise ConfigError(
            f"with transport = confluent, session_timeout_ms ({config['session_timeout_ms']}) "
            f"must not exceed max_poll_interval_ms ({config['max_poll_interval_ms']})"
        )
    interval = config["max_poll_interval_ms"] / 1000
    if config["poll_timeout"] >= interval:
        raise ConfigError(
            f"poll_timeout ({config['poll_timeout']} s) must be well below "
            f"max_poll_interval_ms ({config['max_poll_interval_ms']} ms), or the group rebalances"
        )


def render_table() -> str:
    """The DEFAULTS table as Markdown (docs/configuration.md is this text)."""
    rows = ["| key | default | accepted | environment | meaning |", "|---|---|---|---|---|"]
    for key, opt in DEFAULTS.items():
        accepted = opt.accepted() if opt.kind is not str or opt.choices else "text"
        rows.append(
            f"| `{key}` | `{opt.default!r}` | {accepted} | `STREAMK_{key.upper()}` | {opt.help} |"
        )
    return "\n".join(rows) + "\n"
