"""Scenario files: what stream to generate, what to break in it, and how to run the engine.

A scenario is a TOML file with these tables (every key is checked; an unknown key or an
ill-typed value raises :class:`ScenarioError` naming the file, the table and the key)::

    [scenario]        name, description, seed, format ("msgpack" | "jsonl")
    [[segments]]      generator, length, and the generator's own parameters, in order
    [labels]          unlabelled (share never labelled), delayed (share labelled later),
                      delay (events between the unlabelled event and its label)
    [faults]          duplicates (share), out_of_order (share), window (events)
    [faults.malformed] one share per kind in simulators.faults.KINDS
    [engine]          keys of streamk.engine.config.DEFAULTS (learner, kernel, budget, ...)
    [report]          every (events between timeline points)

See ``simulators/README.md`` for the meaning of each key.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from streamk.engine.config import DEFAULTS
from streamk.errors import ConfigError, StreamkError

from .faults import KINDS, NUMERIC_KINDS, TEXT_KINDS
from .streams import GENERATORS, TEXT, check_segment, min_drift_width

__all__ = ["Scenario", "Segment", "ScenarioError", "load_scenario", "parse_scenario"]

#: engine keys the simulator sets itself (outputs go to the run's directory)
RESERVED_ENGINE_KEYS = frozenset(
    {
        "snapshot_dir",
        "dead_letter_dir",
        "dead_letter_topic",
        "predictions_file",
        "predictions_topic",
        "snapshot_topic",
        "metrics_port",
        "max_events",
        "stop_when_idle",
    }
)

#: engine settings that differ from streamk's defaults, for deterministic replays
ENGINE_DEFAULTS: dict[str, Any] = {"snapshot_every": 1000, "snapshot_seconds": 0.0}


class ScenarioError(ConfigError):
    """A scenario file is missing, not TOML, or has an unknown key or a bad value."""


@dataclass(frozen=True)
class Segment:
    """One stretch of the stream: a generator, its parameters, and how many events."""

    generator: str
    length: int
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    """A validated scenario (see the module docstring for the file layout)."""

    name: str
    seed: int
    segments: tuple[Segment, ...]
    description: str = ""
    format: str = "msgpack"
    unlabelled: float = 0.0
    delayed: float = 0.0
    delay: int = 100
    duplicates: float = 0.0
    out_of_order: float = 0.0
    window: int = 20
    malformed: dict[str, float] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    report_every: int = 1000
    scaleout: dict[str, Any] = field(default_factory=dict)

    @property
    def length(self) -> int:
        """Events drawn from the generators (before label events, duplicates and faults)."""
        return sum(s.length for s in self.segments)

    def engine_config(self) -> dict[str, Any]:
        """Engine keys: the simulator's defaults, then the scenario's ``[engine]`` table."""
        return {**ENGINE_DEFAULTS, **self.engine}

    def fingerprint(self) -> str:
        """SHA-256 of the canonical scenario: a log made from an equal one can be reused."""
        fields = asdict(self)
        if not fields["scaleout"]:  # logs made before the table existed stay reusable
            del fields["scaleout"]
        text = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


_TABLES = {
    "scenario": {"name": str, "description": str, "seed": int, "format": str},
    "labels": {"unlabelled": float, "delayed": float, "delay": int},
    "faults": {"duplicates": float, "out_of_order": float, "window": int, "malformed": dict},
    "report": {"every": int},
    # a simulated consumer group (simulators/scaleout.py); shares of the stream for *_at
    "scaleout": {
        "workers": int,
        "partitions": int,
        "crash_worker": int,
        "crash_at": float,
        "restart_at": float,
        "join_at": float,
    },
}


def load_scenario(
    path: str | Path, scale: float = 1.0, length: int | None = None, seed: int | None = None
) -> Scenario:
    """Read and validate a scenario file.

    Parameters
    ----------
    path
        The TOML file.
    scale
        Multiply every segment's length (and drift positions and widths) by this.
    length
        Alternatively, the total number of generated events (segments keep their shares).
    seed
        Replace the scenario's seed.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"no scenario file at {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path} is not valid TOML: {exc}") from None
    return parse_scenario(data, str(path), scale=scale, length=length, seed=seed)


