"""``streamk snapshot ls|show|verify|reset``: inspect snapshot stores from a shell, start over."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.metrics import DEFINITIONS
from ..errors import SnapshotError, StreamkError
from ..snapshot import DEFAULT_LIMITS, Snapshot, SnapshotStore, loads
from ..snapshot.limits import is_intact
from ..snapshot.store import (
    LATEST,
    SET_ASIDE,
    SnapshotInfo,
    list_dir,
    list_set_aside,
    read_file,
)
from .argtypes import positive_seconds

__all__ = [
    "cmd_ls",
    "cmd_show",
    "cmd_verify",
    "cmd_reset",
    "cmd_ls_topic",
    "cmd_show_topic",
    "add_arguments",
    "main",
    "SCHEMA_VERSION",
]

#: Version of the ``--json`` output layout of these commands.
SCHEMA_VERSION = 1
OK, CORRUPT, USAGE = 0, 1, 2
_ASIDE_MARK = "(damaged, set aside)"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _collect(path: Path) -> list[tuple[str, SnapshotInfo]] | None:
    """(model, info) for a snapshot file, a model directory or a store root; None if missing.

    Files the store set aside as damaged (``*.snapshot.corrupt``) are included, with
    ``info.set_aside`` True: they are what an operator is told to inspect.
    """
    if path.is_file():
        st = path.stat()
        m = SET_ASIDE.fullmatch(path.name)
        seq = int(path.stem) if path.stem.isdigit() else int(m.group(1)) if m else -1
        info = SnapshotInfo(seq, path, st.st_size, st.st_mtime, set_aside=m is not None)
        return [(path.parent.name, info)]
    if not path.is_dir():
        return None
    infos = _model_files(path)
    if infos or (path / LATEST).exists():
        return [(path.name, info) for info in infos]
    return [
        (sub.name, info)
        for sub in sorted(p for p in path.iterdir() if p.is_dir())
        for info in _model_files(sub)
    ]


def _model_files(model_dir: Path) -> list[SnapshotInfo]:
    """A model directory's snapshot files and set-aside damaged files, by seq."""
    both = list_dir(model_dir) + list_set_aside(model_dir)
    return sorted(both, key=lambda info: (info.seq, info.set_aside))


def _latest_name(model_dir: Path) -> str | None:
    try:
        return (model_dir / LATEST).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _usage(message: str) -> int:
    print(f"streamk snapshot: {message}", file=sys.stderr)
    return USAGE


def cmd_ls(path_or_dir: str, json_out: bool = False) -> int:
    """List snapshots in a store root, a model directory, or one file (no verification)."""
    found = _collect(Path(path_or_dir))
    if found is None:
        return _usage(f"{path_or_dir}: no such file or directory")
    rows: list[dict[str, Any]] = [
        {
            "model": model,
            "seq": info.seq,
            "size": info.size,
            "mtime": info.mtime,
            "latest": _latest_name(info.path.parent) == info.path.name,
            "set_aside": info.set_aside,
            "path": str(info.path),
        }
        for model, info in found
    ]
    if json_out:
        print(json.dumps({"schema_version": SCHEMA_VERSION, "snapshots": rows}, indent=2))
        return OK
    if not rows:
        print(f"no snapshots under {path_or_dir}")
        return OK
    width = max(5, *(len(r["model"]) for r in rows))
    print(f"{'MODEL':<{width}}  {'SEQ':>12}  {'SIZE':>12}  {'MODIFIED (UTC)':<24}  PATH")
    for r in rows:
        mark = " *" if r["latest"] else f" {_ASIDE_MARK}" if r["set_aside"] else ""
        print(
            f"{r['model']:<{width}}  {r['seq']:>12}  {r['size']:>12,}  "
            f"{_iso(r['mtime']):<24}  {r['path']}{mark}"
        )
    if any(r["latest"] for r in rows):
        print("* = named by LATEST")
    if any(r["set_aside"] for r in rows):
        print(
            f"{_ASIDE_MARK} = found damaged and renamed *.corrupt by the store, kept for "
            f"inspection: streamk snapshot verify {path_or_dir} says why"
        )
    return OK


