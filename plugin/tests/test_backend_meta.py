"""Backend metadata of emu tensors survives torch.save/torch.load and copies; loading it under FakeTensorMode works."""

import io

import pytest
import torch
from smoke_gates import backend_meta_serialization_unavailable, dynamo_unavailable, requires_torch_save

import torch_emu

pytestmark = pytest.mark.feature("backend_metadata")

META = {"format": 29, "version": 1}


def _saved(meta: dict) -> io.BytesIO:
    x = torch.arange(6.0).reshape(2, 3).emu()
    torch_emu.set_backend_meta(x, meta)
    buffer = io.BytesIO()
    torch.save(x, buffer)
    buffer.seek(0)
    return buffer


def test_set_and_read_back():
    x = torch.ones(3, device="emu")
    assert torch_emu.backend_meta(x) == {}
    torch_emu.set_backend_meta(x, META)
    assert torch_emu.backend_meta(x) == META
    assert torch_emu.backend_meta(x.detach()) == META  # shallow copies clone it
    torch_emu.set_backend_meta(x, {})
    assert torch_emu.backend_meta(x) == {}
    with pytest.raises(ValueError, match="belongs to emu tensors"):
        torch_emu.set_backend_meta(torch.ones(1), META)


def _skip_unless_torch_serializes_backend_meta() -> None:
    reason = backend_meta_serialization_unavailable()
    if reason is not None:
        pytest.skip(reason)


@requires_torch_save()
def test_survives_save_and_load():
    _skip_unless_torch_serializes_backend_meta()
    y = torch.load(_saved(META))
    assert y.device == torch.device("emu:0")
    assert torch_emu.backend_meta(y) == META
    assert y.cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


TORCH_META = {"version_number": True, "format_number": True}


def test_torch_set_and_get_tensor_metadata():
    """torch's own interface (torch._utils.set/get_tensor_metadata, PyTorch's reference backend's test_serialization):
    the string-to-bool map comes back as it was given, beside torch_emu's named integers."""
    _skip_unless_torch_serializes_backend_meta()
    x = torch.empty(3, 3, device="emu")
    assert torch._utils.get_tensor_metadata(x) == {}
    torch._utils.set_tensor_metadata(x, TORCH_META)
    assert torch._utils.get_tensor_metadata(x) == TORCH_META
    torch_emu.set_backend_meta(x, META)
    assert torch_emu.backend_meta(x) == META
    assert {k: v for k, v in torch._utils.get_tensor_metadata(x).items() if not k.startswith("emu_meta:")} == TORCH_META
    torch_emu.set_backend_meta(x, {})
    assert torch._utils.get_tensor_metadata(x) == TORCH_META  # torch's entries stay
    assert torch._utils.get_tensor_metadata(x.detach()) == TORCH_META


@requires_torch_save()
def test_torch_metadata_survives_save_and_load():
    _skip_unless_torch_serializes_backend_meta()
    x = torch.arange(4.0, device="emu")
    torch._utils.set_tensor_metadata(x, TORCH_META)
    buffer = io.BytesIO()
    torch.save(x, buffer)
    buffer.seek(0)
    y = torch.load(buffer)
    assert y.device.type == "emu" and torch._utils.get_tensor_metadata(y) == TORCH_META
    buffer.seek(0)
    assert torch._utils.get_tensor_metadata(torch.load(buffer, map_location="cpu")) == {}


def test_copy_backend_meta():
    copy_meta = getattr(torch._C, "_copy_backend_meta", None)
    if copy_meta is None:
        pytest.skip(f"not available: torch {torch.__version__} has no torch._C._copy_backend_meta")
    src, dst = torch.empty(3, device="emu"), torch.empty(3, device="emu")
    torch._utils.set_tensor_metadata(src, TORCH_META)
    torch_emu.set_backend_meta(src, META)
    copy_meta(src, dst)
    assert torch._utils.get_tensor_metadata(dst) == torch._utils.get_tensor_metadata(src)
    assert torch_emu.backend_meta(dst) == META


