"""Streams and events: asynchronous, in-order queues on driver API 2.x; synchronous on 1.x."""

import gc
import time

import pytest
import torch
from packaging.specifiers import SpecifierSet
from smoke_gates import DRIVER_MAJOR, TORCH, requires_driver, requires_torch

import torch_emu


@pytest.mark.feature("streams")
def test_stream_objects_and_context():
    s = torch.emu.Stream()
    assert s.device_index == 0 and s != torch.emu.default_stream()
    assert torch.emu.current_stream() == torch.emu.default_stream()
    with torch.emu.stream(s):
        assert torch.emu.current_stream() == s
        y = torch.ones(1000, device="emu") * 2
    s.synchronize()
    assert s.query()
    assert torch.emu.current_stream() == torch.emu.default_stream()
    assert y.sum().item() == 2000


@pytest.mark.feature("streams")
def test_stream_on_other_device():
    s = torch.emu.Stream("emu:1")
    with torch.emu.stream(s):
        assert torch.emu.current_device() == 1
        x = torch.arange(10.0, device="emu")
    assert x.device.index == 1 and torch.emu.current_device() == 0
    s.synchronize()
    assert x.sum().item() == 45


@pytest.mark.feature("async_streams")
@requires_driver(2, "asynchronous streams")
def test_work_runs_asynchronously_to_the_caller():
    assert torch_emu.features()["async_streams"]
    a = torch.randn(768, 768, device="emu")
    torch.emu.synchronize()
    s = torch.emu.current_stream()
    start = time.perf_counter()
    for _ in range(10):
        a = a @ a / 768
    queued = time.perf_counter() - start
    pending = not s.query()
    s.synchronize()
    total = time.perf_counter() - start
    assert pending, "work was already done when the calls returned"
    assert queued < total


@pytest.mark.feature("async_streams")
@requires_driver(2, "asynchronous streams")
def test_wait_stream_orders_work_across_streams():
    producer, consumer = torch.emu.Stream(), torch.emu.Stream()
    with torch.emu.stream(producer):
        x = torch.randn(512, 512, device="emu")
        for _ in range(5):
            x = x @ x / 512
        expected_sum = None
    consumer.wait_stream(producer)
    with torch.emu.stream(consumer):
        y = x * 2
    consumer.synchronize()
    producer.synchronize()
    expected_sum = (x.cpu() * 2).sum().item()
    assert y.sum().item() == pytest.approx(expected_sum)


@pytest.mark.feature("events")
def test_events_record_query_synchronize():
    e = torch.emu.Event()
    torch.ones(100, device="emu").sum()
    e.record()
    e.synchronize()
    assert e.query()


@pytest.mark.feature("events")
def test_an_event_lives_as_long_as_its_python_object():
    """torch.emu.Event holds a handle of the runtime's event table; the last reference frees the driver event."""
    e = torch.emu.Event()
    assert repr(e) == "<torch.emu.Event recorded=False>"
    e.record()
    assert repr(e) == "<torch.emu.Event recorded=True>"
    handle = e._handle
    assert torch.ops.torch_emu.event_query(handle) in (True, False)
    del e
    gc.collect()
    with pytest.raises(RuntimeError, match=f"emu event handle {handle} names no live event"):
        torch.ops.torch_emu.event_query(handle)
    torch.ops.torch_emu.event_destroy(handle)  # destroying twice is harmless


@pytest.mark.feature("event_timing")
@requires_driver(2, "event timing")
def test_event_elapsed_time():
    start, end = torch.emu.Event(enable_timing=True), torch.emu.Event(enable_timing=True)
    a = torch.randn(512, 512, device="emu")
    start.record()
    for _ in range(5):
        a = a @ a
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0


@pytest.mark.skipif(DRIVER_MAJOR >= 2, reason="checks the driver 1.x build")
@pytest.mark.feature("sync_driver_paths")
def test_driver_1_is_synchronous_and_says_timing_is_missing():
    assert not torch_emu.features()["async_streams"]
    s = torch.emu.current_stream()
    a = torch.randn(256, 256, device="emu")
    a = a @ a
    assert s.query()
    start, end = torch.emu.Event(enable_timing=True), torch.emu.Event(enable_timing=True)
    start.record()
    end.record()
    with pytest.raises(RuntimeError, match=r"event timing needs driver API 2.x"):
        start.elapsed_time(end)


@pytest.mark.feature("streams")
def test_generic_torch_stream_and_event_use_the_guard():
    if not hasattr(torch, "Stream") or not hasattr(torch, "Event"):
        pytest.skip("not available: torch.Stream/torch.Event need a newer torch")
    s = torch.Stream(device="emu")
    e = torch.Event(device="emu")
    with torch.emu.stream(torch.emu.Stream(stream_id=s.stream_id, device_index=s.device_index)):
        torch.ones(10, device="emu").add_(1)
    e.record(s)
    e.synchronize()
    assert e.query() and s.query()


