#!/usr/bin/env python3
"""How long the host waits in a 64 MiB host->emu copy: non_blocking from pinned memory (queued on the stream),
non_blocking from pageable memory (staged in a pinned block, then queued), and a blocking copy.

Run in an environment with a torch_emu wheel built against driver API 2.2 or newer:  python scripts/bench_pinned.py
Each figure is the best of several rounds, the stream drained before each; the copy itself is not timed for the two
non_blocking cases (that is the point of them).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch_emu


def host_wait_ms(copy: Callable[[], None], rounds: int) -> float:
    times = []
    for _ in range(rounds + 1):  # the first round warms the caches (allocators, pages)
        torch.emu.synchronize()
        start = time.perf_counter()
        copy()
        times.append(time.perf_counter() - start)
        torch.emu.synchronize()
    return min(times[1:]) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if not torch_emu.features()["pinned_memory"]:
        print("pinned host memory is not available in this build (needs driver API 2.2)")
        return 1
    pageable = torch.randn(args.mib << 18)
    # Before torch 2.9 pin_memory() pins for CUDA unless given the device.
    pinned = pageable.pin_memory() if torch.__version__ >= (2, 9) else pageable.pin_memory("emu")
    dev = torch.empty_like(pageable, device="emu")
    cases = {
        "pinned, non_blocking": lambda: dev.copy_(pinned, non_blocking=True),
        "pageable, non_blocking": lambda: dev.copy_(pageable, non_blocking=True),
        "blocking": lambda: dev.copy_(pageable),
    }
    for name, copy in cases.items():
        print(f"{args.mib} MiB host->emu, {name:24s} host waits {host_wait_ms(copy, args.rounds):8.2f} ms")
    assert torch.equal(dev.cpu(), pageable)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