def _jsonable(value: Any) -> Any:
    """Plain state -> JSON: arrays summarised (small ones listed), bytes as their length."""
    if isinstance(value, np.ndarray):
        out: dict[str, Any] = {"dtype": value.dtype.str, "shape": list(value.shape)}
        if value.size <= 16:
            out["values"] = value.tolist() if value.dtype.kind != "c" else str(value.tolist())
        return {"array": out}
    if isinstance(value, bytes):
        return {"bytes": len(value)}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


def support_size(state: dict[str, Any]) -> int | None:
    """Number of support vectors, if the state says: ``n_support``, or ``support.X`` rows
    (or its strings/trees)."""
    for key in ("n_support", "support_size"):
        if isinstance(state.get(key), int):
            return state[key]
    support = state.get("support")
    if isinstance(support, dict):
        for key in ("n", "size", "n_support"):
            if isinstance(support.get(key), int) and not isinstance(support[key], bool):
                return support[key]
        support = support.get("X")
    if isinstance(support, np.ndarray) and support.ndim >= 1:
        return int(support.shape[0])
    if isinstance(support, list):  # support strings or trees (a string/tree kernel)
        return len(support)
    return None


def kernel_spec(state: dict[str, Any]) -> Any:
    """The kernel in use: the support set's spec, whose ``gamma="auto"`` is resolved to the
    number the model computes with; else ``params.kernel`` (what was configured)."""
    support = state.get("support")
    kernel = support.get("kernel") if isinstance(support, dict) else None
    if kernel is None:
        params = state.get("params")
        kernel = params.get("kernel") if isinstance(params, dict) else None
    return kernel


#: snapshot metrics that count things: shown as integers (they are stored as floats)
_COUNTS = frozenset(
    [name for name, (kind, _) in DEFINITIONS.items() if kind == "counter"]
    + ["support_size", "lag", "model_seq"]
) - {"snapshot_seconds_total", "consolidation_seconds_total"}


def _metrics(values: Any) -> Any:
    """Snapshot metrics as JSON, counters as integers (``events_in = 300``, not 300.0)."""
    out = _jsonable(values)
    if not isinstance(out, dict):
        return out
    return {
        k: int(v) if k in _COUNTS and isinstance(v, float) and v.is_integer() else v
        for k, v in out.items()
    }


def _kernel_text(spec: Any) -> str:
    """A kernel spec as a constructor call, ``RBF(gamma=1.0710415881798323)``."""
    if isinstance(spec, dict) and set(spec) == {"__kernel__"}:
        spec = spec["__kernel__"]
    if isinstance(spec, dict) and isinstance(spec.get("name"), str):
        args = ", ".join(
            f"{k}={_kernel_text(v) if isinstance(v, dict) else json.dumps(v, default=str)}"
            for k, v in spec.items()
            if k != "name"
        )
        return f"{spec['name']}({args})"
    if isinstance(spec, list):
        return "[" + ", ".join(_kernel_text(v) for v in spec) + "]"
    return json.dumps(spec, default=str)


def _describe(path: Path | str, snap: Snapshot) -> dict[str, Any]:
    state, serving = snap.state, None
    while "model_class" in state and isinstance(state.get("model"), dict):
        guard = state.get("guard")  # a consolidation guard: describe the learner serving
        if isinstance(guard, dict) and isinstance(guard.get("shadow"), dict):
            serving = guard.get("serving")
            state = guard["shadow"] if serving == "online" else state["model"]
        else:
            state = state["model"]  # a wrapper (consolidation, scaling): describe its learner
    params = state.get("params")
    return {
        "schema_version": SCHEMA_VERSION,
        "path": str(path),
        "class": snap.class_name,
        "format_version": snap.version,
        "writer": snap.writer,
        "seq": snap.seq,
        "created_at": snap.created_at,
        "created_at_iso": _iso(snap.created_at),
        "size": snap.size,
        "checksum": snap.checksum,
        "checksum_ok": True,
        "params": _jsonable(params) if isinstance(params, dict) else None,
        "kernel": _jsonable(kernel_spec(state)),
        "support_size": support_size(state),
        "serving": serving,
        "offsets": {s: {str(p): o for p, o in parts.items()} for s, parts in snap.offsets.items()},
        "metrics": _metrics(snap.metrics),
        "meta": _jsonable(snap.meta),
    }


