"""A simulation run's report: JSON (for machines), Markdown (for people), PNG (if matplotlib).

Only ``report.json``'s ``timing`` block depends on the machine; every other figure is a
function of the scenario and its seed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["compare_dead_letters", "key_figure", "write_report", "write_plot", "plot_figure"]


def compare_dead_letters(
    expected: list[dict[str, Any]], actual: list[tuple[int, str]]
) -> dict[str, Any]:
    """Injected faults against dead letters, by offset and by reason code.

    ``ok`` is true when every injected fault was dead-lettered with its code and nothing
    else was.
    """
    want = {e["offset"]: e["code"] for e in expected}
    got: dict[int, str] = {}
    repeated = []
    for offset, code in actual:
        if offset in got:
            repeated.append(offset)
        got[offset] = code
    missing = sorted(set(want) - set(got))
    unexpected = sorted(set(got) - set(want))
    wrong = sorted(o for o in set(want) & set(got) if want[o] != got[o])
    by_code: dict[str, dict[str, int]] = {}
    for code in sorted(set(want.values()) | set(got.values())):
        by_code[code] = {
            "injected": sum(c == code for c in want.values()),
            "dead_lettered": sum(c == code for c in got.values()),
        }
    return {
        "ok": not (missing or unexpected or wrong or repeated),
        "injected": len(want),
        "dead_lettered": len(actual),
        "by_code": by_code,
        "missing": missing,
        "unexpected": [{"offset": o, "code": got[o]} for o in unexpected],
        "wrong_code": [{"offset": o, "expected": want[o], "got": got[o]} for o in wrong],
        "repeated": repeated,
    }


def key_figure(rep: dict[str, Any]) -> str:
    """The one figure that is the scenario's point, in words.

    Delayed labels: the accuracy of the predictions served before the label came. A drift:
    the rolling metric just before it, at its worst after it and at the end (how deep the
    dip and how full the recovery). Otherwise the final rolling metric. Bad messages add
    how many were dead-lettered as injected.
    """
    metric, timeline = rep["metric"], rep["timeline"]
    worse = max if metric == "MAE" else min
    drifts = rep.get("landmarks", {}).get("drifts", [])
    points = [p for p in timeline if p["rolling_metric"] is not None]
    parts: list[str] = []
    if rep.get("served_accuracy") is not None:
        parts.append(f"served accuracy on delayed labels {_pct(rep['served_accuracy'])}")
    elif drifts and points:
        start = drifts[0]["offset"] - drifts[0]["width"] // 2
        before = [p for p in points if p["records"] <= start]
        after = [p for p in points if p["records"] > start]
        if before and after:
            parts.append(
                f"{metric} {before[-1]['rolling_metric']:.3f} before the drift, "
                f"{worse(p['rolling_metric'] for p in after):.3f} at worst after it, "
                f"{points[-1]['rolling_metric']:.3f} at the end"
            )
    if not parts and points:
        parts.append(f"final rolling {metric} {points[-1]['rolling_metric']:.3f}")
    dl = rep["dead_letters"]
    if dl["injected"]:
        verdict = "all" if dl["ok"] else "MISMATCH:"
        parts.append(
            f"{verdict} {dl['injected']} bad messages dead-lettered"
            + ("" if dl["ok"] else f" ({dl['dead_lettered']} dead letters)")
        )
    return "; ".join(parts) or "no labelled events"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _markdown(rep: dict[str, Any]) -> str:
    sc, dl, c = rep["scenario"], rep["dead_letters"], rep["log"]["counts"]
    lines = [
        f"# Simulation report: {sc['name']}",
        "",
        sc.get("description") or "",
        "",
        f"**{rep['key_figure']}**" if rep.get("key_figure") else "",
        "",
        f"- seed {sc['seed']}, {c['generated']:,} generated events, "
        f"{c['records']:,} records in `{rep['log']['path']}` "
        f"(sha256 `{rep['log']['sha256'][:16]}…`)",
        f"- engine: learner `{rep['engine']['learner']}`, kernel `{rep['engine']['kernel']}`, "
        f"budget {rep['engine']['budget']} ({rep['engine']['policy']}), "
        f"consolidation every {rep['engine'].get('consolidate_every') or '–'} labelled events, "
        f"snapshot every {rep['engine']['snapshot_every']} records",
        f"- learned {rep['result']['learned']:,}, scored {rep['result']['scored']:,}, "
        f"dead-lettered {rep['result']['dead_lettered']:,}; final support size "
        f"{rep['result']['support']}",
        f"- snapshots written: {rep['result']['snapshots']} (final seq {rep['result']['seq']}, "
        f"next offset {rep['result']['positions']})",
        f"- served accuracy on delayed labels: {_pct(rep['served_accuracy'])}",
        f"- events/s: {rep['timing']['events_per_second']:,.0f} (machine-dependent)"
        if rep["timing"]["events_per_second"]
        else "- events/s: –",
        "",
        "## Prequential accuracy and support size",
        "",
        f"Rolling {rep['metric']} over the last {rep['rolling_window']} labelled events, "
        f"sampled every {rep['every']} records.",
        "",
        f"| records | rolling {rep['metric']} | support | learned | scored | dead letters |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for p in rep["timeline"]:
        metric = p["rolling_metric"]
        shown = "–" if metric is None else f"{metric:.4f}"
        lines.append(
            f"| {p['records']:,} | {shown} | {p['support']} | {p['learned']:,} | "
            f"{p['scored']:,} | {p['dead_lettered']} |"
        )
    verdict = (
        "every injected fault was dead-lettered, and nothing else"
        if dl["ok"]
        else ("MISMATCH between injected faults and dead letters")
    )
    lines += [
        "",
        "## Dead letters vs injected faults",
        "",
        f"**{verdict}** ({dl['injected']} injected, {dl['dead_lettered']} dead-lettered).",
        "",
        "| reason code | injected | dead-lettered |",
        "|---|---:|---:|",
    ]
    for code, n in dl["by_code"].items():
        lines.append(f"| `{code}` | {n['injected']} | {n['dead_lettered']} |")
    for key in ("missing", "unexpected", "wrong_code", "repeated"):
        if dl[key]:
            lines.append(f"\n{key}: {dl[key][:20]}")
    lines += [
        "",
        "Delivery faults that are not dead letters (the engine learns by offset, so a "
        f"duplicate is learned twice): {c.get('duplicate', 0)} duplicate deliveries, "
        f"{c['reordered']} records out of order.",
        "",
    ]
    if rep.get("plot"):
        lines += [f"![accuracy and support]({rep['plot']})", ""]
    return "\n".join(lines)


def write_report(rep: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.md``; returns their paths."""
    js, md = out_dir / "report.json", out_dir / "report.md"
    js.write_text(json.dumps(rep, indent=1, sort_keys=True, default=str) + "\n")
    md.write_text(_markdown(rep))
    return js, md


