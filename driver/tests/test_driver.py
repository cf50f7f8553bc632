"""The emulated driver through its C API (ctypes) at API 1.4 and 2.2 (2.1 too, for what 2.2 added), built here.

(No conftest.py: the orchestration tests own the `conftest` module name.)
"""

from __future__ import annotations

import ctypes
import os
import re
import shlex
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from emu_ctypes import (
    D2D,
    D2H,
    H2D,
    HOST_ALLOC_LOCKED,
    INITIALIZATION,
    INVALID_DEVICE,
    INVALID_DEVICE_POINTER,
    INVALID_RESOURCE_HANDLE,
    INVALID_VALUE,
    LAUNCH_FAILURE,
    MEMORY_ALLOCATION,
    NOT_PERMITTED,
    NOT_READY,
    PINNED_HOST,
    DeviceProp,
    Driver,
    EmuError,
    PointerAttributes,
)

pytestmark = pytest.mark.integration
TESTS = Path(__file__).parent
DRIVER = TESTS.resolve().parent
VERSIONS = {"1.4": (1, 4), "2.2": (2, 2)}


def sanitizer_flags() -> list[str]:
    """EMU_SANITIZE=address,undefined (`nox -s sanitize`): the library instrumented, as driver/setup.py builds it then;
    the test process needs the sanitizer runtime preloaded (LD_PRELOAD) to load it."""
    names = [name for name in os.environ.get("EMU_SANITIZE", "").split(",") if name]
    if not names:
        return []
    return [f"-fsanitize={','.join(names)}", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", "-g"]


def build_library(out: Path, major: int, minor: int) -> Path:
    include = out / "include"
    include.mkdir(parents=True)
    template = (DRIVER / "include" / "emu_driver_version.h.in").read_text()
    (include / "emu_driver_version.h").write_text(
        template.replace("@MAJOR@", str(major)).replace("@MINOR@", str(minor))
    )
    lib = out / "libemu_driver.so"
    sources = sorted(str(p) for p in (DRIVER / "src").glob("*.cpp"))
    command = [
        "g++",
        "-std=c++17",
        "-O1",
        "-fPIC",
        "-shared",
        "-fvisibility=hidden",
        "-pthread",
        *sanitizer_flags(),
        f"-I{include}",
        f"-I{DRIVER / 'include'}",
        *sources,
        "-o",
        str(lib),
    ]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    assert done.returncode == 0, shlex.join(command) + "\n" + done.stderr
    return lib


@pytest.fixture(scope="session", params=sorted(VERSIONS))
def driver_lib(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, tuple[int, int]]:
    version = VERSIONS[request.param]
    return build_library(tmp_path_factory.mktemp(f"driver{request.param}"), *version), version


@pytest.fixture(scope="session")
def driver_v2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("driver2"), 2, 2)


@pytest.fixture
def drv(driver_lib: tuple[Path, tuple[int, int]]) -> Driver:
    return Driver(driver_lib[0])


