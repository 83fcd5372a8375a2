"""The README's figures come from commands it names, and match the committed results.

Issue 19: the README quoted the Projectron figure as 0.883 with 41 support vectors while
``benchmarks/results/budgets.json`` (written by ``python -m benchmarks.budgets``) says
0.8866 with 44. These tests read both files, so neither can drift from the other.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "benchmarks" / "results"

#: README class name -> the "learner" field of benchmarks/budgets.py's rows
LEARNERS = {"KernelPerceptron": "perceptron", "MarginPerceptron": "margin"}

#: "`MarginPerceptron(budget=Projectron(200))` reaches 0.887 prequential accuracy on
#: Bananas with 44 support vectors (`python -m benchmarks.budgets`)"
BUDGET_FIGURE = re.compile(
    r"`(?P<learner>\w+)\(budget=(?P<policy>\w+)\((?P<budget>\d+)\)\)`\s+reaches\s+"
    r"(?P<accuracy>0\.\d+)\s+prequential\s+accuracy\s+on\s+(?P<dataset>\w+)\s+with\s+"
    r"(?P<n_support>\d+)\s+support\s+vectors\s+\(`python -m benchmarks\.(?P<bench>\w+)`\)"
)


#: "Through `learn_predict_many` (blocks of 500; ...) `MarginPerceptron(budget=Projectron(200))`
#: learns Bananas at 286,000 events/s, 325× river's `KNNClassifier` measured in the same run
#: (median of 3), with 0.8821 prequential accuracy and 41 support vectors ...
#: (`python -m benchmarks.budgets`)" -- issue 16: the speed figure is the benchmark's.
SPEED_FIGURE = re.compile(
    r"`(?P<model>\w+\(budget=\w+\(\d+\)\))`\s+learns\s+(?P<dataset>\w+)\s+at\s+"
    r"(?P<speed>[\d,]+)\s+events/s,\s+(?P<ratio>\d+)×\s+river's\s+`KNNClassifier`[^.]*?"
    r"with\s+(?P<accuracy>0\.\d+)\s+prequential\s+accuracy\s+and\s+(?P<n_support>\d+)\s+"
    r"support\s+vectors[^`]*?`python -m benchmarks\.(?P<bench>\w+)`\)"
)


def _prose() -> str:
    """The README without its fenced code blocks, whitespace collapsed."""
    text = re.sub(r"^```.*?^```", "", README.read_text(), flags=re.S | re.M)
    return " ".join(text.split())


def _benchmark(name: str, module: str | None = None) -> dict:
    """The committed ``benchmarks/results/<name>.json``, checked to be what
    ``python -m benchmarks.<module>`` (``module``: ``name`` by default) writes."""
    doc = json.loads((RESULTS / f"{name}.json").read_text())
    assert doc["command"] == f"python -m benchmarks.{module or name}"
    return doc


def _user_guide_claim(pattern: str, what: str) -> re.Match:
    """The one place docs/user-guide.md (whitespace collapsed) says ``pattern``."""
    guide = " ".join((ROOT / "docs" / "user-guide.md").read_text().split())
    claim = re.search(pattern, guide)
    assert claim, f"the user guide's {what} moved: update this test"
    return claim


def test_every_budget_figure_matches_the_committed_benchmark_json():
    claims = list(BUDGET_FIGURE.finditer(_prose()))
    assert claims, "the README's budget figure moved: update BUDGET_FIGURE"
    for claim in claims:
        path = RESULTS / f"{claim['bench']}.json"
        assert path.is_file(), f"README names {claim['bench']}, but {path} is not committed"
        doc = _benchmark(claim["bench"])
        rows = [
            r
            for r in doc["results"]
            if r["dataset"] == claim["dataset"]
            and r["learner"] == LEARNERS[claim["learner"]]
            and r["policy"] == claim["policy"]
            and r["budget"] == int(claim["budget"])
        ]
        assert len(rows) == 1, f"no single result row for {claim[0]}"
        row = rows[0]
        decimals = len(claim["accuracy"].split(".")[1])
        assert claim["accuracy"] == f"{row['accuracy']:.{decimals}f}", (claim[0], row)
        assert int(claim["n_support"]) == row["n_support"], (claim[0], row)


def test_the_speed_figure_matches_the_committed_benchmark_json():
    """The recommended model's speed against river's KNN, as ``benchmarks.budgets`` wrote it."""
    claims = list(SPEED_FIGURE.finditer(_prose()))
    assert claims, "the README's speed figure moved: update SPEED_FIGURE"
    for claim in claims:
        fast = _benchmark(claim["bench"])["recommended"]
        assert fast["stream"] == claim["dataset"]
        (row,) = [r for r in fast["rows"] if r["model"] == claim["model"]]
        speed = int(claim["speed"].replace(",", ""))
        assert speed == round(row["events_per_second_median"], -3), (claim[0], row)
        assert claim["ratio"] == f"{row['ratio_vs_knn_median']:.0f}", (claim[0], row)
        decimals = len(claim["accuracy"].split(".")[1])
        assert claim["accuracy"] == f"{row['accuracy']:.{decimals}f}", (claim[0], row)
        assert int(claim["n_support"]) == row["n_support"], (claim[0], row)


def test_every_figure_in_the_readme_prose_is_one_a_test_checks():
    """A new figure in the prose must come with a command and a check: no loose numbers."""
    prose = _prose()
    claims = [*BUDGET_FIGURE.finditer(prose), *SPEED_FIGURE.finditer(prose)]
    checked = {m["accuracy"] for m in claims} | {m["n_support"] for m in claims}
    checked |= {m[k] for m in GUARD_FIGURE.finditer(prose) for k in ("online", "plain", "guarded")}
    figures = re.findall(r"\b\d+\.\d+%|\b0\.\d{2,}\b|\b\d+ support vectors", prose)
    loose = [f for f in figures if f.split()[0] not in checked]
    assert not loose, f"README figures with no command and no test: {loose}"


def test_readme_lists_every_command():
    from streamk.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    block = README.read_text().split("## Command line", 1)[1].split("```")[1]
    listed = set(re.findall(r"^streamk (\w+)", block, re.M))
    assert listed == set(sub.choices), f"README's command list: {sorted(listed)}"


def test_the_user_guides_adatron_figure_matches_the_committed_grid():
    """docs/user-guide.md quotes the resweeping adatron's range from
    ``benchmarks.online_throughput`` (learner ``adatron-resweep``):
    its events/s (to the thousand) and its ratio to river's linear model (two decimals)."""
    claim = _user_guide_claim(
        r"learns the grid's first (?P<events>[\d,]+) events at (?P<lo>[\d,]+)–(?P<hi>[\d,]+) "
        r"events/s, (?P<rlo>0\.\d\d)–(?P<rhi>0\.\d\d)× river's linear `Perceptron` "
        r"\(`python -m benchmarks\.online_throughput`\)",
        "adatron figure",
    )
    doc = _benchmark("online_grid", "online_throughput")
    rows = [r for r in doc["rows"] if r.get("learner") == "adatron-resweep" and "policy" in r]
    assert rows and {r["events"] for r in rows} == {int(claim["events"].replace(",", ""))}
    speeds = [r["learn_many_ev_s"] for r in rows]
    ratios = [r["many_vs_river"] for r in rows]

    def thousands(text: str) -> int:
        return int(text.replace(",", ""))

    assert thousands(claim["lo"]) == round(min(speeds), -3), min(speeds)
    assert thousands(claim["hi"]) == round(max(speeds), -3), max(speeds)
    assert claim["rlo"] == f"{min(ratios):.2f}" and claim["rhi"] == f"{max(ratios):.2f}"


