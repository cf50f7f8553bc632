"""torch features beyond kernels: autoload, autocast, profiler, torch.compile; each records if this torch has it."""

import os
import subprocess
import sys

import pytest
import torch
from smoke_gates import dynamo_unavailable, requires_torch

import torch_emu


@pytest.mark.feature("autoload")
@requires_torch(">=2.5")
def test_import_torch_alone_brings_up_emu():
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    code = "import torch; print(torch.ones(1, device='emu').device)"
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "emu:0"


@pytest.mark.feature("profiler")
def test_profiler_sees_emu_ops():
    x = torch.randn(64, 64, device="emu")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        (x @ x).sum().item()
    names = {e.key for e in prof.key_averages()}
    assert "aten::mm" in names and "aten::sum" in names


@pytest.mark.feature("autocast")
@requires_torch(">=2.4")  # before 2.4 torch.autocast wants the device module to drive autocast state itself
def test_autocast_runs_matmul_in_bfloat16():
    is_available = getattr(torch.amp, "is_autocast_available", None)  # torch >= 2.4
    if is_available is not None and not is_available("emu"):
        pytest.skip("not available: this torch has no autocast for PrivateUse1 devices")
    a = torch.randn(8, 8, device="emu")
    with torch.autocast(device_type="emu", dtype=torch.bfloat16):
        out = torch.mm(a, a)
    assert out.dtype == torch.bfloat16


@pytest.mark.feature("autocast_policy")
@requires_torch(">=2.4")  # the per-policy op lists (AT_FORALL_* in ATen/autocast_mode.h) that emu registers
def test_autocast_follows_the_cuda_policy():
    is_available = getattr(torch.amp, "is_autocast_available", None)
    if is_available is not None and not is_available("emu"):
        pytest.skip("not available: this torch has no autocast for PrivateUse1 devices")
    a = torch.rand(4, 3, 8, 8, device="emu")
    w = torch.rand(5, 3, 3, 3, device="emu")
    half = torch.rand(6, 6, device="emu").bfloat16()
    with torch.autocast(device_type="emu", dtype=torch.bfloat16):
        assert torch.nn.functional.conv2d(a, w).dtype == torch.bfloat16  # lower precision
        lstm_out = torch.nn.LSTM(8, 4).to("emu")(a[0])[0]
        assert lstm_out.dtype == torch.bfloat16
        assert torch.exp(half).dtype == torch.float32  # fp32 list
        assert torch.log_softmax(half, 1).dtype == torch.float32
        assert torch.nn.functional.mse_loss(half, half).dtype == torch.float32
        assert torch.sum(half).dtype == torch.float32  # fp32_set_opt_dtype
        full = torch.rand(6, 6, device="emu")
        assert torch.addcmul(full, half, full).dtype == torch.float32  # promote to the widest
        with pytest.raises(RuntimeError, match="unsafe to autocast"):  # banned
            torch.nn.functional.binary_cross_entropy(torch.rand(4, device="emu"), torch.rand(4, device="emu"))
        assert torch.nn.functional.binary_cross_entropy_with_logits(half[0], half[1]).dtype == torch.float32
    a.sum().item()


@pytest.mark.feature("compile")
def test_torch_compile_with_aot_eager():
    reason = dynamo_unavailable()
    if reason is not None:
        pytest.skip(reason)

    def f(x, y):
        return torch.relu(x @ y + 1).sum(0)

    compiled = torch.compile(f, backend="aot_eager")
    x, y = torch.randn(8, 8, device="emu"), torch.randn(8, 8, device="emu")
    torch.testing.assert_close(compiled(x, y).cpu(), f(x, y).cpu())


@pytest.mark.feature("fallback_listing")
def test_fallback_listing_api():
    torch_emu.reset_fallback_ops()
    torch.cumprod(torch.ones(3, device="emu"), 0).cpu()
    assert any(op.startswith("aten::cumprod") for op in torch_emu.fallback_ops())
    torch_emu.reset_fallback_ops()
    assert torch_emu.fallback_ops() == {}
