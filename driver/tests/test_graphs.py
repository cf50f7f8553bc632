"""Stream capture and graphs of driver API 2.3 through ctypes: capture records instead of running, a graph replays,
synchronising calls during a capture fail at the call and leave the stream usable, and 2.2 has none of it."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
from emu_ctypes import D2H, H2D, INVALID_VALUE, NOT_PERMITTED, Driver, EmuError
from test_driver import build_library

pytestmark = pytest.mark.integration
CAPTURE_UNSUPPORTED, CAPTURE_INVALIDATED = 11, 12
RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
SIZE = 64


@pytest.fixture(scope="module")
def lib23(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("driver2.3"), 2, 3)


class Kernels:
    """A kernel that adds 1 to the SIZE bytes at a device address, and a release that counts its calls."""

    def __init__(self, drv: Driver) -> None:
        self.drv = drv
        self.runs = 0
        self.released: list[int] = []
        self.add_one = drv.kernel(self._add_one)
        self.release = RELEASE(lambda args: self.released.append(args or 0))

    def _add_one(self, args: int) -> int:
        view = ctypes.c_void_p()
        if self.drv.code("emuKernelTranslate", ctypes.c_void_p(args), ctypes.c_size_t(SIZE), ctypes.byref(view)):
            return 1
        data = (ctypes.c_ubyte * SIZE).from_address(view.value or 0)
        for i in range(SIZE):
            data[i] = (data[i] + 1) & 0xFF
        self.runs += 1
        return 0

    def launch(self, buf: int, stream: ctypes.c_void_p) -> None:
        self.drv.call("emuLaunchKernelRetained", self.add_one, ctypes.c_void_p(buf), self.release, stream)


def upload(drv: Driver, buf: int, value: int) -> None:
    data = bytes([value]) * SIZE
    drv.call("emuMemcpy", ctypes.c_void_p(buf), ctypes.c_char_p(data), ctypes.c_size_t(SIZE), H2D)


def download(drv: Driver, buf: int) -> bytes:
    out = ctypes.create_string_buffer(SIZE)
    drv.call("emuMemcpy", out, ctypes.c_void_p(buf), ctypes.c_size_t(SIZE), D2H)
    return out.raw


def capture(drv: Driver, stream: ctypes.c_void_p) -> ctypes.c_void_p:
    graph = ctypes.c_void_p()
    drv.call("emuStreamEndCapture", stream, ctypes.byref(graph))
    return graph


def test_capture_records_and_the_graph_replays(lib23: Path) -> None:
    drv = Driver(lib23)
    kernels = Kernels(drv)
    a, b = drv.malloc(SIZE), drv.malloc(SIZE)
    upload(drv, a, 1)
    upload(drv, b, 0)
    s = drv.stream()
    drv.call("emuStreamBeginCapture", s)
    capturing = ctypes.c_int()
    drv.call("emuStreamIsCapturing", s, ctypes.byref(capturing))
    assert capturing.value == 1
    kernels.launch(a, s)  # a += 1
    drv.call("emuMemcpyAsync", ctypes.c_void_p(b), ctypes.c_void_p(a), ctypes.c_size_t(SIZE), 3, s)  # b = a
    kernels.launch(b, s)  # b += 1
    graph = capture(drv, s)
    drv.call("emuStreamIsCapturing", s, ctypes.byref(capturing))
    assert capturing.value == 0
    # Recorded, not run.
    assert kernels.runs == 0
    assert download(drv, a) == bytes([1]) * SIZE
    count = ctypes.c_size_t()
    drv.call("emuGraphGetNodeCount", graph, ctypes.byref(count))
    assert count.value == 3
    exec_ = ctypes.c_void_p()
    drv.call("emuGraphInstantiate", ctypes.byref(exec_), graph)
    drv.call("emuGraphDestroy", graph)  # the instance keeps the nodes
    for _ in range(3):
        drv.call("emuGraphLaunch", exec_, s)
    drv.call("emuStreamSynchronize", s)
    assert kernels.runs == 6
    assert download(drv, a) == bytes([4]) * SIZE  # 1 + 3 replays
    assert download(drv, b) == bytes([5]) * SIZE  # the last replay's a, plus one
    assert kernels.released == []  # the instance can still run the kernels
    drv.call("emuGraphExecDestroy", exec_)
    assert sorted(kernels.released) == sorted([a, b])  # each retained kernel released once, with its arguments
    # Out of capture, a retained kernel runs once and is released after it.
    kernels.launch(a, s)
    drv.call("emuStreamSynchronize", s)
    assert download(drv, a) == bytes([5]) * SIZE
    assert len(kernels.released) == 3


def test_event_records_are_replayed_with_a_fresh_generation(lib23: Path) -> None:
    drv = Driver(lib23)
    kernels = Kernels(drv)
    a = drv.malloc(SIZE)
    upload(drv, a, 0)
    s, other = drv.stream(), drv.stream()
    done = ctypes.c_void_p()
    drv.call("emuEventCreateWithFlags", ctypes.byref(done), 0)
    drv.call("emuStreamBeginCapture", s)
    kernels.launch(a, s)
    drv.call("emuEventRecord", done, s)
    drv.call("emuStreamWaitEvent", s, done)  # on the same stream: ordered already, must not deadlock
    graph = capture(drv, s)
    exec_ = ctypes.c_void_p()
    drv.call("emuGraphInstantiate", ctypes.byref(exec_), graph)
    for expected in (1, 2):
        drv.call("emuGraphLaunch", exec_, s)
        drv.call("emuStreamWaitEvent", other, done)  # waits for this launch's record
        drv.call("emuEventSynchronize", done)
        assert download(drv, a) == bytes([expected]) * SIZE
    drv.call("emuStreamSynchronize", other)
    for handle, call in ((exec_, "emuGraphExecDestroy"), (graph, "emuGraphDestroy"), (done, "emuEventDestroy")):
        drv.call(call, handle)


@pytest.mark.parametrize(
    "refused",
    ["emuStreamSynchronize", "emuStreamQuery", "emuDeviceSynchronize", "emuMemcpy", "emuFree", "emuLaunchKernel"],
)
def test_a_synchronising_call_fails_at_the_call_and_the_stream_stays_usable(lib23: Path, refused: str) -> None:
    drv = Driver(lib23)
    kernels = Kernels(drv)
    a = drv.malloc(SIZE)
    upload(drv, a, 7)
    s = drv.stream()
    drv.call("emuStreamBeginCapture", s)
    kernels.launch(a, s)
    with pytest.raises(EmuError) as failed:
        if refused in ("emuStreamSynchronize", "emuStreamQuery"):
            drv.call(refused, s)
        elif refused == "emuDeviceSynchronize":
            drv.call(refused)
        elif refused == "emuMemcpy":
            download(drv, a)
        elif refused == "emuFree":
            drv.free(a)
        else:
            drv.call("emuLaunchKernel", drv.kernel(lambda _a: 0), None, s)
    assert failed.value.code == CAPTURE_UNSUPPORTED
    assert "while a stream of device 0 captures" in failed.value.message
    # The capture is spoilt: later work is refused, and its end says why and gives no graph.
    with pytest.raises(EmuError) as spoilt:
        kernels.launch(a, s)
    assert spoilt.value.code == CAPTURE_INVALIDATED
    graph = ctypes.c_void_p(1)
    assert drv.code("emuStreamEndCapture", s, ctypes.byref(graph)) == CAPTURE_INVALIDATED
    assert graph.value is None
    assert "invalidated by" in drv.lib.emuGetLastErrorMessage().decode()
    assert len(kernels.released) == 2 and kernels.runs == 0  # the recorded and the refused kernel, never run
    # The stream, the device and the buffer are usable again.
    kernels.launch(a, s)
    drv.call("emuStreamSynchronize", s)
    assert download(drv, a) == bytes([8]) * SIZE
    drv.call("emuStreamBeginCapture", s)
    kernels.launch(a, s)
    graph = capture(drv, s)
    drv.call("emuGraphDestroy", graph)
    drv.free(a)


def test_capture_misuse_is_refused(lib23: Path) -> None:
    drv = Driver(lib23)
    s = drv.stream()
    assert drv.code("emuStreamBeginCapture", None) == NOT_PERMITTED  # the default stream
    graph = ctypes.c_void_p()
    assert drv.code("emuStreamEndCapture", s, ctypes.byref(graph)) == NOT_PERMITTED  # not capturing
    drv.call("emuStreamBeginCapture", s)
    assert drv.code("emuStreamBeginCapture", s) == NOT_PERMITTED  # already capturing
    host = ctypes.create_string_buffer(SIZE)
    a = drv.malloc(SIZE)
    # A copy from host memory cannot be replayed (the bytes would be those of the capture).
    assert drv.code("emuMemcpyAsync", ctypes.c_void_p(a), host, ctypes.c_size_t(SIZE), H2D, s) == CAPTURE_UNSUPPORTED
    assert drv.code("emuStreamEndCapture", s, ctypes.byref(graph)) == CAPTURE_INVALIDATED
    # A graph runs only on the device it was captured on.
    drv.call("emuStreamBeginCapture", s)
    drv.call("emuMemsetAsync", ctypes.c_void_p(a), 3, ctypes.c_size_t(SIZE), s)
    graph = capture(drv, s)
    exec_ = ctypes.c_void_p()
    drv.call("emuGraphInstantiate", ctypes.byref(exec_), graph)
    drv.call("emuSetDevice", 1)
    elsewhere = drv.stream()
    assert drv.code("emuGraphLaunch", exec_, elsewhere) == INVALID_VALUE
    drv.call("emuSetDevice", 0)
    drv.call("emuGraphLaunch", exec_, s)
    drv.call("emuStreamSynchronize", s)
    assert download(drv, a) == bytes([3]) * SIZE
    # A capturing stream can be destroyed: its capture ends with it.
    drv.call("emuStreamBeginCapture", s)
    drv.call("emuStreamDestroy", s)
    drv.call("emuGraphExecDestroy", exec_)
    drv.call("emuGraphDestroy", graph)
