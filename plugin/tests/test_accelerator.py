"""torch.accelerator on emu: devices and streams (torch >= 2.6), memory (>= 2.9), device capability (>= 2.10).

The memory functions reach the plugin's caching allocator through c10::getDeviceAllocator, which only
accepts a c10::DeviceAllocator; the figures they report are checked against the allocator's rounding
and the driver's own free-memory count, not only against torch.emu's view of the same allocator.
"""

import multiprocessing

import pytest
import torch
from smoke_gates import requires_torch

import torch_emu

# The caching allocator's rounding: 512-byte steps under 1 MiB (small pool), 2 MiB steps from 1 MiB (large pool).
SMALL, SMALL_ROUNDED = 1000, 1024
LARGE, LARGE_ROUNDED = (3 << 20) + 1, 4 << 20

memory_api = requires_torch(">=2.9", "torch.accelerator memory API")


def _accelerator(name: str, old_name: str):
    """torch 2.6 spells the device-index functions *_idx; 2.7 renamed them *_index."""
    return getattr(torch.accelerator, name, None) or getattr(torch.accelerator, old_name)


# ---- devices and streams ----
@pytest.mark.feature("accelerator_device")
@requires_torch(">=2.6", "torch.accelerator")
def test_accelerator_is_emu_with_its_devices():
    assert torch.accelerator.current_accelerator() == torch.device("emu")
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == torch.emu.device_count() == 2


@pytest.mark.feature("accelerator_device")
@requires_torch(">=2.6", "torch.accelerator")
def test_accelerator_current_device_index_is_emus():
    current = _accelerator("current_device_index", "current_device_idx")
    set_index = _accelerator("set_device_index", "set_device_idx")
    assert current() == torch.emu.current_device() == 0
    set_index(1)
    assert current() == torch.emu.current_device() == 1
    assert torch.empty(1, device="emu").device == torch.device("emu:1")
    set_index("emu:0")
    assert torch.emu.current_device() == 0


@pytest.mark.feature("accelerator_device")
@requires_torch(">=2.6", "torch.accelerator")
def test_accelerator_current_stream_is_emus():
    def ident(s: torch.Stream) -> tuple:
        return (s.device, s.stream_id)

    assert ident(torch.accelerator.current_stream()) == ident(torch.emu.default_stream())
    side = torch.emu.Stream()
    with torch.emu.stream(side):
        assert ident(torch.accelerator.current_stream()) == ident(side)
    other = torch.emu.Stream("emu:1")
    torch.accelerator.set_stream(other)
    try:
        assert ident(torch.emu.current_stream(1)) == ident(other)
        assert ident(torch.accelerator.current_stream(1)) == ident(other)
        assert torch.emu.current_device() == 1  # documented: set_stream makes the stream's device current
    finally:
        torch.emu.set_stream(torch.emu.default_stream(1))
        torch.emu.set_device(0)


@pytest.mark.feature("accelerator_device")
@requires_torch(">=2.6", "torch.accelerator")
def test_accelerator_synchronize_waits_for_every_stream():
    side = torch.emu.Stream()
    with torch.emu.stream(side):
        a = torch.randn(256, 256, device="emu")
        for _ in range(30):
            a = torch.tanh(a @ a)
    torch.accelerator.synchronize()
    assert side.query()
    assert torch.isfinite(a.cpu()).all()


# ---- memory ----
@pytest.mark.feature("accelerator_memory")
@memory_api
def test_memory_allocated_grows_by_the_rounded_size_in_its_pool():
    acc = torch.accelerator
    before = acc.memory_stats()
    base = acc.memory_allocated()
    assert base == before["allocated_bytes.all.current"] == torch.emu.memory_allocated()
    small = torch.empty(SMALL, dtype=torch.uint8, device="emu")
    assert acc.memory_allocated() == base + SMALL_ROUNDED
    large = torch.empty(LARGE, dtype=torch.uint8, device="emu")
    assert acc.memory_allocated() == base + SMALL_ROUNDED + LARGE_ROUNDED
    now = acc.memory_stats()
    grown = {key: now[key] - before[key] for key in now if key.endswith(".current")}
    assert grown["allocated_bytes.small_pool.current"] == SMALL_ROUNDED
    assert grown["allocated_bytes.large_pool.current"] == LARGE_ROUNDED
    assert grown["requested_bytes.all.current"] == SMALL + LARGE
    assert grown["allocation.all.current"] == grown["active.all.current"] == 2
    assert grown["active_bytes.all.current"] == SMALL_ROUNDED + LARGE_ROUNDED
    assert acc.memory_reserved() >= acc.memory_allocated()
    del small, large
    assert acc.memory_allocated() == base
    assert acc.memory_stats()["active_bytes.all.current"] == before["active_bytes.all.current"]


