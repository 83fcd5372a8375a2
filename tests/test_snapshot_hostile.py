"""Hostile snapshots: validly checksummed files whose shapes imply huge allocations.

The corpus is built from real states of every learner class in the allow-list:
each array field of each state gets huge declared shapes (as an empty array, so
the file stays tiny and the codec's byte checks pass), plus the two files of
issue 13 item 7 (a keep_gram support set of 8,000 empty rows, 8.6 kB; 2**28
declared features, a few hundred bytes) and support sets whose real rows imply a
Gram matrix over the limit. Every file must give ``SnapshotError`` from
``loads`` in a separate process whose memory is measured, and ``streamk snapshot
verify`` (the real CLI) must agree with ``loads`` on every file, valid controls
included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from streamk.errors import SnapshotError
from streamk.snapshot import dumps, loads, seal

HUGE = 1 << 28
ROOT = Path(__file__).resolve().parents[1]


def _learners() -> dict[str, Any]:
    """A trained instance of every allow-listed learner (budgets that keep a Gram, too)."""
    from streamk.budget.projectron import Projectron
    from streamk.consolidation import ConsolidatedClassifier, ConsolidatedRegressor
    from streamk.kernels.measures import MMDDrift
    from streamk.learners.adatron import KernelAdatron
    from streamk.learners.budgeted import MarginPerceptron
    from streamk.learners.novelty import KernelNovelty
    from streamk.learners.perceptron import KernelPerceptron
    from streamk.learners.ranking import OnlineRanker
    from streamk.learners.scaling import StandardScaledClassifier, StandardScaledRegressor
    from streamk.learners.svr import OnlineSVR

    rng = np.random.default_rng(0)
    xs = [{"a": float(v), "b": float(w), "c": float(v * w)} for v, w in rng.normal(size=(60, 2))]
    models = {
        "KernelPerceptron": KernelPerceptron(),
        "KernelPerceptron-projectron": KernelPerceptron(budget=Projectron(budget=20)),
        "KernelAdatron": KernelAdatron(C=1.0, budget=30),
        "OnlineSVR": OnlineSVR(),
        "OnlineRanker": OnlineRanker(ranks=(1, 2, 3)),
        "KernelNovelty": KernelNovelty(budget=20),
        "MarginPerceptron": MarginPerceptron(budget=20),
        "StandardScaledClassifier": StandardScaledClassifier(KernelAdatron(C=1.0, budget=30)),
        "StandardScaledRegressor": StandardScaledRegressor(OnlineSVR()),
        "ConsolidatedClassifier": ConsolidatedClassifier(
            KernelAdatron(C=1.0, budget=30), every=25, window_size=20, window="reservoir"
        ),
        "ConsolidatedRegressor": ConsolidatedRegressor(OnlineSVR(budget=30), every=25),
        "ConsolidatedClassifier-mmd": ConsolidatedClassifier(
            KernelPerceptron(budget=20), every=None, on_drift=MMDDrift(window_size=20)
        ),
    }
    for i, x in enumerate(xs):
        for key, model in models.items():
            if key == "KernelNovelty":
                model.learn_one(x)
            elif key in ("OnlineSVR", "StandardScaledRegressor", "ConsolidatedRegressor"):
                model.learn_one(x, x["a"] - x["b"])
            elif key == "OnlineRanker":
                model.learn_one(x, 1 + i % 3)
            else:
                model.learn_one(x, ["x", "y", "z"][i % 3])
    return models


def test_corpus_covers_every_builtin_learner_class():
    """The allow-list as a fresh process sees it (other tests register toy classes)."""
    code = "import json; from streamk.snapshot import CLASSES; print(json.dumps(sorted(CLASSES)))"
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    builtin = set(json.loads(run.stdout))
    models = _learners().values()
    detectors = [getattr(getattr(m, "consolidator_", None), "on_drift", None) for m in models]
    missing = builtin - {type(m).__name__ for m in [*models, *detectors]}
    assert not missing, f"add a trained instance of {missing} to _learners() in this file"


def _open(data: bytes) -> dict:
    outer = msgpack.unpackb(data, raw=False)
    return msgpack.unpackb(outer["body"], raw=False, strict_map_key=False)


def _close(body: dict) -> bytes:
    return seal(msgpack.packb(body, use_bin_type=True))


def _array_paths(node: Any, path: tuple = ()) -> list[tuple]:
    """Paths (keys and list indices) of every packed array in a plain tree."""
    if isinstance(node, dict):
        if node.get("__nd__") is True:
            return [path]
        return [p for k, v in node.items() for p in _array_paths(v, (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _array_paths(v, (*path, i))]
    return []


def _learner(state: dict) -> dict:
    """The kernel learner's own state: the state itself, or a wrapper's inner ``model``."""
    return state if "support" in state else state["model"]


def _get(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


def _empty(dtype: str, shape: list[int]) -> dict:
    return {"__nd__": True, "dtype": dtype, "shape": shape, "data": b""}


def _array(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a)
    return {"__nd__": True, "dtype": a.dtype.str, "shape": list(a.shape), "data": a.tobytes()}


def build_corpus() -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(hostile files, valid controls), by name."""
    hostile: dict[str, bytes] = {}
    controls: dict[str, bytes] = {}
    for key, model in _learners().items():
        data = dumps(model, offsets={"events": {0: 60}}, seq=1)
        controls[f"{key}-valid"] = data
        body = _open(data)
        paths = _array_paths(body["model"]["state"])
        assert paths, key
        for path in paths:
            where = ".".join(map(str, path))
            arr = _get(body["model"]["state"], path)
            ndim = max(len(arr["shape"]), 2)
            shapes = [[HUGE if j == i else 0 for j in range(ndim)] for i in range(ndim)]
            shapes += [[1 << 40], [HUGE, HUGE], [0] * 33, [1 << 20, 0, 1 << 20]]
            for shape in shapes:
                hurt = _open(data)
                parent = _get(hurt["model"]["state"], path[:-1])
                parent[path[-1]] = _empty(arr["dtype"], shape)
                hostile[f"{key}-{where}-{'x'.join(map(str, shape))}"] = _close(hurt)
        state = _learner(body["model"]["state"])
        # Counts a learner would allocate from, over their limits.
        hurt = _open(data)
        _learner(hurt["model"]["state"])["features"] = [f"f{i}" for i in range((1 << 16) + 1)]
        _learner(hurt["model"]["state"])["support"]["X"] = _empty("<f8", [0, (1 << 20) + 1])
        hostile[f"{key}-features-over-limit"] = _close(hurt)
        if "labels" in state:
            hurt = _open(data)
            _learner(hurt["model"]["state"])["labels"]["classes"] = list(range((1 << 16) + 1))
            hostile[f"{key}-classes-over-limit"] = _close(hurt)
        # A support set whose real rows imply a Gram over max_implied_bytes (keep_gram).
        hurt = _open(data)
        n = 9000
        _learner(hurt["model"]["state"])["support"].update(
            X=_array(np.zeros((n, 1))),
            coef=_array(np.zeros((n, 1))),
            ids=_array(np.arange(n, dtype=np.int64)),
            keep_gram=True,
        )
        hostile[f"{key}-gram-{n}-rows"] = _close(hurt)
        # A from_state that rejects the state: verify used to say "ok" for these.
        hurt = _open(data)
        _learner(hurt["model"]["state"])["params"]["no_such_param"] = 1
        hostile[f"{key}-bad-params"] = _close(hurt)
    # Issue 13 item 7, as reported.
    base = _open(controls["KernelPerceptron-valid"])
    hurt = _open(controls["KernelPerceptron-valid"])
    hurt["model"]["state"]["support"].update(
        X=_empty("<f8", [8000, 0]), coef=_empty("<f8", [8000, 0]), ids=[0] * 8000, keep_gram=True
    )
    hostile["issue-keep-gram-8000"] = _close(hurt)
    small = {k: v for k, v in base.items()}
    small["model"] = {
        "class": "KernelPerceptron",
        "state": {
            **base["model"]["state"],
            "features": [],
            "scale": None,
            "support": {
                **base["model"]["state"]["support"],
                "X": _empty("<f8", [0, HUGE]),
                "coef": _empty("<f8", [0, 1]),
                "ids": [],
            },
        },
    }
    hostile["issue-2pow28-features"] = _close(small)
    return hostile, controls


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict[str, str], list[str]]:
    """Files in one directory, named like snapshots: (dir, file name -> case, valid names)."""
    hostile, controls = build_corpus()
    directory = tmp_path_factory.mktemp("hostile") / "corpus"
    directory.mkdir()
    names: dict[str, str] = {}
    valid: list[str] = []
    for i, (case, data) in enumerate({**controls, **hostile}.items()):
        file = f"{i:012d}.snapshot"
        (directory / file).write_bytes(data)
        names[file] = case
        if case in controls:
            valid.append(file)
    return directory, names, valid


