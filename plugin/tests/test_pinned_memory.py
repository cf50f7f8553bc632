"""Pinned host memory: the driver's page-locked allocations behind Tensor.pin_memory(), is_pinned(), DataLoader
pinning, and non_blocking copies that are queued on the current emu stream (driver API 2.2, torch >= 2.5)."""

import pytest
import torch
from packaging.specifiers import SpecifierSet
from smoke_gates import TORCH, requires_pinned_memory

pytestmark = [pytest.mark.feature("pinned_memory"), requires_pinned_memory()]

# From torch 2.9, pin_memory() and is_pinned() act for the current accelerator (emu, once registered) and their device
# argument is deprecated, as is DataLoader's pin_memory_device; before, they default to CUDA and take the device.
FOR_ACCELERATOR = TORCH in SpecifierSet(">=2.9")


def pin(t: torch.Tensor) -> torch.Tensor:
    return t.pin_memory() if FOR_ACCELERATOR else t.pin_memory("emu")


def is_pinned(t: torch.Tensor) -> bool:
    return t.is_pinned() if FOR_ACCELERATOR else t.is_pinned("emu")


def keep_stream_busy() -> torch.Tensor:
    """Queues a long chain of kernels on the current stream; the caller checks with a query that it is still running,
    so nothing here depends on timings."""
    a = torch.randn(640, 640, device="emu")
    for _ in range(40):
        a = a @ a / 640
    return a


def test_pin_memory_is_pinned_and_keeps_the_data():
    x = torch.randn(1000)
    assert not is_pinned(x)
    p = pin(x)
    assert is_pinned(p) and not p.is_emu and torch.equal(p, x)
    assert is_pinned(p[10:])  # a view into the block is pinned memory too
    assert pin(p).data_ptr() == p.data_ptr()  # already pinned: returned as is
    assert torch.emu.driver_version() >= 2002
    assert torch.emu.host_memory_stats()["allocated_bytes.current"] >= p.nbytes


@pytest.mark.skipif(TORCH not in SpecifierSet(">=2.13"), reason="not available: checked from torch 2.13 on")
def test_factories_with_pin_memory_allocate_through_emu():
    t = torch.empty(100, pin_memory=True)
    assert t.is_pinned() and torch.zeros(3, pin_memory=True).is_pinned()


def test_non_blocking_copy_from_pinned_memory_is_queued_on_the_stream():
    n = 1 << 20
    host = pin(torch.arange(n, dtype=torch.float32))
    torch.emu.synchronize()
    stream = torch.emu.current_stream()
    busy = keep_stream_busy()
    dev = host.to("emu", non_blocking=True)
    copied = torch.emu.Event()
    copied.record(stream)
    # The call returned while the kernels queued before the copy are still running: the copy waits on the stream.
    assert not stream.query() and not copied.query(), "the stream finished too early for the test to mean anything"
    copied.synchronize()
    assert torch.equal(dev.cpu(), host)
    del busy


def test_non_blocking_copy_into_pinned_memory_is_queued_on_the_stream():
    dev = torch.arange(4096.0, device="emu")
    torch.emu.synchronize()
    stream = torch.emu.current_stream()
    busy = keep_stream_busy()
    back = dev.to("cpu", non_blocking=True)  # torch makes the destination pinned for a non_blocking device->host copy
    assert is_pinned(back)
    out = pin(torch.zeros(4096))
    out.copy_(dev * 2, non_blocking=True)
    done = torch.emu.Event()
    done.record(stream)
    assert not done.query(), "the stream finished too early for the test to mean anything"
    done.synchronize()
    assert torch.equal(back, torch.arange(4096.0)) and torch.equal(out, torch.arange(4096.0) * 2)
    del busy


