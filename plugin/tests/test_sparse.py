"""Sparse COO and compressed (CSR) emu tensors: made, taken apart, computed on and differentiated as on the CPU.

Before, any sparse emu tensor failed: `to_sparse()` could not come back to emu (no SparsePrivateUse1 constructor),
a CSR tensor's `col_indices()` raised, and ops that the CPU runs with a sparse kernel of their own (sum, mul) took
the dense composite path on emu.
"""

import pytest
import torch
from smoke_gates import requires_torch

import torch_emu

# Before 2.5 the pre-2.5 series leaves sparse emu tensors out (SparseSupport.h): torch 2.3 recursed moving one to
# the CPU.
# The deep tier (smoke.tiers: once per build): results against the CPU reference depend on the wheel and torch alone.
pytestmark = [
    pytest.mark.feature("sparse_tensors"),
    requires_torch(">=2.5", "sparse emu tensors"),
    pytest.mark.deep,
]

DENSE = [[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]]


def test_coo_round_trip_keeps_structure_on_emu():
    x = torch.tensor(DENSE, device="emu")
    s = x.to_sparse()
    assert s.device == x.device and s.layout == torch.sparse_coo
    assert s._indices().device == x.device and s._values().device == x.device
    assert s._nnz() == 3 and s.sparse_dim() == 2 and s.dense_dim() == 0
    assert s.cpu().to_dense().tolist() == DENSE
    assert s.to_dense().device == x.device and s.to_dense().cpu().tolist() == DENSE


def test_csr_accessors_alias_the_members():
    c = torch.tensor(DENSE, device="emu").to_sparse_csr()
    assert c.device.type == "emu" and c.layout == torch.sparse_csr
    assert c.crow_indices().cpu().tolist() == [0, 1, 3]
    assert c.col_indices().cpu().tolist() == [1, 0, 2]
    values = c.values()
    values.mul_(10)  # values() is the tensor's own member, not a copy made by a fallback
    assert c.to_dense().cpu().tolist() == [[0.0, 10.0, 0.0], [20.0, 0.0, 30.0]]


def test_ops_with_sparse_cpu_kernels_run_them():
    x = torch.tensor(DENSE, device="emu")
    total = x.to_sparse().sum()
    assert total.layout == torch.strided and total.item() == 6.0  # not a sparse tensor summed over no dimension
    doubled = x.to_sparse_csr() * 2
    assert (
        doubled.layout == torch.sparse_csr and doubled.to_dense().cpu().tolist() == (torch.tensor(DENSE) * 2).tolist()
    )


def test_sampled_addmm_backward_matches_cpu():
    def grads(device: str) -> list[torch.Tensor]:
        torch.manual_seed(0)
        mask = torch.tensor(DENSE).to_sparse_csr().to(device).requires_grad_(True)
        a = torch.randn(2, 4).to(device).requires_grad_(True)
        b = torch.randn(4, 3).to(device).requires_grad_(True)
        out = torch.sparse.sampled_addmm(mask, a, b)
        return [g.cpu().to_dense() for g in torch.autograd.grad(out.sum(), [mask, a, b])]

    for emu, cpu in zip(grads("emu"), grads("cpu"), strict=True):
        torch.testing.assert_close(emu, cpu)
    assert "aten::sparse_sampled_addmm" in torch_emu.fallback_ops()


def test_mm_reduce_amax_backward_matches_cpu():
    # The CPU's amax/amin forward returns the argmax its backward needs only when self requires grad: the fallback's
    # CPU copies used to drop requires_grad, and the backward then indexed an empty tensor and crashed the process.
    def grads(device: str) -> list[torch.Tensor]:
        torch.manual_seed(0)
        sparse = torch.tensor(DENSE).to_sparse_csr().to(device).requires_grad_(True)
        dense = torch.randn(3, 4).to(device).requires_grad_(True)
        out = torch.sparse.mm(sparse, dense, "amax")
        return [g.cpu().to_dense() for g in torch.autograd.grad(out.sum(), [sparse, dense])]

    for emu, cpu in zip(grads("emu"), grads("cpu"), strict=True):
        torch.testing.assert_close(emu, cpu)
