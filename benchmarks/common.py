"""What every benchmark records beside its figures: the machine and its load."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["machine_info", "paired_rates", "result_document", "write_between", "write_results"]


def machine_info() -> dict[str, Any]:
    """Cores, platform, Python, NumPy and its BLAS, and the load average (the machine is shared)."""
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [
            {k: d.get(k) for k in ("internal_api", "version", "num_threads")}
            for d in threadpool_info()
        ]
    except ImportError:
        try:
            info["blas"] = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
        except Exception:  # noqa: BLE001 - best effort only
            info["blas"] = "unknown"
    return info


def paired_rates(rates: list[float], ratios: list[float]) -> dict[str, float]:
    """A model's events per second over repeats and its ratios to river's reference measured
    in the same repeats (paired, so a noisy machine moves both alike): median, min, max."""
    return {
        "events_per_s_median": statistics.median(rates),
        "events_per_s_min": min(rates),
        "events_per_s_max": max(rates),
        "ratio_vs_river_median": statistics.median(ratios),
        "ratio_vs_river_min": min(ratios),
        "ratio_vs_river_max": max(ratios),
    }


def result_document(
    name: str, quick: bool, load_before: Any, rows: list[dict[str, Any]], **fields: Any
) -> dict[str, Any]:
    """What ``python -m benchmarks.<name>`` writes to ``results/``: its name and command,
    ``fields``, the machine, whether the compiled core ran, and the load average before
    (``os.getloadavg()`` at the start) and now (printed), then the ``rows``."""
    from streamk import accel

    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f}")
    return {
        "benchmark": name,
        "command": f"python -m benchmarks.{name}" + (" --quick" if quick else ""),
        **fields,
        "machine": machine_info(),
        "compiled_core": accel.available(),
        "load_average_1_5_15": {"before": load_before, "after": load_after},
        "rows": rows,
    }


def write_results(results: Path, name: str, quick: bool, doc: dict[str, Any]) -> Path:
    """``doc`` as ``results/<name>.json`` (``<name>_quick.json`` for a quick run)."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / (f"{name}_quick.json" if quick else f"{name}.json")
    path.write_text(json.dumps(doc, indent=2))
    print(f"wrote {path}")
    return path


def write_between(path: Path, start: str, end: str, text: str) -> None:
    """Replace what ``path`` holds between the markers ``start`` and ``end`` with ``text``
    (the tables a benchmark writes into the docs)."""
    head, rest = path.read_text().split(start, 1)
    path.write_text(f"{head}{start}\n{text}\n{end}{rest.split(end, 1)[1]}")


def learn_one_seconds(make: Callable[[], Any], data: list, repeats: int = 3) -> float:
    """CPU seconds per event of a fresh ``make()`` learning ``data`` (pairs) one
    ``learn_one`` at a time: the median over ``repeats``."""
    runs = []
    for _ in range(repeats):
        model = make()
        start = time.process_time()
        for x, y in data:
            model.learn_one(x, y)
        runs.append((time.process_time() - start) / len(data))
    return statistics.median(runs)