def test_the_user_guides_adatron_default_figure_matches_its_benchmark():
    """docs/user-guide.md's case for ``resweeps=0``: the accuracy gap to one resweep (points,
    one decimal) and the speed-up (whole numbers) over ``benchmarks.adatron_default``'s rows."""
    claim = _user_guide_claim(
        r"was (?P<lo>[-+]?\d+\.\d) to (?P<hi>[-+]?\d+\.\d) points from the resweeping model's, "
        r"at (?P<slo>\d+)–(?P<shi>\d+)× its speed \(`python -m benchmarks\.adatron_default`\)",
        "adatron default figure",
    )
    doc = _benchmark("adatron_default")
    gains = [100 * r["accuracy_gain"] for r in doc["rows"]]
    speedups = [r["speedup"] for r in doc["rows"]]
    assert len(gains) == 6
    assert float(claim["lo"]) == round(min(gains), 1) and float(claim["hi"]) == round(max(gains), 1)
    assert int(claim["slo"]) == round(min(speedups)) and int(claim["shi"]) == round(max(speedups))


def test_the_merge_tables_adatron_is_the_one_the_benchmark_measured():
    """docs/operations.md's merge table names the adatron ``python -m benchmarks.scale_out``
    built (one resweep per event, not the learner's default since ``resweeps=0``)."""
    from benchmarks.scale_out import LEARNERS as SCALE_OUT

    ops = (ROOT / "docs" / "operations.md").read_text()
    named = set(re.findall(r"`KernelAdatron\(([^)]*)\)`", ops))
    assert named == {"C=1, resweeps=1"}, named
    doc = _benchmark("scale_out_merge", "scale_out")
    assert any(r.get("learner") == "KernelAdatron(C=1, 200)" for r in doc["results"])
    model = SCALE_OUT["KernelAdatron(C=1, 200)"]()
    assert (model.C, model.resweeps) == (1.0, 1)


