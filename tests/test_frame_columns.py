"""``FeatureIndex`` reuses the column numbers of the last frame whose names are equal (a new
``Index`` object each block): the rows equal those of an index that reads every frame's
names afresh, over reordered, renamed, growing and unknown columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamk.learners.features import FeatureIndex


def _frames(seed: int) -> list[tuple[pd.DataFrame, bool]]:
    """Blocks built apart (equal names, distinct Index objects), some reordered, renamed,
    widened or unknown (``grow=False``)."""
    rng = np.random.default_rng(seed)
    orders = [
        ["a", "b", "c"],
        ["a", "b", "c"],
        ["c", "a", "b"],
        ["c", "a", "b"],
        ["a", "b", "c", "d"],
        ["a", "b", "c", "d"],
        ["d", "e", "a"],
        ["a", "b", "c"],
        [0, 1, "a"],
        [0, 1, "a"],
    ]
    out = []
    for j, names in enumerate(orders):
        frame = pd.DataFrame(rng.normal(size=(4, len(names))), columns=list(names))
        out.append((frame, j not in (6, 9)))  # two blocks read without growing the index
    return out


def _fresh_rows(names: list, frame: pd.DataFrame, grow: bool) -> tuple[np.ndarray, list]:
    """The oracle: an index with ``names`` that has never cached a frame."""
    index = FeatureIndex(list(names))
    return index.rows(frame, grow=grow), index.names


@pytest.mark.parametrize("seed", range(3))
def test_cached_columns_give_the_rows_of_a_fresh_read(seed: int) -> None:
    index = FeatureIndex()
    for frame, grow in _frames(seed):
        want, names = _fresh_rows(index.names, frame, grow)
        got = index.rows(frame, grow=grow)
        assert got.tobytes() == want.tobytes() and got.shape == want.shape
        assert got.flags.c_contiguous and got.flags.writeable
        assert index.names == names


def test_a_reordered_frame_with_the_last_index_object_is_not_taken_for_it() -> None:
    index = FeatureIndex()
    frame = pd.DataFrame([[1.0, 2.0]], columns=["x", "y"])
    assert index.rows(frame, grow=True).tolist() == [[1.0, 2.0]]
    swapped = pd.DataFrame([[1.0, 2.0]], columns=["y", "x"])
    assert index.rows(swapped, grow=True).tolist() == [[2.0, 1.0]]
    again = pd.DataFrame([[3.0, 4.0]], columns=["y", "x"])  # equal names, another object
    assert index.rows(again, grow=True).tolist() == [[4.0, 3.0]]
