"""emu tensors and torch.multiprocessing: an emu tensor put on a queue is refused in the receiving process with the
reason and the way out (the receiver used to wait forever); CPU tensors still travel, and become emu tensors there.

PyTorch's reference backend shares device memory through IPC handles of its driver; the emu driver has none, so the
sharing itself is not available and the refusal is what is tested. Every child is bounded by a timeout.
"""

from __future__ import annotations

import multiprocessing

import mp_workers
import pytest
from smoke_gates import child_process_deep

pytestmark = pytest.mark.feature("multiprocessing")

TIMEOUT_S = 120.0


def _exchange(producer, consumer, *args):  # type: ignore[no-untyped-def]
    ctx = multiprocessing.get_context("spawn")
    queue, results, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    processes = [
        ctx.Process(target=producer, args=(queue, done, *args)),
        ctx.Process(target=consumer, args=(queue, results)),
    ]
    for process in processes:
        process.start()
    try:
        outcome = results.get(timeout=TIMEOUT_S)
    finally:
        done.set()
        for process in processes:
            process.join(TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join(10)
                pytest.fail(f"{process.name} hung for {TIMEOUT_S:.0f} s")
    assert [p.exitcode for p in processes] == [0, 0]
    return outcome


# Every cell checks a plain tensor; the build's deep cell the other kinds.
@pytest.mark.parametrize(
    "kind",
    ["tensor", pytest.param("view", marks=child_process_deep), pytest.param("parameter", marks=child_process_deep)],
)
def test_an_emu_tensor_on_a_queue_is_refused_in_the_receiver(kind):  # type: ignore[no-untyped-def]
    outcome = _exchange(mp_workers.produce, mp_workers.consume, kind)
    assert outcome[0] == "refused", outcome
    assert "emu tensors cannot be shared between processes" in outcome[1]
    assert "tensor.cpu()" in outcome[1]


def test_a_cpu_copy_travels_and_moves_to_emu_there():
    outcome = _exchange(mp_workers.produce_cpu_copy, mp_workers.consume_to_emu)
    assert outcome == ("received", "emu", [0.0, 2.0, 4.0, 6.0])