def test_the_user_guides_projectron_floor_matches_its_benchmark():
    """docs/user-guide.md's bound on the Projectron: how many of
    ``benchmarks.projectron_floor``'s cells no implementation could bring to the speed issue
    #16 asks (river's linear model's; 4 times it for the kernel perceptron), and the range of
    their best ratios (two decimals)."""
    claim = _user_guide_claim(
        r"in (?P<cells>\d+) of its (?P<all>\d+) cells no implementation could reach the speed "
        r"asked \(river's linear model's; 4× it for the kernel perceptron\): at best "
        r"(?P<lo>\d\.\d\d)–(?P<hi>\d\.\d\d)× river's "
        r"\(`python -m benchmarks\.projectron_floor`\)",
        "Projectron floor",
    )
    doc = _benchmark("projectron_floor")
    capped = [r["best_ratio"] for r in doc["rows"] if r["best_ratio"] < r.get("target", 1.0)]
    assert int(claim["all"]) == len(doc["rows"]) and int(claim["cells"]) == len(capped)
    assert claim["lo"] == f"{min(capped):.2f}" and claim["hi"] == f"{max(capped):.2f}"


def test_the_user_guides_resweep_floor_matches_its_benchmark():
    """docs/user-guide.md's bound on the resweeping adatron: how many of
    ``benchmarks.resweep_floor``'s cells no implementation could bring to river's linear
    model's speed, the range of all cells' best ratios, and how far above its floor the
    current implementation runs outside the Projectron (two decimals; the multiple as a whole
    number)."""
    claim = _user_guide_claim(
        r"in (?P<cells>\d+) of its (?P<all>\d+) cells no implementation could reach river's "
        r"linear `Perceptron` \(at best (?P<lo>\d+\.\d\d)–(?P<hi>\d+\.\d\d)× its speed over "
        r"all of them\), and, outside the Projectron \(whose own read of P it leaves out\), the "
        r"current one runs at (?P<flo>\d+)–(?P<fhi>\d+)× the floor "
        r"\(`python -m benchmarks\.resweep_floor`\)",
        "resweep floor",
    )
    doc = _benchmark("resweep_floor")
    best = [r["best_ratio"] for r in doc["rows"]]
    over = [r["current_over_floor"] for r in doc["rows"] if r["policy"] != "Projectron"]
    assert int(claim["all"]) == len(best) and int(claim["cells"]) == sum(b < 1.0 for b in best)
    assert claim["lo"] == f"{min(best):.2f}" and claim["hi"] == f"{max(best):.2f}"
    assert claim["flo"] == f"{min(over):.0f}" and claim["fhi"] == f"{max(over):.0f}"


def test_the_user_guides_grid_timing_is_the_benchmarks():
    """docs/user-guide.md says how ``benchmarks.online_throughput`` times a repeat (fresh
    models until a CPU budget is spent): the budget is ``online_grid.MIN_CPU``, and the
    committed grid was measured with it."""
    from benchmarks import online_grid

    claim = _user_guide_claim(
        r"median of (?P<repeats>\d) repeats, each of which learns the stream with fresh "
        r"models until it has spent (?P<ms>\d+) ms",
        "grid timing",
    )
    doc = _benchmark("online_grid", "online_throughput")
    assert int(claim["ms"]) / 1000 == online_grid.MIN_CPU == doc["min_cpu_s_per_repeat"]
    assert int(claim["repeats"]) == doc["repeats"]


