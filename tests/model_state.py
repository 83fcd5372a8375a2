"""A learner's state as plain values and bytes, for tests that ask two paths for the same
model to the bit (``tests/test_warm_runs.py``, ``test_untracked_runs.py``,
``test_warm_event_rows.py``): the ``gamma="auto"`` estimate and width, the support set's
buffers up to its size, the count of rows learned and the policy's state; and the policies'
states compared to rounding, for tests that hold two paths to rounding
(:func:`assert_policy_states_close`)."""

from __future__ import annotations

from typing import Any

import numpy as np


def model_state(model: Any) -> dict[str, Any]:
    """The fields, by name (a test compares all of them or the ones it names)."""
    s = model.support_
    n = s.n
    scale = model._scale  # None for a fixed width
    return {
        "scale": None if scale is None else (scale.n, scale.mean.tobytes(), scale._m2.tobytes()),
        "gamma": repr(model.kernel_),  # every width in it, to the bit (float repr)
        "n": n,
        "next_id": s.next_id,
        "sq_max": s._sq_max,
        "ids": s._ids[:n].tolist(),
        "X": s._X[:n].tobytes(),
        "coef": s._coef[:n].tobytes(),
        "sq": s._sq[:n].tobytes(),
        "kdiag": s._kdiag[:n].tobytes(),
        "n_learned": model.n_learned,
        "policy": repr(model._policy.state()),
    }


def assert_policy_states_close(fast: Any, slow: Any) -> None:
    """The two models' budget policies in the same state: their numbers (a float or an
    array: the Forgetron's scale, the Projectron's P) to 1e-7 relative and 1e-9 absolute,
    everything else equal."""
    pf, ps = fast._policy.state(), slow._policy.state()
    assert pf.keys() == ps.keys()
    for key in pf:
        if isinstance(pf[key], (float, np.ndarray)):
            np.testing.assert_allclose(pf[key], ps[key], rtol=1e-7, atol=1e-9)
        else:
            assert pf[key] == ps[key]


def learn_block(model: Any, X: Any, y: list, a: int, b: int, method: str) -> list:
    """Rows ``a:b`` of the frame ``X`` learned by ``method``: ``"learn_one"`` (row by row,
    each predicted first), ``"learn_many"`` or ``"learn_predict_many"``; what the model
    said of each row before learning it (nothing for ``learn_many``)."""
    if method == "learn_one":
        said = []
        for x, label in zip(X.iloc[a:b].to_dict(orient="records"), y[a:b]):
            said.append(model.predict_one(x))
            model.learn_one(x, label)
        return said
    if method == "learn_many":
        model.learn_many(X.iloc[a:b], y[a:b])
        return []
    return list(model.learn_predict_many(X.iloc[a:b], y[a:b]))
