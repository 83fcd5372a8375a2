"""Allow-list of learner classes a snapshot may name, resolved lazily by import path."""

from __future__ import annotations

import importlib
import re
import threading
from typing import Any

from ..errors import SnapshotError

__all__ = ["CLASSES", "register_class", "resolve_class", "class_name_of"]

#: Public class name -> ``"module:QualName"``. Only these names are ever imported.
CLASSES: dict[str, str] = {
    "KernelPerceptron": "streamk.learners.perceptron:KernelPerceptron",
    "KernelAdatron": "streamk.learners.adatron:KernelAdatron",
    "OnlineSVR": "streamk.learners.svr:OnlineSVR",
    "OnlineRanker": "streamk.learners.ranking:OnlineRanker",
    "KernelNovelty": "streamk.learners.novelty:KernelNovelty",
    "MarginPerceptron": "streamk.learners.budgeted:MarginPerceptron",
    "StandardScaledClassifier": "streamk.learners.scaling:StandardScaledClassifier",
    "StandardScaledRegressor": "streamk.learners.scaling:StandardScaledRegressor",
    # consolidation wrappers: the learner plus window, counters and trigger state
    "ConsolidatedClassifier": "streamk.consolidation.wrapper:ConsolidatedClassifier",
    "ConsolidatedRegressor": "streamk.consolidation.wrapper:ConsolidatedRegressor",
    # drift detectors a consolidated model may carry
    "MMDDrift": "streamk.kernels.measures:MMDDrift",
}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,127}")
_PATH = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_resolved: dict[str, Any] = {}
_lock = threading.Lock()


def register_class(name: str, path: str, *, replace: bool = False) -> None:
    """Allow snapshots naming `name` to be loaded as the class at `path`.

    Parameters
    ----------
    name
        The public name written in snapshots, e.g. ``"KernelPerceptron"``.
    path
        ``"package.module:QualName"``; imported only when such a snapshot is loaded.
    replace
        Allow re-pointing an already registered name at a different path.

    Raises
    ------
    SnapshotError
        On a malformed name or path, or a name already registered elsewhere.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SnapshotError(f"class name {name!r} must be an identifier of at most 128 chars")
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise SnapshotError(f"class path {path!r} must look like 'package.module:ClassName'")
    with _lock:
        old = CLASSES.get(name)
        if old is not None and old != path and not replace:
            raise SnapshotError(
                f"class name {name!r} is already registered as {old!r}; pass replace=True "
                "to re-point it"
            )
        CLASSES[name] = path
        if old != path:
            _resolved.pop(name, None)


def resolve_class(name: str) -> Any:
    """Import and return the class registered under `name`.

    Raises
    ------
    SnapshotError
        If `name` is not in the allow-list, or its module or attribute cannot be imported.
    """
    path = CLASSES.get(name) if isinstance(name, str) else None
    if path is None:
        raise SnapshotError(
            f"snapshot names class {name!r}, which is not in the allow-list "
            f"({', '.join(sorted(CLASSES))}); register it with "
            "streamk.snapshot.register_class(name, 'module:Class') if it is trusted"
        )
    cls = _resolved.get(name)
    if cls is not None:
        return cls
    module_name, _, qualname = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # ImportError, AttributeError, or an error inside the module
        raise SnapshotError(
            f"snapshot holds a {name}, registered as {path!r}, which cannot be imported "
            f"({type(exc).__name__}: {exc}); install a streamk version that provides it"
        ) from exc
    if not isinstance(obj, type) or not callable(getattr(obj, "from_state", None)):
        raise SnapshotError(f"{path!r} registered for {name!r} is not a class with from_state()")
    with _lock:
        _resolved[name] = obj
    return obj


def class_name_of(model: Any) -> str:
    """Return the allow-list name of `model`'s exact class (no import needed).

    Raises
    ------
    SnapshotError
        If the class is not registered, so that a snapshot is never written that
        could not be loaded.
    """
    cls = type(model)
    path = f"{cls.__module__}:{cls.__qualname__}"
    for name, registered in CLASSES.items():
        if registered == path or _resolved.get(name) is cls:
            return name
    raise SnapshotError(
        f"{cls.__qualname__} ({path}) is not in the snapshot allow-list; call "
        f"streamk.snapshot.register_class({cls.__name__!r}, {path!r}) first"
    )