def test_the_user_guides_grid_tables_are_the_committed_grids():
    """The two ratio tables in the user guide are ``online_grid.summary_tables`` of the
    committed grid: a re-run of ``python -m benchmarks.online_throughput`` that moves a
    cell fails here until the guide is regenerated."""
    from benchmarks.online_grid import GUIDE_TABLES as GRID_TABLES
    from benchmarks.online_grid import summary_tables

    guide = (ROOT / "docs" / "user-guide.md").read_text()
    assert guide.count(GRID_TABLES) == 1, "the user guide's grid tables moved: update this test"
    expected = summary_tables(_benchmark("online_grid", "online_throughput"))
    assert guide.split(GRID_TABLES, 1)[1].startswith(expected + "\n"), expected


def test_the_user_guide_is_what_guide_only_writes_from_the_committed_grid(tmp_path):
    """``python -m benchmarks.online_throughput --guide-only`` puts the committed grid's
    tables and resweep figure into the guide: on the guide as committed it changes nothing,
    so the guide's figures are the ones the command writes, not edited by hand."""
    from benchmarks import online_throughput

    guide = tmp_path / "user-guide.md"
    committed = (ROOT / "docs" / "user-guide.md").read_text()
    guide.write_text(committed)
    assert online_throughput.main(["--guide-only", "--guide", str(guide)]) == 0
    assert guide.read_text() == committed


def test_write_guide_puts_a_new_grids_figures_in_and_leaves_the_rest(tmp_path):
    """A re-run that moves the cells: :func:`write_guide` replaces the two tables and the
    resweep figure's five numbers with the new grid's, and no other line of the guide."""
    from benchmarks.online_grid import GUIDE_RESWEEP, GUIDE_TABLES, summary_tables, write_guide

    doc = _benchmark("online_grid", "online_throughput")
    for i, row in enumerate(r for r in doc["rows"] if "many_vs_river" in r):
        row["many_vs_river"] *= 1.0 + 0.37 * (i % 5)  # every learner's span moves
        if row["learner"] == "adatron-resweep":
            row["learn_many_ev_s"] = 1_234_567.0 * (1 + i % 3)
            row["events"] = 12_345
    guide = tmp_path / "user-guide.md"
    committed = (ROOT / "docs" / "user-guide.md").read_text()
    guide.write_text(committed)
    assert write_guide(doc, guide) is True
    text = guide.read_text()
    assert text.split(GUIDE_TABLES, 1)[1].startswith(summary_tables(doc) + "\n")
    figure = GUIDE_RESWEEP.search(" ".join(text.split()))
    resweep = [r for r in doc["rows"] if r.get("learner") == "adatron-resweep" and "policy" in r]
    speeds = [r["learn_many_ev_s"] for r in resweep]
    ratios = [r["many_vs_river"] for r in resweep]
    assert figure["events"] == "12,345"
    assert (figure["lo"], figure["hi"]) == ("1,235,000", "3,704,000"), (min(speeds), max(speeds))
    assert (figure["rlo"], figure["rhi"]) == (f"{min(ratios):.2f}", f"{max(ratios):.2f}")
    old, new = committed.splitlines(), text.splitlines()
    assert len(old) == len(new)
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    tables = old.index(GUIDE_TABLES.strip()) + 1
    claim = GUIDE_RESWEEP.search(committed)
    first, last = committed[: claim.start()].count("\n"), committed[: claim.end()].count("\n")
    table_lines = 2 * (2 + len({r["learner"] for r in doc["rows"] if "policy" in r})) + 1
    assert changed and all(
        tables <= i < tables + table_lines or first <= i <= last for i in changed
    ), changed
    assert write_guide(doc, guide) is False  # a second write finds nothing to change


