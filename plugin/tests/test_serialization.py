"""torch.save / torch.load of emu tensors and modules, with map_location."""

import io

import pytest
import torch
from smoke_gates import requires_torch_save

pytestmark = [pytest.mark.feature("serialization"), requires_torch_save()]


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False, **load_kwargs)


def test_tensor_keeps_its_device():
    x = torch.randn(3, 4).emu(1)
    y = round_trip(x)
    assert y.device == torch.device("emu:1") and torch.equal(y.cpu(), x.cpu())


def test_map_location():
    x = torch.randn(5).emu()
    assert round_trip(x, map_location="cpu").device.type == "cpu"
    assert round_trip(x, map_location="emu:1").device == torch.device("emu:1")
    assert round_trip(x.cpu(), map_location="emu").device.type == "emu"


def test_views_stay_views_after_loading():
    base = torch.arange(10.0, device="emu")
    a, b = round_trip([base, base[2:5]])
    b.fill_(-1)
    assert a[2:5].cpu().tolist() == [-1, -1, -1]


def test_module_state_dict():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).emu()
    state = round_trip(model.state_dict())
    assert all(v.device.type == "emu" for v in state.values())
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).emu()
    fresh.load_state_dict(state)
    x = torch.randn(3, 4, device="emu")
    assert torch.equal(fresh(x).cpu(), model(x).cpu())
    whole = round_trip(model, map_location="cpu")
    assert next(whole.parameters()).device.type == "cpu"
