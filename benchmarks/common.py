"""What every benchmark records beside its figures: the machine and its load."""

from __future__ import annotations

import os
import platform
from typing import Any

import numpy as np

__all__ = ["machine_info"]


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
