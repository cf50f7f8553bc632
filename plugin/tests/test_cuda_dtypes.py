"""CUDA's dtypes on emu: model code branches on device.type and takes CUDA's path on emu, so emu computes the dtypes
CUDA computes (ComplexHalf math, Half FFTs and pooling, integer histc, ...) with the result dtypes CUDA returns,
where the CPU kernels refuse them. The OpInfo feature (`opinfo_cuda_dtypes`) covers every such pair of op_db; these
tests pin what model code meets."""

import pytest
import torch
import torch.nn.functional as F

import torch_emu

pytestmark = pytest.mark.feature("cuda_dtypes")


def as_complex32(z: torch.Tensor) -> torch.Tensor:
    return z.to(torch.complex32)


def close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, **tolerance: float) -> None:
    assert actual.device.type == "emu"
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.cpu(), expected.to(dtype), **tolerance)


def test_integer_histc_counts_tokens_per_expert_as_transformers_moe_does():
    # transformers.integrations.moe: `histc_input = expert_ids_g.float() if hidden.device.type in ("cpu", "mps")
    # else expert_ids_g.int()`, then histc(bins=E, min=0, max=E - 1) and cumsum(dtype=int32) as expert offsets.
    experts = 8
    torch.manual_seed(0)
    expert_ids = torch.randint(0, experts, (64, 2)).reshape(-1).sort().values
    histc_input = expert_ids.emu().int()
    tokens_per_expert = torch.histc(histc_input, bins=experts, min=0, max=experts - 1)
    offsets = torch.cumsum(tokens_per_expert, dim=0, dtype=torch.int32)
    assert tokens_per_expert.dtype == torch.int32
    assert tokens_per_expert.device.type == "emu"
    assert tokens_per_expert.cpu().tolist() == torch.bincount(expert_ids, minlength=experts).tolist()
    assert offsets.cpu().tolist() == torch.bincount(expert_ids, minlength=experts).cumsum(0).tolist()
    # torchtitan's router: int64 indices over [0, E] (the last expert's ids land in the last bin)
    counts = torch.histc(expert_ids.emu(), bins=experts, min=0, max=experts)
    assert counts.dtype == torch.int64
    assert counts.cpu().tolist() == torch.bincount(expert_ids, minlength=experts).tolist()


def test_integer_histc_follows_cudas_integer_arithmetic():
    x = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 10, -1], dtype=torch.int16).emu()
    # The bounds become integers (0 and 7); a bin is (x - min) * bins // (max - min), and max is in the last bin.
    assert torch.histc(x, bins=3, min=0.9, max=7.5).cpu().tolist() == [3, 2, 3]
    # min == max: the data's range, widened by one each side when the data is constant.
    assert torch.histc(torch.full((3,), 2, dtype=torch.uint8).emu(), bins=2).cpu().tolist() == [0, 3]
    out = torch.empty(0, dtype=torch.int16, device="emu")
    assert torch.histc(x, bins=2, min=0, max=7, out=out) is out
    assert out.cpu().tolist() == [4, 4]
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x, bins=2, min=5, max=1)
    # Neither CUDA nor the CPU computes it (aten's refusal is a RuntimeError before torch 2.2).
    with pytest.raises((NotImplementedError, RuntimeError), match="not implemented for 'Bool'"):
        torch.histc(torch.ones(3, dtype=torch.bool, device="emu"))
    torch.emu.synchronize()


def test_half_avg_pool3d_forward_and_backward():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6, 6).half()
    leaf = x.emu().requires_grad_()
    out = F.avg_pool3d(leaf, 2)
    close(out, F.avg_pool3d(x.float(), 2), torch.float16, rtol=2e-3, atol=2e-3)
    out.float().sum().backward()
    assert leaf.grad is not None
    close(leaf.grad, torch.full_like(x, 1 / 8, dtype=torch.float32), torch.float16)


def test_fft_in_half_and_complex_half():
    torch.manual_seed(0)
    x = torch.randn(4, 16).half()
    spectrum = torch.fft.rfft(x.emu())
    close(spectrum, torch.fft.rfft(x.float()), torch.complex32, rtol=2e-3, atol=2e-3)
    close(torch.fft.irfft(spectrum, n=16), x.float(), torch.float16, rtol=2e-3, atol=4e-3)
    z = as_complex32(torch.randn(8, dtype=torch.complex64))
    close(torch.fft.fft(z.emu()), torch.fft.fft(z.to(torch.complex64)), torch.complex32, rtol=2e-3, atol=4e-3)
    out = torch.empty(0, dtype=torch.complex32, device="emu")
    assert torch.fft.fft2(x.emu(), out=out) is out
    close(out, torch.fft.fft2(x.float()), torch.complex32, rtol=2e-3, atol=4e-2)
    with torch.inference_mode():
        close(torch.fft.ihfft(x.emu()), torch.fft.ihfft(x.float()), torch.complex32, rtol=2e-3, atol=2e-3)
    leaf = x.emu().requires_grad_()
    torch.fft.rfft(leaf).abs().float().sum().backward()
    reference = x.float().requires_grad_()
    torch.fft.rfft(reference).abs().sum().backward()
    assert leaf.grad is not None and reference.grad is not None
    close(leaf.grad, reference.grad, torch.float16, rtol=1e-2, atol=1e-2)
    with pytest.raises(RuntimeError, match="Unsupported dtype BFloat16"):  # CUDA has no BFloat16 FFT either
        torch.fft.rfft(x.bfloat16().emu())


