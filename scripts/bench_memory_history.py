#!/usr/bin/env python3
"""What emu's memory history costs per allocation and free: history off, on without stacks, on with Python stacks.

Run in an environment with a torch_emu wheel:  python scripts/bench_memory_history.py
Each figure is a cached small block taken and given back (torch.empty(256) on emu, then dropped), in microseconds per
pair: the best and the median of several rounds. With a wheel that has no memory history (torch_emu < 0.4.3) only
the first row is printed, so the same script run against both wheels shows what the history costs while it is off.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch_emu


def pair_us(pairs: int, rounds: int) -> tuple[float, float]:
    """Best and median microseconds per allocate-and-free pair over rounds of `pairs` pairs."""
    per_pair = []
    for _ in range(rounds + 1):  # the first round warms the cache
        start = time.perf_counter()
        for _ in range(pairs):
            x = torch.empty(256, device="emu")
            del x
        per_pair.append((time.perf_counter() - start) / pairs * 1e6)
    return min(per_pair[1:]), statistics.median(per_pair[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    memory = getattr(torch.emu, "memory", None)
    record = getattr(memory, "_record_memory_history", None)
    cases: list[tuple[str, dict | None]] = [("history off", None)]
    if record is not None:
        cases += [
            ("history on, no stacks", {"enabled": "all", "context": None, "stacks": "python"}),
            ("history on, Python stacks", {"enabled": "all", "context": "all", "stacks": "python"}),
        ]
    history = "with" if record is not None else "without"
    print(f"torch {torch.__version__}, torch_emu {torch_emu.__version__} ({history} memory history)")
    print(f"{args.pairs} pairs x {args.rounds} rounds")
    for name, options in cases:
        if options is not None and record is not None:
            record(**options, max_entries=4096, clear_history=True)
        best, median = pair_us(args.pairs, args.rounds)
        if record is not None:
            record(None, clear_history=True)
        print(f"{name:28s} best {best:7.2f} us/pair   median {median:7.2f} us/pair")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