def test_the_user_guides_cells_below_one_are_the_ones_it_names():
    """docs/user-guide.md names where a grid cell drops below river's linear model: the
    Projectron, the resweeping adatron, or, in ``learn_one`` alone, a learner that updates
    on nearly every event: the adatron (no budget, the Forgetron at B = 1,000) and the
    margin perceptron (the Forgetron at B = 1,000) on the d = 50 stream, and the SVR on
    Friedman (remove-oldest at B = 1,000, Merge at both budgets). Every committed cell below
    1 is one of those (a re-run that moves another below 1 fails here until the guide says
    so)."""
    guide = " ".join((ROOT / "docs" / "user-guide.md").read_text().split())
    assert (
        "or, in `learn_one` alone, a learner that updates on nearly every event: the adatron "
        "(no budget, the `Forgetron` at B = 1,000) and the margin perceptron (the `Forgetron` "
        "at B = 1,000) on the d = 50 stream, and `OnlineSVR` on Friedman (remove-oldest at "
        "B = 1,000, `Merge` at both budgets)." in guide
    ), "the user guide's cells below 1 moved: update this test"
    doc = _benchmark("online_grid", "online_throughput")
    below = 0
    for row in doc["rows"]:
        if "policy" not in row or row["learner"] == "adatron-resweep":
            continue  # (river's rows; the resweeps have their own figure)
        if row["policy"] == "Projectron":
            continue
        cell = (row["learner"], row["stream"], row["policy"], row["budget"])
        assert row["many_vs_river"] >= 1.0, cell
        if row["one_vs_river"] < 1.0:
            below += 1
            if row["learner"] == "svr":
                assert row["stream"] == "Friedman", cell
                assert row["policy"] == "Merge" or (row["policy"], row["budget"]) == (
                    "RemoveOldest",
                    1000,
                ), cell
            else:
                assert row["learner"] in ("adatron", "margin") and row["stream"] == "Synth50"
                assert (row["policy"], row["budget"]) in (("Forgetron", 1000), ("Unbounded", "-"))
                assert row["learner"] == "adatron" or row["policy"] == "Forgetron", cell
    assert below > 0


def test_summary_tables_take_each_cells_lowest_and_highest_ratio():
    """``summary_tables`` on a hand-made grid: ranges over streams and budgets, one figure
    where they agree to two decimals, a dash where a learner never ran a policy, the
    policies cheapest first whatever order the rows come in."""
    from benchmarks.online_grid import summary_tables

    def cell(learner, policy, many, one):
        return {"learner": learner, "policy": policy, "many_vs_river": many, "one_vs_river": one}

    doc = {
        "rows": [
            {"learner": "svr", "model": "river LinearRegression", "learn_one_ev_s": 1.0},
            cell("svr", "Merge", 0.5, 0.25),
            cell("svr", "Merge", 2.0, 0.75),
            cell("svr", "Merge", 1.25, 0.5),
            cell("svr", "Unbounded", 3.0, 1.0),
            cell("perceptron", "Merge", 4.001, 1.5),
            cell("perceptron", "Merge", 3.999, 1.5),
        ]
    }
    many, one = summary_tables(doc).split("\n\n")
    assert many.splitlines() == [
        "| `learn_many` | no budget | `Merge` |",
        "|---|---|---|",
        "| `KernelPerceptron` | – | 4.00 |",
        "| `OnlineSVR` | 3.00 | 0.50–2.00 |",
    ]
    assert one.splitlines()[2:] == [
        "| `KernelPerceptron` | – | 1.50 |",
        "| `OnlineSVR` | 1.00 | 0.25–0.75 |",
    ]


def test_the_committed_grids_spreads_bracket_their_medians():
    """Each grid cell's slowest and fastest repeat (events/s) bracket its median, for
    ``learn_many`` and ``learn_one`` (the spread was once the rate times the events)."""
    doc = _benchmark("online_grid", "online_throughput")
    cells = [r for r in doc["rows"] if "many_vs_river" in r]
    assert cells
    for r in cells:
        for key in ("learn_many_ev_s", "learn_one_ev_s"):
            lo, hi = r[f"{key}_min_max"]
            assert lo <= r[key] * (1 + 1e-12) and r[key] <= hi * (1 + 1e-12), (r, key)