def test_complex_half_math_has_cudas_result_dtypes():
    torch.manual_seed(0)
    z64 = torch.randn(5, 3, dtype=torch.complex64)
    z = as_complex32(z64).emu()
    wide = as_complex32(z64).to(torch.complex64)
    close(torch.exp(z), torch.exp(wide), torch.complex32, rtol=2e-3, atol=2e-3)
    close(torch.sinh(z), torch.sinh(wide), torch.complex32, rtol=2e-3, atol=2e-3)
    close(torch.abs(z), torch.abs(wide), torch.float16, rtol=2e-3, atol=2e-3)
    close(torch.angle(z), torch.angle(wide), torch.float16, rtol=2e-3, atol=2e-3)
    close(z / (z + 1), wide / (wide + 1), torch.complex32, rtol=2e-3, atol=2e-3)
    close(z.sum(0), wide.sum(0), torch.complex32, rtol=2e-3, atol=2e-3)
    close(torch.trace(z[:3]), torch.trace(wide[:3]), torch.complex32, rtol=2e-3, atol=2e-3)


def test_complex_half_in_place_and_out_arguments():
    z64 = torch.randn(4, dtype=torch.complex64)
    wide = as_complex32(z64).to(torch.complex64)
    native = as_complex32(z64).emu()
    assert native.exp_() is native  # a native kernel, in place
    close(native, torch.exp(wide), torch.complex32, rtol=2e-3, atol=2e-3)
    fallback = as_complex32(z64).emu()
    view = fallback[1:]
    assert view.sinh_() is view  # through the CPU fallback, in place on a view
    close(fallback[1:], torch.sinh(wide[1:]), torch.complex32, rtol=2e-3, atol=2e-3)
    close(fallback[:1], wide[:1], torch.complex32)
    out = torch.empty(0, dtype=torch.float16, device="emu")
    assert torch.angle(as_complex32(z64).emu(), out=out) is out  # out=, resized
    close(out, torch.angle(wide), torch.float16, rtol=2e-3, atol=2e-3)


def test_bool_and_complex_reductions_as_cuda():
    flags = torch.tensor([[True, False], [False, True]])
    assert torch.abs(flags.emu()).dtype == torch.bool
    assert torch.equal(torch.abs(flags.emu()).cpu(), flags)
    trace = torch.trace(flags.emu())
    assert trace.dtype == torch.int64 and trace.item() == 2
    close(F.softsign(flags.emu()), flags.float() / 2, torch.float32)
    nan = float("nan")
    values = torch.tensor([1 + 1j, complex(nan, 0), complex(0, nan), 2 - 1j], dtype=torch.complex64)
    close(torch.nansum(values.emu()), torch.tensor(3 + 0j), torch.complex64)
    close(torch.nanmean(values.emu()), torch.tensor(1.5 + 0j), torch.complex64)  # over the 2 without NaN


def test_half_batch_norm_saves_float_statistics_like_cuda():
    torch.manual_seed(0)
    x = torch.randn(6, 4).half()
    weight = torch.rand(4).half()
    bias = torch.rand(4).half()
    running_mean, running_var = torch.zeros(4).half().emu(), torch.ones(4).half().emu()
    leaf = x.emu().requires_grad_()
    out, save_mean, save_invstd = torch.native_batch_norm(
        leaf, weight.emu(), bias.emu(), running_mean, running_var, True, 0.1, 1e-5
    )
    meta = torch.native_batch_norm(x.to("meta"), weight.to("meta"), bias.to("meta"), None, None, True, 0.1, 1e-5)
    assert (
        [t.dtype for t in (out, save_mean, save_invstd)]
        == [t.dtype for t in meta]
        == [torch.float16] + [torch.float32] * 2
    )
    close(
        out,
        F.batch_norm(x.float(), None, None, weight.float(), bias.float(), training=True),
        torch.float16,
        rtol=2e-3,
        atol=2e-3,
    )
    close(running_mean, x.float().mean(0) * 0.1, torch.float16, rtol=2e-3, atol=2e-3)
    out.float().pow(2).sum().backward()
    reference = x.float().requires_grad_()
    F.batch_norm(reference, None, None, weight.float(), bias.float(), training=True).pow(2).sum().backward()
    assert leaf.grad is not None and reference.grad is not None
    close(leaf.grad, reference.grad, torch.float16, rtol=1e-2, atol=1e-2)


def test_a_dtype_no_kernel_takes_is_refused_in_the_callers_terms():
    half = torch.ones(3, dtype=torch.float16, device="emu")
    # The CPU kernel refuses Half and Float alike: the error names the caller's Half, not the widened Float.
    with pytest.raises((NotImplementedError, RuntimeError), match="not implemented for 'Half'"):
        torch.gcd(half, half)
    torch.emu.synchronize()


def test_a_widened_op_runs_through_the_fallback_once():
    z = as_complex32(torch.randn(4, dtype=torch.complex64)).emu()
    before = torch_emu.fallback_ops().get("aten::cosh.out", 0)
    torch.cosh(z)
    torch.cosh(z)  # the second call goes widened at once
    assert torch_emu.fallback_ops().get("aten::cosh.out", 0) - before == 2