def cmd_show(path: str, json_out: bool = False) -> int:
    """Describe one snapshot (a file, or the newest file of a model directory)."""
    target = Path(path)
    if target.is_dir():
        infos = list_dir(target)
        if not infos:
            aside = list_set_aside(target)
            if aside:
                return _usage(
                    f"{path}: no snapshot files in this directory, only {len(aside)} set aside "
                    f"as damaged (*.corrupt); see why with: streamk snapshot verify {path}"
                )
            return _usage(f"{path}: no snapshot files in this directory")
        target = infos[-1].path
    elif not target.is_file():
        return _usage(f"{path}: no such file or directory")
    try:
        snap = loads(read_file(target, DEFAULT_LIMITS), DEFAULT_LIMITS, build=False)
    except (OSError, SnapshotError) as exc:
        if json_out:
            out = {"schema_version": SCHEMA_VERSION, "path": str(target), "checksum_ok": False}
            print(json.dumps({**out, "error": str(exc)}, indent=2))
        else:
            print(f"CORRUPT {target}: {exc}", file=sys.stderr)
        return CORRUPT
    return _print_description(_describe(target, snap), json_out)


def _param_text(value: Any) -> str:
    """A parameter or metric for people: kernels as constructor calls, the rest as JSON."""
    if isinstance(value, dict) and set(value) == {"__kernel__"}:
        return _kernel_text(value)
    policy = value.get("__budget__") if isinstance(value, dict) else None
    if isinstance(policy, dict) and isinstance(policy.get("name"), str):
        budget = policy.get("budget")
        return f"{policy['name']}(budget={json.dumps(budget, default=str)})"
    return json.dumps(value, default=str)


def _configured(info: dict[str, Any]) -> str:
    """`` (resolved from ...)`` when the configured kernel (``gamma="auto"``) differs from
    the one in use."""
    params = info.get("params") or {}
    configured = params.get("kernel") if isinstance(params, dict) else None
    if configured is None or _kernel_text(configured) == _kernel_text(info["kernel"]):
        return ""
    return f"  (resolved from the configured {_kernel_text(configured)})"


def _print_description(info: dict[str, Any], json_out: bool) -> int:
    if json_out:
        print(json.dumps(info, indent=2, default=str))
        return OK
    lines = [
        ("path", info["path"]),
        ("class", info["class"]),
        ("format", f"streamk.snapshot v{info['format_version']} (writer: {info['writer']})"),
        ("seq", str(info["seq"])),
        ("created_at", f"{info['created_at_iso']} ({info['created_at']})"),
        ("size", f"{info['size']:,} bytes"),
        ("checksum", f"sha256 {info['checksum']} (verified)"),
        ("kernel", _kernel_text(info["kernel"]) + _configured(info)),
        ("support", "n/a" if info["support_size"] is None else f"{info['support_size']} vectors"),
    ]
    if info["serving"] is not None:
        lines.append(("serving", f"{info['serving']} (of the consolidation guard's two learners)"))
    for label, mapping in (("params", info["params"] or {}), ("metrics", info["metrics"])):
        items = [f"{k} = {_param_text(v)}" for k, v in mapping.items()] or ["-"]
        lines += [(label if i == 0 else "", item) for i, item in enumerate(items)]
    offsets = [f"{s}[{p}] = {o}" for s, parts in info["offsets"].items() for p, o in parts.items()]
    lines += [("offsets" if i == 0 else "", o) for i, o in enumerate(offsets or ["-"])]
    meta = [f"{k} = {json.dumps(v, default=str)}" for k, v in info["meta"].items()]
    lines += [("meta" if i == 0 else "", m) for i, m in enumerate(meta or ["-"])]
    for label, text in lines:
        print(f"{label:<11} {text}")
    return OK


