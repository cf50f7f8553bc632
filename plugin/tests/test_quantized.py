"""Quantized emu tensors: made, copied, viewed and computed on as on the CPU.

PyTorch's reference backend makes a quantized tensor on its device (test_open_device_quantized), and its device-generic
tests flip, flatten and ravel one. On emu a quantized tensor holds its integer bytes in device memory and its quantizer
on the host; every result here is compared with the same call on the CPU: the integer bytes, the quantizer's
parameters, the dequantized values and the errors.
"""

from __future__ import annotations

import io
import warnings

import pytest
import torch
from smoke_gates import quantized_tensors_unavailable, requires_torch_save

import torch_emu

_reason = quantized_tensors_unavailable()
pytestmark = [
    pytest.mark.deep,
    pytest.mark.feature("quantized_tensors"),
    pytest.mark.skipif(_reason is not None, reason=_reason or ""),
    # torch deprecates its quantized dtypes: the warning is the CPU's too, and not what is tested.
    pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning"),
]

QTYPES = ["qint8", "quint8", "qint32"]


def _x() -> torch.Tensor:
    return torch.linspace(-3.0, 3.0, 60).reshape(3, 4, 5)


def _same(emu: torch.Tensor, cpu: torch.Tensor) -> None:
    """The emu quantized tensor holds what the CPU one holds: type, scheme, parameters, bytes, values."""
    assert emu.device.type == "emu" and cpu.device.type == "cpu"
    assert emu.dtype == cpu.dtype and emu.shape == cpu.shape and emu.qscheme() == cpu.qscheme()
    if cpu.qscheme() == torch.per_tensor_affine:
        assert (emu.q_scale(), emu.q_zero_point()) == (cpu.q_scale(), cpu.q_zero_point())
    else:
        assert emu.q_per_channel_axis() == cpu.q_per_channel_axis()
        assert torch.equal(emu.q_per_channel_scales().cpu(), cpu.q_per_channel_scales())
        assert torch.equal(emu.q_per_channel_zero_points().cpu(), cpu.q_per_channel_zero_points())
    ints = emu.int_repr()
    assert ints.device == emu.device and ints.dtype == cpu.int_repr().dtype
    assert torch.equal(ints.cpu(), cpu.int_repr())
    values = emu.dequantize()
    assert values.device == emu.device and values.dtype == torch.float32
    assert torch.equal(values.cpu(), cpu.dequantize())


@pytest.mark.parametrize("qtype", QTYPES)
def test_quantize_per_tensor_as_on_the_cpu(qtype):
    dtype = getattr(torch, qtype)
    q = torch.quantize_per_tensor(_x().to("emu"), 0.05, 3, dtype)
    _same(q, torch.quantize_per_tensor(_x(), 0.05, 3, dtype))
    # The tensor-argument overload (scale and zero point as tensors), as torch.ao's observers call it.
    scale, zero_point = torch.tensor(0.05), torch.tensor(3)
    q = torch.quantize_per_tensor(_x().to("emu"), scale.to("emu"), zero_point.to("emu"), dtype)
    _same(q, torch.quantize_per_tensor(_x(), scale, zero_point, dtype))


def test_quantize_per_channel_as_on_the_cpu():
    scales, zero_points = torch.tensor([0.1, 0.02, 0.3, 0.05], dtype=torch.float64), torch.tensor([0, 5, -3, 1])
    for axis_scales, axis in ((scales[:3], 0), (scales, 1)):
        zps = zero_points[: axis_scales.numel()]
        q = torch.quantize_per_channel(_x().to("emu"), axis_scales, zps, axis, torch.qint8)
        _same(q, torch.quantize_per_channel(_x(), axis_scales, zps, axis, torch.qint8))


def test_the_reference_backends_quantized_tensor():
    """PyTorch's open-registration test: a quantized tensor made from a device tensor stays on the device."""
    input_data = torch.randn(3, 4, 5, dtype=torch.float32, device="cpu").to("emu")
    quantized_tensor = torch.quantize_per_tensor(input_data, 0.1, 10, torch.qint8)
    assert quantized_tensor.device == torch.device("emu:0")
    assert quantized_tensor.dtype == torch.qint8


