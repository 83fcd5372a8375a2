"""The SMO solvers against LIBSVM (scikit-learn), cold, warm and on a window larger than its Gram.

Run: ``python -m benchmarks.solvers [--repeats 3] [--quick] [--big 50000] [--numpy]``.

Data: noisy two moons (``make_moons``, noise 0.3), RBF with gamma 1; the regression target is
``sin(3 x_0) + 0.1 noise``. Gram matrices are built once, outside the timings, and both solvers
get the same one (scikit-learn ``kernel="precomputed"``, ``tol=1e-3``, ``cache_size=200``).
Every case is timed ``--repeats`` times, interleaved, and reported as the median (min-max) of
the per-repeat ratios ours / LIBSVM, with the machine's load average before and after; a
timing that takes less than 50 ms is the mean over as many calls as fill 50 ms.

* ``cold``: C-SVC at n = 4,000 and 8,000, C = 1 and 10 (target <= 1.0x); epsilon-SVR and
  one-class at the same n (target <= 1.2x).
* ``warm``: a consolidation as the engine does it. A model is solved on a window of ``w`` rows;
  ``w/10`` more events arrive and the on-line rule adds each one it misclassifies with
  ``alpha = min(1, C)``; the next problem is the old support vectors that left the window plus
  the slid window, warm-started from the on-line model. Ours warm vs LIBSVM cold on the same
  problem (target <= 0.5x), objective relative to LIBSVM's.
* ``big``: a ``--big``-row window with a 200 MB column cache (``KernelColumns``; the Gram would
  take n^2 * 8 bytes), in a subprocess whose peak RSS is read (target < 600 MB); and on a subset
  of 10,000 rows the same with LIBSVM's own 200 MB cache on the rows: equal objectives.

JSON goes to ``benchmarks/results/solvers.json`` (``solvers-quick.json`` for ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import machine_info

RESULTS = Path(__file__).resolve().parent / "results"
TOL = 1e-3


def moons(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_moons

    X, t = make_moons(n, noise=0.3, random_state=seed)
    return X, 2.0 * t - 1.0


def rbf(A: np.ndarray, B: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    from streamk.kernels import RBF

    return RBF(gamma=gamma).gram(A, B)


def stats(v: list[float]) -> dict[str, float]:
    return {"median": float(np.median(v)), "min": float(np.min(v)), "max": float(np.max(v))}


#: A timing repeats its call until this much time has passed and reports the mean per call:
#: a 2 ms solve timed once on a shared machine swung 0.3-1.5x against LIBSVM.
MIN_SPAN = 0.05


def timed(fn: Any) -> tuple[float, Any]:
    """Seconds per call of ``fn`` (mean over as many calls as fill ``MIN_SPAN``), and its output."""
    t0 = time.perf_counter()
    out = fn()
    calls, span = 1, time.perf_counter() - t0
    while span < MIN_SPAN:
        fn()
        calls += 1
        span = time.perf_counter() - t0
    return span / calls, out


def libsvm_dual(model: Any, n: int) -> np.ndarray:
    """LIBSVM's signed dual coefficients as a dense vector."""
    d = np.zeros(n)
    d[model.support_] = model.dual_coef_[0]
    return d


def compare(ours: Any, theirs: Any, repeats: int) -> tuple[list[float], list[float], Any, Any]:
    t_o, t_l, r_o, r_l = [], [], None, None
    for _ in range(repeats):
        s, r_o = timed(ours)
        t_o.append(s)
        s, r_l = timed(theirs)
        t_l.append(s)
    return t_o, t_l, r_o, r_l


def row(case: str, n: int, t_o: list[float], t_l: list[float], **extra: Any) -> dict[str, Any]:
    return {
        "case": case,
        "n": n,
        "ours_s": stats(t_o),
        "libsvm_s": stats(t_l),
        "ratio": stats([a / b for a, b in zip(t_o, t_l, strict=True)]),
        **extra,
    }


