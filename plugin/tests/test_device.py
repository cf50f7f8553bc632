"""Device registration and the torch.emu module's device functions."""

import pytest
import torch

pytestmark = pytest.mark.feature("device")


def test_backend_is_registered_as_emu():
    assert torch._C._get_privateuse1_backend_name() == "emu"
    assert torch.emu.is_available()
    assert torch.emu.device_count() == 2


def test_tensors_on_each_device():
    a = torch.ones(2, device="emu")
    b = torch.ones(2, device=torch.device("emu:1"))
    assert a.device == torch.device("emu:0") and b.device == torch.device("emu", 1)
    assert a.is_emu and not a.cpu().is_emu
    assert torch.zeros(3).emu().device.type == "emu"
    assert torch.zeros(3).emu(1).device.index == 1


def test_set_device_and_context():
    torch.emu.set_device(1)
    assert torch.emu.current_device() == 1
    assert torch.empty(1, device="emu").device.index == 1
    with torch.emu.device(0):
        assert torch.emu.current_device() == 0
    assert torch.emu.current_device() == 1


def test_properties():
    props = torch.emu.get_device_properties(0)
    assert torch.emu.get_device_name(1).startswith("Emu Accelerator")
    assert props.total_memory == 4096 << 20
    free, total = torch.emu.mem_get_info(0)
    assert total == props.total_memory and 0 < free <= total


def test_module_moves_to_emu():
    layer = torch.nn.Linear(3, 2).emu()
    assert layer.weight.device.type == "emu"
    assert layer(torch.ones(1, 3, device="emu")).shape == (1, 2)


OUT_OF_RANGE = r"The device index is out of range. It must be in \[0, 2\), but got {}"


def test_wrong_device_index_is_a_clear_error():
    """One message, the one c10 gives for XPU and PyTorch's reference backend checks, wherever an index comes in."""
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(5)):
        torch.empty(2, device="emu:5")
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(7)):
        torch.emu.set_device(7)
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(9)):
        torch.ones(2).to("emu:9")
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(2)):
        torch.emu.device(2)
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(3)):
        torch.emu.synchronize("emu:3")
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(-1)):
        torch.emu.get_device_properties(-1)
    if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "set_device_index"):  # torch >= 2.6
        with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(2)):
            torch.accelerator.set_device_index(2)
    assert torch.emu.current_device() == 0  # a refused index changes nothing


def test_init_as_torch_cuda_names_it():
    torch.emu.init()  # the driver runs already: nothing to do in a process that may use emu
    assert torch.emu.is_initialized()
