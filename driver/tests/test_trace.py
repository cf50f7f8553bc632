"""Activity tracing of driver API 2.4 through ctypes: each kernel, copy, memset and replayed graph node a stream runs
is recorded with its device, stream, correlation id and times; nothing is recorded while tracing is off; a full
buffer counts drops; 2.3 has none of it."""

from __future__ import annotations

import ctypes
import itertools
import time
from pathlib import Path

import pytest
from emu_ctypes import D2D, D2H, H2D, INVALID_VALUE, Driver, EmuError, read_trace
from test_driver import build_library
from test_graphs import SIZE, Kernels, capture, upload

pytestmark = pytest.mark.integration
KERNEL, MEMCPY, MEMSET = 1, 2, 3


@pytest.fixture(scope="module")
def lib24(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("driver2.4"), 2, 4)


def test_each_piece_of_work_is_recorded_with_where_when_and_its_correlation(lib24: Path) -> None:
    drv = Driver(lib24)
    kernels = Kernels(drv)
    a, b = drv.malloc(SIZE), drv.malloc(SIZE)
    upload(drv, a, 1)
    s = drv.stream()
    kernels.launch(a, s)  # before tracing: not recorded
    drv.call("emuStreamSynchronize", s)
    assert drv.code("emuTraceIsOn") == 0
    before = time.time_ns()
    drv.call("emuTraceStart")
    assert drv.code("emuTraceIsOn") == 1
    drv.call("emuTracePushCorrelation", ctypes.c_uint64(41))
    drv.call("emuTraceLabel", b"add_one")
    kernels.launch(a, s)
    kernels.launch(a, s)  # the label named one kernel only
    drv.call("emuTracePushCorrelation", ctypes.c_uint64(42))
    drv.call("emuMemcpyAsync", ctypes.c_void_p(b), ctypes.c_void_p(a), ctypes.c_size_t(SIZE), D2D, s)
    drv.call("emuTracePopCorrelation")
    drv.call("emuMemsetAsync", ctypes.c_void_p(b), 7, ctypes.c_size_t(SIZE), None)  # the default stream
    host = ctypes.create_string_buffer(SIZE)
    drv.call("emuMemcpyAsync", host, ctypes.c_void_p(b), ctypes.c_size_t(SIZE), D2H, None)
    drv.call("emuTracePopCorrelation")
    drv.call("emuTraceStop")
    kernels.launch(a, s)  # after tracing: not recorded
    drv.call("emuDeviceSynchronize")
    after = time.time_ns()
    records, dropped = read_trace(drv)
    assert dropped == 0
    got = [(r.kind, r.name.decode(), r.device, r.stream, r.correlation) for r in records]
    assert sorted(got) == sorted(
        [
            (KERNEL, "add_one", 0, 1, 41),
            (KERNEL, "kernel", 0, 1, 41),
            (MEMCPY, "Memcpy DtoD", 0, 1, 42),
            (MEMSET, "Memset", 0, 0, 41),
            (MEMCPY, "Memcpy DtoH", 0, 0, 41),
        ]
    )
    for r in records:  # CLOCK_REALTIME, as Python's time.time_ns
        assert before <= r.queued_ns <= r.start_ns <= r.end_ns <= after
    on_stream = [r for r in records if r.stream == 1]
    assert [r.name.decode() for r in on_stream] == ["add_one", "kernel", "Memcpy DtoD"]  # in stream order
    assert all(x.end_ns <= y.start_ns for x, y in itertools.pairwise(on_stream))
    assert read_trace(drv) == ([], 0)  # read once
    with pytest.raises(EmuError) as refused:
        drv.call("emuTracePopCorrelation")
    assert refused.value.code == INVALID_VALUE and "no correlation id pushed" in refused.value.message


def test_a_replayed_graph_records_its_nodes_as_captured(lib24: Path) -> None:
    drv = Driver(lib24)
    kernels = Kernels(drv)
    a, b = drv.malloc(SIZE), drv.malloc(SIZE)
    upload(drv, a, 1)
    s = drv.stream()
    drv.call("emuStreamBeginCapture", s)
    drv.call("emuTraceLabel", b"captured_add")
    kernels.launch(a, s)
    drv.call("emuMemcpyAsync", ctypes.c_void_p(b), ctypes.c_void_p(a), ctypes.c_size_t(SIZE), D2D, s)
    graph = capture(drv, s)
    exec_ = ctypes.c_void_p()
    drv.call("emuGraphInstantiate", ctypes.byref(exec_), graph)
    drv.call("emuTraceStart")
    drv.call("emuTracePushCorrelation", ctypes.c_uint64(7))
    for _ in range(2):
        drv.call("emuGraphLaunch", exec_, s)
    drv.call("emuTracePopCorrelation")
    drv.call("emuTraceStop")
    drv.call("emuStreamSynchronize", s)
    records, _ = read_trace(drv)
    assert [(r.kind, r.name.decode(), r.correlation) for r in records] == [
        (KERNEL, "captured_add", 7),
        (MEMCPY, "Memcpy DtoD", 7),
    ] * 2
    drv.call("emuGraphExecDestroy", exec_)
    drv.call("emuGraphDestroy", graph)


def test_reading_in_parts_and_a_null_count_is_refused(lib24: Path) -> None:
    drv = Driver(lib24)
    a = drv.malloc(SIZE)
    drv.call("emuTraceStart")
    for value in range(5):
        drv.call("emuMemsetAsync", ctypes.c_void_p(a), value, ctypes.c_size_t(SIZE), None)
    drv.call("emuTraceStop")
    drv.call("emuDeviceSynchronize")
    first, _ = read_trace(drv, capacity=3)
    rest, _ = read_trace(drv, capacity=3)
    assert len(first) == 3 and len(rest) == 2
    assert [r.start_ns for r in first + rest] == sorted(r.start_ns for r in first + rest)  # oldest first
    with pytest.raises(EmuError) as refused:
        drv.call("emuTraceRead", None, ctypes.c_size_t(0), None, None)
    assert refused.value.code == INVALID_VALUE and "count is null" in refused.value.message


def test_api_2_3_has_no_tracing(tmp_path: Path) -> None:
    drv = Driver(build_library(tmp_path, 2, 3))
    assert not drv.has("emuTraceStart") and not drv.has("emuTraceRead")
    assert H2D == 1  # the copy kinds the records name are the API's