def parse_scenario(
    data: dict[str, Any],
    where: str = "scenario",
    scale: float = 1.0,
    length: int | None = None,
    seed: int | None = None,
) -> Scenario:
    """Validate a scenario already parsed from TOML (see :func:`load_scenario`)."""
    unknown = sorted(set(data) - set(_TABLES) - {"segments", "engine"})
    if unknown:
        raise ScenarioError(
            f"{where}: unknown table(s) {unknown}; "
            f"known: {sorted([*_TABLES, 'segments', 'engine'])}"
        )
    t = {name: _table(data, name, where) for name in _TABLES}
    head = t["scenario"]
    if "name" not in head:
        raise ScenarioError(f"{where}: [scenario] needs a name")
    fmt = head.get("format", "msgpack")
    if fmt not in ("msgpack", "jsonl"):
        raise ScenarioError(f"{where}: [scenario] format must be 'msgpack' or 'jsonl', got {fmt!r}")
    segments = _segments(data.get("segments"), where)
    total = sum(s.length for s in segments)
    if length is not None:
        if length < 1:
            raise ScenarioError(f"length must be >= 1, got {length}")
        scale = length / total
    if not (scale > 0 and math.isfinite(scale)):
        raise ScenarioError(f"scale must be a positive number, got {scale!r}")
    if scale != 1.0:
        segments = [_scaled(s, scale) for s in segments]
    labels, faults = t["labels"], t["faults"]
    for key in ("unlabelled", "delayed"):
        _share(labels, key, f"{where}: [labels] {key}")
    if labels.get("unlabelled", 0.0) + labels.get("delayed", 0.0) > 1.0:
        raise ScenarioError(f"{where}: [labels] unlabelled + delayed must be at most 1")
    for key in ("duplicates", "out_of_order"):
        _share(faults, key, f"{where}: [faults] {key}")
    for key, table in (("delay", labels), ("window", faults), ("every", t["report"])):
        if key in table and table[key] < 1:
            raise ScenarioError(f"{where}: {key} must be >= 1, got {table[key]}")
    malformed = dict(faults.get("malformed", {}))
    text = _text_stream(segments, where)
    for kind in list(malformed):
        if kind not in KINDS:
            raise ScenarioError(
                f"{where}: [faults.malformed] unknown kind {kind!r}; known: {sorted(KINDS)}"
            )
        if kind in (NUMERIC_KINDS if text else TEXT_KINDS):
            stream = "a text stream" if text else "numeric features"
            raise ScenarioError(
                f"{where}: [faults.malformed] {kind} does not apply to {stream}; use "
                f"{sorted(KINDS.keys() - (NUMERIC_KINDS if text else TEXT_KINDS))}"
            )
        _share(malformed, kind, f"{where}: [faults.malformed] {kind}")
    return Scenario(
        name=head["name"],
        seed=head.get("seed", 42) if seed is None else seed,
        segments=tuple(segments),
        description=head.get("description", ""),
        format=fmt,
        unlabelled=labels.get("unlabelled", 0.0),
        delayed=labels.get("delayed", 0.0),
        delay=labels.get("delay", 100),
        duplicates=faults.get("duplicates", 0.0),
        out_of_order=faults.get("out_of_order", 0.0),
        window=faults.get("window", 20),
        malformed={k: float(v) for k, v in sorted(malformed.items())},
        engine=_engine(data.get("engine", {}), where),
        report_every=t["report"].get("every", 1000),
        scaleout=_scaleout(t["scaleout"], where),
    )


