"""scaled_dot_product_attention on emu: the math backend, reported as such, honouring the caller's backend choice;
the fused entry points torch keeps for PrivateUse1 backends (SDPBackend.OVERRIDEABLE) refuse and name the backend."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch
from smoke_gates import requires_torch

# The deep tier (smoke.tiers: once per build): results against the CPU reference depend on the wheel and torch alone.
pytestmark = [pytest.mark.feature("attention"), pytest.mark.deep]

MATH = 0  # SDPBackend.MATH in every release


@contextlib.contextmanager
def _math_disabled() -> Iterator[None]:
    """Only the fused backends enabled: the global flags that torch.nn.attention.sdpa_kernel sets (every release)."""
    flags = torch.backends.cuda
    saved = (flags.math_sdp_enabled(), flags.flash_sdp_enabled(), flags.mem_efficient_sdp_enabled())
    flags.enable_math_sdp(False)
    flags.enable_flash_sdp(True)
    flags.enable_mem_efficient_sdp(True)
    try:
        yield
    finally:
        flags.enable_math_sdp(saved[0])
        flags.enable_flash_sdp(saved[1])
        flags.enable_mem_efficient_sdp(saved[2])


def _qkv(requires_grad: bool = False) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return tuple(torch.randn(2, 3, 16, 8, requires_grad=requires_grad) for _ in range(3))


def test_fused_sdp_choice_reports_the_math_backend():
    q, k, v = (t.emu() for t in _qkv())
    assert torch._fused_sdp_choice(q, k, v) == MATH  # the CPU's choice (flash) came back through the fallback


@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_matches_cpu_forward_and_backward(is_causal):  # type: ignore[no-untyped-def]
    attention = torch.nn.functional.scaled_dot_product_attention
    cpu = _qkv(requires_grad=True)
    emu = tuple(t.detach().emu().requires_grad_() for t in cpu)
    out_cpu, out_emu = attention(*cpu, is_causal=is_causal), attention(*emu, is_causal=is_causal)
    torch.testing.assert_close(out_emu.cpu(), out_cpu, rtol=1e-5, atol=1e-5)
    out_cpu.sum().backward()
    out_emu.sum().backward()
    for c, e in zip(cpu, emu):
        torch.testing.assert_close(e.grad.cpu(), c.grad, rtol=1e-5, atol=1e-5)


@requires_torch(">=2.5", "a PrivateUse1 backend's say in scaled_dot_product_attention's choice")
def test_disabled_math_backend_is_refused_with_its_name():
    q, k, v = (t.emu() for t in _qkv())
    with _math_disabled():
        with pytest.raises(RuntimeError, match=r"math backend only \(SDPBackend.MATH\), which is disabled"):
            torch.nn.functional.scaled_dot_product_attention(q, k, v)
        with pytest.raises(RuntimeError, match=r"SDPBackend\.MATH"):
            torch._fused_sdp_choice(q, k, v)
    assert torch.nn.functional.scaled_dot_product_attention(q, k, v).shape == q.shape


@requires_torch(">=2.5", "torch.ops.aten._scaled_dot_product_fused_attention_overrideable")
def test_fused_entry_points_refuse_and_name_the_backend():
    q, k, v = (t.emu() for t in _qkv())
    with pytest.raises(NotImplementedError, match=r"emu has no fused .* math backend \(SDPBackend.MATH\)"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v)
    empty = torch.empty(0, device="emu")
    with pytest.raises(NotImplementedError, match=r"SDPBackend\.MATH"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
            q, q, k, v, empty, [True, True, True, False], q, empty, empty, empty, 16, 16, 0.0, False, empty, empty
        )
