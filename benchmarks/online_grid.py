"""The learner × budget-policy grid of ``python -m benchmarks.online_throughput`` (issue #16).

Every streamk learner with every budget policy at B = 200 and 1,000, on Bananas, Phishing
and a d = 50 synthetic stream (the regressors and the ranker on regression streams: the
same d = 50 generator's real target, and Friedman), next to river's linear model of the
same task, all in one run. Learning alone is timed, data in memory (CPU time, median of
the repeats, which go round-robin over the models so a burst of load lands on all alike; a
repeat learns the stream with fresh models until it has spent :data:`MIN_CPU` seconds, so a
pass of a millisecond is not left to one reading of the clock):

* ``learn_many`` on pandas blocks of 500 rows, and ``learn_one`` on dicts;
* river's ``Perceptron`` / ``LogisticRegression`` (classification) or ``LinearRegression``
  ``learn_one`` on the same dicts: the ratios are against ``Perceptron`` (classification)
  and ``LinearRegression`` (regression, ranking, novelty on a regression stream), timed
  again next to every cell (just before it, in every repeat), so that a machine whose
  speed drifts during the run moves a ratio's two sides alike (the reference measured once
  a repeat per learner ran 84,000-137,000 events/s on one stream between two runs).

Accuracy (MAE for the SVR, rank accuracy for the ranker) is prequential, from one extra
test-then-train pass; ``compiled`` is the share of ``learn_many``'s rows that took a
compiled block pass (:data:`streamk.learners.fastpass.COUNTS`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from river import datasets, linear_model
from river.datasets import synth

from benchmarks.common import machine_info
from streamk import (
    RBF,
    Forgetron,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    Laplacian,
    Linear,
    MarginPerceptron,
    Merge,
    OnlineRanker,
    OnlineSVR,
    Polynomial,
    Projectron,
    RemoveOldest,
    RemoveRandom,
    RemoveSmallest,
    Sum,
    accel,
)
from streamk.errors import ConfigError
from streamk.learners import fastpass

BLOCK = 500

#: Kernel choices (``--kernel``): a factory each; "auto" widths are estimated as usual.
KERNELS: dict[str, Callable[[], Any]] = {
    "rbf": lambda: RBF(gamma="auto"),
    "laplacian": lambda: Laplacian(gamma="auto"),
    "poly": lambda: Polynomial(degree=2, scale=0.1),
    "linear": lambda: Linear(),
    # a combination: the per-event core runs it as a program (streamk/kernels/program.py)
    "sum": lambda: Sum(RBF(gamma="auto"), Linear()),
}

#: Budget policies at a budget B; ``None`` marks the unbounded set (run once, B = "-").
POLICIES: dict[str, Callable[[int], Any] | None] = {
    "RemoveOldest": RemoveOldest,
    "RemoveRandom": lambda b: RemoveRandom(b, seed=0),
    "RemoveSmallest": RemoveSmallest,
    "Forgetron": Forgetron,
    "Projectron": Projectron,
    "Merge": Merge,
    "Unbounded": None,
}

#: learner name -> (task, factory(kernel, budget)); task "clf" runs on the classification
#: streams, "reg" and "rank" on the regression ones, "novelty" on the classification ones.
LEARNERS: dict[str, tuple[str, Callable[[Any, Any], Any]]] = {
    "perceptron": ("clf", lambda k, b: KernelPerceptron(kernel=k, budget=b)),
    "margin": ("clf", lambda k, b: MarginPerceptron(kernel=k, budget=b)),
    "adatron": ("clf", lambda k, b: KernelAdatron(kernel=k, budget=b)),
    # the adatron with one O(n_support²) resweep per event (its default until resweeps=0)
    "adatron-resweep": ("clf", lambda k, b: KernelAdatron(kernel=k, budget=b, resweeps=1)),
    "novelty": ("novelty", lambda k, b: KernelNovelty(kernel=k, budget=b)),
    "svr": ("reg", lambda k, b: OnlineSVR(kernel=k, budget=b)),
    "ranker": ("rank", lambda k, b: OnlineRanker(kernel=k, ranks=(0, 1, 2, 3, 4), budget=b)),
}


#: Events per run where a learner or policy is slow, so the full grid (3 repeats, two
#: budgets, both methods) fits in a run on a shared machine: the table's ``events`` column
#: says how many each row used. Halved by ``--quick``.
CAPS_LEARNER = {"adatron-resweep": 500, "svr": 1_500, "novelty": 1_500}
CAPS_POLICY = {"Merge": 1_500, "Projectron": 1_500}


def _synthetic(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """d = 50 standard normal features; a non-linear target of four of them plus noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 50))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.5 * X[:, 3] + 0.1 * rng.standard_normal(n)
    return X, y


