"""cmake_ops's own suite, run against the installed wheel (torch-buildmatrix's smoke test for each cell)."""

from __future__ import annotations

import cmake_ops
import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scaled_add_matches_torch(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(5, 3, dtype=dtype, generator=generator)
    b = torch.randn(3, 5, dtype=dtype, generator=generator).t()  # not contiguous
    torch.testing.assert_close(cmake_ops.scaled_add(a, b, 0.5), a + 0.5 * b)


def test_the_operator_is_in_torch_registry() -> None:
    a = torch.ones(2)
    assert torch.ops.cmake_ops.scaled_add.default(a, a, 2.0).tolist() == [3.0, 3.0]


def test_a_shape_mismatch_is_refused() -> None:
    with pytest.raises(RuntimeError, match="shapes differ"):
        cmake_ops.scaled_add(torch.ones(2), torch.ones(3), 1.0)