def test_the_readmes_block_pass_policies_take_a_block_pass():
    """README.md says which policies the compiled block passes take: no budget,
    remove-oldest, remove-random, remove-smallest and the Forgetron for the perceptrons,
    the ranker, the SVR and the novelty detector, and Merge for the perceptrons on an RBF
    kernel. Each such ``learn_many`` block (labels known, a fixed width: no warm-up) goes
    through a block pass, none of its rows through the per-event core; under Merge the
    pass merges."""
    import numpy as np
    import pandas as pd
    import pytest

    from streamk import RBF, Forgetron, Merge, RemoveOldest, RemoveRandom, RemoveSmallest, accel
    from streamk.learners import (
        KernelNovelty,
        KernelPerceptron,
        MarginPerceptron,
        OnlineRanker,
        OnlineSVR,
        fastpass,
    )

    if accel.core is None:
        pytest.skip("needs the compiled core")
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (
        "the no-budget, remove-oldest, remove-random, remove-smallest and Forgetron policies, "
        "and Merge for the perceptrons on an RBF kernel" in readme
    ), "the README's list of block-pass policies moved: update this test"
    rng = np.random.default_rng(2)
    X = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    score = np.sin(2 * X["a"]) + X["b"] * X["c"]
    learners = {
        "perceptron": (lambda b: KernelPerceptron(kernel=RBF(gamma=0.5), budget=b), score > 0),
        "margin": (lambda b: MarginPerceptron(kernel=RBF(gamma=0.5), budget=b), score > 0),
        "ranker": (
            lambda b: OnlineRanker(kernel=RBF(gamma=0.5), ranks=(0, 1, 2), budget=b),
            np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])),
        ),
        "svr": (lambda b: OnlineSVR(kernel=RBF(gamma=0.5), budget=b), score),
        "novelty": (lambda b: KernelNovelty(kernel=RBF(gamma=0.5), budget=b), None),
    }
    policies = {
        "none": lambda: None,
        "oldest": lambda: RemoveOldest(40),
        "random": lambda: RemoveRandom(40, seed=1),
        "smallest": lambda: RemoveSmallest(40),
        "forgetron": lambda: Forgetron(40),
        "merge": lambda: Merge(40),
    }
    for lname, (make, y) in learners.items():
        for pname, policy in policies.items():
            if pname == "merge" and lname not in ("perceptron", "margin"):
                continue
            model = make(policy())
            rows = X.to_dict("records")
            if y is not None:  # every label known first (a new one takes the NumPy path)
                y = pd.Series(np.asarray(y).tolist(), dtype=object)
                for label in sorted(set(y)):
                    first = int(np.flatnonzero(y.to_numpy() == label)[0])
                    model.learn_one(rows[first], y[first])
            fastpass.COUNTS.clear()
            if y is None:
                model.learn_many(X)
            else:
                model.learn_many(X, y)
            cell = (lname, pname)
            assert fastpass.COUNTS["event_rows"] == 0, cell
            assert fastpass.COUNTS["compiled"] == len(X), (cell, dict(fastpass.COUNTS))
            if pname == "merge":
                assert fastpass.COUNTS["merges"] > 0, cell


def test_the_user_guides_test_then_train_figures_are_the_event_path_benchmarks():
    """The user guide's test-then-train and ``learn_one`` ratios on the d = 50 stream are
    the committed ``python -m benchmarks.event_path`` run's medians."""
    claim = _user_guide_claim(
        r"test-then-train runs at (?P<kp_ttt>[\d.]+)× river's for `KernelPerceptron\(budget="
        r"(?P<b>\d+)\)` and (?P<ka_ttt>[\d.]+)× for `KernelAdatron\(budget=(?P=b)\)` "
        r"\(`learn_one` alone: (?P<kp_one>[\d.]+)× and (?P<ka_one>[\d.]+)×\)",
        "test-then-train figures",
    )
    doc = _benchmark("event_path")
    assert doc["budget"] == int(claim["b"]) and doc["repeats"] == 3

    def ratio(protocol: str, model: str) -> float:
        (row,) = [
            r
            for r in doc["rows"]
            if r["stream"].startswith("Hyperplane(d=50")
            and r["protocol"] == protocol
            and r["model"] == f"{model}(budget={claim['b']})"
        ]
        return round(row["ratio_vs_river_median"], 2)

    assert float(claim["kp_ttt"]) == ratio("test-then-train", "KernelPerceptron")
    assert float(claim["ka_ttt"]) == ratio("test-then-train", "KernelAdatron")
    assert float(claim["kp_one"]) == ratio("learn_one", "KernelPerceptron")
    assert float(claim["ka_one"]) == ratio("learn_one", "KernelAdatron")
    proba = _user_guide_claim(
        r"asking `predict_proba_one` instead, the perceptrons and the adatron run at "
        r"(?P<lo>[\d.]+)–(?P<hi>[\d.]+)× river's on the three streams",
        "predict_proba_one figures",
    )
    ratios = [
        round(r["ratio_vs_river_median"], 2)
        for r in doc["rows"]
        if r["protocol"] == "test-then-train, proba"
        and not r["model"].endswith("NumPy path")
        and not r["model"].startswith("river")
    ]
    assert len(ratios) == 9  # three learners, three streams
    assert (float(proba["lo"]), float(proba["hi"])) == (min(ratios), max(ratios))


