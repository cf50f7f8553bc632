#!/usr/bin/env python3
"""all_reduce algorithm bandwidth (bytes / time, as nccl-tests' algbw) of emu's eccl backend beside gloo on CPU
tensors and a host memcpy, from 1 KiB to 256 MiB, with 2 and 4 processes, in one run.

Run in an environment with a torch_emu wheel built against driver API 2.3 or newer:
    python scripts/bench_collectives.py [--runs 20] [--max-mib 256] [--procs 2 4]
Each figure is the median of --runs timed all_reduce calls (float32, sum, in place) on rank 0, after one untimed
warm-up; the ranks meet at a barrier before each call, and an eccl call is timed until its stream is done.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch

KIB = 1024


def sizes(max_mib: int) -> list[int]:
    out, size = [], KIB
    while size <= max_mib * KIB * KIB:
        out.append(size)
        size *= 4
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Job:
    backend: str
    world: int
    port: int
    byte_sizes: list[int]
    runs: int


def rank_main(job: Job, rank: int, out: Any) -> None:
    import torch.distributed as dist
    import torch_emu  # noqa: F401  (registers eccl)

    backend, runs = job.backend, job.runs
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(job.port),
        RANK=str(rank),
        WORLD_SIZE=str(job.world),
        LOCAL_RANK=str(rank),
    )
    if backend == "eccl":
        device = torch.device("emu", rank)
        torch.emu.set_device(device)  # type: ignore[attr-defined]
        dist.init_process_group(device_id=device, timeout=timedelta(minutes=10))
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timedelta(minutes=10))
    results = {}
    for nbytes in job.byte_sizes:
        tensor = torch.ones(nbytes // 4, device=device)
        times = []
        for run in range(runs + 1):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            if backend == "eccl":
                torch.emu.synchronize()  # type: ignore[attr-defined]
            if run:  # the first call warms caches and pages
                times.append(time.perf_counter() - start)
        results[nbytes] = statistics.median(times)
    if rank == 0:
        out.put(results)
    dist.destroy_process_group()


def run(backend: str, world: int, byte_sizes: list[int], runs: int) -> dict[int, float]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    job = Job(backend, world, free_port(), byte_sizes, runs)
    procs = [ctx.Process(target=rank_main, args=(job, rank, out)) for rank in range(world)]
    for p in procs:
        p.start()
    results: dict[int, float] = out.get()
    for p in procs:
        p.join()
    return results


def memcpy_times(byte_sizes: list[int], runs: int) -> dict[int, float]:
    results = {}
    for nbytes in byte_sizes:
        src, dst = torch.ones(nbytes // 4), torch.empty(nbytes // 4)
        dst.copy_(src)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            dst.copy_(src)
            times.append(time.perf_counter() - start)
        results[nbytes] = statistics.median(times)
    return results


def label(nbytes: int) -> str:
    return f"{nbytes // (KIB * KIB)} MiB" if nbytes >= KIB * KIB else f"{nbytes // KIB} KiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--max-mib", type=int, default=256)
    parser.add_argument("--procs", type=int, nargs="+", default=[2, 4])
    args = parser.parse_args()
    os.environ["EMU_DEVICE_COUNT"] = str(max(2, *args.procs))  # one device per process (the children inherit it)

    import torch_emu
    from torch_emu import distributed

    ok, why = distributed.available()
    if not ok:
        print(f"eccl is not available: {why}")
        return 1
    byte_sizes = sizes(args.max_mib)
    columns: list[tuple[str, dict[int, float]]] = []
    for world in args.procs:
        for backend in ("eccl", "gloo"):
            columns.append((f"{backend} {world}p", run(backend, world, byte_sizes, args.runs)))
    columns.append(("memcpy", memcpy_times(byte_sizes, args.runs)))
    print(
        f"all_reduce algbw in GB/s (bytes / median time of {args.runs}), float32 sum; torch {torch.__version__}, "
        f"torch_emu {torch_emu.__version__}, {os.cpu_count()} CPUs"
    )
    print(f"{'size':>8}" + "".join(f"{name:>12}" for name, _ in columns))
    for nbytes in byte_sizes:
        print(f"{label(nbytes):>8}" + "".join(f"{nbytes / times[nbytes] / 1e9:>12.3f}" for _, times in columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
