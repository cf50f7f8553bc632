"""The interconnect of driver API 2.3 (communicators over shared memory) with real processes, through ctypes."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from emu_ctypes import LAUNCH_FAILURE, Driver
from test_driver import build_library

pytestmark = pytest.mark.integration
WORKER = Path(__file__).parent / "comm_worker.py"
COMM_FAILURE = 10  # emuErrorCommFailure


@pytest.fixture(scope="module")
def lib23(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("driver2.3"), 2, 3)


@pytest.fixture(scope="module")
def lib24(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("driver2.4"), 2, 4)


def unique_id(lib: Path) -> str:
    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    uid = UniqueId()
    Driver(lib).call("emuCommGetUniqueId", ctypes.byref(uid))
    return bytes(uid).hex()


def run_ranks(lib: Path, scenario: str, nranks: int = 2, timeout_ms: int = 20000) -> list[dict[str, object]]:
    uid = unique_id(lib)
    env = {**os.environ, "COMM_TIMEOUT_MS": str(timeout_ms), "EMU_DEVICE_COUNT": str(max(nranks, 2))}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(lib), uid, str(rank), str(nranks), scenario],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for rank in range(nranks)
    ]
    results = []
    for rank, proc in enumerate(procs):
        out, err = proc.communicate(timeout=120)
        lines = out.strip().splitlines()
        results.append(json.loads(lines[-1]) if lines else {"exit": proc.returncode, "stderr": err})
        if lines:
            assert proc.returncode == 0, f"rank {rank}: {err}"
    name = bytes.fromhex(uid).rstrip(b"\0").decode()
    assert not Path("/dev/shm" + name).exists(), "the shared segment outlived its communicator"
    return results


@pytest.mark.parametrize("nranks", [2, 3])
def test_collectives_between_processes(lib23: Path, nranks: int) -> None:
    results = run_ranks(lib23, "collectives", nranks)
    n = nranks
    for me, seen in enumerate(results):
        assert seen["sum_ok"] is True
        assert seen["avg"] == [float(n + 1)] * 3
        assert seen["max"] == [float(n - 1), 0.0]
        assert seen["min"] == [0.0, -float(n - 1)]
        assert seen["prod"] == [float(eval("*".join(str(k + 2) for k in range(n))))]
        assert seen["int64"] == [n * 2**40 + sum(range(n))]
        assert seen["float16"] == [[0x4000, 0x4200][n - 2]] * 4  # 2.0 or 3.0
        assert seen["bfloat16"] == [[0x4000, 0x4040][n - 2]]
        assert seen["broadcast"] == [float(n - 1)] * 5
        assert seen["all_gather"] == [float(j * 10 + k) for j in range(n) for k in range(3)]
        assert seen["reduce_scatter"] == [float(sum(j + me for j in range(n)))] * 2
        if me == 0:
            assert seen["reduce"] == [float(sum(range(1, n + 1)))]
        assert seen["ring"] == [float((me - 1) % n)] * 2


def test_traced_transfers_are_recorded_with_their_correlation(lib24: Path) -> None:
    for rank, seen in enumerate(run_ranks(lib24, "traced")):
        assert seen["records"] == [[4, "eccl AllReduce", 100 + rank, True], [4, "eccl SendRecv", 100 + rank, True]]
        assert seen["dropped"] == 0 and seen["value"] == [2.0] * 4


def test_transfer_is_queued_not_waited_for(lib23: Path) -> None:
    rank0, rank1 = run_ranks(lib23, "async")
    assert rank0["value"] == rank1["value"] == [2.0]
    assert rank0["queued_s"] < 0.2 < rank0["synced_s"]  # rank 1 joins 0.5 s late: the stream waited, not the call


def test_dead_peer_fails_the_transfer_well_within_the_timeout(lib23: Path) -> None:
    rank0, rank1 = run_ranks(lib23, "dead", timeout_ms=60000)
    assert rank1.get("exit") == 0
    assert rank0["error"] == LAUNCH_FAILURE
    assert "rank 1 (pid" in str(rank0["message"]) and "exited" in str(rank0["message"])
    assert float(rank0["after_s"]) < 10  # found by the liveness check, not by the 60 s timeout
    assert rank0["later"] == COMM_FAILURE  # the communicator stays failed


def test_silent_peer_times_out(lib23: Path) -> None:
    rank0, _ = run_ranks(lib23, "silent", timeout_ms=700)
    assert rank0["error"] == LAUNCH_FAILURE
    assert "timed out after" in str(rank0["message"]) and "waiting for rank 1" in str(rank0["message"])
    assert 0.6 < float(rank0["after_s"]) < 5.5


def test_mismatched_collectives_fail_on_every_rank(lib23: Path) -> None:
    results = run_ranks(lib23, "mismatch")
    for seen in results:
        assert seen["error"] == LAUNCH_FAILURE
        message = str(seen["message"])
        assert "does not match across ranks" in message
        assert "all_reduce of 4 float32" in message and "all_reduce of 8 float32" in message


def test_bad_arguments_fail_at_the_call(lib23: Path) -> None:
    drv = Driver(lib23)
    comm = ctypes.c_void_p()

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    bogus = UniqueId(b"/not-ours")
    assert drv.code("emuCommInitRank", ctypes.byref(comm), 2, bogus, 0, ctypes.c_uint(100)) == 1
    uid = UniqueId()
    drv.call("emuCommGetUniqueId", ctypes.byref(uid))
    drv.call("emuCommInitRank", ctypes.byref(comm), 1, uid, 0, ctypes.c_uint(1000))  # a communicator of one
    host = (ctypes.c_float * 4)()
    code = drv.code("emuCommAllReduce", host, host, ctypes.c_size_t(4), 5, 0, comm, None)
    assert code == 4  # emuErrorInvalidDevicePointer: host memory is not a device buffer
    dev = drv.malloc(16)
    assert (
        drv.code("emuCommBroadcast", ctypes.c_void_p(dev), ctypes.c_void_p(dev), ctypes.c_size_t(4), 5, 3, comm, None)
        == 1
    )
    drv.call("emuCommAllReduce", ctypes.c_void_p(dev), ctypes.c_void_p(dev), ctypes.c_size_t(4), 5, 0, comm, None)
    drv.call("emuStreamSynchronize", None)
    drv.call("emuCommDestroy", comm)
    assert drv.code("emuCommDestroy", comm) == 5  # emuErrorInvalidResourceHandle


def test_older_apis_lack_the_interconnect(tmp_path: Path) -> None:
    for major, minor in [(2, 2)]:  # 1.x lacks it by the same version test
        drv = Driver(build_library(tmp_path / f"d{major}{minor}", major, minor))
        assert not drv.has("emuCommInitRank") and not drv.has("emuCommAllReduce")
