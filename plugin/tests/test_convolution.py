"""Convolutions on emu (convolution_overrideable and its backward) against CPU, and a small CNN trained on both."""

import copy

import pytest
import torch
import torch.nn.functional as F

# The deep tier (smoke.tiers: once per build): results against the CPU reference depend on the wheel and torch alone.
pytestmark = [pytest.mark.feature("convolution"), pytest.mark.deep]

# (name, functional, input shape, weight shape, keyword arguments)
VARIANTS = [
    ("conv1d", F.conv1d, (2, 4, 11), (6, 4, 3), {}),
    ("conv1d_stride_pad", F.conv1d, (2, 4, 11), (6, 4, 3), {"stride": 2, "padding": 1}),
    ("conv1d_dilation_groups", F.conv1d, (2, 4, 13), (6, 2, 3), {"dilation": 2, "groups": 2}),
    ("conv1d_same", F.conv1d, (2, 4, 10), (6, 4, 4), {"padding": "same", "dilation": 2}),
    ("conv2d", F.conv2d, (2, 3, 9, 8), (5, 3, 3, 3), {}),
    ("conv2d_asym", F.conv2d, (2, 3, 9, 8), (5, 3, 2, 3), {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2)}),
    ("conv2d_depthwise", F.conv2d, (2, 4, 9, 8), (8, 1, 3, 3), {"groups": 4, "padding": 1}),
    ("conv2d_valid", F.conv2d, (1, 2, 6, 6), (3, 2, 3, 3), {"padding": "valid"}),
    ("conv3d", F.conv3d, (1, 2, 5, 6, 5), (4, 2, 3, 3, 3), {"padding": 1}),
    (
        "conv3d_groups_stride",
        F.conv3d,
        (2, 4, 6, 6, 6),
        (4, 2, 2, 3, 2),
        {"groups": 2, "stride": 2, "dilation": (1, 1, 2)},
    ),
    ("conv_transpose1d", F.conv_transpose1d, (2, 4, 7), (4, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ("conv_transpose2d", F.conv_transpose2d, (2, 4, 5, 6), (4, 3, 3, 2), {"stride": (2, 3), "padding": 1}),
    (
        "conv_transpose2d_groups_dilation",
        F.conv_transpose2d,
        (2, 4, 5, 5),
        (4, 2, 3, 3),
        {"groups": 2, "dilation": 2, "output_padding": 1, "stride": 2},
    ),
    ("conv_transpose3d", F.conv_transpose3d, (1, 2, 3, 4, 3), (2, 3, 2, 2, 2), {"stride": 2}),
]


@pytest.mark.parametrize(
    ("name", "fn", "input_shape", "weight_shape", "kwargs"), VARIANTS, ids=[v[0] for v in VARIANTS]
)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_forward_and_backward_match_cpu(name, fn, input_shape, weight_shape, kwargs, bias):  # noqa: PLR0917
    torch.manual_seed(0)
    transposed = name.startswith("conv_transpose")
    groups = kwargs.get("groups", 1)
    out_channels = weight_shape[1] * groups if transposed else weight_shape[0]
    x = torch.randn(input_shape, dtype=torch.float64, requires_grad=True)
    w = torch.randn(weight_shape, dtype=torch.float64, requires_grad=True)
    b = torch.randn(out_channels, dtype=torch.float64, requires_grad=True) if bias else None
    xe, we = x.detach().emu().requires_grad_(), w.detach().emu().requires_grad_()
    be = b.detach().emu().requires_grad_() if bias else None

    expected = fn(x, w, b, **kwargs)
    got = fn(xe, we, be, **kwargs)
    assert got.device.type == "emu"
    torch.testing.assert_close(got.cpu(), expected)

    grad = torch.randn_like(expected)
    expected.backward(grad)
    got.backward(grad.emu())
    torch.testing.assert_close(xe.grad.cpu(), x.grad)
    torch.testing.assert_close(we.grad.cpu(), w.grad)
    if bias:
        torch.testing.assert_close(be.grad.cpu(), b.grad)


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_padding_modes_match_cpu(padding_mode):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=2, padding_mode=padding_mode, dtype=torch.float64)
    conv_emu = copy.deepcopy(conv).to("emu")
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64, requires_grad=True)
    xe = x.detach().emu().requires_grad_()
    expected, got = conv(x), conv_emu(xe)
    torch.testing.assert_close(got.cpu(), expected)
    expected.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(xe.grad.cpu(), x.grad)
    torch.testing.assert_close(conv_emu.weight.grad.cpu(), conv.weight.grad)


def test_unbatched_and_channels_last_match_cpu():
    torch.manual_seed(0)
    w = torch.randn(4, 3, 3, 3)
    x = torch.randn(3, 8, 8)
    torch.testing.assert_close(F.conv2d(x.emu(), w.emu()).cpu(), F.conv2d(x, w), atol=1e-5, rtol=1e-5)
    xc = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
    torch.testing.assert_close(F.conv2d(xc.emu(), w.emu()).cpu(), F.conv2d(xc, w), atol=1e-5, rtol=1e-5)


def test_bad_arguments_raise_where_called():
    x, w = torch.randn(1, 3, 5, 5).emu(), torch.randn(4, 2, 3, 3).emu()
    with pytest.raises(RuntimeError, match="channels"):
        F.conv2d(x, w)
    with pytest.raises(RuntimeError, match="same"):
        F.conv2d(x, torch.randn(4, 3, 3, 3, dtype=torch.float64).emu())


def train(model, data, target, device, steps=5):
    model = model.to(device)
    data, target = data.to(device), target.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def test_small_cnn_trains_like_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 3, padding=1),
        torch.nn.BatchNorm2d(6),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 8, 3, groups=2),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 3),
    )
    data, target = torch.randn(8, 1, 12, 12), torch.randint(0, 3, (8,))
    cpu, cpu_model = train(copy.deepcopy(model), data, target, "cpu")
    emu, emu_model = train(copy.deepcopy(model), data, target, "emu")
    assert emu[-1] < emu[0]
    assert emu == pytest.approx(cpu, rel=1e-4, abs=1e-5)
    for (name, p_cpu), p_emu in zip(cpu_model.state_dict().items(), emu_model.state_dict().values()):
        torch.testing.assert_close(p_emu.cpu(), p_cpu, atol=1e-4, rtol=1e-4, msg=name)


def test_batchnorm_updates_running_statistics():
    # native_batch_norm writes running_mean/var without declaring it; the CPU fallback alone would drop it.
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(3)
    bn_emu = copy.deepcopy(bn).to("emu")
    x = torch.randn(4, 3, 5, 5)
    for _ in range(2):
        bn(x)
        bn_emu(x.emu())
    torch.testing.assert_close(bn_emu.running_mean.cpu(), bn.running_mean)
    torch.testing.assert_close(bn_emu.running_var.cpu(), bn.running_var)
    bn.eval()
    bn_emu.eval()
    torch.testing.assert_close(bn_emu(x.emu()).cpu(), bn(x))
