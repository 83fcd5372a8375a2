"""Batch SMO (streamk.solvers.svc) against LIBSVM (scikit-learn SVC, precomputed kernel).

Run: ``python -m benchmarks.solvers [--sizes 1000,2000,4000] [--repeats 3] [--quick]``.

For each size n: an RBF Gram matrix of a noisy two-moons set (``make_moons``, noise 0.3,
gamma 1) is built once outside the timings. Timed per repeat: our cold SMO, our SMO warm-started
from the solution on the first 90% of rows (padded with zeros; that 90% solve is not timed), and
LIBSVM's cold fit. Reported: medians and min-max of times and ratios, iterations, the relative
difference of the dual objective and the agreement of the decisions. Targets (issue): cold SMO
<= 2x LIBSVM at n = 4000; warm <= 1x LIBSVM cold. JSON goes to benchmarks/results/solvers.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import machine_info

RESULTS = Path(__file__).resolve().parent / "results" / "solvers.json"


def gram(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_moons

    X, y = make_moons(n, noise=0.3, random_state=seed)
    sq = (X * X).sum(1)
    K = np.exp(-1.0 * np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0))
    return K, 2.0 * y - 1.0


def stats(v: list[float]) -> dict[str, float]:
    return {"median": float(np.median(v)), "min": float(np.min(v)), "max": float(np.max(v))}


def run_size(n: int, repeats: int, C: float, tol: float) -> dict[str, Any]:
    from sklearn.svm import SVC

    from streamk.solvers import svc

    K, y = gram(n)
    m = int(0.9 * n)
    part = svc(K[:m, :m], y[:m], C=C, tol=tol)
    alpha0 = np.concatenate((part.alpha, np.zeros(n - m)))
    t_cold, t_warm, t_lib = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        cold = svc(K, y, C=C, tol=tol)
        t_cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        warm = svc(K, y, C=C, tol=tol, alpha0=alpha0)
        t_warm.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ref = SVC(kernel="precomputed", C=C, tol=tol).fit(K, y)
        t_lib.append(time.perf_counter() - t0)
    a = np.zeros(n)
    a[ref.support_] = np.abs(ref.dual_coef_[0])
    ref_obj = float(0.5 * (a * y) @ K @ (a * y) - a.sum())
    agree = float(np.mean(np.sign(K @ (cold.alpha * y) + cold.b) == ref.predict(K)))
    return {
        "n": n,
        "C": C,
        "tol": tol,
        "ours_cold_s": stats(t_cold),
        "ours_warm_s": stats(t_warm),
        "libsvm_cold_s": stats(t_lib),
        "ratio_cold": stats([c / b for c, b in zip(t_cold, t_lib, strict=True)]),
        "ratio_warm": stats([w / b for w, b in zip(t_warm, t_lib, strict=True)]),
        "iters_cold": cold.n_iter,
        "iters_warm": warm.n_iter,
        "iters_libsvm": int(np.sum(ref.n_iter_)),
        "n_sv": int((cold.alpha > 0).sum()),
        "objective_rel_diff": abs(cold.objective - ref_obj) / abs(ref_obj),
        "warm_objective_rel_diff": abs(warm.objective - ref_obj) / abs(ref_obj),
        "decision_agreement": agree,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,2000,4000", help="comma-separated n (16000 needs 2 GB)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="sizes 500,1000 and one repeat")
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    sizes = [500, 1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    repeats = 1 if args.quick else args.repeats
    rows = []
    head = (
        f"{'n':>6} {'ours cold s':>12} {'warm s':>9} {'libsvm s':>9} {'cold/lib':>16} "
        f"{'warm/lib':>16} {'it ours/warm/lib':>18} {'obj rel':>8} {'agree':>6}"
    )
    print(head)
    for n in sizes:
        r = run_size(n, repeats, args.C, args.tol)
        rows.append(r)
        rc, rw = r["ratio_cold"], r["ratio_warm"]
        print(
            f"{n:>6} {r['ours_cold_s']['median']:>12.3f} {r['ours_warm_s']['median']:>9.3f} "
            f"{r['libsvm_cold_s']['median']:>9.3f} "
            f"{rc['median']:>5.2f} ({rc['min']:.2f}-{rc['max']:.2f}) "
            f"{rw['median']:>5.2f} ({rw['min']:.2f}-{rw['max']:.2f}) "
            f"{r['iters_cold']:>6}/{r['iters_warm']}/{r['iters_libsvm']:<6} "
            f"{r['objective_rel_diff']:>8.1e} {r['decision_agreement']:>6.3f}",
            flush=True,
        )
    out = {"benchmark": "solvers", "machine": machine_info(), "repeats": repeats, "results": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
