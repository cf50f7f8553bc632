"""propops's own suite: property tests against NumPy, which need hypothesis and numpy (smoke.requires)."""

from __future__ import annotations

import numpy as np
import propops
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=32)


@given(arrays(np.float32, st.integers(min_value=1, max_value=64), elements=finite))
def test_running_max_matches_numpy(values: np.ndarray) -> None:
    out = propops.running_max(torch.from_numpy(values))
    np.testing.assert_array_equal(out.numpy(), np.maximum.accumulate(values))


@given(arrays(np.float64, st.integers(min_value=1, max_value=64), elements=finite))
def test_running_max_never_decreases_and_ends_at_the_max(values: np.ndarray) -> None:
    out = propops.running_max(torch.from_numpy(values)).numpy()
    assert (np.diff(out) >= 0).all() and out[-1] == values.max()


def test_a_tensor_of_two_dimensions_is_refused() -> None:
    with pytest.raises(RuntimeError, match="must be 1-D"):
        propops.running_max(torch.ones(2, 2))
