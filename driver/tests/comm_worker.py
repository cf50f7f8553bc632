"""One rank of a driver communicator test (run as a process of its own by test_comm.py).

argv: library path, unique id (hex), rank, nranks, scenario. Prints one JSON line with what the rank saw.
"""

from __future__ import annotations

import array
import ctypes
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from emu_ctypes import Driver, EmuError, read_trace

FLOAT32, INT64, FLOAT16, BFLOAT16 = 5, 3, 4, 7
SUM, PROD, MAX, MIN, AVG = 0, 1, 2, 3, 4


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class Rank:
    def __init__(self, drv: Driver, rank: int, nranks: int, uid: bytes, timeout_ms: int) -> None:
        self.drv, self.rank, self.n = drv, rank, nranks
        self.comm = ctypes.c_void_p()
        drv.call("emuCommInitRank", ctypes.byref(self.comm), nranks, UniqueId(uid), rank, ctypes.c_uint(timeout_ms))
        self.stream = drv.stream()

    def put(self, values: array.array) -> int:  # type: ignore[type-arg]
        ptr = self.drv.malloc(max(1, len(values) * values.itemsize))
        if len(values):
            self.drv.to_device(ptr, values.tobytes())
        return ptr

    def get(self, ptr: int, typecode: str, count: int) -> list[float]:
        out = array.array(typecode)
        out.frombytes(self.drv.to_host(ptr, count * out.itemsize))
        return out.tolist()

    def sync(self) -> None:
        self.drv.call("emuStreamSynchronize", self.stream)

    def all_reduce(self, values: list[float], typecode: str, dtype: int, op: int) -> list[float]:
        buf = self.put(array.array(typecode, values))
        self.drv.call(
            "emuCommAllReduce",
            ctypes.c_void_p(buf),
            ctypes.c_void_p(buf),
            ctypes.c_size_t(len(values)),
            dtype,
            op,
            self.comm,
            self.stream,
        )
        self.sync()
        return self.get(buf, typecode, len(values))


def scenario_collectives(r: Rank) -> dict[str, object]:
    me, n, drv = r.rank, r.n, r.drv
    seen: dict[str, object] = {}
    # float32 sum across more than one 4 MiB piece, with a ragged tail
    count = 1_500_001
    total = r.all_reduce([float(i % 97 + me) for i in range(count)], "f", FLOAT32, SUM)
    seen["sum_ok"] = all(total[i] == n * (i % 97) + sum(range(n)) for i in range(0, count, 997)) and total[-1] == (
        n * ((count - 1) % 97) + sum(range(n))
    )
    seen["avg"] = r.all_reduce([2.0 * (me + 1)] * 3, "f", FLOAT32, AVG)
    seen["max"] = r.all_reduce([float(me), -float(me)], "f", FLOAT32, MAX)
    seen["min"] = r.all_reduce([float(me), -float(me)], "f", FLOAT32, MIN)
    seen["prod"] = r.all_reduce([float(me + 2)], "f", FLOAT32, PROD)
    seen["int64"] = r.all_reduce([2**40 + me], "q", INT64, SUM)
    half = r.all_reduce([0x3C00] * 4, "H", FLOAT16, SUM)  # 1.0 in float16
    seen["float16"] = half
    seen["bfloat16"] = r.all_reduce([0x3F80], "H", BFLOAT16, SUM)  # 1.0 in bfloat16
    # broadcast from the last rank, out of place
    src = r.put(array.array("f", [float(me)] * 5))
    dst = r.put(array.array("f", [0.0] * 5))
    drv.call(
        "emuCommBroadcast",
        ctypes.c_void_p(src),
        ctypes.c_void_p(dst),
        ctypes.c_size_t(5),
        FLOAT32,
        n - 1,
        r.comm,
        r.stream,
    )
    r.sync()
    seen["broadcast"] = r.get(dst, "f", 5)
    # all_gather of 3 elements per rank
    mine = r.put(array.array("f", [float(me * 10 + k) for k in range(3)]))
    gathered = r.put(array.array("f", [0.0] * (3 * n)))
    drv.call(
        "emuCommAllGather",
        ctypes.c_void_p(mine),
        ctypes.c_void_p(gathered),
        ctypes.c_size_t(3),
        FLOAT32,
        r.comm,
        r.stream,
    )
    r.sync()
    seen["all_gather"] = r.get(gathered, "f", 3 * n)
    # reduce_scatter: block b of rank me holds me + b
    blocks = r.put(array.array("f", [float(me + b) for b in range(n) for _ in range(2)]))
    out = r.put(array.array("f", [0.0] * 2))
    drv.call(
        "emuCommReduceScatter",
        ctypes.c_void_p(blocks),
        ctypes.c_void_p(out),
        ctypes.c_size_t(2),
        FLOAT32,
        SUM,
        r.comm,
        r.stream,
    )
    r.sync()
    seen["reduce_scatter"] = r.get(out, "f", 2)
    # reduce to rank 0
    red = r.put(array.array("f", [1.0 + me]))
    drv.call(
        "emuCommReduce",
        ctypes.c_void_p(red),
        ctypes.c_void_p(red),
        ctypes.c_size_t(1),
        FLOAT32,
        SUM,
        0,
        r.comm,
        r.stream,
    )
    r.sync()
    seen["reduce"] = r.get(red, "f", 1)
    # a ring exchange in one group: send to the next rank, receive from the previous (3 MiB: several chunks)
    big = 3 * 2**20 // 4
    sendbuf = r.put(array.array("f", [float(me)] * big))
    recvbuf = r.put(array.array("f", [0.0] * big))
    drv.call("emuCommGroupStart")
    drv.call("emuCommSend", ctypes.c_void_p(sendbuf), ctypes.c_size_t(big), FLOAT32, (me + 1) % n, r.comm, r.stream)
    drv.call("emuCommRecv", ctypes.c_void_p(recvbuf), ctypes.c_size_t(big), FLOAT32, (me - 1) % n, r.comm, r.stream)
    drv.call("emuCommGroupEnd")
    r.sync()
    got = r.get(recvbuf, "f", big)
    seen["ring"] = [got[0], got[-1]]
    # a barrier: a collective of no elements
    drv.call("emuCommAllReduce", None, None, ctypes.c_size_t(0), FLOAT32, SUM, r.comm, r.stream)
    r.sync()
    return seen