def test_the_standardisation_figure_is_the_committed_benchmarks():
    """ "the kernel perceptron on a 50-feature stream takes 6.76 µs an event in blocks of
    500, against 56.73 µs standardising in Python (`python -m benchmarks.scaled`)"."""
    claim = re.search(
        r"on a 50-feature stream takes (?P<fast>[\d.]+) µs an event in blocks of (?P<block>\d+),"
        r" against (?P<slow>[\d.]+) µs standardising in Python \(`python -m benchmarks\.scaled`\)",
        _prose(),
    )
    assert claim, "the README's standardisation figure moved: update this test"
    doc = _benchmark("scaled")
    assert doc["block"] == int(claim["block"])
    blocks = f"blocks of {doc['block']}"
    cell = {
        r["model"]: r["events_per_s_median"]
        for r in doc["rows"]
        if r["stream"].startswith("Hyperplane(d=50") and r["protocol"] == blocks
    }
    assert claim["fast"] == f"{1e6 / cell['standard_scaled(same)']:.2f}"
    assert claim["slow"] == f"{1e6 / cell['standard_scaled(same), Python standardisation']:.2f}"


GUARD_FIGURE = re.compile(
    r"whichever erred less over the last (?P<guard>\d+) events serves: on a 50-feature "
    r"Hyperplane stream, consolidation alone takes the kernel perceptron from "
    r"(?P<online>[\d.]+) to (?P<plain>[\d.]+) prequential accuracy, the guarded model keeps "
    r"(?P<guarded>[\d.]+) \(`python -m benchmarks\.consolidation_guard`\)"
)


def test_the_consolidation_guard_figures_are_the_committed_benchmarks():
    """ "on a 50-feature Hyperplane stream, consolidation alone takes the kernel perceptron
    from 0.7418 to 0.6960 prequential accuracy, the guarded model keeps 0.7417"."""
    claim = GUARD_FIGURE.search(_prose())
    assert claim, "the README's consolidation guard figure moved: update this test"
    doc = _benchmark("consolidation_guard")
    assert doc["guard"] == int(claim["guard"])
    cell = {
        r["model"]: r["score"]
        for r in doc["rows"]
        if r["learner"] == "KernelPerceptron" and r["stream"] == "Hyperplane(d=50)"
    }
    assert claim["online"] == f"{cell['on-line']:.4f}"
    assert claim["plain"] == f"{cell['consolidated, guard=0']:.4f}"
    guarded = f"consolidated, guard={doc['guard']}"
    assert claim["guarded"] == f"{cell[guarded]:.4f}"


def test_the_guide_s_guard_table_is_the_committed_benchmarks():
    from benchmarks.consolidation_guard import END, START, render

    doc = _benchmark("consolidation_guard")
    guide = (ROOT / "docs" / "user-guide.md").read_text()
    assert guide.split(START, 1)[1].split(END, 1)[0].strip() == render(doc["rows"])


OPERATIONS = ROOT / "docs" / "operations.md"


def _k_figures(value: float) -> str:
    """Events/s as the operations guide writes them: thousands, rounded."""
    return f"{round(value / 1000)}k"


