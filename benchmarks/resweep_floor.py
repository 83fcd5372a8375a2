"""The best ratio to river any ``KernelAdatron(resweeps=1)`` could reach on the grid's cells.

A resweep (Shawe-Taylor & Cristianini, CF 7.13; :meth:`KernelAdatron._resweep
<streamk.learners.adatron.KernelAdatron._resweep>`) is one cyclic pass of coordinate steps
over the ``n`` support vectors, oldest first: step ``i`` reads
``f_i = sum_j G_ij c_j`` (``G`` the set's Gram matrix, ``c`` the coefficients as the pass
has left them), moves ``c_i``, and every later step must see the move. What must a pass
read, at least?

* Every stored Gram entry, once. A step needs all of its row: every coefficient of a
  support vector is non-zero (a vector whose coefficients all return to 0 leaves the
  set), so no entry ``G_ij`` can be skipped without changing some ``f_i``. ``G`` is
  symmetric: ``n (n + 1) / 2`` distinct entries.
* And once is enough. Split ``f_i`` at ``i`` (in the pass's order):
  ``f_i = A_i + G_ii c_i + sum_{j > i} G_ij c_j`` with ``A_i = sum_{j < i} G_ij c_j``
  over the coefficients already moved. Step ``i`` reads the tail ``G_i,j>i`` once
  (``n - i`` entries, a few KB: it stays in L1), takes its dot with the unmoved ``c_j``,
  moves ``c_i``, and adds ``G_ij c_i`` to ``A_j`` for every ``j > i`` from the tail
  still in cache. Each stored entry comes from memory once.

So the floor of a pass is reading ``n (n + 1) / 2`` doubles; the ``n`` axpys of length
``n`` of the textbook loop (``f += G_i delta``, after ``F = G c`` at the start: the
compiled pass, :mod:`streamk.learners.dualpass`) read up to ``2 n²``, four times as much,
and are an implementation, not a minimum. The event's own first step adds its kernel row
against the set before it (``n_before × d`` stored feature values, read once). Both reads
are priced at the fastest read bandwidth this machine shows on a contiguous block of
doubles of those sizes (:func:`benchmarks.projectron_floor._bandwidths`: a vectorised
sum, blocks in cache, so the floor errs low); writes of the new Gram row and the ``O(n)``
vectors are left out (they err low too), and so is a policy's own work (under the
Projectron, add ``benchmarks.projectron_floor``'s read of ``P``).

A fresh ``KernelAdatron(resweeps=1)`` learns the grid's events one at a time under each of
the grid's budget policies; the support's size at each pass and before each event gives
the floor per event, river's linear ``Perceptron`` ``learn_one`` time per event on the same
stream (same run) over it is the best ratio any implementation could reach. Next to it:
the time the current implementation takes per event (``learn_one``, same run, median of
repeats), its multiple of the floor, and the ratios the committed grid
(``benchmarks/results/online_grid.json``, rows ``adatron-resweep``) holds.

Run: ``python -m benchmarks.resweep_floor`` (about a minute; writes
``benchmarks/results/resweep_floor.json``).
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

from benchmarks import online_grid as grid
from benchmarks.common import learn_one_seconds, result_document, write_results
from benchmarks.projectron_floor import _bandwidths, _river_seconds

RESULTS = Path(__file__).resolve().parent / "results"
LEARNER = "adatron-resweep"
#: the grid's budgets
BUDGETS = (200, 1000)
#: repeats of the current implementation's timing (median)
REPEATS = 3


def _sizes(model: Any, data: list) -> tuple[list[int], list[int]]:
    """A fresh resweeping ``model`` learning ``data`` one event at a time: the support's
    size at every pass of its resweeps and before every event (the set its kernel row is
    taken against)."""
    passes: list[int] = []
    before: list[int] = []
    resweep, event = model._resweep, model._event

    def counted(n_passes: int) -> None:
        passes.extend([model._support.n] * n_passes)
        resweep(n_passes)

    model._resweep = counted  # the instance's: the learner's code is unchanged
    model._event = None  # (the per-event core resweeps inside its call: the same sizes)
    try:
        for x, y in data:
            before.append(model._support.n)
            model.learn_one(x, y)
    finally:
        del model._resweep
        model._event = event
    return passes, before


def floor_bytes(passes: list[int], before: list[int], width: int) -> float:
    """Bytes a pass-through must read at least: ``n (n + 1) / 2`` Gram entries a pass, the
    event's kernel row (``n_before × width`` features), 8 bytes each."""
    return 8.0 * (sum(n * (n + 1) / 2 for n in passes) + width * sum(before))


