"""Periodic consolidation of a budgeted kernel perceptron vs the plain on-line learner.

Run: ``python -m benchmarks.consolidation`` (``--quick`` for a smoke run). For each stream
(river's Bananas, a drifting SEA stream, a RandomRBF stream with 20 centroids) and budget:

* prequential accuracy of ``KernelPerceptron(budget)`` alone and wrapped in
  ``Consolidated(..., every=N, guard=0)`` (sync, every solution served; what the default
  guard adds: ``python -m benchmarks.consolidation_guard``), and the solver time per
  consolidation;
* held-out accuracy at several cut points: the on-line model, the model consolidated on
  (support set ∪ window) — adopted within the budget and unbudgeted — and scikit-learn's
  ``SVC(kernel="precomputed")`` with a bias on the same rows and Gram matrix, plus the time to
  build that Gram and fit (our solve builds its own Gram too); ratios are our solve / SVC's,
  median and min–max over the cut points (target <= 1.2);
* kernel choice: per candidate, FSM, 1 − KTA and the held-out accuracy of scikit-learn's SVC
  trained on the window; marked, FSM's pick and ``select_kernel``'s (a 3-fold C-SVC validation);
  and ``select_kernel``'s gamma against 5-fold cross-validated SVC's on breast_cancer, digits
  (0 vs rest) and wine (0 vs rest) (target: within one grid step on at least 2).

Solve times are the median of 3 runs per cut, ours and scikit-learn's interleaved.

Prints tables; JSON to ``benchmarks/results/consolidation.json`` (``-quick`` suffix for --quick).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from river import datasets
from river.datasets import synth

from streamk.consolidation import Consolidated, Consolidator, solve_learner
from streamk.consolidation.solve import build
from streamk.kernels import RBF, Laplacian, Polynomial, ScaleEstimator
from streamk.kernels.measures import alignment, fsm, fsm_error_bound, select_kernel
from streamk.learners import KernelPerceptron

from .common import machine_info

RESULTS = Path(__file__).parent / "results"


def streams(n: int | None) -> dict[str, list[tuple[dict, Any]]]:
    sea_n = n or 6000
    sea = synth.ConceptDriftStream(
        synth.SEA(variant=0, seed=1, noise=0.05),
        synth.SEA(variant=2, seed=3, noise=0.05),
        position=sea_n // 2,
        width=200,
        seed=4,
    )
    rbf_n = n or 6000
    rbf_stream = synth.RandomRBF(seed_model=7, seed_sample=8, n_classes=2, n_features=5,
                                 n_centroids=20)  # fmt: skip
    return {
        "Bananas": list(itertools.islice(datasets.Bananas(), n)),
        "SEA-drift": list(sea.take(sea_n)),
        "RandomRBF": list(rbf_stream.take(rbf_n)),
    }


def prequential(model: Any, events: list[tuple[dict, Any]]) -> tuple[float, float, list[float]]:
    """Accuracy, wall seconds, and the solver seconds of each consolidation."""
    correct, durations = 0, []
    t0 = time.perf_counter()
    for x, y in events:
        correct += model.predict_one(x) == y
        before = getattr(model, "n_consolidations", 0)
        model.learn_one(x, y)
        if getattr(model, "n_consolidations", 0) > before:
            durations.append(model.last_duration)
    return correct / len(events), time.perf_counter() - t0, durations


def dense(events: list[tuple[dict, Any]], learner: KernelPerceptron) -> np.ndarray:
    return learner._features.rows([x for x, _ in events], grow=False)


def holdout(events, budget: int, every: int, window: int, cuts: list[int], test_n: int):
    """At each cut: on-line vs consolidated (budgeted, unbudgeted) vs scikit-learn SVC."""
    from sklearn.svm import SVC

    out = []
    for cut in cuts:
        learner = KernelPerceptron(budget=budget)
        cons = Consolidator(every=10**9, window_size=window, when_full=False)
        for x, y in events[:cut]:
            learner.learn_one(x, y)
            cons.observe(learner, x, y)
        test = events[cut : cut + test_n]
        Xt = dense(test, learner)
        yt = np.array([y for _, y in test], dtype=object)
        Xw, yw = cons.window.data()
        t0 = time.perf_counter()
        res = solve_learner(learner, Xw, yw, C=1.0)
        ours_t = [time.perf_counter() - t0]
        adopted = build(learner, res.state)
        full = solve_learner(learner, Xw, yw, C=1.0, fill=None)
        unbudgeted = build(learner, full.state) if full.state is not None else adopted
        svc_ours = solve_learner(learner, Xw, yw, C=1.0, solver="svc", fill=None)
        # scikit-learn on the same rows: support ∪ window, deduplicated, with the same labels
        S = learner.support_
        Xtr = np.vstack([S.X, Xw])
        T = learner._labels.target_matrix(list(yw))[:, 0]
        ytr = np.r_[np.sign(S.coef[:, 0]), T]
        Xtr, idx = np.unique(Xtr, axis=0, return_index=True)
        ytr = ytr[idx]

        def sk_fit(Xtr=Xtr, ytr=ytr, learner=learner) -> Any:
            """The user's alternative: build the window's Gram and fit."""
            K = learner.kernel_.gram(Xtr, Xtr)
            return SVC(kernel="precomputed", C=1.0).fit(K, ytr)

        t0 = time.perf_counter()
        ref = sk_fit()
        sk_t = [time.perf_counter() - t0]
        for _ in range(2):  # median of 3, the two sides interleaved
            t0 = time.perf_counter()
            solve_learner(learner, Xw, yw, C=1.0)
            ours_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            sk_fit()
            sk_t.append(time.perf_counter() - t0)
        ours_s, sk_s = statistics.median(ours_t), statistics.median(sk_t)
        sk_pred = ref.predict(learner.kernel_.gram(Xt, Xtr))
        y_pm = learner._labels.target_matrix(list(yt))[:, 0]
        F_svc = build(learner, svc_ours.state).support_.decision(Xt)[:, 0]
        bias = svc_ours.extra["bias"][0] if svc_ours.extra.get("bias") else 0.0

        def acc(model, Xt=Xt, yt=yt) -> float:
            pred = model._labels.decide(model.support_.decision(Xt))
            return float(np.mean(np.asarray(pred, dtype=object) == yt))

        out.append(
            {
                "cut": cut,
                "online": acc(learner),
                "consolidated": acc(adopted),
                "consolidated_unbudgeted": acc(unbudgeted),
                "svc_ours_bias": float(np.mean(np.where(F_svc + bias >= 0, 1, -1) == y_pm)),
                "sklearn_svc": float(np.mean(sk_pred == y_pm)),
                "n_sv_adopted": adopted.n_support,
                "n_sv_unbudgeted": unbudgeted.n_support,
                "n_sv_sklearn": int(len(ref.support_)),
                "n_train": res.n_train,
                "ours_s": ours_s,
                "sklearn_s": sk_s,
                "ratio_s": statistics.median(a / b for a, b in zip(ours_t, sk_t, strict=True)),
            }
        )
    return out


def kernel_choice(events, window: int, test_n: int, cut: int) -> list[dict[str, Any]]:
    """FSM / KTA of each candidate on the window, and SVC's held-out accuracy with it."""
    from sklearn.svm import SVC

    learner = KernelPerceptron(budget=200)
    for x, y in events[:cut]:
        learner.learn_one(x, y)
    win, test = events[cut - window : cut], events[cut : cut + test_n]
    Xw, Xt = dense(win, learner), dense(test, learner)
    yw = learner._labels.target_matrix([y for _, y in win])[:, 0]
    yt = learner._labels.target_matrix([y for _, y in test])[:, 0]
    scale = ScaleEstimator()
    scale.update(Xw)
    auto = RBF().resolve(scale)
    candidates = {
        "RBF auto (default)": auto,
        "RBF auto/4": RBF(gamma=auto.gamma / 4),
        "RBF auto*4": RBF(gamma=auto.gamma * 4),
        "Laplacian auto": Laplacian().resolve(scale),
        "Poly 2": Polynomial(degree=2),
    }
    picked = select_kernel(Xw, yw, list(candidates.values()))  # 3-fold C-SVC validation
    rows = []
    for name, k in candidates.items():
        K = k.gram(Xw, Xw)
        value = fsm(K, yw)
        svm = SVC(kernel="precomputed", C=1.0).fit(K, yw)
        rows.append(
            {
                "kernel": name,
                "fsm": value,
                "fsm_err": fsm_error_bound(value),
                "one_minus_kta": 1 - alignment(K, yw),
                "svc_heldout": float(np.mean(svm.predict(k.gram(Xt, Xw)) == yt)),
                "selected": k is picked,
            }
        )
    best = min(rows, key=lambda r: r["fsm"])
    for r in rows:
        r["fsm_selected"] = r is best
    return rows