@requires_torch_save()
def test_load_under_fake_tensor_mode_accepts_the_metadata():
    try:
        from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    except ImportError as exc:
        pytest.skip(f"not available: this torch has no FakeTensorMode ({exc})")
    buffer = _saved(META)
    try:
        with FakeTensorMode():
            y = torch.load(buffer)
    except RuntimeError as exc:
        # Older releases rebuild the loaded tensor on "meta" and then refuse to give it the emu storage: torch's
        # own FakeTensorMode cannot load any PrivateUse1 tensor there, whatever the plugin does.
        if 'device "meta"' not in str(exc) or "devices must match" not in str(exc):
            raise
        pytest.skip(
            f"not available: torch {torch.__version__}'s FakeTensorMode cannot load PrivateUse1 tensors ({exc})"
        )
    # Loading works and keeps the device. The metadata does not arrive (torch up to 2.15): torch._utils's
    # _rebuild_tensor_v2 applies it while the rebuilt fake still reports "meta", whose device has no metadata
    # hook (only PrivateUse1 may register one), and sets the emu device only afterwards.
    assert isinstance(y, FakeTensor) and y.device.type == "emu" and y.shape == (2, 3)


def _fake_tensor_mode():
    try:
        from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    except ImportError as exc:
        pytest.skip(f"not available: this torch has no FakeTensorMode ({exc})")
    return FakeTensor, FakeTensorMode


def _emu_tensor_with_metadata() -> torch.Tensor:
    x = torch.arange(6.0).reshape(2, 3).emu(1)
    torch._utils.set_tensor_metadata(x, TORCH_META)
    torch_emu.set_backend_meta(x, META)
    return x


# torch (up to 2.15 at least) builds a fake from a new meta tensor and copies only the conj and neg bits onto it, so a
# fake lost every entry until torch_emu wrapped the converter (torch_emu/_fake_tensor.py). PyTorch's reference backend
# asserts the same (test_fake_tensor_metadata_preservation and its FunctionalTensor variant, torch_openreg's
# test_storage.py) for torches that copy it themselves.
@pytest.mark.deep
@pytest.mark.feature("backend_metadata_in_faketensor")  # its own row: the other tests' passes must not hide it
def test_fake_tensor_keeps_the_metadata():
    FakeTensor, FakeTensorMode = _fake_tensor_mode()
    x = _emu_tensor_with_metadata()
    plain = torch.ones(2, device="emu")
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(x)
        again = mode.from_tensor(x)
        fake_plain = mode.from_tensor(plain)
    assert isinstance(fake, FakeTensor) and fake.device == torch.device("emu:1") and again is fake
    assert torch._utils.get_tensor_metadata(fake) == torch._utils.get_tensor_metadata(x)
    assert torch_emu.backend_meta(fake) == META
    assert torch._utils.get_tensor_metadata(fake_plain) == {}
    assert torch_emu.backend_meta(x) == META  # the real tensor keeps its own


@pytest.mark.deep
@pytest.mark.feature("backend_metadata_in_faketensor")
def test_fake_of_a_functional_tensor_keeps_the_metadata():
    """A FunctionalTensor wrapper carries no metadata; its fake gets that of the emu tensor inside."""
    FakeTensor, FakeTensorMode = _fake_tensor_mode()
    try:
        from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
    except ImportError as exc:
        pytest.skip(f"not available: this torch has no FunctionalTensor ({exc})")
    if not hasattr(FunctionalTensor, "to_functional"):
        pytest.skip(f"not available: torch {torch.__version__}'s FunctionalTensor has no to_functional")
    x = _emu_tensor_with_metadata()
    with FunctionalTensorMode():
        wrapper = FunctionalTensor.to_functional(x)
        assert torch._utils.get_tensor_metadata(wrapper) == {}
        with FakeTensorMode() as mode:
            fake = mode.from_tensor(wrapper)
    assert isinstance(fake, FakeTensor)
    assert torch._utils.get_tensor_metadata(fake) == torch._utils.get_tensor_metadata(x)
    assert torch_emu.backend_meta(fake) == META


@pytest.mark.deep
@pytest.mark.feature("backend_metadata_in_faketensor")
def test_torch_compile_traces_a_fake_that_has_the_metadata():
    """What a compile backend sees of an emu input (the graph's fake example value) carries the input's metadata."""
    reason = dynamo_unavailable()
    if reason is not None:
        pytest.skip(reason)
    x = _emu_tensor_with_metadata()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(
            torch_emu.backend_meta(node.meta["example_value"])
            for node in gm.graph.nodes
            if node.op == "placeholder" and isinstance(node.meta.get("example_value"), torch.Tensor)
        )
        return gm

    assert torch.compile(lambda t: t * 2, backend=backend)(x).cpu().tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert seen == [META]