def test_empty_quantized_tensors():
    e = torch._empty_affine_quantized([2, 3], scale=0.5, zero_point=4, dtype=torch.quint8, device="emu")
    assert (e.device, e.dtype, e.shape, e.q_scale(), e.q_zero_point()) == (
        torch.device("emu:0"),
        torch.quint8,
        torch.Size([2, 3]),
        0.5,
        4,
    )
    like = torch.empty_quantized([7], e, device=e.device)  # the device argument defaults to the CPU's
    assert (like.device, like.dtype, like.q_scale(), like.q_zero_point()) == (e.device, e.dtype, 0.5, 4)
    scales, zero_points = torch.tensor([0.5, 0.25]), torch.tensor([1, 2])
    per_channel = torch._empty_per_channel_affine_quantized(
        [2, 3], scales=scales, zero_points=zero_points, axis=0, dtype=torch.qint8, device="emu"
    )
    assert per_channel.device.type == "emu" and per_channel.qscheme() == torch.per_channel_affine
    like = torch.empty_quantized([2], per_channel[:, 0], device="emu")
    assert like.qscheme() == torch.per_channel_affine and torch.equal(
        like.q_per_channel_scales().cpu(), torch.tensor([0.5, 0.25], dtype=torch.float64)
    )
    assert torch.empty(4, dtype=torch.qint8, device="emu").dtype == torch.qint8  # as torch.empty on the CPU
    assert torch.empty_like(e).q_scale() == 0.5


def test_copies_to_and_from_the_cpu():
    on_cpu = torch.quantize_per_tensor(_x(), 0.05, 3, torch.quint8)
    on_emu = on_cpu.to("emu")
    _same(on_emu, on_cpu)
    back = on_emu.cpu()
    assert back.device.type == "cpu" and torch.equal(back.int_repr(), on_cpu.int_repr())
    assert back.q_scale() == on_cpu.q_scale()
    per_channel = torch.quantize_per_channel(
        _x(), torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 1, 2]), 0, torch.qint8
    )
    _same(per_channel.to("emu"), per_channel)
    # copy_ between quantized tensors takes the source's quantizer, as on the CPU.
    into = torch._empty_affine_quantized([3, 4, 5], scale=1.0, zero_point=0, dtype=torch.quint8, device="emu")
    into.copy_(on_cpu)
    _same(into, on_cpu)
    # A float source is quantized with the destination's quantizer.
    cpu_target = torch._empty_affine_quantized([3, 4, 5], scale=0.1, zero_point=2, dtype=torch.qint8)
    emu_target = torch._empty_affine_quantized([3, 4, 5], scale=0.1, zero_point=2, dtype=torch.qint8, device="emu")
    cpu_target.copy_(_x())
    emu_target.copy_(_x().to("emu"))
    _same(emu_target, cpu_target)


def test_copies_the_cpu_refuses_are_refused():
    q = torch.quantize_per_tensor(_x(), 0.05, 3, torch.qint8)
    for source in (q, q.to("emu")):
        for target in (torch.empty(3, 4, 5), torch.empty(3, 4, 5, device="emu")):
            with pytest.raises(RuntimeError, match="Copying from quantized Tensor to non-quantized Tensor"):
                target.copy_(source)
    other = torch.quantize_per_tensor(_x(), 0.05, 3, torch.quint8).to("emu")
    with pytest.raises(RuntimeError):
        other.copy_(q.to("emu"))
    with pytest.raises(RuntimeError):
        q.to("emu").copy_(
            torch.quantize_per_channel(_x(), torch.ones(3), torch.zeros(3, dtype=torch.long), 0, torch.qint8)
        )