def selection_vs_cv() -> list[dict[str, Any]]:
    """``select_kernel``'s gamma against 5-fold cross-validated SVC's on three data sets.

    The issue's yardstick: breast_cancer, digits (0 vs rest, first 600) and wine (class 0 vs
    rest), standardised; RBF gammas ``2^k / d`` for ``k = -6..4``. Agreement: within one grid
    step. Also FSM's and centred alignment's picks (the measures, not used to select).
    """
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import SVC

    Xb, tb = load_breast_cancer(return_X_y=True)
    Xd, td = load_digits(return_X_y=True)
    Xw, tw = load_wine(return_X_y=True)
    data = {
        "breast_cancer": (Xb, tb == 1),
        "digits 0/rest": (Xd[:600], td[:600] == 0),
        "wine 0/rest": (Xw, tw == 0),
    }
    rows = []
    for name, (X, y) in data.items():
        X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
        grid = [2.0**k / X.shape[1] for k in range(-6, 5)]
        cands = [RBF(gamma=g) for g in grid]
        t0 = time.perf_counter()
        ours = grid.index(select_kernel(X, y, cands).gamma)
        ours_s = time.perf_counter() - t0
        cv = StratifiedKFold(5, shuffle=True, random_state=0)
        t0 = time.perf_counter()
        search = GridSearchCV(SVC(C=1.0), {"gamma": grid}, cv=cv).fit(X, y)
        cv_s = time.perf_counter() - t0
        ref = grid.index(search.best_params_["gamma"])
        picks = {m: grid.index(select_kernel(X, y, cands, m).gamma) for m in ("alignment", "fsm")}
        rows.append({"data": name, "select": ours, "cv5": ref, "alignment": picks["alignment"],
                     "fsm": picks["fsm"], "agree": abs(ours - ref) <= 1, "select_s": ours_s,
                     "cv5_s": cv_s})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events, one budget")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    n = 2500 if args.quick else None
    budgets = [200] if args.quick else [200, 500]
    every, window = (500, 500) if args.quick else (1000, 1000)
    result: dict[str, Any] = {"machine": machine_info(), "every": every, "window": window}
    preq, held, kern = [], [], []
    for name, events in streams(n).items():
        for budget in budgets:
            base, base_s, _ = prequential(KernelPerceptron(budget=budget), events)
            for when_full in (False, True):
                model = Consolidated(
                    KernelPerceptron(budget=budget),
                    every=every,
                    window_size=window,
                    when_full=when_full,
                    guard=0,  # the solutions' own effect (the guard: consolidation_guard.py)
                )
                cons, cons_s, durations = prequential(model, events)
                preq.append(
                    {
                        "stream": name,
                        "budget": budget,
                        "trigger": f"every {every}" + (" or full" if when_full else ""),
                        "events": len(events),
                        "online": base,
                        "consolidated": cons,
                        "gain": cons - base,
                        "n_consolidations": len(durations),
                        "solve_s_median": statistics.median(durations) if durations else None,
                        "solve_s_max": max(durations) if durations else None,
                        "wall_s_online": base_s,
                        "wall_s_consolidated": cons_s,
                    }
                )
                print(f"  {name} budget={budget} {preq[-1]['trigger']}: {base:.4f} -> {cons:.4f}")
        m = len(events)
        cuts = [m // 2, 2 * m // 3] if args.quick else [m // 3, m // 2, 2 * m // 3, 5 * m // 6]
        for budget in budgets:
            for r in holdout(events, budget, every, window, cuts, test_n=m // 6):
                held.append({"stream": name, "budget": budget, **r})
        for r in kernel_choice(events, window, m // 6, cut=2 * m // 3):
            kern.append({"stream": name, **r})
    result.update(prequential=preq, holdout=held, kernels=kern, selection_vs_cv=selection_vs_cv())
    print_tables(result)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / ("consolidation-quick.json" if args.quick else "consolidation.json")
    path.write_text(json.dumps(result, indent=1, default=float))
    print(f"\nwrote {path}")
    return 0


def _ratio_summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def print_tables(result: dict[str, Any]) -> None:
    print("\nPrequential accuracy (KernelPerceptron, RemoveOldest budget), sync consolidation")
    print(f"{'stream':<10} {'budget':>6} {'trigger':<18} {'online':>8} {'consol.':>8} {'gain':>7}"
          f" {'#cons':>5} {'solve s (med/max)':>18}")  # fmt: skip
    for r in result["prequential"]:
        solve = f"{r['solve_s_median']:.3f}/{r['solve_s_max']:.3f}" if r["solve_s_median"] else "-"
        print(f"{r['stream']:<10} {r['budget']:>6} {r['trigger']:<18} {r['online']:>8.4f}"
              f" {r['consolidated']:>8.4f} {r['gain']:>+7.4f} {r['n_consolidations']:>5}"
              f" {solve:>18}")  # fmt: skip
    print(
        "\nHeld-out accuracy at cut points (median over cuts); the window = support ∪ window rows"
    )
    print(f"{'stream':<10} {'budget':>6} {'online':>7} {'adopted':>8} {'unbudg.':>8}"
          f" {'ours+b':>7} {'sk SVC':>7} {'adopted-sk (pts)':>17}"
          f" {'our solve/sk fit':>18}")  # fmt: skip
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in result["holdout"]:
        groups.setdefault((r["stream"], r["budget"]), []).append(r)
    for (stream, budget), rs in groups.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0] if isinstance(rs[0][k], float)}
        diffs = [100 * (r["consolidated"] - r["sklearn_svc"]) for r in rs]
        times = [r["ratio_s"] for r in rs]
        print(f"{stream:<10} {budget:>6} {med['online']:>7.4f} {med['consolidated']:>8.4f}"
              f" {med['consolidated_unbudgeted']:>8.4f} {med['svc_ours_bias']:>7.4f}"
              f" {med['sklearn_svc']:>7.4f} {_ratio_summary(diffs):>17}"
              f" {_ratio_summary(times):>18}")  # fmt: skip
    print("\nselect_kernel vs 5-fold CV SVC (grid index of gamma = 2^k/d, k = -6..4)")
    print(f"{'data':<14} {'select':>6} {'CV5':>4} {'align.':>6} {'FSM':>4} {'agree':>6}")
    for r in result["selection_vs_cv"]:
        print(f"{r['data']:<14} {r['select']:>6} {r['cv5']:>4} {r['alignment']:>6} {r['fsm']:>4}"
              f" {'yes' if r['agree'] else 'no':>6}")  # fmt: skip
    n_agree = sum(r["agree"] for r in result["selection_vs_cv"])
    print(f"agree within one grid step on {n_agree} of {len(result['selection_vs_cv'])}")
    print("\nKernel choice on the window (smaller FSM / 1-KTA is better); SVC held-out accuracy")
    print(f"{'stream':<10} {'kernel':<20} {'FSM':>7} {'FSMerr':>7} {'1-KTA':>7} {'SVC acc':>8}")
    for r in result["kernels"]:
        mark = (" <- FSM" if r["fsm_selected"] else "") + (" <- select" if r["selected"] else "")
        print(f"{r['stream']:<10} {r['kernel']:<20} {r['fsm']:>7.3f} {r['fsm_err']:>7.3f}"
              f" {r['one_minus_kta']:>7.3f} {r['svc_heldout']:>8.4f}{mark}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