def test_non_blocking_copies_with_pageable_memory_stay_correct():
    torch.emu.synchronize()
    pageable = torch.arange(10_000.0)
    busy = keep_stream_busy()
    dev = pageable.to("emu", non_blocking=True)
    # Staged in a pinned block and queued: the call did not wait for the stream.
    assert not torch.emu.current_stream().query(), "the stream finished too early for the test to mean anything"
    pageable.fill_(-1)  # pageable memory is staged at the call: changing it afterwards changes nothing
    back = torch.empty(10_000)
    back.copy_(dev, non_blocking=True)  # into pageable memory: complete when the call returns
    assert torch.equal(back, torch.arange(10_000.0))
    del busy


def test_a_freed_pinned_block_is_reused_only_after_the_stream_passed_it():
    n = 3 << 18  # a size class of its own (1 MiB of float32 rounds to 4 MiB with the others)
    torch.emu.synchronize()
    torch.emu.host_empty_cache()
    host = pin(torch.ones(n))
    busy = keep_stream_busy()
    dev = host.to("emu", non_blocking=True)
    old = host.data_ptr()
    del host
    again = pin(torch.empty(n))  # while the stream may still read the freed block
    assert not torch.emu.current_stream().query(), "the stream finished too early for the test to mean anything"
    assert again.data_ptr() != old
    torch.emu.synchronize()
    assert dev.sum().item() == n
    allocs = torch.emu.host_memory_stats()["num_host_alloc"]
    reused = pin(torch.empty(n))  # the stream has passed it: back in the cache, no driver call
    assert reused.data_ptr() == old and torch.emu.host_memory_stats()["num_host_alloc"] == allocs
    del busy


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "forked-workers"])
def test_dataloader_pins_batches_for_emu(workers):
    torch.ones(1, device="emu")  # the runtime has started: forked workers must not touch it, the pin thread does
    data = torch.utils.data.TensorDataset(torch.arange(64.0).reshape(16, 4), torch.arange(16))
    device = {} if FOR_ACCELERATOR else {"pin_memory_device": "emu"}
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True, num_workers=workers, **device)
    seen = 0
    for features, labels in loader:
        assert is_pinned(features) and is_pinned(labels)
        on_emu = features.to("emu", non_blocking=True)
        assert torch.equal(on_emu.cpu(), features)
        seen += labels.numel()
    assert seen == 16


@pytest.mark.feature("host_allocator")
@pytest.mark.skipif(
    not hasattr(getattr(torch, "accelerator", None), "empty_host_cache"),
    reason=f"not available: torch {TORCH} has no torch.accelerator.empty_host_cache",
)
def test_torch_accelerator_empties_emus_pinned_cache():
    """The pinned cache is torch's host allocator for emu: torch.accelerator's call reaches it (it crashed before)."""
    torch.emu.synchronize()
    torch.emu.host_empty_cache()
    torch.emu.host_reset_accumulated_memory_stats()
    block = pin(torch.ones(1 << 16))
    stats = torch.emu.host_memory_stats()
    assert stats["num_host_alloc"] == 1 and stats["active_requests.current"] == 1
    del block
    assert torch.emu.host_memory_stats()["cached_bytes.current"] >= (1 << 18)
    torch.accelerator.empty_host_cache()
    stats = torch.emu.host_memory_stats()
    assert stats["cached_bytes.current"] == 0 and stats["num_host_free"] == 1 and stats["segment.current"] == 0


def test_host_peak_and_totals_reset():
    torch.emu.synchronize()
    torch.emu.host_empty_cache()
    big = pin(torch.ones(1 << 18))
    del big
    torch.emu.host_reset_peak_memory_stats()
    torch.emu.host_reset_accumulated_memory_stats()
    stats = torch.emu.host_memory_stats()
    assert stats["allocated_bytes.peak"] == stats["allocated_bytes.current"]
    assert stats["num_host_alloc"] == stats["allocated_bytes.allocated"] == 0
    small = pin(torch.ones(16))
    stats = torch.emu.host_memory_stats()
    assert stats["allocated_bytes.allocated"] == 4096 and stats["allocated_bytes.peak"] >= 4096
    del small