def cmd_ls_topic(
    bootstrap_servers: str, topic: str, json_out: bool = False, timeout: float = 30.0
) -> int:
    """List every snapshot manifest on a Kafka topic with its status (checksums verified)."""
    from ..snapshot.kafka import SnapshotReader

    try:
        infos = SnapshotReader(bootstrap_servers, topic).list(timeout=timeout)
    except StreamkError as exc:
        return _usage(str(exc))
    if json_out:
        rows = [asdict(info) for info in infos]
        print(json.dumps({"schema_version": SCHEMA_VERSION, "topic": topic, "snapshots": rows}))
        return OK
    if not infos:
        print(f"no snapshots on topic {topic}")
        return OK
    width = max(5, *(len(i.name) for i in infos))
    print(
        f"{'MODEL':<{width}}  {'SEQ':>12}  {'SIZE':>12}  {'CHUNKS':>6}  {'STATUS':<10}  "
        f"{'CREATED (UTC)':<24}  PARTITION/OFFSET"
    )
    for i in infos:
        reason = f"  ({i.reason})" if i.reason else ""
        print(
            f"{i.name:<{width}}  {i.seq:>12}  {i.size:>12,}  {i.chunks:>6}  {i.status:<10}  "
            f"{_iso(i.created_at):<24}  {i.partition}/{i.offset}{reason}"
        )
    return OK


def cmd_show_topic(
    bootstrap_servers: str, topic: str, name: str, json_out: bool = False, timeout: float = 30.0
) -> int:
    """Describe the newest complete, verified snapshot of `name` on a Kafka topic."""
    from ..snapshot.kafka import SnapshotReader

    try:
        snap = SnapshotReader(bootstrap_servers, topic).latest(name, timeout=timeout, build=False)
    except StreamkError as exc:
        return _usage(str(exc))
    if snap is None:
        print(
            f"no complete, verified snapshot of {name!r} on topic {topic} "
            "(any that were rejected are logged above)",
            file=sys.stderr,
        )
        return CORRUPT
    return _print_description(
        _describe(f"kafka://{bootstrap_servers}/{topic}/{name}", snap), json_out
    )


def cmd_verify(path_or_dir: str, json_out: bool = False) -> int:
    """Verify every snapshot under a path (checksum, body, schema) and each LATEST pointer."""
    found = _collect(Path(path_or_dir))
    if found is None:
        return _usage(f"{path_or_dir}: no such file or directory")
    if not found:
        return _usage(f"{path_or_dir}: no snapshot files found")
    results = []
    for model, info in found:
        intact = False  # not loadable here, but not damaged: a newer format, over the limits
        if not info.regular:  # never opened: a FIFO would block the reader
            ok, reason = False, "not a regular file (skipped unopened)"
        else:
            try:  # exactly loads' validation, the learner built (as the engine would)
                loads(read_file(info.path, DEFAULT_LIMITS), DEFAULT_LIMITS, build=True)
                ok, reason = True, "ok"
            except (OSError, SnapshotError) as exc:
                ok, reason = False, str(exc)
                intact = isinstance(exc, SnapshotError) and is_intact(exc)
            reason = reason.removeprefix(f"{info.path}: ")
        if info.set_aside:
            reason = (
                f"set aside by the store as damaged; checked again: {reason}"
                if not ok
                else "set aside by the store as damaged, but it verifies now (a read error "
                f"at the time?); to use it again, rename it to {info.seq:012d}.snapshot"
            )
        results.append(
            {
                "model": model,
                "path": str(info.path),
                "ok": ok,
                "intact": ok or intact,
                "reason": reason,
                "set_aside": info.set_aside,
            }
        )
    for model_dir in sorted({info.path.parent for _, info in found}):
        name = _latest_name(model_dir)
        if Path(path_or_dir).is_dir() and name is not None and not (model_dir / name).is_file():
            reason = f"LATEST names {name!r}, which does not exist" + (
                " (the store set it aside as damaged)"
                if (model_dir / f"{name}.corrupt").exists()
                else ""
            )
            results.append(
                {
                    "model": model_dir.name,
                    "path": str(model_dir / LATEST),
                    "ok": False,
                    "intact": False,
                    "reason": reason,
                    "set_aside": False,
                }
            )
    bad = [r for r in results if not r["ok"]]
    stuck = _without_valid_snapshot(Path(path_or_dir), found, results)
    if json_out:
        print(
            json.dumps(
                {
                    "schema_version": SCHEMA_VERSION,
                    "ok": not bad,
                    "results": results,
                    "models_without_valid_snapshot": [d.name for d in stuck],
                },
                indent=2,
            )
        )
    else:
        for r in results:
            note = r["reason"] if not r["ok"] or r["set_aside"] else ""
            label = "OK     " if r["ok"] else "INTACT " if r["intact"] else "CORRUPT"
            print(f"{label} {r['path']}" + (note and f": {note}"))
        aside = sum(1 for r in bad if r["set_aside"])
        kept = sum(1 for r in bad if r["intact"])
        print(
            f"{len(results) - len(bad)} ok, {len(bad) - kept} corrupt"
            + (f" ({aside} of them set aside by the store as *.corrupt)" if aside else "")
            + (f", {kept} intact but not loadable by this streamk" if kept else "")
        )
        for model_dir in stuck:
            if any(r["intact"] and Path(r["path"]).parent == model_dir for r in bad):
                print(
                    f"model {model_dir.name!r} has no snapshot this streamk can load, but "
                    "intact ones (INTACT above): upgrade streamk, or raise the limits it "
                    "names; do not reset it (its model and offsets would be lost)"
                )
                continue
            print(
                f"model {model_dir.name!r} has no valid snapshot; restore a copy, or start it "
                f"fresh with: streamk snapshot reset --dir {model_dir.parent} "
                f"--model {model_dir.name}"
            )
    return CORRUPT if bad else OK


