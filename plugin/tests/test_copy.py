"""Copies host<->emu and emu<->emu: dtypes, layouts, broadcasting, non_blocking, across devices."""

import pytest
import torch

pytestmark = pytest.mark.feature("copy")

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int8,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip(dtype):
    cpu = (torch.arange(24) % 7).to(dtype).reshape(2, 3, 4)
    assert torch.equal(cpu.emu().cpu(), cpu)


def test_non_contiguous_and_dtype_converting_copies():
    cpu = torch.randn(5, 6)
    dev = cpu.emu()
    assert torch.equal(dev.t().cpu(), cpu.t())
    assert torch.equal(dev[:, ::2].cpu(), cpu[:, ::2])
    assert torch.equal(cpu.t().emu().cpu(), cpu.t())
    assert torch.equal(dev.to(torch.float64).cpu(), cpu.double())
    target = torch.zeros(6, 5, device="emu", dtype=torch.float64)
    target.copy_(dev.t())
    assert torch.equal(target.cpu(), cpu.t().double())
    strided_target = torch.zeros(6, 10, device="emu")[:, ::2]
    strided_target.copy_(cpu.t())
    assert torch.equal(strided_target.cpu(), cpu.t())


def test_broadcasting_copy_and_conjugate_views():
    dev = torch.zeros(3, 4, device="emu")
    dev.copy_(torch.arange(4.0))
    assert torch.equal(dev.cpu(), torch.arange(4.0).expand(3, 4))
    z = torch.tensor([1 + 2j, 3 - 1j]).emu()
    assert torch.equal(z.conj().cpu(), torch.tensor([1 - 2j, 3 + 1j]))
    assert torch.equal(z.conj().clone().cpu(), torch.tensor([1 - 2j, 3 + 1j]))


def test_across_devices():
    cpu = torch.randn(100)
    a = cpu.emu(0)
    b = a.to("emu:1")
    assert b.device.index == 1 and torch.equal(b.cpu(), cpu)
    c = torch.empty(50, device="emu:0")
    c.copy_(b[::2])
    assert torch.equal(c.cpu(), cpu[::2])


def test_non_blocking_copies_complete_after_synchronize():
    cpu = torch.randn(1 << 16)
    dev = cpu.to("emu", non_blocking=True)
    back = torch.empty_like(cpu)
    back.copy_(dev, non_blocking=True)
    torch.emu.synchronize()
    assert torch.equal(back, cpu)


def test_mismatched_sizes_raise():
    with pytest.raises(RuntimeError, match=r"copy_: cannot copy a tensor of shape \[4\] into one of shape \[3\]"):
        torch.zeros(3, device="emu").copy_(torch.ones(4))
    with pytest.raises(RuntimeError, match=r"cannot copy a tensor of shape \[2, 5\]"):
        torch.zeros(5, device="emu").copy_(torch.ones(2, 5, device="emu"))


def test_freed_storage_is_detected():
    x = torch.ones(8, device="emu")
    x.untyped_storage().resize_(0)
    with pytest.raises(RuntimeError, match=r"storage holds 0 \(was the storage freed or resized"):
        x.cpu()
    with pytest.raises(RuntimeError, match="was the storage freed or resized"):
        x + 1


def test_storage_resize_keeps_contents():
    x = torch.arange(4.0, device="emu")
    storage = x.untyped_storage()
    storage.resize_(64)
    assert storage.nbytes() == 64
    assert torch.equal(x.cpu(), torch.arange(4.0))
    y = torch.arange(3.0, device="emu")
    y.resize_(10)
    assert torch.equal(y[:3].cpu(), torch.arange(3.0))
