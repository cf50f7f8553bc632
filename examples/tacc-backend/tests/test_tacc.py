"""torch-tacc's own test suite, run against the installed wheel where the tacc toolkit is installed."""

from __future__ import annotations

import pytest
import torch
import torch_tacc
from packaging.version import Version

API = Version(torch_tacc.TACC_API)
needs_api_2 = pytest.mark.skipif(API.major < 2, reason="toolkit API 2 adds vmul and memory statistics")


def test_the_loaded_toolkit_is_the_one_the_wheel_was_built_for() -> None:
    loaded = Version(torch_tacc.runtime_version())
    assert loaded.major == API.major and loaded >= API


def test_tacc_is_a_torch_device() -> None:
    assert torch.tacc.is_available() and torch.tacc.device_count() == 2
    x = torch.arange(6.0).view(2, 3).to("tacc")
    assert x.device.type == "tacc" and x.is_tacc
    assert torch.equal(x.cpu(), torch.arange(6.0).view(2, 3))
    assert torch.ones(2).tacc().device == torch.device("tacc", 0)


def test_a_device_that_does_not_exist_is_refused() -> None:
    with pytest.raises(RuntimeError, match="out of range: there are 2 tacc device"):
        torch.empty(3, device="tacc:5")


def test_tensors_live_on_the_device_they_were_made_on() -> None:
    x = torch.ones(4, device="tacc:1")
    assert x.device == torch.device("tacc", 1)
    assert torch.equal((x + x).cpu(), torch.full((4,), 2.0))


@pytest.mark.parametrize("alpha", [1.0, -0.5])
def test_add_runs_on_the_toolkit_and_matches_the_cpu(alpha: float) -> None:
    a, b = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(torch.add(a.to("tacc"), b.to("tacc"), alpha=alpha).cpu(), torch.add(a, b, alpha=alpha))


def test_mul_matches_the_cpu_with_either_toolkit() -> None:
    # API 2 runs it on tacc_vmul_f32, API 1 on the CPU fallback: the same numbers either way.
    a, b = torch.randn(64), torch.randn(64)
    torch.testing.assert_close((a.to("tacc") * b.to("tacc")).cpu(), a * b)


def test_operators_without_a_tacc_kernel_fall_back_to_the_cpu() -> None:
    a, b = torch.randn(5, 4), torch.randn(4, 3)
    out = a.to("tacc") @ b.to("tacc")
    assert out.device.type == "tacc"
    torch.testing.assert_close(out.cpu(), a @ b)
    torch.testing.assert_close(a.to("tacc").sum(dim=0).cpu(), a.sum(dim=0))


def test_strided_and_converting_copies() -> None:
    a = torch.arange(12.0).view(3, 4)
    on = a.to("tacc")
    torch.testing.assert_close(on.t().contiguous().cpu(), a.t().contiguous())
    torch.testing.assert_close(on[:, 1].cpu(), a[:, 1])
    target = torch.zeros(4, 3, device="tacc").t()  # a non-contiguous destination
    target.copy_(a)
    torch.testing.assert_close(target.cpu(), a)
    torch.testing.assert_close(on.to(torch.float64).cpu(), a.double())
    assert torch.equal(torch.tensor([1, 2, 3], device="tacc").cpu(), torch.tensor([1, 2, 3]))


def test_autograd_through_tacc_tensors() -> None:
    w = torch.randn(3, requires_grad=True)
    x = torch.randn(3)
    (w.to("tacc") * x.to("tacc")).sum().backward()
    assert w.grad is not None
    torch.testing.assert_close(w.grad, x)


@needs_api_2
def test_memory_is_allocated_and_freed_through_the_toolkit() -> None:
    before, _ = torch_tacc.memory_allocated(1)
    x = torch.empty(1024, device="tacc:1")
    during, peak = torch_tacc.memory_allocated(1)
    assert during - before == 4096 and peak >= during
    del x
    assert torch_tacc.memory_allocated(1)[0] == before


@pytest.mark.skipif(API.major >= 2, reason="API 1 toolkits have no memory statistics")
def test_memory_statistics_say_they_need_api_2() -> None:
    with pytest.raises(NotImplementedError, match="need toolkit API 2"):
        torch_tacc.memory_allocated(0)