@pytest.mark.feature("record_stream")
def test_record_stream_is_accepted():
    s = torch.emu.Stream()
    assert isinstance(s, torch._C.Stream) and s.device == torch.device("emu", 0)
    x = torch.ones(10, device="emu")
    x.record_stream(s)
    with pytest.raises(RuntimeError, match="stream is on"):
        x.record_stream(torch.emu.Stream("emu:1"))
    s.synchronize()
    assert x.sum().item() == 10


@pytest.mark.feature("record_stream")
@requires_driver(2, "asynchronous streams")
def test_record_stream_delays_reuse_until_the_stream_is_done():
    n = 1_234_567  # a size class no other test leaves in the cache
    torch.emu.synchronize()
    torch.emu.empty_cache()
    side = torch.emu.Stream()
    x = torch.ones(n, device="emu")
    a = torch.randn(640, 640, device="emu")
    side.wait_stream(torch.emu.current_stream())
    with torch.emu.stream(side):
        for _ in range(30):  # long enough that the caller's next lines run while it works, even on a loaded machine
            a = a @ a / 640
        total = x.sum()
    x.record_stream(side)
    old = x.data_ptr()
    del x
    y = torch.empty(n, device="emu")  # on the default stream, while the side stream may still read x
    busy = not side.query()
    assert busy, "the side stream finished too early for the test to mean anything"
    assert y.data_ptr() != old
    side.synchronize()
    assert total.item() == n
    # Once the side stream is done, the block returns to the cache and is reused without a driver call.
    reserved = torch.emu.memory_reserved()
    z = torch.empty(n, device="emu")
    assert z.data_ptr() == old
    assert torch.emu.memory_reserved() == reserved


def current(stream: torch.Stream):
    """`with stream:` as PyTorch's test writes it where torch.Stream is a context manager (torch 2.7, pytorch#140138);
    on 2.6 ("'torch.Stream' object does not support the context manager protocol") the same stream is made current
    through torch.emu.stream, so the driver's ordering is still checked there."""
    if hasattr(torch.Stream, "__enter__"):
        return stream
    return torch.emu.stream(torch.emu.Stream(stream_id=stream.stream_id, device_index=stream.device_index))


@pytest.mark.feature("streams")
@requires_driver(2, "asynchronous streams")
@requires_torch(">=2.6", "torch.Stream and torch.accelerator for emu")
def test_streams_waiting_on_one_event_read_what_the_default_stream_wrote():
    """PyTorch's reference test_multiple_streams_wait_same_event: tensors made on the default stream, read on two
    streams that waited on an event of a third, gave two sums (7 in 30 runs here) until created streams started
    after the default stream's earlier work (the driver's ordering)."""
    for _ in range(20):
        s1, s2, s3 = (torch.Stream(device="emu:0") for _ in range(3))
        x, y = torch.randn(30, 30, device="emu:0"), torch.randn(30, 30, device="emu:0")
        event = s1.record_event()
        s2.wait_event(event)
        s3.wait_event(event)
        with current(s2):
            assert torch.accelerator.current_stream() == s2
            z2 = torch.matmul(x, y)
        with current(s3):
            z3 = torch.matmul(x, y)
        torch.accelerator.synchronize()
        assert event.query()
        assert torch.equal(z2, z3)
        torch.testing.assert_close(z2.cpu(), x.cpu() @ y.cpu())


@pytest.mark.feature("streams")
def test_stream_priority_is_kept_and_reported():
    """Stream(priority=...) dropped the priority; now it picks the pool and reads back, numbered as CUDA's."""
    assert torch.emu.Stream.priority_range() == (0, -1)
    high, normal = torch.emu.Stream(priority=-1), torch.emu.Stream()
    assert (high.priority, normal.priority) == (-1, 0)
    assert torch.emu.Stream(priority=-5).priority == -1  # clamped to the range, as CUDA does
    assert torch.emu.Stream("emu:1", priority=-1).priority == -1
    assert high != normal and "priority=-1" in repr(high)
    # The priority travels with the stream: the current stream and one rebuilt from its id keep it.
    with torch.emu.stream(high):
        assert torch.emu.current_stream().priority == -1
        x = torch.ones(64, device="emu") * 2
    high.synchronize()
    assert x.sum().item() == 128
    rebuilt = torch.emu.Stream(stream_id=high.stream_id, device_index=high.device_index)
    assert rebuilt.priority == -1 and rebuilt == high
    # torch's own Stream(device=..., priority=...) reaches the guard's high-priority pool; before torch 2.4
    # torch.Stream takes no keywords ("'device' is an invalid keyword argument" on 2.1 to 2.3).
    if TORCH in SpecifierSet(">=2.4"):
        generic = torch.Stream(device="emu", priority=-1)
        assert torch.emu.Stream(stream_id=generic.stream_id, device_index=generic.device_index).priority == -1
