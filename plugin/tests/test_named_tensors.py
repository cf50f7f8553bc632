"""Named tensors on emu (PyTorch's reference backend's test_empty): torch.empty(..., names=...), renaming, copies.

Not covered: names through computations. emu's own kernels and its CPU fallback do not propagate names (sum over a named
dim gives an unnamed result); named tensors are experimental and gone from torch 2.13.
"""

import pytest
import torch
from smoke_gates import TORCH

pytestmark = [
    pytest.mark.feature("named_tensors"),
    pytest.mark.filterwarnings("ignore:Named tensors and all their associated APIs are an experimental feature"),
    pytest.mark.skipif(
        not hasattr(torch.Tensor, "refine_names"),
        reason=f"not available: torch {TORCH} has no named tensors (torch.empty takes no names=)",
    ),
]


def test_empty_with_names():
    x = torch.empty([2, 3, 4, 5], device="emu", names=["N", "C", "H", "W"])
    assert x.device.type == "emu" and x.shape == (2, 3, 4, 5)
    assert x.names == ("N", "C", "H", "W")


def test_names_are_kept_and_changed_on_emu():
    x = torch.zeros([2, 3], device="emu", names=["N", "C"])
    assert x.names == ("N", "C")
    assert x.rename(C="channels").names == ("N", "channels")
    assert x.rename(None).names == (None, None)
    assert torch.ones(2, 3).emu().refine_names("N", "C").names == ("N", "C")
    assert x.cpu().names == ("N", "C")  # a copy keeps them, as to and from CUDA
