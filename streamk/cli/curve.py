"""The learning curve of an engine run: recorded per batch, written as JSON and a PNG.

``streamk replay LOG --plot curve.png`` records, after every batch the engine handles, the
log offset reached, the rolling prequential metric (accuracy, MAE, or for a novelty
detector the fraction flagged, over the engine's window), the support size and the
counters; it writes them to ``curve.json`` beside the PNG (so the figure's numbers can be
checked) and draws them as the simulator's report does (``simulators/report.py``), with the
landmarks an engine knows: snapshots, consolidations and dead letters, each at the batch
it happened in. Segment boundaries and drifts are a scenario's, not the log's: the
simulator marks those. The PNG needs matplotlib (``pip install 'streamk[plot]'``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["LearningCurve", "require_matplotlib", "throttled"]

#: the counters a point keeps; their increases are the curve's marks
_COUNTS = ("learned", "scored", "dead_lettered", "snapshots", "consolidations")


def require_matplotlib() -> None:
    """Fail before the run, not after it, when the optional plotting extra is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"--plot needs matplotlib, which is not installed ({exc}); install the plot extra: "
            "pip install 'streamk[plot]' (or leave out --plot)"
        ) from None


def throttled(
    callback: Callable[[dict[str, Any]], None] | None, seconds: float
) -> Callable[[dict[str, Any]], None]:
    """``callback`` called at most once per ``seconds`` (the console's progress line)."""
    last = [-math.inf]

    def call(point: dict[str, Any]) -> None:
        now = time.monotonic()
        if callback is not None and now - last[0] >= seconds:
            last[0] = now
            callback(point)

    return call


class LearningCurve:
    """Points of an engine run, one per batch: see the module docstring.

    Set :attr:`engine` before the run; :meth:`record` is the engine's ``on_progress``
    (with ``progress_seconds = 0``, called after every batch).
    """

    def __init__(self, metric: str, window: int) -> None:
        self.metric = metric
        self.window = window
        self.engine: Any = None
        self.points: list[dict[str, Any]] = []

    def record(self, progress: dict[str, Any] | None = None) -> None:
        """Add the engine's state now; at the offset of the last point (an idle turn, the
        shutdown snapshot) it replaces that point."""
        engine = self.engine
        progress = progress if progress is not None else engine.progress()
        offset = sum(int(o) for o in engine.positions.values())
        if self.points and self.points[-1]["offset"] == offset:
            self.points.pop()
        point = {
            "offset": offset,
            "records": int(progress["records"]),
            "rolling_metric": progress["rolling_metric"],
            "support": int(progress["support"]),
            "learned": int(progress["learned"]),
            "scored": int(progress["scored"]),
            "dead_lettered": int(progress["dead_lettered"]),
            "snapshots": int(progress["snapshots"]),
            "consolidations": int(engine.metrics.get("consolidations")),
        }
        self.points.append(point)

    def marks(self) -> dict[str, list[int]]:
        """Offsets (batch ends) where each counter of :data:`_COUNTS` but the first two rose."""
        out: dict[str, list[int]] = {key: [] for key in _COUNTS[2:]}
        before = dict.fromkeys(_COUNTS, 0)
        for p in self.points:
            for key in out:
                if p[key] > before[key]:
                    out[key].append(p["offset"])
            before = {key: p[key] for key in _COUNTS}
        return out

    def data(self) -> dict[str, Any]:
        """What the JSON file holds."""
        return {
            "metric": self.metric,
            "window": self.window,
            "x": "offset: the log position after each batch (records handled from the log's start)",
            "points": self.points,
            "marks": self.marks(),
        }

    def key_figure(self) -> str:
        """The run in one line, for the plot's title."""
        if not self.points:
            return "no records"
        last = self.points[-1]
        metric = last["rolling_metric"]
        parts = [
            f"final rolling {self.metric} {metric:.4f}" if metric is not None else "no metric",
            f"support {last['support']:,}",
            f"{last['learned']:,} learned",
        ]
        if last["dead_lettered"]:
            parts.append(f"{last['dead_lettered']:,} dead letters")
        if last["consolidations"]:
            parts.append(f"{last['consolidations']:,} consolidations")
        return ", ".join(parts)

    def write(self, png: str | Path, title: str) -> tuple[Path, Path]:
        """Write ``png`` and its sibling ``.json``; returns both paths."""
        png = Path(png)
        data_path = png.with_suffix(".json")
        data_path.write_text(json.dumps(self.data(), indent=1, allow_nan=False) + "\n")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig = self.figure(plt, title)
        fig.savefig(png, dpi=100)
        plt.close(fig)
        return png, data_path

    def figure(self, plt: Any, title: str) -> Any:
        """The matplotlib figure: metric and support over the log, landmarks marked."""
        from matplotlib.lines import Line2D

        points = [p for p in self.points if p["rolling_metric"] is not None]
        fig, ax = plt.subplots(figsize=(10, 5))
        xs = [p["offset"] for p in points]
        ax.plot(xs, [p["rolling_metric"] for p in points], color="tab:blue", marker=".")
        ax.set_xlabel("records (log offset)")
        label = f"rolling {self.metric} (last {self.window:,} events)"
        ax.set_ylabel(label, color="tab:blue")
        ax2 = ax.twinx()
        ax2.plot(xs, [p["support"] for p in points], color="tab:orange")
        ax2.set_ylabel("support size", color="tab:orange")
        ax2.set_ylim(bottom=0)
        ax.set_zorder(ax2.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.set_xlim(0, max([p["offset"] for p in self.points] or [1]))
        handles = [
            Line2D([], [], color="tab:blue", marker=".", label=label),
            Line2D([], [], color="tab:orange", label="support size"),
        ]
        marks = self.marks()
        trans = ax.get_xaxis_transform()
        if marks["consolidations"]:
            cons = marks["consolidations"]
            ax.scatter(cons, [0.985] * len(cons), marker="v", color="tab:green", transform=trans)
            handles.append(
                Line2D([], [], color="tab:green", marker="v", linestyle="", label="consolidation")
            )
        rugs = [
            ("dead_lettered", "tab:red", "x", "dead letters (batch)"),
            ("snapshots", "0.4", "|", "snapshot"),
        ]
        row = 0
        for key, color, marker, text in rugs:
            if not marks[key]:
                continue
            ys = [0.03 + 0.04 * row] * len(marks[key])
            ax.scatter(marks[key], ys, marker=marker, color=color, s=30, transform=trans)
            handles.append(Line2D([], [], color=color, marker=marker, linestyle="", label=text))
            row += 1
        if points:  # room for the rug rows under the curve
            lo, hi = ax.get_ylim()
            ax.set_ylim(lo - 0.06 * (row + 1) * (hi - lo), hi + 0.08 * (hi - lo))
        fig.legend(handles=handles, loc="lower center", fontsize=8, ncol=5, frameon=False)
        ax.set_title(f"{title}\n{self.key_figure()}", fontsize=10)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        return fig