def streams(quick: bool) -> dict[str, tuple[str, list[tuple[dict, Any]]]]:
    """name -> (task, events in memory)."""
    n = 1_500 if quick else 3_000
    X, y = _synthetic(n)
    names = [f"x{j}" for j in range(X.shape[1])]
    syn_x = [dict(zip(names, row)) for row in X.tolist()]
    out: dict[str, tuple[str, list[tuple[dict, Any]]]] = {
        "Bananas": ("clf", list(datasets.Bananas().take(n))),
        "Phishing": ("clf", list(datasets.Phishing())),
        "Synth50": ("clf", list(zip(syn_x, (y > 0).tolist()))),
        "Synth50-reg": ("reg", list(zip(syn_x, y.tolist()))),
        "Friedman": ("reg", list(synth.Friedman(seed=7).take(n))),
    }
    return out


def _ranks(data: list[tuple[dict, float]]) -> list[tuple[dict, int]]:
    """The regression target cut at its quintiles into ranks 0-4 (the ranker's task)."""
    y = np.array([t for _, t in data])
    cuts = np.quantile(y, [0.2, 0.4, 0.6, 0.8])
    return [(x, int(np.searchsorted(cuts, t))) for x, t in data]


#: CPU seconds a repeat spends at least: fresh models learn the stream again until then
#: (one pass of a fast cell takes about a millisecond, within the clock's and the cache's noise)
MIN_CPU = 0.05


def _cpu(run: Callable[[], None]) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def _repeat(
    fresh: Callable[[], Any], learn: Callable[[Any], Callable[[], None]], events: int
) -> tuple[float, int]:
    """One repeat: ``learn(fresh())`` (a fresh model's pass over ``events`` events; the model
    built untimed) timed again and again until :data:`MIN_CPU` is spent. Returns ``(CPU
    seconds per event, events learned)``."""
    spent, done = 0.0, 0
    while spent < MIN_CPU or done == 0:
        spent += _cpu(learn(fresh()))
        done += events
    return spent / done, done


def _spread(per_event: list[float]) -> list[float]:
    """The slowest and the fastest repeat's events/s, from their CPU seconds per event."""
    return [1.0 / max(per_event), 1.0 / min(per_event)]


def _factory(
    learner: Callable[[Any, Any], Any], kernel: Callable[[], Any], policy: Callable[[], Any]
) -> Callable[[], Any]:
    """A factory of fresh models: ``learner`` with a fresh kernel and a fresh budget policy."""
    return lambda: learner(kernel(), policy())


def _learn_one(model: Any, data: list, unsupervised: bool) -> Callable[[], None]:
    def run() -> None:
        if unsupervised:
            for x, _ in data:
                model.learn_one(x)
        else:
            for x, y in data:
                model.learn_one(x, y)

    return run


def _learn_many(model: Any, blocks: list, unsupervised: bool) -> Callable[[], None]:
    def run() -> None:
        if unsupervised:
            for Xb, _ in blocks:
                model.learn_many(Xb)
        else:
            for Xb, yb in blocks:
                model.learn_many(Xb, yb)

    return run


def _quality(task: str, model: Any, data: list, blocks: list) -> float | None:
    """Prequential accuracy (MAE for regression), ``None`` for novelty."""
    if task == "novelty":
        return None
    if task == "clf" and hasattr(model, "learn_predict_many"):
        preds = [p for Xb, yb in blocks for p in model.learn_predict_many(Xb, yb)]
        return float(np.mean([p == y for p, (_, y) in zip(preds, data)]))
    err = []
    for x, y in data:
        p = model.predict_one(x)
        err.append(abs((0.0 if p is None else p) - y) if task == "reg" else float(p == y))
        model.learn_one(x, y)
    return float(np.mean(err))


def _rivals(task: str) -> dict[str, Callable[[], Any]]:
    if task == "clf":
        return {
            "river Perceptron": linear_model.Perceptron,
            "river LogisticRegression": linear_model.LogisticRegression,
        }
    return {"river LinearRegression": linear_model.LinearRegression}


#: Events a fresh model learns to find out whether its policy accepts the kernel.
PROBE = 50


def _refusal(make: Callable[[], Any], data: list, unsupervised: bool) -> str | None:
    """Why the model ``make()`` builds refuses these events (a policy rejecting the kernel,
    e.g. ``Merge`` with a non-RBF kernel), as ``"n/a: <reason>"``; ``None`` when it learns
    them.

    The learners refuse such a pairing at construction; a short prefix of events covers a
    check made on the first insertion.
    """
    try:
        _learn_one(make(), data[:PROBE], unsupervised)()
    except ConfigError as exc:
        return f"n/a: {exc}"
    return None