def test_the_operations_publishing_figures_are_the_engine_benchmarks():
    """Session 23's docs audit: the table quoted an older run (32k, 90k, 182k, 285k)."""
    doc = json.loads((RESULTS / "engine.json").read_text())
    assert doc["command"].strip() == "python -m benchmarks.engine"  # (a trailing space)
    rows = {r["case"]: r for r in doc["rows"]}
    text = OPERATIONS.read_text()
    rate = {case: _k_figures(r["events_per_s_median"]) for case, r in rows.items()}
    cells = {
        "kafka-python, one record per event (default)": rate[
            "engine: score (budget 100) + publish predictions (kafka-python)"
        ],
        "kafka-python, one block per run": rate[
            "engine: score (budget 100) + publish prediction blocks (kafka-python)"
        ],
        'confluent (`transport = "confluent"`), one record per event': rate[
            "engine: score (budget 100) + publish predictions, confluent"
        ],
        "confluent, one block per run": rate[
            "engine: score (budget 100) + publish prediction blocks, confluent"
        ],
    }
    for row, figure in cells.items():
        assert f"| {row} | {figure} |" in text, row
    alone = (
        f"Scoring alone runs at {rate['engine: score (budget 100)']} events/s on kafka-python "
        f"and {rate['engine: score (budget 100), confluent']} on confluent"
    )
    assert alone in " ".join(text.split())


def test_the_operations_merge_table_is_the_committed_scale_out_benchmark():
    """Every cell of the merge table (k = 3) recomputed from the committed JSON, as
    ``benchmarks/scale_out.py`` prints it: accuracy points against the best worker / one
    model, median [min, max] over the repeats (three hyperplane cells were stale)."""
    import statistics

    def summary(values: list[float]) -> str:
        return f"{statistics.median(values):+.1f} [{min(values):+.1f}, {max(values):+.1f}]"

    names = {"bananas": "Bananas", "hyperplane20": "hyperplane d=20"}
    learners = {
        "KernelPerceptron(200)": "`KernelPerceptron`",
        "MarginPerceptron(Projectron(200))": "`MarginPerceptron(Projectron)`",
        "KernelAdatron(C=1, 200)": "`KernelAdatron(C=1, resweeps=1)`",
    }
    lines = {
        line.split("|")[1].strip(): line
        for line in OPERATIONS.read_text().splitlines()
        if line.startswith("| Bananas, `") or line.startswith("| hyperplane d=20, `")
    }
    checked = 0
    for entry in _benchmark("scale_out_merge", "scale_out")["results"]:
        if entry["k"] != 3:
            continue
        line = lines[f"{names[entry['stream']]}, {learners[entry['learner']]}"]
        rows = entry["repeats"]
        for method in ("project", "solve"):
            if "the same: the union fits the budget" in line and method == "solve":
                continue
            acc = [r["merged"][method]["accuracy"] for r in rows]
            best = summary([100 * (a - max(r["workers"])) for a, r in zip(acc, rows)])
            one = summary([100 * (a - r["single"]) for a, r in zip(acc, rows)])
            assert f"{best} / {one}" in line, (entry["stream"], entry["learner"], method)
            checked += 1
    assert checked == 11


def test_the_operations_short_run_figures_are_the_committed_benchmarks():
    """Every rate of the mixed-stream paragraph, from ``benchmarks/results/short_runs.json``,
    and its ``BLOCK_MIN`` the engine's."""
    from streamk.engine.runs import BLOCK_MIN

    doc = json.loads((RESULTS / "short_runs.json").read_text())
    assert doc["command"] == "python -m benchmarks.short_runs" and doc["block_min"] == BLOCK_MIN
    rows = {r["order"]: r for r in doc["rows"]}
    now = f"events_per_s_block_min_{BLOCK_MIN}"

    def k(rate: float) -> str:
        return f"{rate / 1000:.1f}k"

    def pair(order: str) -> tuple[str, str]:
        return k(rows[order][now]), k(rows[order]["events_per_s_every_run_framed"])

    text = " ".join(OPERATIONS.read_text().split())
    assert f"shorter than {BLOCK_MIN} events (`BLOCK_MIN`" in text
    one, ten, grouped = (
        pair(o)
        for o in ("alternating every event", "alternating every 10 events", "grouped (runs of 250)")
    )
    assert (
        f"measured {one[0]} events/s where the kinds alternate every event ({one[1]} before)"
        in text
    )
    assert (
        f"{ten[0]} every 10 events ({ten[1]}) and {grouped[0]} in runs of 250 ({grouped[1]})"
        in text
    )
