#!/usr/bin/env python3
"""Benchmarks torch_emu against the CPU, side by side in one run, and prints ratios.

Run in an environment with a torch_emu wheel installed:  python scripts/bench_plugin.py
Targets (issue 2): 1000 small adds emu/CPU <= 3; 64 MiB copies vs a host memcpy >= 0.8 (issue 17; the spread over
rounds is printed); mm 1024 emu/CPU <= 1.2. Each figure is the best of several repeats.
"""

from __future__ import annotations

import argparse
import ctypes
import time
from collections.abc import Callable

import torch
import torch_emu


def best_of(fn: Callable[[], None], repeats: int) -> float:
    fn()  # warm up: caches, allocator, pages
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def add_chain(device: str, n: int = 1000) -> Callable[[], None]:
    x = torch.ones(1000, device=device)
    y = torch.ones(1000, device=device)

    def run() -> None:
        z = x
        for _ in range(n):
            z = z + y
        if device == "emu":
            torch.emu.synchronize()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=12, help="rounds of the 64 MiB copy spread")
    args = parser.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    info = torch_emu.build_info()
    print(
        f"torch {torch.__version__}, torch_emu {info['PLUGIN_VERSION']}, driver API {info['driver_api_runtime']}, "
        f"{torch.get_num_threads()} CPU threads"
    )

    cpu = best_of(add_chain("cpu"), args.repeats)
    emu = best_of(add_chain("emu"), args.repeats)
    print(
        f"1000 x add(1k floats) + synchronize: cpu {cpu * 1e3:8.2f} ms  emu {emu * 1e3:8.2f} ms  "
        f"ratio emu/cpu {emu / cpu:5.2f}  (target <= 3)"
    )

    nbytes = 64 << 20
    host_src = torch.rand(nbytes // 4)
    host_dst = torch.empty_like(host_src)
    dev = torch.empty(nbytes // 4, device="emu")

    def memcpy() -> None:
        ctypes.memmove(host_dst.data_ptr(), host_src.data_ptr(), nbytes)

    def h2d() -> None:
        dev.copy_(host_src)

    def d2h() -> None:
        host_dst.copy_(dev)

    t_memcpy = best_of(memcpy, args.repeats)
    t_h2d = best_of(h2d, args.repeats)
    t_d2h = best_of(d2h, args.repeats)
    gbps = lambda t: nbytes / t / 1e9  # noqa: E731
    print(
        f"64 MiB copy: host memcpy {gbps(t_memcpy):6.2f} GB/s  host->emu {gbps(t_h2d):6.2f} GB/s "
        f"(ratio {t_memcpy / t_h2d:4.2f})  emu->host {gbps(t_d2h):6.2f} GB/s "
        f"(ratio {t_memcpy / t_d2h:4.2f})  (target >= 0.8)"
    )
    # The spread: each round times a memcpy and the two copies back to back, so machine load hits all three alike.
    h2d_ratios, d2h_ratios = [], []
    for _ in range(args.rounds):
        t_m, t_h, t_d = best_of(memcpy, 1), best_of(h2d, 1), best_of(d2h, 1)
        h2d_ratios.append(t_m / t_h)
        d2h_ratios.append(t_m / t_d)
    for name, ratios in (("host->emu", h2d_ratios), ("emu->host", d2h_ratios)):
        ordered = sorted(ratios)
        print(
            f"64 MiB {name} / memcpy over {len(ordered)} rounds: min {ordered[0]:4.2f}  "
            f"median {ordered[len(ordered) // 2]:4.2f}  max {ordered[-1]:4.2f}"
        )
    assert torch.equal(host_dst, host_src)

    a_cpu, b_cpu = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a_emu, b_emu = a_cpu.emu(), b_cpu.emu()

    def mm_cpu() -> None:
        torch.mm(a_cpu, b_cpu)

    def mm_emu() -> None:
        torch.mm(a_emu, b_emu)
        torch.emu.synchronize()

    t_cpu = best_of(mm_cpu, args.repeats)
    t_emu = best_of(mm_emu, args.repeats)
    print(
        f"mm 1024x1024: cpu {t_cpu * 1e3:7.2f} ms  emu {t_emu * 1e3:7.2f} ms  "
        f"ratio emu/cpu {t_emu / t_cpu:4.2f}  (target <= 1.2)"
    )


if __name__ == "__main__":
    main()