def test_element_moves_and_views_as_on_the_cpu():
    cpu = torch.quantize_per_tensor(_x(), 0.05, 3, torch.qint8)
    emu = cpu.to("emu")
    for name, op in [
        ("flip", lambda t: t.flip(0, 2)),
        ("flatten", lambda t: t.flatten()),
        ("ravel", lambda t: t.ravel()),
        ("clone", lambda t: t.clone()),
        ("transposed clone", lambda t: t.transpose(0, 2).clone()),
        ("contiguous", lambda t: t.permute(2, 0, 1).contiguous()),
        ("slice", lambda t: t[1:, ::2]),
        ("select", lambda t: t[2]),
        ("view", lambda t: t.view(12, 5)),
        ("reshape", lambda t: t.reshape(4, 15)),
        ("unsqueeze and squeeze", lambda t: t.unsqueeze(1).squeeze(1)),
        ("unfold", lambda t: t.unfold(2, 2, 1)),
    ]:
        try:
            _same(op(emu), op(cpu))
        except AssertionError as exc:
            raise AssertionError(name) from exc
    # Views alias the device bytes: no copy.
    assert emu.flatten().data_ptr() == emu.data_ptr() and emu.view(60).data_ptr() == emu.data_ptr()
    assert emu[1].data_ptr() == emu.data_ptr() + 20
    assert emu.clone().data_ptr() != emu.data_ptr() and emu.flip(0).data_ptr() != emu.data_ptr()


def test_per_channel_views_keep_their_axis():
    cpu = torch.quantize_per_channel(
        _x(), torch.tensor([0.1, 0.2, 0.3, 0.4]), torch.tensor([0, 1, 2, 3]), 1, torch.qint8
    )
    emu = cpu.to("emu")
    for op in (lambda t: t.unsqueeze(0), lambda t: t.unsqueeze(0).squeeze(0), lambda t: t.clone(), lambda t: t[:, 1:]):
        _same(op(emu), op(cpu))
    # The CPU cannot flip a per-channel tensor (its flip restrides the result); neither can emu.
    for tensor in (cpu, emu):
        with pytest.raises(RuntimeError, match="only on uniformly quantized tensor"):
            tensor.flip(1)


def test_ops_with_quantized_cpu_kernels_compute_as_on_the_cpu():
    a = torch.quantize_per_tensor(_x(), 0.05, 3, torch.quint8)
    b = torch.quantize_per_tensor(_x().flip(0), 0.05, 3, torch.quint8)
    ea, eb = a.to("emu"), b.to("emu")
    _same(torch.relu(ea), torch.relu(a))
    _same(torch.cat([ea, eb], dim=1), torch.cat([a, b], dim=1))
    _same(torch.ops.quantized.add(ea, eb, 0.1, 5).to("emu"), torch.ops.quantized.add(a, b, 0.1, 5))
    assert torch.equal(ea, ea.clone()) and not torch.equal(ea, eb)
    assert torch.equal((ea == eb).cpu(), a == b)
    _same(ea.clone().fill_(1.0), a.clone().fill_(1.0))  # in place: the CPU's result is written back to emu
    # They ran as the CPU fallback does, and are listed as such.
    assert {"aten::dequantize.self", "aten::cat"} <= set(torch_emu.fallback_ops())


def test_dense_kernels_refuse_quantized_tensors_as_on_the_cpu():
    q = torch.quantize_per_tensor(_x(), 0.05, 3, torch.qint8)
    with pytest.raises(NotImplementedError) as on_cpu:
        torch.exp(q)
    with pytest.raises(NotImplementedError) as on_emu:
        torch.exp(q.to("emu"))
    assert "QuantizedCPU" in str(on_cpu.value) and "QuantizedCPU" in str(on_emu.value)


@requires_torch_save()
def test_save_and_load():
    q = torch.quantize_per_tensor(_x(), 0.05, 3, torch.qint8)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.save({"q": q.to("emu"), "x": _x().to("emu")}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    _same(loaded["q"], q)
    assert torch.equal(loaded["x"].cpu(), _x())