def _grid_rows() -> dict[tuple, dict[str, Any]]:
    """(stream, policy, B) -> the committed grid's ``adatron-resweep`` row."""
    path = RESULTS / "online_grid.json"
    if not path.exists():
        return {}
    rows = json.loads(path.read_text())["rows"]
    return {
        (r["stream"], r["policy"], r["budget"]): r
        for r in rows
        if r.get("learner") == LEARNER and "many_vs_river" in r
    }


def main() -> int:
    load_before = os.getloadavg()
    bandwidth = _bandwidths()
    fastest = max(bandwidth.values())
    measured = _grid_rows()
    make_learner = grid.LEARNERS[LEARNER][1]
    rows: list[dict[str, Any]] = []
    print(
        f"{'stream':<10} {'policy':<14} {'B':>5} {'mean n':>6} {'floor µs/ev':>11} "
        f"{'river µs/ev':>11} {'best ratio':>10} {'now µs/ev':>9} {'now/floor':>9} "
        f"{'grid many/one':>14}"
    )
    for sname, (stask, data0) in grid.streams(False).items():
        if stask != "clf":
            continue
        data = data0[: grid.CAPS_LEARNER[LEARNER]]
        width = len(data[0][0])
        river_s = _river_seconds("clf", data)
        for pname, budget, policy in grid._configs(list(BUDGETS)):

            def make(policy=policy):
                return make_learner(grid.KERNELS["rbf"](), policy())

            passes, before = _sizes(make(), data)
            floor = floor_bytes(passes, before, width) / fastest / len(data)
            now = learn_one_seconds(make, data, REPEATS)
            row = measured.get((sname, pname, budget), {})
            many, one = row.get("many_vs_river"), row.get("one_vs_river")
            out = {
                "stream": sname,
                "policy": pname,
                "budget": budget,
                "events": len(data),
                "width": width,
                "passes": len(passes),
                "mean_n_at_pass": statistics.fmean(passes) if passes else 0.0,
                "floor_us_per_event": 1e6 * floor,
                "river_us_per_event": 1e6 * river_s,
                "best_ratio": river_s / floor if floor else float("inf"),
                "current_us_per_event": 1e6 * now,
                "current_over_floor": now / floor if floor else float("inf"),
                "current_vs_river": river_s / now,
                "grid_many_vs_river": many,
                "grid_one_vs_river": one,
            }
            rows.append(out)
            shown = "-" if many is None else f"{many:.2f} / {one:.2f}"
            print(
                f"{sname:<10} {pname:<14} {budget!s:>5} {out['mean_n_at_pass']:>6.0f} "
                f"{1e6 * floor:>11.2f} {1e6 * river_s:>11.2f} {out['best_ratio']:>10.2f} "
                f"{1e6 * now:>9.1f} {out['current_over_floor']:>9.1f} {shown:>14}",
                flush=True,
            )
    doc = result_document(
        "resweep_floor",
        False,
        load_before,
        rows,
        learner="KernelAdatron(resweeps=1), RBF(gamma='auto')",
        read_bandwidth_bytes_per_s={str(n): bw for n, bw in bandwidth.items()},
    )
    write_results(RESULTS, "resweep_floor", False, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