def _configs(budgets: list[int]) -> list[tuple[str, Any, Callable[[], Any]]]:
    """(policy name, B, factory of a fresh policy or None) for every grid column."""
    out = []
    for name, make in POLICIES.items():
        if make is None:
            out.append((name, "-", lambda: None))
        else:
            out.extend((name, b, (lambda m=make, b=b: m(b))) for b in budgets)
    return out


def _refused_row(
    stream: str, learner: str, policy: str, budget: Any, kernel: str, refused: dict
) -> dict[str, Any]:
    """The JSON row of a combination the policy refused: no timings, the reason."""
    return {
        "stream": stream,
        "learner": learner,
        "policy": policy,
        "budget": budget,
        "kernel": kernel,
        "status": refused[(policy, budget)],
    }


#: the grid's learner names as a user writes the models (the summary's rows)
MODEL_NAMES = {
    "perceptron": "KernelPerceptron",
    "margin": "MarginPerceptron",
    "adatron": "KernelAdatron",
    "adatron-resweep": "KernelAdatron(resweeps=1)",
    "novelty": "KernelNovelty",
    "svr": "OnlineSVR",
    "ranker": "OnlineRanker",
}


def _span(ratios: list[float]) -> str:
    """``lo–hi`` to two decimals, one figure where they agree, a dash for none."""
    if not ratios:
        return "–"
    lo, hi = f"{min(ratios):.2f}", f"{max(ratios):.2f}"
    return lo if lo == hi else f"{lo}–{hi}"


