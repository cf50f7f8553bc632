"""Named tensors on emu (PyTorch's reference backend's test_empty): torch.empty(..., names=...) and name handling."""

import pytest
import torch
from smoke_gates import TORCH

pytestmark = [
    pytest.mark.feature("named tensors"),
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


def test_names_follow_ops_as_on_cpu():
    cpu = torch.arange(6.0).reshape(2, 3).refine_names("N", "C")
    emu = cpu.rename(None).emu().refine_names("N", "C")
    for op in (lambda t: t.sum("C"), lambda t: t.align_to("C", "N"), lambda t: t.rename(C="channels") * 2):
        expected, got = op(cpu), op(emu)
        assert got.names == expected.names and got.device.type == "emu"
        assert torch.equal(got.rename(None).cpu(), expected.rename(None))