def _scaleout(table: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``[scaleout]`` table, checked: shares in (0, 1), a restart after the crash."""
    if not table:
        return {}
    out = {"workers": 3, "partitions": 6, "crash_worker": 1, **table}
    if out["workers"] < 2 or out["partitions"] < out["workers"] + ("join_at" in out):
        raise ScenarioError(
            f"{where}: [scaleout] needs workers >= 2 and at least one partition per worker"
        )
    if not 0 <= out["crash_worker"] < out["workers"]:
        raise ScenarioError(f"{where}: [scaleout] crash_worker must name one of the workers")
    for key in ("crash_at", "restart_at", "join_at"):
        if key in out and not 0 < out[key] < 1:
            raise ScenarioError(f"{where}: [scaleout] {key} is a share of the stream, in (0, 1)")
    if "restart_at" in out and out["restart_at"] <= out.get("crash_at", 1):
        raise ScenarioError(f"{where}: [scaleout] restart_at must come after crash_at")
    return out


def _table(data: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ScenarioError(f"{where}: [{name}] must be a table")
    spec = _TABLES[name]
    out = {}
    for key, value in table.items():
        if key not in spec:
            raise ScenarioError(f"{where}: [{name}] unknown key {key!r}; known: {sorted(spec)}")
        out[key] = _typed(value, spec[key], f"{where}: [{name}] {key}")
    return out


def _typed(value: Any, kind: type, what: str) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ScenarioError(f"{what} must be {kind.__name__}, got {value!r}")
    return value


def _share(table: dict[str, Any], key: str, what: str) -> None:
    if key in table:
        table[key] = _typed(table[key], float, what)
        if not 0.0 <= table[key] <= 1.0:
            raise ScenarioError(f"{what} is a share and must be in [0, 1], got {table[key]}")


def _segments(raw: Any, where: str) -> list[Segment]:
    if not raw or not isinstance(raw, list):
        raise ScenarioError(
            f"{where}: needs at least one [[segments]] table with a generator and a length"
        )
    out = []
    for i, seg in enumerate(raw):
        what = f"{where}: segment {i + 1}"
        seg = dict(seg)
        name = seg.pop("generator", None)
        if name not in GENERATORS:
            raise ScenarioError(
                f"{what}: generator must be one of {sorted(GENERATORS)}, got {name!r}"
            )
        n = _typed(seg.pop("length", None), int, f"{what} length")
        if n < 1:
            raise ScenarioError(f"{what}: length must be >= 1, got {n}")
        try:
            check_segment(name, n, seg)
        except (TypeError, ValueError) as exc:
            raise ScenarioError(f"{what} ({name}): {exc}") from None
        out.append(Segment(name, n, seg))
    return out


def _text_stream(segments: list[Segment], where: str) -> bool:
    """True when every segment is text; mixing text and numeric segments is an error."""
    kinds = {seg.generator in TEXT for seg in segments}
    if len(kinds) > 1:
        raise ScenarioError(
            f"{where}: text segments ({', '.join(TEXT)}) cannot be mixed with numeric ones: "
            "one model takes either strings or numbers"
        )
    return kinds == {True}


def _scaled(seg: Segment, scale: float) -> Segment:
    params = dict(seg.params)
    for key in ("position", "width"):
        if key in params:
            params[key] = max(1, round(params[key] * scale))
    if "width" in params:  # a scaled-down drift stays as abrupt as a float allows
        params["width"] = max(params["width"], min_drift_width(params.get("position", 5000)))
    return Segment(seg.generator, max(1, round(seg.length * scale)), params)


def _engine(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: [engine] must be a table")
    out = {}
    for key, value in raw.items():
        if key in RESERVED_ENGINE_KEYS:
            raise ScenarioError(
                f"{where}: [engine] {key} is set by the simulator (outputs go to the run's "
                "directory); remove it"
            )
        if key not in DEFAULTS:
            raise ScenarioError(
                f"{where}: [engine] unknown key {key!r}; see docs/configuration.md "
                f"(known: {sorted(set(DEFAULTS) - RESERVED_ENGINE_KEYS)})"
            )
        out[key] = _typed(value, DEFAULTS[key].kind, f"{where}: [engine] {key}")
    from streamk.engine.config import load_config
    from streamk.engine.runner import model_factory

    try:  # ranges, cross-key checks, learner/kernel/policy names: as the engine would
        model_factory(load_config(overrides={**ENGINE_DEFAULTS, **out}, environ={}))
    except (StreamkError, ValueError, TypeError) as exc:
        raise ScenarioError(f"{where}: [engine] {exc}") from None
    return out