def write_plot(rep: dict[str, Any], out_dir: Path) -> Path | None:
    """``report.png``: rolling metric and support size over records, with the scenario's
    landmarks marked, and its key figure in the title; or ``None`` without matplotlib.

    Marked: segment boundaries (solid grey lines, labelled with the generator), each
    drift's centre (dashed red line) and width (shaded), consolidations (green ticks at
    the top, at the batch they were seen in), and injected faults as rug rows at the
    bottom (malformed messages, duplicates, reordered records). matplotlib is an optional
    extra (``pip install streamk[plot]``); without it this prints a message.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("simulators: matplotlib is not installed; skipping the plot (pip install matplotlib)")
        return None
    fig = plot_figure(rep, plt)
    path = out_dir / "report.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_figure(rep: dict[str, Any], plt: Any) -> Any:
    """The report's matplotlib figure (see :func:`write_plot`); tests read its artists."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    marks = rep.get("landmarks", {})
    points = [p for p in rep["timeline"] if p["rolling_metric"] is not None]
    fig, ax = plt.subplots(figsize=(10, 5))
    xs = [p["records"] for p in points]
    ax.plot(xs, [p["rolling_metric"] for p in points], color="tab:blue", marker=".")
    ax.set_xlabel("records (log offset)")
    ax.set_ylabel(f"rolling {rep['metric']}", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(xs, [p["support"] for p in points], color="tab:orange")
    ax2.set_ylabel("support size", color="tab:orange")
    ax2.set_ylim(bottom=0)
    ax.set_zorder(ax2.get_zorder() + 1)  # the metric and the markers above the support curve
    ax.patch.set_visible(False)
    end = rep["result"]["records"]
    ax.set_xlim(0, max(end, 1))
    handles = [
        Line2D([], [], color="tab:blue", marker=".", label=f"rolling {rep['metric']}"),
        Line2D([], [], color="tab:orange", label="support size"),
    ]
    segments = marks.get("segments", [])
    for seg in segments:
        ax.axvline(seg["offset"], color="0.4", linewidth=1.2)
        ax.annotate(
            seg["generator"],
            (seg["offset"], 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -24),
            textcoords="offset points",
            fontsize=8,
            color="0.3",
        )
    if len(segments) > 1:
        handles.append(Line2D([], [], color="0.4", label="segment boundary"))
    for drift in marks.get("drifts", []):
        half = drift["width"] / 2
        ax.axvspan(drift["offset"] - half, drift["offset"] + half, color="tab:red", alpha=0.12)
        ax.axvline(drift["offset"], color="tab:red", linestyle="--", linewidth=1.2)
    if marks.get("drifts"):
        handles.append(Line2D([], [], color="tab:red", linestyle="--", label="drift centre"))
        handles.append(Patch(color="tab:red", alpha=0.12, label="drift width"))
    cons = marks.get("consolidations", [])
    if cons:
        trans = ax.get_xaxis_transform()
        ax.scatter(cons, [0.985] * len(cons), marker="v", color="tab:green", s=30, transform=trans)
        handles.append(
            Line2D([], [], color="tab:green", marker="v", linestyle="", label="consolidation")
        )
    rugs = [
        ("malformed", "tab:red", "x", "malformed (dead-lettered)"),
        ("duplicates", "tab:purple", "|", "duplicate"),
        ("reordered", "0.5", "|", "reordered"),
    ]
    row = 0
    trans = ax.get_xaxis_transform()
    for key, color, marker, label in rugs:
        offsets = marks.get(key, [])
        if not offsets:
            continue
        y = 0.03 + 0.04 * row
        ax.scatter(offsets, [y] * len(offsets), marker=marker, color=color, s=30, transform=trans)
        handles.append(Line2D([], [], color=color, marker=marker, linestyle="", label=label))
        row += 1
    if points:  # room for the rug rows under the curve and the labels above it
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo - 0.06 * (row + 1) * (hi - lo), hi + 0.12 * (hi - lo))
    fig.legend(handles=handles, loc="lower center", fontsize=8, ncol=5, frameon=False)
    title = rep["scenario"]["name"]
    if rep.get("key_figure"):
        title += "\n" + rep["key_figure"]
    ax.set_title(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.1 if len(handles) > 5 else 0.06, 1, 1))
    return fig