def test_the_issue_files_are_as_small_as_reported():
    hostile, _ = build_corpus()
    assert len(hostile["issue-keep-gram-8000"]) < 10_000
    assert len(hostile["issue-2pow28-features"]) < 2_000


_PROBE = textwrap.dedent(
    """
    import json, resource, sys, tracemalloc
    from pathlib import Path
    from streamk.errors import SnapshotError
    from streamk.snapshot import loads
    import streamk.learners.perceptron, streamk.learners.adatron, streamk.learners.svr
    import streamk.learners.ranking, streamk.learners.novelty, streamk.learners.budgeted
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {}
    tracemalloc.start()
    for path in sorted(Path(sys.argv[1]).glob("*.snapshot")):
        data = path.read_bytes()
        tracemalloc.reset_peak()
        try:
            loads(data)
            result = "ok"
        except SnapshotError as exc:
            result = "SnapshotError: " + str(exc)[:300]
        except BaseException as exc:
            result = type(exc).__name__ + ": " + str(exc)[:300]
        out[path.name] = [result, tracemalloc.get_traced_memory()[1]]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"files": out, "rss_growth_kib": peak - base}))
    """
)


@pytest.mark.timeout(300)
def test_every_hostile_file_fails_loads_in_bounded_memory(corpus):
    directory, names, valid = corpus
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, str(directory)],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    limit = 100 * 2**20
    assert report["rss_growth_kib"] * 1024 < limit, report["rss_growth_kib"]
    for file, (result, peak) in report["files"].items():
        case = names[file]
        if file in valid:
            assert result == "ok", (case, result)
        else:
            assert result.startswith("SnapshotError"), (case, result)
        assert peak < limit, (case, peak)
    assert len(report["files"]) == len(names)


def test_verify_cli_and_loads_agree_on_every_file(corpus):
    directory, names, valid = corpus
    exe = Path(sys.executable).with_name("streamk")
    run = subprocess.run(
        [str(exe), "snapshot", "verify", str(directory), "--json"],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 1, run.stderr[-3000:]  # some files are bad
    results = {Path(r["path"]).name: r for r in json.loads(run.stdout)["results"]}
    assert set(results) == set(names)
    for file, case in names.items():
        try:
            loads((directory / file).read_bytes())
            loads_ok = True
        except SnapshotError:
            loads_ok = False
        assert results[file]["ok"] is loads_ok, (case, results[file]["reason"])
        assert loads_ok is (file in valid), case