def cold_cases(sizes: list[int], repeats: int, backend: str) -> list[dict[str, Any]]:
    from sklearn.svm import SVC, SVR, OneClassSVM

    from streamk.solvers import one_class, svc, svr

    out = []
    for n in sizes:
        X, y = moons(n)
        K = rbf(X, X)
        for C in (1.0, 10.0):
            t_o, t_l, r, m = compare(
                partial(svc, K, y, C=C, tol=TOL, backend=backend),
                partial(SVC(kernel="precomputed", C=C, tol=TOL).fit, K, y),
                repeats,
            )
            d = libsvm_dual(m, n)
            ref = 0.5 * d @ K @ d - np.abs(d).sum()
            out.append(row(f"svc C={C:g}", n, t_o, t_l, iters=[r.n_iter, int(np.sum(m.n_iter_))],
                           obj_rel=abs(r.objective - ref) / abs(ref)))  # fmt: skip
        t = np.sin(3 * X[:, 0]) + 0.1 * np.random.default_rng(0).standard_normal(n)
        t_o, t_l, r, m = compare(
            partial(svr, K, t, C=1.0, epsilon=0.1, tol=TOL, backend=backend),
            partial(SVR(kernel="precomputed", C=1.0, epsilon=0.1, tol=TOL).fit, K, t),
            repeats,
        )
        d = libsvm_dual(m, n)
        ref = 0.5 * d @ K @ d - t @ d + 0.1 * np.abs(d).sum()
        out.append(row("svr C=1 eps=0.1", n, t_o, t_l, iters=[r.n_iter, int(np.sum(m.n_iter_))],
                       obj_rel=abs(r.objective - ref) / abs(ref)))  # fmt: skip
        t_o, t_l, r, m = compare(
            partial(one_class, K, nu=0.1, tol=TOL, backend=backend),
            partial(OneClassSVM(kernel="precomputed", nu=0.1, tol=TOL).fit, K),
            repeats,
        )
        d = libsvm_dual(m, n)
        ref = 0.5 * d @ K @ d
        out.append(row("one-class nu=0.1", n, t_o, t_l, iters=[r.n_iter, int(np.sum(m.n_iter_))],
                       obj_rel=abs(r.objective - ref) / abs(ref)))  # fmt: skip
        for r_ in out[-4:]:
            print_row(r_)
    return out