def run_script(lib: Path, body: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = (
        f"import sys; sys.path.insert(0, {str(TESTS)!r})\nfrom emu_ctypes import *\nd = Driver({str(lib)!r})\n"
        + textwrap.dedent(body)
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )


def test_version_query_matches_header_macro(driver_lib: tuple[Path, tuple[int, int]]) -> None:
    lib, (major, minor) = driver_lib
    header = (lib.parent / "include" / "emu_driver_version.h").read_text()
    assert re.search(rf"EMU_DRIVER_VERSION_MAJOR {major}\b", header)
    assert Driver(lib).version() == major * 1000 + minor


def test_devices_and_properties(drv: Driver) -> None:
    count = ctypes.c_int()
    drv.call("emuGetDeviceCount", ctypes.byref(count))
    assert count.value == int(os.environ.get("EMU_DEVICE_COUNT", "2"))
    prop = DeviceProp()
    drv.call("emuGetDeviceProperties", ctypes.byref(prop), 1)
    assert prop.name.decode().startswith("Emu Accelerator")
    assert prop.totalGlobalMem == 4096 << 20
    with pytest.raises(EmuError) as bad:
        drv.call("emuSetDevice", 7)
    assert bad.value.code == INVALID_DEVICE and "there are 2 device(s)" in bad.value.message


def test_device_count_from_environment(driver_lib: tuple[Path, tuple[int, int]]) -> None:
    ok = run_script(
        driver_lib[0],
        "c = ctypes.c_int(); d.call('emuGetDeviceCount', ctypes.byref(c)); print(c.value)",
        EMU_DEVICE_COUNT="5",
        EMU_DEVICE_MEMORY_MB="64",
    )
    assert ok.stdout.strip() == "5", ok.stderr
    bad = run_script(
        driver_lib[0],
        "c = ctypes.c_int(); print(d.code('emuGetDeviceCount', ctypes.byref(c)), "
        "d.lib.emuGetLastErrorMessage().decode())",
        EMU_DEVICE_COUNT="99",
    )
    assert bad.stdout.startswith(f"{INITIALIZATION} EMU_DEVICE_COUNT='99'"), bad.stdout + bad.stderr


def max_devices() -> int:
    """EMU_MAX_DEVICES as the public header defines it (the plugin sizes its per-device tables with it)."""
    found = re.search(r"^#define EMU_MAX_DEVICES (\d+)$", (DRIVER / "include" / "emu_driver.h").read_text(), re.M)
    assert found, "emu_driver.h no longer defines EMU_MAX_DEVICES"
    return int(found[1])


def test_device_count_limit_is_the_header_constant(driver_lib: tuple[Path, tuple[int, int]]) -> None:
    limit = max_devices()
    count = "c = ctypes.c_int(); print(d.code('emuGetDeviceCount', ctypes.byref(c)), c.value, "
    count += "d.lib.emuGetLastErrorMessage().decode())"
    most = run_script(driver_lib[0], count, EMU_DEVICE_COUNT=str(limit), EMU_DEVICE_MEMORY_MB="1")
    assert most.stdout.split()[:2] == ["0", str(limit)], most.stdout + most.stderr
    over = run_script(driver_lib[0], count, EMU_DEVICE_COUNT=str(limit + 1), EMU_DEVICE_MEMORY_MB="1")
    assert over.stdout.startswith(f"{INITIALIZATION} 0 EMU_DEVICE_COUNT='{limit + 1}'"), over.stdout + over.stderr
    assert over.stdout.rstrip().endswith(f"is not an integer in 1..{limit}"), over.stdout


def test_round_trip_memset_and_copies_across_devices(drv: Driver) -> None:
    a = drv.malloc(1000)
    assert a % 256 == 0
    drv.to_device(a, bytes(range(200)) * 5)
    assert drv.to_host(a, 1000) == bytes(range(200)) * 5
    drv.call("emuMemset", ctypes.c_void_p(a), 7, ctypes.c_size_t(10))
    assert drv.to_host(a, 12) == b"\x07" * 10 + bytes([10, 11])
    drv.call("emuSetDevice", 1)
    b = drv.malloc(1000)
    drv.call("emuMemcpy", ctypes.c_void_p(b), ctypes.c_void_p(a), ctypes.c_size_t(1000), D2D)
    assert drv.to_host(b, 1000) == drv.to_host(a, 1000)
    attrs = (ctypes.c_int * 8)()
    drv.call("emuPointerGetAttributes", attrs, ctypes.c_void_p(b + 100))
    assert attrs[0] == 1 and attrs[1] == 1  # device memory, on device 1
    drv.free(b)
    drv.call("emuSetDevice", 0)
    drv.free(a)


def test_bad_pointers_are_named(drv: Driver) -> None:
    a = drv.malloc(256)
    host = ctypes.create_string_buffer(512)
    with pytest.raises(EmuError) as overrun:
        drv.call("emuMemcpy", host, ctypes.c_void_p(a), ctypes.c_size_t(512), D2H)
    assert (
        overrun.value.code == INVALID_DEVICE_POINTER and "overruns its allocation of 256 bytes" in overrun.value.message
    )
    with pytest.raises(EmuError) as wrong_kind:
        drv.call("emuMemcpy", ctypes.c_void_p(a), ctypes.c_void_p(a), ctypes.c_size_t(4), H2D)
    assert wrong_kind.value.code == INVALID_VALUE and "is a device pointer" in wrong_kind.value.message
    with pytest.raises(EmuError) as not_device:
        drv.call("emuMemcpy", host, host, ctypes.c_size_t(4), D2H)
    assert not_device.value.code == INVALID_DEVICE_POINTER and "not device memory" in not_device.value.message
    drv.free(a)
    with pytest.raises(EmuError) as freed:
        drv.to_host(a, 4)
    assert "not in a live allocation (freed?)" in freed.value.message
    with pytest.raises(EmuError) as double:
        drv.free(a)
    assert "double free" in double.value.message


def test_out_of_memory_says_how_much_is_free(driver_lib: tuple[Path, tuple[int, int]]) -> None:
    done = run_script(
        driver_lib[0],
        """
        p = ctypes.c_void_p()
        print(d.code('emuMalloc', ctypes.byref(p), ctypes.c_size_t(65 << 20)), d.lib.emuGetLastErrorMessage().decode())
    """,
        EMU_DEVICE_MEMORY_MB="64",
    )
    assert done.stdout.startswith(f"{MEMORY_ALLOCATION} cannot allocate 68157440 bytes on device 0"), (
        done.stdout + done.stderr
    )


def test_host_dereference_of_device_pointer_fails_loudly(driver_lib: tuple[Path, tuple[int, int]]) -> None:
    done = run_script(
        driver_lib[0],
        """
        p = d.malloc(64)
        d.to_device(p, b'x' * 64)
        print('reading', flush=True)
        ctypes.string_at(p, 1)
        print('read it')
    """,
    )
    assert done.returncode != 0 and "reading" in done.stdout and "read it" not in done.stdout
    assert "host code dereferenced device pointer 0x" in done.stderr


def test_translate_only_inside_a_kernel(drv: Driver) -> None:
    a = drv.malloc(64)
    out = ctypes.c_void_p()
    assert drv.code("emuKernelTranslate", ctypes.c_void_p(a), ctypes.c_size_t(64), ctypes.byref(out)) == NOT_PERMITTED
    seen: list[bytes] = []

    def kernel(_args: int) -> int:
        p = ctypes.c_void_p()
        if drv.code("emuKernelTranslate", ctypes.c_void_p(a), ctypes.c_size_t(4), ctypes.byref(p)) != 0:
            return 1
        ctypes.memmove(p, b"kern", 4)
        seen.append(ctypes.string_at(p, 4))
        return 0

    drv.call("emuLaunchKernel", drv.kernel(kernel), None, None)
    drv.call("emuStreamSynchronize", None)
    assert seen == [b"kern"] and drv.to_host(a, 4) == b"kern"
    drv.free(a)


def _vm_flags_of(address: int) -> list[str]:
    """The VmFlags of the mapping holding address, from /proc/self/smaps."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    inside = False
    for line in lines:
        head = line.split()[0] if line else ""
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start <= address < end
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    return []


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc/self/smaps")
def test_device_memory_asks_for_transparent_huge_pages(drv: Driver) -> None:
    # Host<->device copies ran at 0.4-0.8 of a memcpy while the bytes sat on 4 KiB pages (THP "madvise" mode).
    a = drv.malloc(4 << 20)
    host: list[int] = []

    def kernel(_args: int) -> int:
        p = ctypes.c_void_p()
        if drv.code("emuKernelTranslate", ctypes.c_void_p(a), ctypes.c_size_t(4 << 20), ctypes.byref(p)) != 0:
            return 1
        host.append(int(p.value or 0))
        return 0

    drv.call("emuLaunchKernel", drv.kernel(kernel), None, None)
    drv.call("emuStreamSynchronize", None)
    assert host and "hg" in _vm_flags_of(host[0])  # hg: madvise(MADV_HUGEPAGE)
    drv.free(a)


def test_failed_kernel_is_reported_by_the_next_synchronize(drv: Driver) -> None:
    def kernel(_args: int) -> int:
        drv.lib.emuKernelSetErrorMessage(b"index 9 out of range")
        return 3

    s = drv.stream()
    drv.call("emuLaunchKernel", drv.kernel(kernel), None, s)
    with pytest.raises(EmuError) as failed:
        drv.call("emuStreamSynchronize", s)
    assert failed.value.code == LAUNCH_FAILURE and "index 9 out of range" in failed.value.message
    drv.call("emuStreamSynchronize", s)  # reported once, then cleared
    drv.call("emuStreamDestroy", s)
    assert drv.code("emuStreamSynchronize", s) == INVALID_RESOURCE_HANDLE


def test_api_1_lacks_async_and_events(driver_lib: tuple[Path, tuple[int, int]]) -> None:
    lib, (major, _minor) = driver_lib
    drv = Driver(lib)
    newer = ("emuMemcpyAsync", "emuMemsetAsync", "emuEventCreateWithFlags", "emuEventElapsedTime", "emuStreamWaitEvent")
    assert all(drv.has(name) == (major >= 2) for name in newer)
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    assert ("emuEventRecord" in symbols) == (major >= 2)


def test_api_1_runs_kernels_before_launch_returns(driver_lib: tuple[Path, tuple[int, int]]) -> None:
    lib, (major, _minor) = driver_lib
    drv = Driver(lib)
    start = time.perf_counter()
    drv.call("emuLaunchKernel", drv.kernel(lambda _a: time.sleep(0.3) or 0), None, None)
    launch = time.perf_counter() - start
    drv.call("emuStreamSynchronize", None)
    total = time.perf_counter() - start
    if major == 1:
        assert launch >= 0.3
    else:
        assert launch < 0.25 and total >= 0.3


def test_api_2_streams_run_asynchronously_in_order_with_events(driver_v2: Path) -> None:
    drv = Driver(driver_v2)
    s = drv.stream()
    order: list[int] = []
    start_evt, end_evt = ctypes.c_void_p(), ctypes.c_void_p()
    drv.call("emuEventCreateWithFlags", ctypes.byref(start_evt), 0)
    drv.call("emuEventCreateWithFlags", ctypes.byref(end_evt), 0)
    drv.call("emuEventRecord", start_evt, s)
    for i in range(3):
        drv.call("emuLaunchKernel", drv.kernel(lambda _a, i=i: time.sleep(0.1) or order.append(i) or 0), None, s)
    drv.call("emuEventRecord", end_evt, s)
    assert drv.code("emuStreamQuery", s) == NOT_READY
    assert drv.code("emuEventQuery", end_evt) == NOT_READY
    ms = ctypes.c_float()
    assert drv.code("emuEventElapsedTime", ctypes.byref(ms), start_evt, end_evt) == NOT_READY
    drv.call("emuEventSynchronize", end_evt)
    assert order == [0, 1, 2]
    assert drv.code("emuStreamQuery", s) == 0  # a completed event means its stream has got that far too
    drv.call("emuEventElapsedTime", ctypes.byref(ms), start_evt, end_evt)
    assert 250 <= ms.value < 2000
    # Another stream waits for an event recorded on the first.
    other = drv.stream()
    drv.call("emuLaunchKernel", drv.kernel(lambda _a: time.sleep(0.2) or order.append(3) or 0), None, s)
    drv.call("emuEventRecord", end_evt, s)
    drv.call("emuStreamWaitEvent", other, end_evt)
    drv.call("emuLaunchKernel", drv.kernel(lambda _a: order.append(4) or 0), None, other)
    drv.call("emuStreamSynchronize", other)
    assert order == [0, 1, 2, 3, 4]
    for e in (start_evt, end_evt):
        drv.call("emuEventDestroy", e)
    assert drv.code("emuEventQuery", start_evt) == INVALID_RESOURCE_HANDLE


def test_api_2_created_streams_start_after_the_default_streams_earlier_work(driver_v2: Path) -> None:
    """A tensor made on the default stream and read on another (which waited only on an event of a third) was read
    before it was written: PyTorch's reference test_multiple_streams_wait_same_event got two different sums."""
    drv = Driver(driver_v2)
    side, third = drv.stream(), drv.stream()
    order: list[str] = []
    drv.call("emuLaunchKernel", drv.kernel(lambda _a: time.sleep(0.2) or order.append("default") or 0), None, None)
    event = ctypes.c_void_p()
    drv.call("emuEventCreateWithFlags", ctypes.byref(event), 0)
    drv.call("emuEventRecord", event, third)
    drv.call("emuStreamWaitEvent", side, event)
    drv.call("emuLaunchKernel", drv.kernel(lambda _a: order.append("side") or 0), None, side)
    drv.call("emuStreamSynchronize", side)
    assert order == ["default", "side"]
    # One direction only: the default stream does not wait for created streams (no legacy-stream barrier).
    drv.call("emuLaunchKernel", drv.kernel(lambda _a: time.sleep(0.3) or order.append("slow side") or 0), None, side)
    drv.call("emuLaunchKernel", drv.kernel(lambda _a: order.append("default again") or 0), None, None)
    drv.call("emuStreamSynchronize", None)
    assert order[-1] == "default again" and drv.code("emuStreamQuery", side) == NOT_READY
    drv.call("emuStreamSynchronize", side)
    drv.call("emuEventDestroy", event)


def test_api_2_async_copy_is_checked_at_enqueue(driver_v2: Path) -> None:
    drv = Driver(driver_v2)
    a = drv.malloc(128)
    src = ctypes.create_string_buffer(b"y" * 128, 128)
    s = drv.stream()
    drv.call("emuMemcpyAsync", ctypes.c_void_p(a), src, ctypes.c_size_t(128), H2D, s)
    drv.call("emuStreamSynchronize", s)
    assert drv.to_host(a, 128) == b"y" * 128
    with pytest.raises(EmuError) as bad:
        drv.call("emuMemcpyAsync", ctypes.c_void_p(a), src, ctypes.c_size_t(257), H2D, s)
    assert "overruns" in bad.value.message
    drv.free(a)


class Gate:
    """A kernel that holds its stream until the test opens the gate: proves what is queued, not timed."""

    def __init__(self, drv: Driver) -> None:
        self.opened = threading.Event()
        self.kernel = drv.kernel(lambda _a: 0 if self.opened.wait(30) else 1)


def pinned(drv: Driver, size: int) -> int:
    p = ctypes.c_void_p()
    drv.call("emuHostAlloc", ctypes.byref(p), ctypes.c_size_t(size), 0)
    return p.value or 0


def attributes(drv: Driver, ptr: int) -> PointerAttributes:
    attrs = PointerAttributes()
    drv.call("emuPointerGetAttributes", ctypes.byref(attrs), ctypes.c_void_p(ptr))
    return attrs


def test_api_2_2_adds_host_alloc_and_2_1_lacks_it(driver_v2: Path, tmp_path: Path) -> None:
    older = build_library(tmp_path / "driver2.1", 2, 1)
    for lib, present in ((older, False), (driver_v2, True)):
        symbols = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
        assert all((name in symbols.stdout) == present for name in ("emuHostAlloc", "emuFreeHost", "emuHostGetFlags"))
    assert (
        "#define EMU_DRIVER_HAS_HOST_ALLOC (EMU_DRIVER_VERSION >= 2002)"
        in (DRIVER / "include" / "emu_driver.h").read_text()
    )


def test_api_2_2_has_no_graphs(driver_v2: Path) -> None:
    """Stream capture and graphs came with 2.3 (driver/tests/test_graphs.py)."""
    drv = Driver(driver_v2)
    assert drv.has("emuHostAlloc")
    assert not drv.has("emuStreamBeginCapture")
    assert not drv.has("emuGraphLaunch")


def test_pinned_host_memory_is_page_aligned_registered_and_freed(driver_v2: Path) -> None:
    drv = Driver(driver_v2)
    p = pinned(drv, 10_000)
    assert p % os.sysconf("SC_PAGE_SIZE") == 0
    ctypes.memmove(p, b"host" * 2500, 10_000)  # ordinary host memory: the host reads and writes it
    inner = attributes(drv, p + 9_999)
    assert (inner.type, inner.device, inner.basePtr, inner.size) == (PINNED_HOST, -1, p, 10_000)
    assert attributes(drv, p + 10_000).type == 0  # past the allocation's end: pageable
    pageable = ctypes.create_string_buffer(64)
    assert attributes(drv, ctypes.addressof(pageable)).type == 0
    flags = ctypes.c_uint()
    drv.call("emuHostGetFlags", ctypes.byref(flags), ctypes.c_void_p(p + 5))
    # Locked or not (RLIMIT_MEMLOCK), the flags say which; the allocation's own flags come back.
    assert flags.value & ~HOST_ALLOC_LOCKED == 0
    with pytest.raises(EmuError) as middle:
        drv.call("emuFreeHost", ctypes.c_void_p(p + 8))
    assert middle.value.code == INVALID_VALUE and "not its start" in middle.value.message
    drv.call("emuFreeHost", ctypes.c_void_p(p))
    assert attributes(drv, p).type == 0
    with pytest.raises(EmuError) as double:
        drv.call("emuFreeHost", ctypes.c_void_p(p))
    assert "double free" in double.value.message
    with pytest.raises(EmuError) as flagged:
        drv.call("emuHostAlloc", ctypes.byref(ctypes.c_void_p()), ctypes.c_size_t(8), 0x40)
    assert flagged.value.code == INVALID_VALUE and "unknown flags 64" in flagged.value.message
    drv.call("emuFreeHost", None)


def test_pinned_host_alloc_does_not_fail_when_pages_cannot_be_locked(driver_v2: Path) -> None:
    # RLIMIT_MEMLOCK 0 makes mlock fail for unprivileged users (root may still lock: CAP_IPC_LOCK).
    done = run_script(
        driver_v2,
        """
        import os, resource
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
        p = ctypes.c_void_p()
        d.call('emuHostAlloc', ctypes.byref(p), ctypes.c_size_t(32 << 20), 0)
        f = ctypes.c_uint()
        d.call('emuHostGetFlags', ctypes.byref(f), p)
        print('locked' if f.value & HOST_ALLOC_LOCKED else 'unlocked', os.geteuid())
        d.call('emuFreeHost', p)
    """,
    )
    assert done.returncode == 0, done.stderr
    state, uid = done.stdout.split()
    assert state == "unlocked" or uid == "0", done.stdout


def test_async_copy_from_pinned_memory_is_queued_and_free_waits_for_it(driver_v2: Path) -> None:
    drv = Driver(driver_v2)
    s = drv.stream()
    a = drv.malloc(4096)
    p = pinned(drv, 4096)
    ctypes.memmove(p, b"P" * 4096, 4096)
    gate = Gate(drv)
    drv.call("emuLaunchKernel", gate.kernel, None, s)
    drv.call("emuMemcpyAsync", ctypes.c_void_p(a), ctypes.c_void_p(p), ctypes.c_size_t(4096), H2D, s)
    # Returned while the stream is still held: the copy is queued behind the kernel, not done.
    assert drv.code("emuStreamQuery", s) == NOT_READY
    ctypes.memmove(p, b"Q" * 4096, 4096)  # pinned memory is read when the stream reaches the copy
    freed = threading.Thread(target=drv.call, args=("emuFreeHost", ctypes.c_void_p(p)))
    freed.start()
    freed.join(0.3)
    assert freed.is_alive() and drv.code("emuStreamQuery", s) == NOT_READY  # free waits for the queued copy
    gate.opened.set()
    freed.join(30)
    assert not freed.is_alive()
    drv.call("emuStreamSynchronize", s)
    assert drv.to_host(a, 4096) == b"Q" * 4096
    drv.free(a)


def test_async_copy_to_pinned_memory_is_queued(driver_v2: Path) -> None:
    drv = Driver(driver_v2)
    s = drv.stream()
    a = drv.malloc(256)
    drv.to_device(a, b"D" * 256)
    p = pinned(drv, 256)
    gate = Gate(drv)
    drv.call("emuLaunchKernel", gate.kernel, None, s)
    drv.call("emuMemcpyAsync", ctypes.c_void_p(p), ctypes.c_void_p(a), ctypes.c_size_t(256), D2H, s)
    assert drv.code("emuStreamQuery", s) == NOT_READY and ctypes.string_at(p, 256) == bytes(256)
    gate.opened.set()
    drv.call("emuStreamSynchronize", s)
    assert ctypes.string_at(p, 256) == b"D" * 256
    drv.call("emuFreeHost", ctypes.c_void_p(p))
    drv.free(a)


def test_async_copy_from_pageable_memory_is_staged(driver_v2: Path) -> None:
    drv = Driver(driver_v2)
    s = drv.stream()
    a = drv.malloc(256)
    src = ctypes.create_string_buffer(b"S" * 256, 256)
    gate = Gate(drv)
    drv.call("emuLaunchKernel", gate.kernel, None, s)
    drv.call("emuMemcpyAsync", ctypes.c_void_p(a), src, ctypes.c_size_t(256), H2D, s)
    assert drv.code("emuStreamQuery", s) == NOT_READY
    ctypes.memmove(src, b"X" * 256, 256)  # the caller may reuse a pageable source at once
    gate.opened.set()
    drv.call("emuStreamSynchronize", s)
    assert drv.to_host(a, 256) == b"S" * 256
    drv.free(a)


def test_async_copy_to_pageable_memory_is_done_on_return(driver_v2: Path) -> None:
    drv = Driver(driver_v2)
    s = drv.stream()
    a = drv.malloc(256)
    dst = ctypes.create_string_buffer(256)
    ran: list[int] = []
    drv.call("emuLaunchKernel", drv.kernel(lambda _a: time.sleep(0.2) or ran.append(1) or 0), None, s)
    drv.call("emuMemsetAsync", ctypes.c_void_p(a), 0x5A, ctypes.c_size_t(256), s)
    drv.call("emuMemcpyAsync", dst, ctypes.c_void_p(a), ctypes.c_size_t(256), D2H, s)
    assert ran == [1] and dst.raw == b"Z" * 256 and drv.code("emuStreamQuery", s) == 0
    drv.free(a)
