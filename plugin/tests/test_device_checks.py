"""Device mismatches raise CPU's and CUDA's messages: set_ across devices, out= on another device than the inputs."""

import pytest
import torch

pytestmark = pytest.mark.feature("device_checks")


def test_set_storage_of_another_emu_device_raises():
    b = torch.empty(0, device="emu:1")
    with pytest.raises(RuntimeError, match="the devices must match"):
        b.set_(torch.ones(4, device="emu:0").untyped_storage())
    assert b.device == torch.device("emu:1")  # not silently moved


def test_set_storage_of_the_same_device_works():
    source = torch.arange(4.0, device="emu:1")
    b = torch.empty(0, device="emu:1")
    b.set_(source.untyped_storage())
    assert b.device == torch.device("emu:1") and b.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_set_empty_keeps_the_device_when_another_is_current():
    b = torch.ones(3, device="emu:1")
    b.set_()
    assert b.device == torch.device("emu:1") and b.numel() == 0


def test_out_on_another_device_gives_the_standard_message():
    x = torch.tensor([0.0, 1.0, 2.0], device="emu")
    with pytest.raises(RuntimeError, match=r"Expected out tensor to have device emu:0, but got cpu instead"):
        torch.nonzero(x, out=torch.empty(0, dtype=torch.long))
    out = torch.empty(0, dtype=torch.long, device="emu")
    torch.nonzero(x, out=out)
    assert out.cpu().flatten().tolist() == [1, 2]


def test_nonzero_out_devices_as_pytorch_tests_them():
    """PyTorch's device-generic test_nonzero checks CUDA, XPU and PrivateUse1 for "on the same device"."""
    x = torch.tensor([[0.0, 1.0], [2.0, 0.0]], device="emu")
    with pytest.raises(RuntimeError, match="on the same device"):
        torch.nonzero(x, out=torch.empty([], dtype=torch.long))
    with pytest.raises(RuntimeError, match="scalar type Long"):
        torch.nonzero(x, out=torch.empty([], dtype=torch.float, device="emu"))


def test_cpu_input_with_an_emu_out_is_refused():
    """A CPU input and an emu out= tensor: CUDA refuses the pair; the fallback ran it and resized the emu tensor."""
    out = torch.empty(0, dtype=torch.long, device="emu")
    with pytest.raises(RuntimeError, match=r"Expected out tensor to have device cpu, but got emu:0 instead"):
        torch.nonzero(torch.tensor([0.0, 1.0]), out=out)
    assert out.numel() == 0
    with pytest.raises(RuntimeError, match="on the same device"):
        torch.cat([torch.ones(2), torch.ones(2)], out=torch.empty(0, device="emu"))
    # A 0-dim CPU tensor is a number: it goes with an emu input and out, as on CUDA.
    result = torch.empty(0, device="emu")
    torch.atan2(torch.ones(3, device="emu"), torch.tensor(1.0), out=result)
    assert result.cpu().tolist() == pytest.approx([0.7853982] * 3)