def consolidation_problem(w: int, C: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gram, labels and on-line warm start of the second consolidation of a sliding window."""
    from streamk.solvers import svc

    step = w // 10
    X, y = moons(w + step, seed=3)
    w0 = np.arange(w)
    K0 = rbf(X[w0], X[w0])
    prev = svc(K0, y[w0], C=C, tol=TOL)
    sv = np.flatnonzero(prev.alpha > 0)
    coef = list(prev.alpha[sv] * y[sv])
    rows = list(sv)
    for i in range(w, w + step):  # the on-line rule between two consolidations
        f = float(rbf(X[i : i + 1], X[rows])[0] @ np.array(coef)) + prev.b
        if np.sign(f) != y[i]:
            rows.append(i)
            coef.append(min(1.0, C) * y[i])
    alpha_of = dict(zip(rows, np.abs(coef), strict=True))
    keep = [r for r in sv if r < step]  # support vectors that left the window stay
    prob = np.array(keep + list(range(step, w + step)))
    a0 = np.array([alpha_of.get(int(r), 0.0) for r in prob])
    return rbf(X[prob], X[prob]), y[prob], a0


def warm_cases(windows: list[int], repeats: int, backend: str) -> list[dict[str, Any]]:
    from sklearn.svm import SVC

    from streamk.solvers import svc

    out = []
    for w in windows:
        for C in (1.0, 10.0):
            K, y, a0 = consolidation_problem(w, C)
            n = len(y)
            t_w, t_l, r_w, m = compare(
                partial(svc, K, y, C=C, tol=TOL, alpha0=a0, backend=backend),
                partial(SVC(kernel="precomputed", C=C, tol=TOL).fit, K, y),
                repeats,
            )
            cold = partial(svc, K, y, C=C, tol=TOL, backend=backend)
            t_c = [timed(cold)[0] for _ in t_w]
            r_c = svc(K, y, C=C, tol=TOL, backend=backend)
            d = libsvm_dual(m, n)
            ref = 0.5 * d @ K @ d - np.abs(d).sum()
            r_ = row(f"warm svc C={C:g} window={w}", n, t_w, t_l,
                     ours_cold_s=stats(t_c),
                     cold_ratio=stats([a / b for a, b in zip(t_c, t_l, strict=True)]),
                     iters=[r_w.n_iter, r_c.n_iter, int(np.sum(m.n_iter_))],
                     obj_rel=abs(r_w.objective - ref) / abs(ref))  # fmt: skip
            print_row(r_)
            out.append(r_)
    return out


_BIG = """
import json, resource, sys, time
import numpy as np
from sklearn.datasets import make_moons
from streamk.kernels import RBF
from streamk.solvers import svc
from streamk.solvers.core import KernelColumns
n, cache = int(sys.argv[1]), int(sys.argv[2])
X, t = make_moons(n, noise=0.3, random_state=5)
y = 2.0 * t - 1.0
def hwm():  # this process's peak RSS in MB (ru_maxrss would carry the parent's over exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
rss0 = hwm()
t0 = time.perf_counter()
r = svc(KernelColumns(X, RBF(gamma=1.0), cache_bytes=cache), y, C=1.0, tol=1e-3)
s = time.perf_counter() - t0
out = {"n": n, "cache_bytes": cache, "seconds": s, "iters": r.n_iter, "objective": r.objective,
       "n_sv": int((r.alpha > 0).sum()), "b": r.b,
       "rss_before_solve_mb": rss0, "peak_rss_mb": hwm()}
if len(sys.argv) > 3:
    from sklearn.svm import SVC
    t0 = time.perf_counter()
    m = SVC(C=1.0, gamma=1.0, tol=1e-3, cache_size=cache / 2**20).fit(X, y)
    out["libsvm_seconds"] = time.perf_counter() - t0
    d = np.zeros(n)
    d[m.support_] = m.dual_coef_[0]
    obj = 0.0
    for s0 in range(0, n, 2000):  # 0.5 d'Kd - sum|d| in blocks (no n x n matrix)
        obj += 0.5 * d[s0:s0 + 2000] @ (RBF(gamma=1.0).gram(X[s0:s0 + 2000], X) @ d)
    out["libsvm_objective"] = obj - np.abs(d).sum()
    out["libsvm_n_sv"] = len(m.support_)
print(json.dumps(out))
"""


def big_case(n: int, with_libsvm: bool) -> dict[str, Any]:
    """One solve in a fresh process (its peak RSS is the solve's, not this script's)."""
    args = [sys.executable, "-c", _BIG, str(n), str(200 * 2**20)] + (["1"] if with_libsvm else [])
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    res = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if "libsvm_objective" in out:
        out["obj_rel"] = abs(out["objective"] - out["libsvm_objective"]) / abs(
            out["libsvm_objective"]
        )
    print(json.dumps(out), flush=True)
    return out


def print_row(r: dict[str, Any]) -> None:
    q = r["ratio"]
    extra = ""
    if "cold_ratio" in r:
        c = r["cold_ratio"]
        extra = f"  ours cold/lib {c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})"
    print(
        f"{r['case']:<28} n={r['n']:>6} ours {r['ours_s']['median']:8.4f}s "
        f"lib {r['libsvm_s']['median']:8.4f}s  ratio {q['median']:.2f} "
        f"({q['min']:.2f}-{q['max']:.2f})  it {r['iters']}  obj rel {r['obj_rel']:.1e}{extra}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="n = 1000, 2000, one repeat, no big case")
    p.add_argument("--big", type=int, default=50_000, help="rows of the big window (0: skip)")
    p.add_argument("--backend", default="auto", help="auto, compiled or numpy")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    from streamk.solvers.core import compiled_available

    sizes = [1000, 2000] if args.quick else [4000, 8000]
    windows = [1000] if args.quick else [1000, 4000]
    repeats = 1 if args.quick else args.repeats
    load_before = list(os.getloadavg())
    print(f"load average {load_before}; compiled core: {compiled_available()}", flush=True)
    result: dict[str, Any] = {
        "benchmark": "solvers",
        "command": "python -m benchmarks.solvers " + " ".join(argv or sys.argv[1:]),
        "machine": machine_info(),
        "compiled": compiled_available(),
        "backend": args.backend,
        "repeats": repeats,
        "tol": TOL,
    }
    result["cold"] = cold_cases(sizes, repeats, args.backend)
    result["warm"] = warm_cases(windows, repeats, args.backend)
    if args.big and not args.quick:
        result["big_subset_vs_libsvm"] = big_case(10_000, with_libsvm=True)
        result["big"] = big_case(args.big, with_libsvm=False)
    result["loadavg_before"] = load_before
    result["loadavg_after"] = list(os.getloadavg())
    result["self_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = args.out or RESULTS / ("solvers-quick.json" if args.quick else "solvers.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"load average after {result['loadavg_after']}; wrote {out}")


if __name__ == "__main__":
    main()
