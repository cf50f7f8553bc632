"""Native kernels against the CPU results, and the CPU fallback with its op list."""

import pytest
import torch

import torch_emu

pytestmark = pytest.mark.feature("ops")


def same(fn, *cpu_args, atol=1e-5, rtol=1e-5):
    dev_args = [a.emu() if isinstance(a, torch.Tensor) else a for a in cpu_args]
    expected = fn(*cpu_args)
    got = fn(*dev_args)
    if isinstance(expected, tuple):
        for e, g in zip(expected, got):
            assert g.device.type == "emu"
            torch.testing.assert_close(g.cpu(), e, atol=atol, rtol=rtol)
    else:
        assert got.device.type == "emu"
        torch.testing.assert_close(got.cpu(), expected, atol=atol, rtol=rtol)


X = torch.randn(4, 5)
Y = torch.randn(4, 5)
B = torch.randn(5)
INTS = torch.randint(-5, 5, (4, 5))
P = torch.rand(4, 5) + 0.1

NATIVE = {
    "add": (lambda x, y: x + y, X, Y),
    "add_broadcast_alpha": (lambda x, b: torch.add(x, b, alpha=2), X, B),
    "add_scalar": (lambda x: x + 3, X),
    "sub": (lambda x, y: x - y, X, Y),
    "mul": (lambda x, y: x * y, X, Y),
    "div": (lambda x, y: x / y, X, P),
    "int_div_promotes": (lambda i: i / 2, INTS),
    "int_add": (lambda i: i + i, INTS),
    "neg_abs": (lambda x: (-x).abs(), X),
    "exp_log_sqrt": (lambda p: torch.sqrt(torch.log(torch.exp(p))), P),
    "rsqrt_reciprocal": (lambda p: torch.rsqrt(p) + torch.reciprocal(p), P),
    "trig": (lambda x: torch.sin(x) + torch.cos(x) + torch.tanh(x) + torch.sigmoid(x), X),
    "relu": (torch.relu, X),
    "sum": (lambda x: x.sum(), X),
    "sum_dim": (lambda x: x.sum(1, keepdim=True), X),
    "sum_int": (lambda i: i.sum(0), INTS),
    "mean": (lambda x: x.mean(), X),
    "mean_dims": (lambda x: x.mean((0, 1)), X),
    # The CPU mean_out of older releases (2.5 among them) sums half types in float into a tensor it assigns to its
    # out argument: on emu, whose kernels write through a view, the result stayed zero (a ResNet's average pool under
    # bf16 autocast).
    "mean_dims_bfloat16": (lambda x: x.mean((0, 1), keepdim=True), X.bfloat16()),
    "mean_dim_float16": (lambda x: x.mean(1), X.half()),
    "max": (lambda x: x.max(), X),
    "max_dim": (lambda x: x.max(dim=1), X),
    "mm": (lambda x, y: x @ y.t(), X, Y),
    "bmm": (lambda x: torch.bmm(x.reshape(2, 2, 5), x.reshape(2, 5, 2)), X),
    "matmul_batched": (lambda x, y: torch.matmul(x.reshape(2, 2, 5), y.t()), X, Y),
    "addmm": (lambda b, x, y: torch.addmm(b[:4], x, y.t(), beta=0.5, alpha=2), B, X, Y),
    "softmax": (lambda x: torch.softmax(x, dim=1), X),
    "log_softmax": (lambda x: torch.log_softmax(x, dim=0), X),
    "index_select": (lambda x: x.index_select(1, torch.tensor([4, 0, 2]).to(x.device)), X),
    "cat": (lambda x, y: torch.cat([x, y, x], dim=1), X, Y),
    "where": (lambda x, y: torch.where(x > y, x, y), X, Y),
    "comparisons": (lambda x, y: torch.stack([x == y, x != y, x < y, x <= y, x > 0, x >= 0.5]), X, Y),
    "fill_zero": (lambda x: x.clone().fill_(2.5) + x.clone().zero_(), X),
    "inplace_chain": (lambda x, y: x.clone().add_(y).mul_(y).sub_(x).div_(P.to(x.device)).exp_(), X, Y),
}


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_native_kernel_matches_cpu(name):
    fn, *args = NATIVE[name]
    torch_emu.reset_fallback_ops()
    same(fn, *args)
    # stack() above is not on the native list; everything else in these cases must be native.
    fell_back = {op for op in torch_emu.fallback_ops() if op not in ("aten::stack", "aten::clone", "aten::_to_copy")}
    assert not fell_back, f"{name} fell back to CPU for {fell_back}"