def _without_valid_snapshot(
    path: Path, found: list[tuple[str, SnapshotInfo]], results: list[dict[str, Any]]
) -> list[Path]:
    """Model directories verified whole whose every snapshot file failed: the engine stops
    on such a model ("no valid snapshot") until it is restored or reset."""
    if not path.is_dir():  # one file: its directory's other files were not looked at
        return []
    valid = {Path(r["path"]).parent for r in results if r["ok"] and not r["set_aside"]}
    dirs = {info.path.parent for _, info in found}
    return sorted(d for d in dirs if d not in valid)


def cmd_reset(directory: str, model: str, force: bool = False, json_out: bool = False) -> int:
    """Set a model's snapshot files aside (``<dir>/<model>/quarantine/<time>/``): a fresh start."""
    store = SnapshotStore(directory)
    try:
        moved = store.reset(model, force=force)
    except (OSError, SnapshotError) as exc:
        return _usage(f"reset: {exc}")
    if json_out:
        out = {"schema_version": SCHEMA_VERSION, "model": model, "moved": [str(p) for p in moved]}
        print(json.dumps(out, indent=2))
        return OK
    if not moved:
        print(f"nothing to reset: no snapshot files of {model!r} under {directory}")
        return OK
    print(f"moved {len(moved)} file(s) of model {model!r} to {moved[0].parent}:")
    for p in moved:
        print(f"  {p.name}")
    print(f"the next start of {model!r} is a fresh model (seqs continue above the old ones)")
    return OK


_EPILOGS = {
    "ls": """examples:
  # every model and snapshot in a store (* marks the file LATEST names)
  streamk snapshot ls ./snapshots
  # one model's snapshots as JSON
  streamk snapshot ls ./snapshots/fraud --json
  # every snapshot manifest on a Kafka topic, with status (latest, ok, incomplete, corrupt)
  streamk snapshot ls --topic snapshots --bootstrap-servers 127.0.0.1:9092
""",
    "show": """examples:
  # the newest snapshot of a model: class, hyper-parameters, offsets, checksum
  streamk snapshot show ./snapshots/fraud
  # one file, machine-readable
  streamk snapshot show ./snapshots/fraud/000000000042.snapshot --json
  # the newest complete, verified snapshot of a model on a Kafka topic
  streamk snapshot show --topic snapshots --name fraud --bootstrap-servers 127.0.0.1:9092
""",
    "verify": """examples:
  # check every snapshot in a store; exit code 1 if any is corrupt
  streamk snapshot verify ./snapshots
  # one file
  streamk snapshot verify ./snapshots/fraud/000000000042.snapshot
""",
    "reset": """Moves every snapshot file of the model (*.snapshot, *.corrupt, LATEST) into
DIR/MODEL/quarantine/<UTC time>/; nothing is deleted. Refuses a model that still
has a valid snapshot unless --force. Run it when the engine stops with
"no valid snapshot" (every snapshot damaged) and you accept starting over.

examples:
  # start model 'fraud' over after all its snapshots were damaged
  streamk snapshot reset --dir ./snapshots --model fraud
""",
}