def summary_tables(doc: dict[str, Any]) -> str:
    """The grid ``doc`` (its JSON) as two Markdown tables, ``learn_many`` then ``learn_one``:
    a row per learner, a column per policy, each cell the lowest and highest ratio to river's
    linear model over the streams and budgets measured (docs/user-guide.md quotes them)."""
    cells = [r for r in doc["rows"] if "many_vs_river" in r]
    order = ("Unbounded", "RemoveOldest", "RemoveRandom", "RemoveSmallest", "Forgetron", "Merge")
    ranked = [*order, *(p for p in POLICIES if p not in order)]  # cheapest first
    policies = [p for p in ranked if any(r["policy"] == p for r in cells)]
    learners = [n for n in LEARNERS if any(r["learner"] == n for r in cells)]
    heads = ["no budget" if p == "Unbounded" else f"`{p}`" for p in policies]
    out = []
    for key, what in (("many_vs_river", "`learn_many`"), ("one_vs_river", "`learn_one`")):
        lines = [
            f"| {what} | " + " | ".join(heads) + " |",
            "|---" * (len(policies) + 1) + "|",
        ]
        for name in learners:
            row = [
                _span([r[key] for r in cells if r["learner"] == name and r["policy"] == p])
                for p in policies
            ]
            lines.append(f"| `{MODEL_NAMES.get(name, name)}` | " + " | ".join(row) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


#: the line above the user guide's grid tables (docs/user-guide.md, "What each learner and
#: policy runs at"): :func:`write_guide` puts :func:`summary_tables` after it
GUIDE_TABLES = (
    "<!-- online_grid.summary_tables: regenerated from benchmarks/results/online_grid.json -->\n"
)

#: the user guide's figure for ``KernelAdatron(resweeps=1)`` (learner ``adatron-resweep``),
#: whitespace between words free, as it wraps: :func:`write_guide` sets its five numbers
GUIDE_RESWEEP = re.compile(
    r"learns\s+the\s+grid's\s+first\s+(?P<events>[\d,]+)\s+events\s+at\s+(?P<lo>[\d,]+)–"
    r"(?P<hi>[\d,]+)\s+events/s,\s+(?P<rlo>\d\.\d\d)–(?P<rhi>\d\.\d\d)×\s+river's\s+linear\s+"
    r"`Perceptron`\s+\(`python\s+-m\s+benchmarks\.online_throughput`\)"
)


def resweep_figure(doc: dict[str, Any]) -> dict[str, str]:
    """The guide's resweep figure from the grid ``doc``: the events learned, the lowest and
    highest events/s (to the thousand) and ratio to river (two decimals) over its cells."""
    rows = [r for r in doc["rows"] if r.get("learner") == "adatron-resweep" and "policy" in r]
    events = {r["events"] for r in rows}
    if len(events) != 1:
        raise ValueError(f"the grid's adatron-resweep cells learned {sorted(events)} events")
    speeds = [r["learn_many_ev_s"] for r in rows]
    ratios = [r["many_vs_river"] for r in rows]
    return {
        "events": f"{events.pop():,}",
        "lo": f"{round(min(speeds), -3):,.0f}",
        "hi": f"{round(max(speeds), -3):,.0f}",
        "rlo": f"{min(ratios):.2f}",
        "rhi": f"{max(ratios):.2f}",
    }


def write_guide(doc: dict[str, Any], guide: Path) -> bool:
    """Put the grid ``doc``'s figures into the user guide at ``guide``: the two ratio tables
    (:func:`summary_tables`, after :data:`GUIDE_TABLES`) and the resweeping adatron's figure
    (:data:`GUIDE_RESWEEP`). Whether the text changed. Its prose on which cells fall below 1
    stays as written: ``tests/test_readme_figures.py`` says when a re-run moves one."""
    text = guide.read_text()
    if text.count(GUIDE_TABLES) != 1:
        raise ValueError(f"{guide} must hold the line {GUIDE_TABLES.strip()!r} once")
    head, tail = text.split(GUIDE_TABLES)
    old_tables = tail.split("\n\n", 2)  # the learn_many table, the learn_one table, the rest
    if len(old_tables) != 3 or not all(t.startswith("| ") for t in old_tables[:2]):
        raise ValueError(f"{guide}: two tables must follow {GUIDE_TABLES.strip()!r}")
    out = head + GUIDE_TABLES + summary_tables(doc) + "\n" + old_tables[2]
    found = list(GUIDE_RESWEEP.finditer(out))
    if len(found) != 1:
        raise ValueError(f"{guide} must quote the resweeping adatron's figure once")
    figure, claim = resweep_figure(doc), found[0]
    parts, at = [], claim.start()
    for name in ("events", "lo", "hi", "rlo", "rhi"):
        parts += [out[at : claim.start(name)], figure[name]]
        at = claim.end(name)
    out = out[: claim.start()] + "".join(parts) + out[at:]
    if out == text:
        return False
    guide.write_text(out)
    return True


def run(args: argparse.Namespace, results: Path) -> int:
    """Run the grid, print one table, write ``results/online_grid[_quick].json`` (with
    ``--only``, ``online_grid[_quick]_only_<learners>.json``: the full grid's file stays)."""
    repeats = 1 if args.quick else args.repeats
    budgets = [200] if args.quick else [200, 1000]
    only = {s for s in args.only.split(",") if s}
    kernel = KERNELS[args.kernel]
    import pandas as pd

    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    suffix = ("" if args.kernel == "rbf" else f"_{args.kernel}") + ("_quick" if args.quick else "")
    suffix += "_only_" + "_".join(sorted(only)) if only else ""  # not the full grid's file
    path = results / f"online_grid{suffix}.json"
    results.mkdir(parents=True, exist_ok=True)

    def save() -> dict[str, Any]:  # after every learner: an interrupted run keeps its cells
        out = {
            "benchmark": "online_throughput grid",
            "command": "python -m benchmarks.online_throughput"
            + (" --quick" if args.quick else ""),
            "kernel": args.kernel,
            "repeats": repeats,
            "min_cpu_s_per_repeat": MIN_CPU,
            "block": BLOCK,
            "caps": {"learner": CAPS_LEARNER, "policy": CAPS_POLICY, "quick_halves": args.quick},
            "machine": machine_info(),
            "compiled_core": accel.available(),
            "load_average_1_5_15": {"before": load_before, "after": os.getloadavg()},
            "rows": rows,
        }
        path.write_text(json.dumps(out, indent=2))
        return out

    header = (
        f"{'stream':<12} {'learner':<10} {'policy':<12} {'B':>5} {'events':>6} {'many ev/s':>10} "
        f"{'one ev/s':>9} {'many/riv':>8} {'one/riv':>7} {'quality':>8} {'compiled':>8}"
    )
    print(f"kernel {args.kernel}; {repeats} repeat(s); blocks of {BLOCK}; CPU time, median\n")
    print(header, flush=True)
    for sname, (stask, data0) in streams(args.quick).items():
        for lname, (ltask, lfactory) in LEARNERS.items():
            if only and lname not in only:
                continue
            on_reg = stask == "reg"
            if (ltask in ("reg", "rank")) != on_reg or (ltask == "novelty" and on_reg):
                continue
            data = _ranks(data0) if ltask == "rank" else data0
            X = pd.DataFrame([x for x, _ in data])
            y = pd.Series([t for _, t in data], dtype=object if ltask != "reg" else float)
            unsup = ltask == "novelty"
            rivals = _rivals("clf" if stask == "clf" else "reg")
            configs = _configs(budgets)
            sizes = {}
            for pname, b, _ in configs:
                caps = [c for c in (CAPS_LEARNER.get(lname), CAPS_POLICY.get(pname)) if c]
                cap = min(caps, default=len(data)) // (2 if args.quick and caps else 1)
                sizes[(pname, b)] = min(len(data), cap)
            by_size = {
                n: [
                    (X.iloc[i : min(i + BLOCK, n)], y.iloc[i : min(i + BLOCK, n)])
                    for i in range(0, n, BLOCK)
                ]
                for n in set(sizes.values())
            }
            refused = {
                (pname, b): why
                for pname, b, pf in configs
                if (why := _refusal(_factory(lfactory, kernel, pf), data, unsup)) is not None
            }
            times: dict[Any, list[float]] = {}
            compiled: dict[Any, float] = {}
            reference = next(iter(rivals))
            river_learn = partial(_learn_one, data=data, unsupervised=False)
            for rep in range(repeats):
                for rname, rf in rivals.items():
                    times.setdefault(rname, []).append(_repeat(rf, river_learn, len(data))[0])
                for pname, b, pf in configs:
                    if (pname, b) in refused:
                        continue
                    n = sizes[(pname, b)]
                    # the cell's reference, measured next to it: a machine whose speed
                    # drifts during the run moves both sides of the ratio alike
                    per_event = _repeat(rivals[reference], river_learn, len(data))[0]
                    times.setdefault((pname, b, "river"), []).append(per_event)
                    fresh = _factory(lfactory, kernel, pf)
                    fastpass.COUNTS.clear()
                    learn = partial(_learn_many, blocks=by_size[n], unsupervised=unsup)
                    per_event, done = _repeat(fresh, learn, n)
                    times.setdefault((pname, b, "many"), []).append(per_event)
                    if rep == 0:
                        compiled[(pname, b)] = fastpass.COUNTS["compiled"] / done
                    learn = partial(_learn_one, data=data[:n], unsupervised=unsup)
                    times.setdefault((pname, b, "one"), []).append(_repeat(fresh, learn, n)[0])
            rate = {k: 1.0 / statistics.median(v) for k, v in times.items()}
            for rname in rivals:
                rows.append(
                    {
                        "stream": sname,
                        "learner": lname,
                        "model": rname,
                        "learn_one_ev_s": rate[rname],
                        "events": len(data),
                    }
                )
            for pname, b, pf in configs:
                n = sizes[(pname, b)]
                if (pname, b) in refused:
                    rows.append(_refused_row(sname, lname, pname, b, args.kernel, refused))
                    print(
                        f"{sname:<12} {lname:<10} {pname:<12} {b!s:>5} {n:>6} {refused[(pname, b)]}"
                    )
                    continue
                quality = _quality(ltask, lfactory(kernel(), pf()), data[:n], by_size[n])
                many, one = rate[(pname, b, "many")], rate[(pname, b, "one")]
                ref = rate[(pname, b, "river")]
                row = {
                    "stream": sname,
                    "learner": lname,
                    "policy": pname,
                    "budget": b,
                    "kernel": args.kernel,
                    "events": n,
                    "learn_many_ev_s": many,
                    "learn_many_ev_s_min_max": _spread(times[(pname, b, "many")]),
                    "learn_one_ev_s": one,
                    "learn_one_ev_s_min_max": _spread(times[(pname, b, "one")]),
                    "river_reference": reference,
                    "river_learn_one_ev_s": ref,
                    "many_vs_river": many / ref,
                    "one_vs_river": one / ref,
                    "quality": quality,
                    "quality_kind": {"reg": "MAE", "novelty": None}.get(ltask, "accuracy"),
                    "compiled_share": compiled[(pname, b)],
                }
                rows.append(row)
                q = "-" if quality is None else f"{quality:.4f}"
                print(
                    f"{sname:<12} {lname:<10} {pname:<12} {b!s:>5} {n:>6} {many:>10,.0f} "
                    f"{one:>9,.0f} {many / ref:>8.2f} {one / ref:>7.2f} {q:>8} "
                    f"{compiled[(pname, b)]:>8.0%}",
                    flush=True,
                )
            for rname in rivals:
                print(f"{sname:<12} {'':<10} {rname:<25} {'':>12} {rate[rname]:>9,.0f}", flush=True)
            save()
    doc = save()
    print("\nratio to river's linear model (lowest-highest over streams and budgets):\n")
    print(summary_tables(doc))
    print(f"load average before {load_before}, after {os.getloadavg()}\nwrote {path}")
    return 0
