"""torch.save / torch.load of emu tensors and modules, with map_location."""

import io

import pytest
import torch
from smoke_gates import backend_meta_serialization_unavailable, numpy_bridge_unavailable, requires_torch_save

import torch_emu

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


# PyTorch's reference backend checks an archive holding numpy arrays next to device tensors (torch_openreg's
# test_storage.py, test_open_device_numpy_serialization: a frozen archive whose tensor reads "openreg:0"). Renaming
# that test to emu by replacing bytes corrupts its archive (the pickle's string length and the zip entry's size and
# CRC-32 still count "openreg:0"; torch.load: "PytorchStreamReader failed reading zip archive: invalid header or
# archive is corrupted"), so here the archives are written for emu by torch.save itself.
META = {"format": 29}


def _numpy_globals() -> list:
    """What a weights_only load needs allowed to rebuild the numpy arrays this numpy pickles."""
    import _codecs

    import numpy as np

    arrays = (np.arange(2, dtype=np.float32), np.arange(2, dtype=np.int64))
    return [arrays[0].__reduce__()[0], np.ndarray, np.dtype, _codecs.encode, *(type(a.dtype) for a in arrays)]


def _load(buffer: io.BytesIO, weights_only: bool, **kwargs):
    buffer.seek(0)
    if not weights_only:
        return torch.load(buffer, weights_only=False, **kwargs)
    safe_globals = getattr(torch.serialization, "safe_globals", None)
    if safe_globals is None:
        pytest.skip(
            f"not available: torch {torch.__version__} has no torch.serialization.safe_globals (torch 2.5) to "
            "allow numpy arrays in a weights_only load"
        )
    with safe_globals(_numpy_globals()):
        return torch.load(buffer, weights_only=True, **kwargs)


@pytest.mark.deep
@pytest.mark.parametrize("weights_only", [False, True], ids=["pickle", "weights_only"])
@pytest.mark.parametrize("map_location", [None, "emu", "emu:1", "cpu"])
def test_archive_of_emu_tensors_numpy_arrays_and_python_objects(weights_only, map_location):
    import numpy as np

    x = torch.arange(6.0).reshape(2, 3).emu(1)
    torch_emu.set_backend_meta(x, META)
    archive = {
        "x": x,
        "x_t": x.t(),
        "array": np.arange(5, dtype=np.float32),
        "ints": np.array([[1, 2], [3, 4]], dtype=np.int64),
        "cpu": torch.ones(3),
        "half": torch.full((2,), 0.5, dtype=torch.float16, device="emu"),
        "objects": [1, 2.5, "three", None, (4, 5), {"six": 6}],
    }
    buffer = io.BytesIO()
    torch.save(archive, buffer)
    kwargs = {} if map_location is None else {"map_location": map_location}
    loaded = _load(buffer, weights_only, **kwargs)

    # A device string maps every storage there, the CPU tensor's too; none keeps where each was saved.
    device = torch.device({None: "emu:1", "emu": "emu:0"}.get(map_location, map_location))
    cpu_device = torch.device("cpu" if map_location is None else device)
    assert loaded["x"].device == device and loaded["half"].device.type == device.type
    assert loaded["x"].cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert loaded["half"].cpu().tolist() == [0.5, 0.5]
    loaded["x_t"].fill_(7.0)  # still a view of x
    assert loaded["x"].cpu().tolist() == [[7.0] * 3] * 2
    # Kept on emu where torch.save carries PrivateUse1 metadata at all (not 2.4); a CPU tensor has none.
    kept = device.type == "emu" and backend_meta_serialization_unavailable() is None
    assert torch_emu.backend_meta(loaded["x"]) == (META if kept else {})
    assert loaded["array"].dtype == np.float32 and loaded["array"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert loaded["ints"].dtype == np.int64 and loaded["ints"].tolist() == [[1, 2], [3, 4]]
    assert loaded["cpu"].device == cpu_device and loaded["cpu"].tolist() == [1.0, 1.0, 1.0]
    assert loaded["objects"] == [1, 2.5, "three", None, (4, 5), {"six": 6}]


class _EmuTensorFromNumpy:
    """Pickles as releases before 2.5 pickled a tensor of a backend without storage: torch._utils's
    _rebuild_device_tensor_from_numpy with the array, dtype, location and requires_grad (the reference's frozen
    archive, written for emu)."""

    def __init__(self, array, location: str) -> None:
        self.array = array
        self.location = location

    def __reduce_ex__(self, protocol):
        return (torch._utils._rebuild_device_tensor_from_numpy, (self.array, torch.float32, self.location, False))


def _weights_only_allows(name: str) -> bool:
    allowed = getattr(getattr(torch, "_weights_only_unpickler", None), "_get_allowed_globals", None)
    return allowed is not None and name in allowed()


@pytest.mark.deep
@pytest.mark.parametrize("weights_only", [False, True], ids=["pickle", "weights_only"])
def test_legacy_archive_of_an_emu_tensor_rebuilt_from_numpy(weights_only):
    import numpy as np

    rebuild = "torch._utils._rebuild_device_tensor_from_numpy"
    if not hasattr(torch._utils, "_rebuild_device_tensor_from_numpy"):
        pytest.skip(f"not available: torch {torch.__version__} has no {rebuild}")
    reason = numpy_bridge_unavailable()  # the rebuild calls torch.from_numpy
    if reason is not None:
        pytest.skip(reason)
    if weights_only and not _weights_only_allows(rebuild):
        pytest.skip(f"not available: torch {torch.__version__}'s weights_only unpickler does not allow {rebuild}")
    values = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    buffer = io.BytesIO()
    torch.save({"x": _EmuTensorFromNumpy(values, "emu:0"), "array": values}, buffer)
    assert b"_rebuild_device_tensor_from_numpy" in buffer.getvalue()  # the legacy path, not a storage
    places = [(None, "emu:0"), ("cpu", "cpu"), ("emu:1", "emu:1")]
    if not hasattr(torch._utils, "_get_restore_location"):
        places = places[:1]  # before it (torch 2.1), the rebuild ignores map_location: the archive's device
    for map_location, device in places:
        kwargs = {} if map_location is None else {"map_location": map_location}
        loaded = _load(buffer, weights_only, **kwargs)
        assert loaded["x"].device == torch.device(device)
        assert loaded["x"].cpu().tolist() == values.tolist() == loaded["array"].tolist()


@pytest.mark.deep
def test_storage_less_path_rebuilds_from_a_cpu_tensor(monkeypatch):
    """A backend without storage pickles through _rebuild_device_tensor_from_cpu_tensor (the reference backend's
    test_open_device_cpu_serialization makes emu look storage-less the same way)."""
    rebuild = getattr(torch._utils, "_rebuild_device_tensor_from_cpu_tensor", None)
    if rebuild is None:
        pytest.skip(f"not available: torch {torch.__version__} has no _rebuild_device_tensor_from_cpu_tensor")
    monkeypatch.setattr(torch._C, "_has_storage", lambda _: False)
    x = torch.randn(2, 3)
    emu = x.to("emu")
    assert emu._reduce_ex_internal(torch.serialization.DEFAULT_PROTOCOL)[0] is rebuild
    buffer = io.BytesIO()
    torch.save({"x": emu}, buffer)
    for weights_only in (False, True):
        assert torch.equal(_load(buffer, weights_only)["x"].cpu(), x)
        assert _load(buffer, weights_only)["x"].device == torch.device("emu:0")
        assert _load(buffer, weights_only, map_location="cpu")["x"].device.type == "cpu"
