"""A learner whose coefficients single precision cannot hold still consolidates.

The solver's warm start is rounded to float32 (so the adopted model does not depend on the
order of the features); an ``OnlineSVR`` on targets of 1e40, which it accepts (up to 1e150),
holds coefficients above float32's 3.4e38, the cast made them infinite, and every
consolidation failed with ``SolverError: warm start has non-finite entries``. Oracle: the
plain learner on the same events (prequential error) and the unscaled stream.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from river import datasets

from streamk.consolidation import Consolidated
from streamk.learners import OnlineSVR

BANANAS = list(itertools.islice(datasets.Bananas(), 600))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("scale", [1.0, 1e40])
def test_an_svr_on_huge_targets_consolidates_as_well_as_the_plain_learner(scale):
    model = Consolidated(OnlineSVR(budget=50), every=100, window_size=100, guard=0)
    plain = OnlineSVR(budget=50)
    err_model = err_plain = 0.0
    for x, y in BANANAS:
        y = float(y) * scale
        err_model += abs(model.predict_one(x) - y) / scale
        err_plain += abs(plain.predict_one(x) - y) / scale
        model.learn_one(x, y)
        plain.learn_one(x, y)
    assert np.abs(plain.support_.coef).max() > 3.5e38 or scale == 1.0  # beyond float32
    assert model.n_consolidations >= 6 and model.n_skipped == 0
    assert np.isfinite(model.model.support_.coef).all()
    # prequential MAE per event, in target units: the plain learner's is 0.374 at both
    # scales, the consolidated one's 0.32 (unscaled) and 0.34 (x1e40)
    assert err_model / len(BANANAS) < 1.1 * err_plain / len(BANANAS)
