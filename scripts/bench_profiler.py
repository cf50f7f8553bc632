#!/usr/bin/env python3
"""The profiler's overhead on a model step on emu: the same training step timed bare and under each profiler that
sees emu (issue 33's goal: under 10 % each), side by side in one run.

Run in an environment with a torch_emu wheel installed:  python scripts/bench_profiler.py [--steps 20] [--rounds 5]
A step is a small transformer encoder layer's forward, backward and SGD update on a (16, 64, 128) batch, drained with
torch.emu.synchronize(). Each figure is the median over rounds of the mean step time of a round; the rounds of the
three ways interleave, so that a change of the machine's load touches each the same. The profiled rounds include
the profiler's start and stop and its processing of the events (what a user pays around a profiled region).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch
import torch_emu  # registers the emu device on releases that do not autoload it


def make_step() -> Callable[[], None]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True).to("emu")
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.01)
    batch = torch.randn(16, 64, 128, device="emu")

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        layer(batch).square().mean().backward()
        optimizer.step()

    return step


def profilers() -> dict[str, Callable[[], AbstractContextManager[object]]]:
    """The ways timed: bare, and each profiler a user points at emu (device traces where this build has them)."""
    ways: dict[str, Callable[[], AbstractContextManager[object]]] = {
        "bare": nullcontext,
        "torch.profiler (CPU ops, profile_memory)": lambda: torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True
        ),
        'autograd profiler (use_device="emu")': lambda: torch.autograd.profiler.profile(use_device="emu"),
    }
    if torch_emu.device_traces()[0]:
        ways["torch.profiler (CPU ops, emu device traces)"] = lambda: torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
        )
    return ways


def round_ms(step: Callable[[], None], context: Callable[[], AbstractContextManager[object]], steps: int) -> float:
    torch.emu.synchronize()
    start = time.perf_counter()
    with context():
        for _ in range(steps):
            step()
        torch.emu.synchronize()
    return (time.perf_counter() - start) * 1e3 / steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    step = make_step()
    ways = profilers()
    for context in ways.values():  # warm-up: the allocator's cache, the kernels' first use, the profiler's set-up
        round_ms(step, context, 2)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, context in ways.items():
            times[name].append(round_ms(step, context, args.steps))
    bare = statistics.median(times["bare"])
    print(f"torch {torch.__version__}; a step: {args.steps} per round, median of {args.rounds} rounds")
    for name, values in times.items():
        median = statistics.median(values)
        overhead = "" if name == "bare" else f"  overhead {100 * (median / bare - 1):+6.1f} % (goal: under 10 %)"
        print(f"{name:44s} {median:8.2f} ms/step (min {min(values):.2f}, max {max(values):.2f}){overhead}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
