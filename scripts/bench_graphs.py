#!/usr/bin/env python3
"""Host time to issue 300 small kernels on emu: launched eagerly one by one, against one replay of a graph that
captured them (issue 33's goal: the replay at most a third of the eager time).

Run in an environment with a torch_emu wheel built against driver API 2.3 or newer:  python scripts/bench_graphs.py
Each figure is the best of several rounds, the device drained before each; only the issuing is timed (the kernels
run on the stream's worker either way), and the result is checked against the eager one.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch_emu


def host_ms(issue: Callable[[], None], rounds: int) -> float:
    times = []
    for _ in range(rounds + 1):  # the first round warms the caches
        torch.emu.synchronize()
        start = time.perf_counter()
        issue()
        times.append(time.perf_counter() - start)
        torch.emu.synchronize()
    return min(times[1:]) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if not torch_emu.features().get("graphs", False):
        print("graph capture is not available in this build (needs driver API 2.3)")
        return 1
    x = torch.zeros(256, device="emu")

    def kernels() -> None:
        for _ in range(args.kernels):
            x.add_(1)

    graph = torch.emu.EmuGraph()
    with torch.emu.graph(graph):
        kernels()
    eager = host_ms(kernels, args.rounds)
    with torch.emu.stream(torch.emu.Stream()):
        replay = host_ms(graph.replay, args.rounds)
    # The rounds ran 1 + rounds eager issues and as many replays: every one added args.kernels to every element.
    assert torch.equal(x.cpu(), torch.full((256,), float(2 * (args.rounds + 1) * args.kernels)))
    print(f"{args.kernels} small kernels, issued eagerly:   host {eager:8.3f} ms")
    print(f"{args.kernels} small kernels, one graph replay: host {replay:8.3f} ms")
    print(f"replay / eager: {replay / eager:.3f} (goal: at most 0.333)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