@pytest.mark.feature("accelerator_memory")
@memory_api
def test_peak_follows_tensors_and_resets():
    acc = torch.accelerator
    acc.reset_peak_memory_stats()
    base = acc.memory_allocated()
    assert acc.max_memory_allocated() == base
    x = torch.empty(LARGE, dtype=torch.uint8, device="emu")
    del x
    assert acc.memory_allocated() == base
    assert acc.max_memory_allocated() == base + LARGE_ROUNDED == torch.emu.max_memory_allocated()
    assert acc.max_memory_reserved() >= base + LARGE_ROUNDED
    acc.reset_peak_memory_stats()
    assert acc.max_memory_allocated() == base
    assert acc.max_memory_reserved() == acc.memory_reserved()


@pytest.mark.feature("accelerator_memory")
@memory_api
def test_empty_cache_returns_reserved_memory_to_the_driver():
    acc = torch.accelerator
    x = torch.empty(8 << 20, dtype=torch.uint8, device="emu")
    del x
    reserved = acc.memory_reserved()
    assert reserved - acc.memory_allocated() >= 8 << 20  # the block is cached, not given back
    driver_free, _ = torch.emu.mem_get_info()
    frees = acc.memory_stats()["num_device_free"]
    acc.empty_cache()
    assert acc.memory_reserved() == acc.memory_allocated()
    released = reserved - acc.memory_reserved()
    assert torch.emu.mem_get_info()[0] - driver_free == released  # the driver has exactly those bytes back
    stats = acc.memory_stats()
    assert stats["num_device_free"] > frees
    assert stats["segment.all.current"] == torch.emu.memory_stats()["segment.all.current"]


@pytest.mark.feature("accelerator_memory")
@memory_api
def test_accumulated_counts_reset_and_cache_hits_skip_the_driver():
    acc = torch.accelerator
    acc.empty_cache()
    acc.reset_accumulated_memory_stats()
    stats = acc.memory_stats()
    assert stats["allocation.all.allocated"] == stats["num_device_alloc"] == stats["allocated_bytes.all.freed"] == 0
    x = torch.empty(SMALL, dtype=torch.uint8, device="emu")
    del x
    y = torch.empty(SMALL, dtype=torch.uint8, device="emu")  # the same block, from the cache
    stats = acc.memory_stats()
    assert stats["allocation.all.allocated"] == 2 and stats["allocation.all.freed"] == 1
    assert stats["allocated_bytes.small_pool.allocated"] == 2 * SMALL_ROUNDED
    assert stats["num_device_alloc"] == stats["segment.all.allocated"] == 1
    del y


@pytest.mark.feature("accelerator_memory")
@memory_api
def test_out_of_memory_counts_the_retry_and_the_oom():
    acc = torch.accelerator
    x = torch.empty(LARGE, dtype=torch.uint8, device="emu")
    del x  # cached: the failing allocation empties the cache and retries once
    before = acc.memory_stats()
    with pytest.raises(torch.OutOfMemoryError, match="emu out of memory"):
        torch.empty(6 << 30, dtype=torch.uint8, device="emu")
    after = acc.memory_stats()
    assert after["num_alloc_retries"] == before["num_alloc_retries"] + 1
    assert after["num_ooms"] == before["num_ooms"] + 1
    assert acc.memory_reserved() == acc.memory_allocated()  # the retry gave the cache back


@pytest.mark.feature("accelerator_memory")
@memory_api
def test_memory_functions_per_device_and_agree_with_torch_emu():
    acc = torch.accelerator
    base0, base1 = acc.memory_allocated(0), acc.memory_allocated("emu:1")
    x = torch.empty(SMALL, dtype=torch.uint8, device="emu:1")
    assert acc.memory_allocated(torch.device("emu", 1)) == base1 + SMALL_ROUNDED
    assert acc.memory_allocated(0) == base0
    emu_stats = torch.emu.memory_stats(1)
    acc_stats = acc.memory_stats(1)
    # torch.emu.memory_stats keeps torch.cuda's key set; every key torch.accelerator reports agrees with it.
    shared = set(acc_stats) & set(emu_stats)
    assert {"allocated_bytes.all.current", "reserved_bytes.large_pool.peak", "num_device_alloc"} <= shared
    assert {key: acc_stats[key] for key in shared} == {key: emu_stats[key] for key in shared}
    del x


