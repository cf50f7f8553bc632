"""A thin ctypes binding of emu_driver.h for the driver's tests."""

from __future__ import annotations

import ctypes
from pathlib import Path

SUCCESS, INVALID_VALUE, MEMORY_ALLOCATION, INVALID_DEVICE, INVALID_DEVICE_POINTER = 0, 1, 2, 3, 4
INVALID_RESOURCE_HANDLE, NOT_READY, NOT_PERMITTED, LAUNCH_FAILURE, INITIALIZATION = 5, 6, 7, 8, 9
H2H, H2D, D2H, D2D = 0, 1, 2, 3
KERNEL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class DeviceProp(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 64),
        ("totalGlobalMem", ctypes.c_size_t),
        ("major", ctypes.c_int),
        ("minor", ctypes.c_int),
        ("multiProcessorCount", ctypes.c_int),
    ]


class Record(ctypes.Structure):
    """emuActivityRecord (API 2.4)."""

    _fields_ = [
        ("kind", ctypes.c_int),
        ("device", ctypes.c_int),
        ("stream", ctypes.c_uint64),
        ("correlation", ctypes.c_uint64),
        ("queued_ns", ctypes.c_int64),
        ("start_ns", ctypes.c_int64),
        ("end_ns", ctypes.c_int64),
        ("name", ctypes.c_char * 128),
    ]


def read_trace(drv: Driver, capacity: int = 64) -> tuple[list[Record], int]:
    """emuTraceRead: up to capacity records, and how many were dropped."""
    records = (Record * capacity)()
    count, dropped = ctypes.c_size_t(), ctypes.c_uint64()
    drv.call("emuTraceRead", records, ctypes.c_size_t(capacity), ctypes.byref(count), ctypes.byref(dropped))
    return [records[i] for i in range(count.value)], dropped.value


class EmuError(Exception):
    def __init__(self, code: int, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.code = code
        self.message = message


class Driver:
    def __init__(self, path: Path) -> None:
        self.lib = ctypes.CDLL(str(path))
        for name in ("emuGetErrorName", "emuGetErrorString", "emuGetLastErrorMessage"):
            getattr(self.lib, name).restype = ctypes.c_char_p
        self._kernels: list[object] = []  # keep ctypes callbacks alive

    def has(self, symbol: str) -> bool:
        return hasattr(self.lib, symbol)

    def call(self, name: str, *args: object) -> None:
        code = getattr(self.lib, name)(*args)
        if code != SUCCESS:
            raise EmuError(code, self.lib.emuGetErrorName(code).decode(), self.lib.emuGetLastErrorMessage().decode())

    def code(self, name: str, *args: object) -> int:
        return int(getattr(self.lib, name)(*args))

    def version(self) -> int:
        v = ctypes.c_int()
        self.call("emuDriverGetVersion", ctypes.byref(v))
        return v.value

    def malloc(self, size: int) -> int:
        p = ctypes.c_void_p()
        self.call("emuMalloc", ctypes.byref(p), ctypes.c_size_t(size))
        return p.value or 0

    def free(self, ptr: int) -> None:
        self.call("emuFree", ctypes.c_void_p(ptr))

    def to_device(self, dst: int, data: bytes) -> None:
        self.call("emuMemcpy", ctypes.c_void_p(dst), ctypes.c_char_p(data), ctypes.c_size_t(len(data)), H2D)

    def to_host(self, src: int, size: int) -> bytes:
        buf = ctypes.create_string_buffer(size)
        self.call("emuMemcpy", buf, ctypes.c_void_p(src), ctypes.c_size_t(size), D2H)
        return buf.raw

    def kernel(self, fn: object) -> object:
        k = KERNEL(fn)
        self._kernels.append(k)
        return k

    def stream(self) -> ctypes.c_void_p:
        s = ctypes.c_void_p()
        self.call("emuStreamCreate", ctypes.byref(s))
        return s


PINNED_HOST = 2  # emuMemoryTypePinnedHost (API 2.2)
HOST_ALLOC_LOCKED = 0x100


class PointerAttributes(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("device", ctypes.c_int),
        ("basePtr", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
    ]