def test_fallback_runs_and_is_listed():
    torch_emu.reset_fallback_ops()
    same(lambda x: torch.cumsum(x, 1), X)
    same(lambda x: torch.sort(x, 1), X)
    counts = torch_emu.fallback_ops()
    assert counts.get("aten::cumsum.out", 0) + counts.get("aten::cumsum", 0) >= 1
    assert any(op.startswith("aten::sort") for op in counts)
    assert "aten::add.Tensor" not in counts


def test_mixed_devices_are_errors():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(2, device="emu:0") + torch.ones(2, device="emu:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(2, device="emu") + torch.ones(2)


def test_shape_errors_raise_where_the_op_is_called():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        torch.ones(2, 3, device="emu") @ torch.ones(4, 5, device="emu")
    with pytest.raises(RuntimeError, match="must match"):
        torch.ones(2, 3, device="emu") + torch.ones(4, device="emu")


def test_kernel_failure_surfaces_at_synchronize():
    x = torch.ones(3, device="emu")
    with pytest.raises(RuntimeError, match="index out of range"):
        x.index_select(0, torch.tensor([7], device="emu"))
        torch.emu.synchronize()
    # The error was reported once; the device keeps working.
    assert x.sum().item() == 3


def test_item_and_scalars():
    x = torch.tensor([[1.5, -2.0]], device="emu")
    assert x[0, 1].item() == -2.0
    assert bool((x > 0).any())
    assert int(torch.tensor(7, device="emu")) == 7


def _warnings_of(fn) -> list:  # type: ignore[no-untyped-def]
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message).split(" (Triggered internally")[0] for w in caught]


def test_byte_mask_indexing_warns_as_on_cpu():
    """PyTorch's test_byte_mask_accumulate: y[mask] and index_put_ with a uint8 mask warn once each, as on the CPU and
    CUDA; through the structured kernel's meta function and then the CPU's own, y[mask] warned twice on emu."""
    per_device = {}
    for device in ("cpu", "emu"):
        mask = torch.tensor([1, 0, 1, 0, 1, 0, 0, 0, 0, 1], dtype=torch.uint8, device=device)
        y = torch.ones(10, 10, device=device)
        per_device[device] = _warnings_of(lambda: y.index_put_((mask,), y[mask], accumulate=True))  # noqa: B023
        assert y.sum().item() == 100 + 4 * 10
    assert per_device["emu"] == per_device["cpu"]
    assert len(per_device["emu"]) == 2 and all("torch.uint8 is now deprecated" in w for w in per_device["emu"])


def test_indexing_with_cpu_and_emu_indices_matches_cpu():
    x = torch.arange(24.0).reshape(4, 6)
    rows, cols = torch.tensor([3, 0, 3]), torch.tensor([1, 5, 0])
    for index in ((rows,), (rows, cols), (x[:, 0] > 5,)):
        expected = x[index]
        assert torch.equal(x.emu()[index].cpu(), expected)  # CPU indices, as CUDA accepts them
        assert torch.equal(x.emu()[tuple(i.emu() for i in index)].cpu(), expected)


def _outcome(fn):  # type: ignore[no-untyped-def]
    """fn's result on the CPU (values, shape, strides), or the type and text of what it raised."""
    try:
        result = fn()
    except (RuntimeError, IndexError, ValueError) as exc:
        return type(exc).__name__, str(exc).split("\n")[0]
    return result.cpu().tolist(), tuple(result.shape), result.stride()


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.complex64, torch.bool])
def test_rot90_matches_cpu_with_its_errors(dtype):  # type: ignore[no-untyped-def]
    """PyTorch's device-generic test_rot90 and test_complex_rot90 on emu: values, strides, and the error raised for
    bad dims (rot90 is a composite of flip and an in-place transpose_ on the flipped tensor)."""
    for shape in ((2, 2), (2, 2, 2), (3, 5, 4), (0, 3)):
        data = torch.arange(1, 1 + torch.Size(shape).numel()).reshape(shape).to(dtype)
        dims_list = [[0, 1], [1, 0], [1, -1], [0, -3], [0, 3], [1, 1], [0, 1, 2], [0]]
        for k in (-5, -1, 0, 1, 2, 3, 5):
            for dims in dims_list:
                emu = data.emu()
                assert _outcome(lambda: emu.rot90(k, dims)) == _outcome(lambda: data.rot90(k, dims)), (shape, k, dims)  # noqa: B023