@pytest.mark.feature("accelerator_memory")
@memory_api
def test_memory_functions_reject_a_device_that_does_not_exist():
    with pytest.raises(RuntimeError, match=r"The device index is out of range. It must be in \[0, 2\), but got 7"):
        torch.accelerator.memory_allocated(7)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.accelerator.reset_peak_memory_stats(-3)
    assert torch.accelerator.memory_allocated(1) >= 0  # the allocator still answers


@pytest.mark.feature("accelerator_memory")
@memory_api
def test_get_memory_info_is_the_drivers():
    if not hasattr(torch.accelerator, "get_memory_info"):
        pytest.skip(f"not available: torch.accelerator.get_memory_info is not in torch {torch.__version__}")
    x = torch.empty(LARGE, dtype=torch.uint8, device="emu:1")
    assert torch.accelerator.get_memory_info(1) == torch.emu.mem_get_info(1)
    free, total = torch.accelerator.get_memory_info("emu:0")
    assert total == torch.emu.get_device_properties(0).total_memory and 0 < free <= total
    del x


def _accelerator_memory_in_child(queue) -> None:  # type: ignore[no-untyped-def]
    try:
        stats = dict(torch.accelerator.memory_stats())
        torch.accelerator.empty_cache()
        queue.put(("ok", stats))
    except Exception as exc:  # the parent reports whatever the child met
        queue.put(("raised", repr(exc)))


@pytest.mark.feature("accelerator_memory")
@memory_api
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Python >= 3.12 warns about forking a threaded process
def test_forked_child_sees_an_uninitialized_allocator():
    """In a child forked after emu started, the allocator reports 'not initialized': torch.accelerator's
    memory_stats is empty and empty_cache does nothing, instead of freeing through a driver whose workers are gone."""
    x = torch.empty(SMALL, dtype=torch.uint8, device="emu")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_accelerator_memory_in_child, args=(queue,))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        child.join(10)
        pytest.fail("the forked child hung for 60 s")
    assert child.exitcode == 0
    assert queue.get(timeout=10) == ("ok", {})
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] >= SMALL_ROUNDED  # the parent's are intact
    del x


# ---- capability ----
@pytest.mark.feature("device")
def test_device_capability_is_the_drivers():
    props = torch.emu.get_device_properties(0)
    assert torch.emu.get_device_capability() == (props.major, props.minor) == torch_emu.driver_api_version()


@pytest.mark.feature("accelerator_capability")
@requires_torch(">=2.10", "torch.accelerator.get_device_capability")
def test_accelerator_capability_lists_the_dtypes_emu_holds_and_converts():
    capability = torch.accelerator.get_device_capability("emu:1")
    dtypes = capability["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.complex64, torch.bool, torch.uint64} <= dtypes
    assert capability == torch.accelerator.get_device_capability(0)
    with pytest.raises(RuntimeError, match=r"The device index is out of range. It must be in \[0, 2\), but got 5"):
        torch.accelerator.get_device_capability(5)

    def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
        return a.dtype == b.dtype and torch.equal(a.cpu().view(torch.uint8), b.view(torch.uint8))

    for dtype in sorted(dtypes, key=str):
        host = torch.arange(-2, 6).to(dtype)
        on_emu = host.to("emu")
        assert same_bytes(on_emu, host), dtype  # held as is
        # Converted on emu exactly as the CPU converts (both ways, through a wide and a narrow type).
        others = (
            (torch.complex128, torch.complex64) if dtype.is_complex else (torch.float64, torch.float32, torch.int64)
        )
        for other in others:
            assert same_bytes(on_emu.to(other), host.to(other)), (dtype, other)
            assert same_bytes(on_emu.to(other).to(dtype), host.to(other).to(dtype)), (other, dtype)
    # What it leaves out is not reached by a conversion: a quantized tensor is made by quantize_per_tensor and its
    # kin (test_quantized.py), and .to(torch.qint8) fails on the CPU as on emu.
    assert torch.qint8 not in dtypes
    for device in ("cpu", "emu"):
        with pytest.raises(RuntimeError, match="not supported on quantized tensors"):
            torch.arange(4.0, device=device).to(torch.qint8)
