"""Processes for test_multiprocessing.py, in a module of their own: a spawned child imports its target by module name
(sys.path comes from the parent, which conftest.py extended with this directory)."""

from __future__ import annotations

import torch

import torch_emu  # noqa: F401  (torch < 2.5 loads no backend by itself)

PRODUCER_WAIT_S = 60.0


def produce(queue, done, kind: str) -> None:  # type: ignore[no-untyped-def]
    base = torch.arange(8.0, device="emu")
    tensor = {"tensor": base, "view": base[2:6], "parameter": torch.nn.Parameter(base)}[kind]
    queue.put(tensor)
    done.wait(timeout=PRODUCER_WAIT_S)


def consume(queue, results) -> None:  # type: ignore[no-untyped-def]
    try:
        received = queue.get(timeout=PRODUCER_WAIT_S)
        results.put(("received", received.device.type, received.cpu().tolist()))
    except RuntimeError as exc:
        results.put(("refused", str(exc)))


def produce_cpu_copy(queue, done) -> None:  # type: ignore[no-untyped-def]
    queue.put(torch.arange(4.0, device="emu").cpu())
    done.wait(timeout=PRODUCER_WAIT_S)


def consume_to_emu(queue, results) -> None:  # type: ignore[no-untyped-def]
    received = queue.get(timeout=PRODUCER_WAIT_S).to("emu")
    results.put(("received", received.device.type, (received * 2).cpu().tolist()))
