"""The profiler with emu as its device: every event has a sane (non-negative, finite) duration."""

import math

import pytest
import torch

pytestmark = pytest.mark.feature("profiler_device_time")


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


def _device_memory(event) -> int:
    """An event's device bytes: device_memory_usage from torch 2.4, privateuse1_memory_usage before."""
    name = "device_memory_usage" if hasattr(event, "device_memory_usage") else "privateuse1_memory_usage"
    return getattr(event, name)


@pytest.mark.feature("profiler_memory")
def test_profile_memory_counts_emu_allocations_and_frees():
    """The caching allocator reports to the profiler: profile_memory showed 0 device bytes for emu before."""
    torch.emu.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        kept = torch.empty(1 << 18, device="emu")  # 1 MiB, the large pool's 2 MiB rounding
        freed = torch.empty(1000, device="emu")  # 4000 bytes, rounded to 4096
        del freed
    empties = [_device_memory(e) for e in prof.events() if e.name == "aten::empty"]
    # the block sizes: 2 MiB, and at least 4096 bytes (a larger cached block may serve the small tensor)
    assert empties[0] == 2 << 20 and empties[1] >= 4096 and len(empties) == 2, empties
    frees = [_device_memory(e) for e in prof.events() if e.name == "[memory]"]
    assert frees == [-empties[1]], frees  # the free, outside any op
    assert all(e.cpu_memory_usage == 0 for e in prof.events() if e.name == "aten::empty")  # counted as device memory
    assert kept.numel() == 1 << 18
