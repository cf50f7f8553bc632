"""The caching allocator: statistics, reuse, empty_cache, out-of-memory."""

import pytest
import torch

pytestmark = pytest.mark.feature("memory")


def test_allocated_and_peak_follow_tensors():
    torch.emu.empty_cache()
    base = torch.emu.memory_allocated()
    torch.emu.reset_peak_memory_stats()
    x = torch.empty(1 << 20, dtype=torch.uint8, device="emu")
    assert torch.emu.memory_allocated() - base >= 1 << 20
    peak = torch.emu.max_memory_allocated()
    del x
    assert torch.emu.memory_allocated() == base
    assert torch.emu.max_memory_allocated() == peak >= base + (1 << 20)
    assert torch.emu.memory_reserved() >= peak


def test_freed_blocks_are_reused_then_returned():
    x = torch.empty(4 << 20, dtype=torch.uint8, device="emu")
    ptr = x.data_ptr()
    del x
    y = torch.empty(4 << 20, dtype=torch.uint8, device="emu")
    assert y.data_ptr() == ptr  # served from the cache, no driver call
    del y
    reserved = torch.emu.memory_reserved()
    torch.emu.empty_cache()
    assert torch.emu.memory_reserved() <= reserved - (4 << 20)


def test_devices_have_separate_statistics():
    before = torch.emu.memory_allocated(1)
    x = torch.empty(1024, device="emu:1")
    assert torch.emu.memory_allocated(1) > before
    assert torch.emu.memory_stats(1)["allocated_bytes.all.current"] == torch.emu.memory_allocated(1)
    del x


# torch.OutOfMemoryError arrives in 2.4; before, c10::OutOfMemoryError surfaces as torch.cuda.OutOfMemoryError.
OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def test_out_of_memory_is_an_out_of_memory_error():
    with pytest.raises(OUT_OF_MEMORY, match=r"emu out of memory: tried to allocate 6442450944 bytes on emu:0"):
        torch.empty(6 << 30, dtype=torch.uint8, device="emu")
    # The device still works afterwards.
    assert torch.ones(2, device="emu").sum().item() == 2