def scenario_traced(r: Rank) -> dict[str, object]:
    """API 2.4: a traced collective and a point-to-point exchange are recorded with the caller's correlation id."""
    buf = r.put(array.array("f", [1.0] * 4))
    r.drv.call("emuTraceStart")
    r.drv.call("emuTracePushCorrelation", ctypes.c_uint64(100 + r.rank))
    r.drv.call(
        "emuCommAllReduce",
        ctypes.c_void_p(buf),
        ctypes.c_void_p(buf),
        ctypes.c_size_t(4),
        FLOAT32,
        SUM,
        r.comm,
        r.stream,
    )
    peer = 1 - r.rank
    r.drv.call("emuCommGroupStart")
    r.drv.call("emuCommSend", ctypes.c_void_p(buf), ctypes.c_size_t(4), FLOAT32, peer, r.comm, r.stream)
    r.drv.call("emuCommRecv", ctypes.c_void_p(buf), ctypes.c_size_t(4), FLOAT32, peer, r.comm, r.stream)
    r.drv.call("emuCommGroupEnd")
    r.drv.call("emuTracePopCorrelation")
    r.drv.call("emuTraceStop")
    r.sync()
    records, dropped = read_trace(r.drv)
    return {
        "records": [[x.kind, x.name.decode(), x.correlation, x.end_ns >= x.start_ns] for x in records],
        "dropped": dropped,
        "value": r.get(buf, "f", 4),
    }


def scenario_async(r: Rank) -> dict[str, object]:
    """Rank 1 arrives late: rank 0's call must return before it does (the stream waits, not the caller)."""
    buf = r.put(array.array("f", [1.0]))
    if r.rank == 1:
        time.sleep(0.5)
    start = time.monotonic()
    r.drv.call(
        "emuCommAllReduce",
        ctypes.c_void_p(buf),
        ctypes.c_void_p(buf),
        ctypes.c_size_t(1),
        FLOAT32,
        SUM,
        r.comm,
        r.stream,
    )
    queued = time.monotonic() - start
    r.sync()
    return {"queued_s": queued, "synced_s": time.monotonic() - start, "value": r.get(buf, "f", 1)}


def failing(r: Rank, count: int) -> dict[str, object]:
    buf = r.put(array.array("f", [1.0] * count))
    start = time.monotonic()
    r.drv.call(
        "emuCommAllReduce",
        ctypes.c_void_p(buf),
        ctypes.c_void_p(buf),
        ctypes.c_size_t(count),
        FLOAT32,
        SUM,
        r.comm,
        r.stream,
    )
    try:
        r.sync()
    except EmuError as error:
        seen: dict[str, object] = {"error": error.code, "message": error.message, "after_s": time.monotonic() - start}
        later = r.drv.code(
            "emuCommAllReduce",
            ctypes.c_void_p(buf),
            ctypes.c_void_p(buf),
            ctypes.c_size_t(1),
            FLOAT32,
            SUM,
            r.comm,
            r.stream,
        )
        seen["later"] = later
        seen["later_message"] = r.drv.lib.emuGetLastErrorMessage().decode()
        return seen
    return {"error": 0, "after_s": time.monotonic() - start}


def main() -> None:
    lib, uid, scenario = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[5]
    rank, nranks = int(sys.argv[3]), int(sys.argv[4])
    drv = Driver(Path(lib))
    drv.lib.emuCommGetFailure.restype = ctypes.c_char_p
    r = Rank(drv, rank, nranks, uid, timeout_ms=int(os.environ.get("COMM_TIMEOUT_MS", "20000")))
    if scenario == "collectives":
        seen = scenario_collectives(r)
    elif scenario == "async":
        seen = scenario_async(r)
    elif scenario == "traced":
        seen = scenario_traced(r)
    elif scenario == "dead":
        if rank == 1:
            os._exit(0)  # dies without destroying its communicator
        seen = failing(r, 4)
    elif scenario == "silent":
        if rank == 1:
            time.sleep(6)  # alive, never answers (longer than the peer needs to time out, even on a loaded machine)
            os._exit(0)
        seen = failing(r, 4)
    elif scenario == "mismatch":
        seen = failing(r, 4 if rank == 0 else 8)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    drv.call("emuCommDestroy", r.comm)
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main()
