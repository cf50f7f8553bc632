"""The profiler with emu as its device: every event has a sane (non-negative, finite) duration."""

import math

import pytest
import torch

pytestmark = pytest.mark.feature("profiler device time")


def test_profiler_use_device_emu_gives_non_negative_durations():
    x = torch.randn(128, 128, device="emu")
    try:
        profile = torch.autograd.profiler.profile(use_device="emu")
    except (TypeError, ValueError, AssertionError) as exc:  # releases whose profiler takes no PrivateUse1 device
        pytest.skip(f"not available: this torch's profiler has no use_device='emu' ({exc})")
    with profile as prof:
        for _ in range(3):
            (x @ x).relu().sum().item()
    events = prof.function_events
    assert any(e.name == "aten::mm" for e in events)
    for e in events:
        elapsed = e.time_range.elapsed_us()
        assert math.isfinite(elapsed) and elapsed >= 0, (e.name, elapsed)
        device_time = getattr(e, "device_time_total", getattr(e, "self_device_time_total", 0))
        assert device_time >= 0, (e.name, device_time)
    for row in prof.key_averages():
        assert row.cpu_time_total >= 0, (row.key, row.cpu_time_total)