def add_arguments(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``snapshot ls|show|verify|reset`` on an argparse subparsers object.

    Each leaf parser gets ``func`` (``args -> exit code``) as a default, river-style.
    """
    fmt = argparse.RawDescriptionHelpFormatter
    parser = subparsers.add_parser(
        "snapshot",
        help="list, inspect, verify and reset model snapshots",
        description="List, inspect, verify and reset model snapshots (docs/snapshot-format.md).",
        epilog="Run `streamk snapshot <command> --help` for examples.",
        formatter_class=fmt,
    )
    sub = parser.add_subparsers(dest="snapshot_command", metavar="{ls,show,verify,reset}")
    sub.required = True
    helps = {
        "ls": ("list snapshots in a store, a model directory, a file or a Kafka topic", "PATH"),
        "show": ("describe one snapshot (a file, a model directory's or topic's newest)", "PATH"),
        "verify": ("run the full load validation (learner built); exit 1 if any fails", "PATH"),
    }
    funcs = {
        "ls": lambda a: cmd_ls(a.path, json_out=a.json),
        "show": lambda a: cmd_show(a.path, json_out=a.json),
        "verify": lambda a: cmd_verify(a.path, json_out=a.json),
    }
    for name, (text, metavar) in helps.items():
        p = sub.add_parser(
            name, help=text, description=text, epilog=_EPILOGS[name], formatter_class=fmt
        )
        help_path = "snapshot file, model directory or store root"
        if name == "verify":
            p.add_argument("path", metavar=metavar, help=help_path)
        else:
            p.add_argument("path", metavar=metavar, nargs="?", help=f"{help_path} (or --topic)")
            _add_topic_arguments(p, with_name=name == "show")
        p.add_argument(
            "--json", action="store_true", help="machine-readable output with schema_version"
        )
        p.set_defaults(func=funcs[name] if name == "verify" else _with_topic(name, funcs[name]))
    text = "set a model's snapshots aside so it starts fresh (after all are damaged)"
    p = sub.add_parser(
        "reset", help=text, description=text, epilog=_EPILOGS["reset"], formatter_class=fmt
    )
    p.add_argument("--dir", required=True, help="the snapshot store (snapshot_dir)")
    p.add_argument("--model", required=True, help="the model name (model_name)")
    p.add_argument("--force", action="store_true", help="also set aside valid snapshots")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=lambda a: cmd_reset(a.dir, a.model, force=a.force, json_out=a.json))
    return parser


def _add_topic_arguments(p: argparse.ArgumentParser, *, with_name: bool) -> None:
    p.add_argument("--topic", help="read snapshots from this Kafka topic instead of a path")
    from ..engine.config import DEFAULTS

    default = DEFAULTS["bootstrap_servers"].default  # the address `streamk run` uses
    p.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("STREAMK_BOOTSTRAP_SERVERS", default),
        help=f"Kafka bootstrap servers (default: $STREAMK_BOOTSTRAP_SERVERS or {default})",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=30.0,
        help="seconds to read the topic (default: 30)",
    )
    if with_name:
        p.add_argument("--name", help="model name (the record key) to show, with --topic")


def _with_topic(command: str, file_func: Any) -> Any:
    """Dispatch to the topic variant when ``--topic`` is given, else to the path variant."""

    def run(a: argparse.Namespace) -> int:
        if a.topic is None:
            if a.path is None:
                return _usage(f"{command}: give a PATH or --topic")
            return file_func(a)
        if a.path is not None:
            return _usage(f"{command}: give a PATH or --topic, not both")
        if command == "ls":
            return cmd_ls_topic(a.bootstrap_servers, a.topic, a.json, a.timeout)
        if not a.name:
            return _usage("show --topic needs --name MODEL")
        return cmd_show_topic(a.bootstrap_servers, a.topic, a.name, a.json, a.timeout)

    return run


def main(argv: list[str] | None = None) -> int:
    """Run ``snapshot ...`` standalone: ``python -m streamk.cli.snapshot ls ./snapshots``."""
    parser = argparse.ArgumentParser(prog="streamk")
    add_arguments(parser.add_subparsers(dest="command", required=True))
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["snapshot"]:
        argv = ["snapshot", *argv]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
