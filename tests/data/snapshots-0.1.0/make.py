"""Write one snapshot per learner class with streamk 0.1.0 as of commit 83e40f7 (before the
layout move), and the predictions each gives on probe points: the golden values that
tests/test_snapshot_compat.py checks today's code against.

Run with that commit on the path: ``git worktree add /tmp/old 83e40f7`` then
``PYTHONPATH=/tmp/old python tests/data/snapshots-0.1.0/make.py tests/data/snapshots-0.1.0``."""

import json
import sys
from pathlib import Path

import numpy as np

import streamk
from streamk import (
    RBF,
    Constant,
    KernelAdatron,
    KernelNovelty,
    KernelPerceptron,
    MarginPerceptron,
    OnlineRanker,
    OnlineSVR,
    Projectron,
    RemoveOldest,
    Sum,
    snapshot,
)

print(streamk.__file__)
out = Path(sys.argv[1])
rng = np.random.default_rng(7)
X = rng.normal(size=(300, 3))
ycls = X[:, 0] * X[:, 1] > 0
yreg = np.sin(X[:, 0]) + 0.3 * X[:, 2]
yrank = np.digitize(X[:, 0], [-0.5, 0.5])
probe = rng.normal(size=(25, 3))


def d(row):
    return {f"x{j}": float(v) for j, v in enumerate(row)}


models = {
    "perceptron": (KernelPerceptron(budget=RemoveOldest(60)), ycls.tolist()),
    "perceptron-multiclass": (
        KernelPerceptron(kernel=Sum(RBF(0.5), Constant(1.0))),
        [int(v) for v in yrank],
    ),
    "margin-perceptron": (MarginPerceptron(budget=Projectron(40)), ycls.tolist()),
    "adatron": (KernelAdatron(), ycls.tolist()),
    "svr": (OnlineSVR(), yreg.tolist()),
    "ranker": (OnlineRanker(ranks=[0, 1, 2]), [int(v) for v in yrank]),
    "novelty": (KernelNovelty(), None),
}
golden = {}
for name, (model, ys) in models.items():
    for i, row in enumerate(X):
        if ys is None:
            model.learn_one(d(row))
        else:
            model.learn_one(d(row), ys[i])
    data = snapshot.dumps(model, offsets={"events": {0: 300}}, seq=3)
    (out / f"{name}.snapshot").write_bytes(data)
    preds = [model.predict_one(d(r)) for r in probe]
    golden[name] = {
        "class": type(model).__name__,
        "predictions": [p if not isinstance(p, (np.generic,)) else p.item() for p in preds],
    }
(out / "golden.json").write_text(
    json.dumps(
        {
            "probe": probe.tolist(),
            "models": golden,
            "written_by": "streamk 0.1.0 at commit 83e40f7 (before the layout move)",
        },
        indent=1,
        default=float,
    )
)
print("ok", sorted(golden))
