"""A simulation run's report: JSON (for machines), Markdown (for people), PNG (if matplotlib).

Only ``report.json``'s ``timing`` block depends on the machine; every other figure is a
function of the scenario and its seed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["compare_dead_letters", "write_report", "write_plot"]


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


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _markdown(rep: dict[str, Any]) -> str:
    sc, dl, c = rep["scenario"], rep["dead_letters"], rep["log"]["counts"]
    lines = [
        f"# Simulation report: {sc['name']}",
        "",
        sc.get("description") or "",
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
    """``report.png`` (rolling metric and support size over records), or ``None``.

    matplotlib is an optional extra (``pip install streamk[plot]``); without it this
    prints a message and returns ``None``.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("simulators: matplotlib is not installed; skipping the plot (pip install matplotlib)")
        return None
    points = [p for p in rep["timeline"] if p["rolling_metric"] is not None]
    fig, ax = plt.subplots(figsize=(8, 4))
    xs = [p["records"] for p in points]
    ax.plot(xs, [p["rolling_metric"] for p in points], color="tab:blue")
    ax.set_xlabel("records")
    ax.set_ylabel(f"rolling {rep['metric']}", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(xs, [p["support"] for p in points], color="tab:orange")
    ax2.set_ylabel("support size", color="tab:orange")
    ax.set_title(rep["scenario"]["name"])
    fig.tight_layout()
    path = out_dir / "report.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
