"""At interpreter exit, torch's autograd threads for emu finish what they are releasing before Python finalizes.

torch runs a backward's device work on one autograd thread per device. That thread completes the graph's result,
which wakes the caller, and only then releases what the graph held; releasing a tensor that has a Python object
takes the GIL. A backward that raised leaves its remaining tasks queued on the thread too, each released as it is
skipped. If Python is finalizing by then, CPython ends the thread inside torch's noexcept frames and the process
aborts: "terminate called without an active exception" (torch 2.13 on Python 3.11; torch's own race, the same for
CUDA). A script ending right after a backward on emu (warning_parity.py in the deep tier) aborted so in about one
run in three here.

The exit handler (atexit runs before finalization starts) runs one small backward on each emu device that has
allocated, holding its tensors until the end: the device's autograd thread finishes its current task before it
takes the new graph, and releases nothing of the new one that has a Python object. A short sleep with the GIL
released then lets it release the tasks an errored backward left queued.
"""

from __future__ import annotations

import atexit
import time

import torch

from torch_emu._library import ops as _ops

SETTLE_SECONDS = 0.02  # the queued tasks of an errored backward are skipped in microseconds each


def _settle_autograd_threads() -> None:
    try:
        if _ops.fork_is_bad():
            return
        used = [i for i in range(_ops.device_count()) if _ops.memory_stats(i)["allocation.all.allocated"] > 0]
        if not used:
            return
        held = []  # the graphs' tensors, released here, on this thread, once the autograd threads have settled
        for index in used:
            leaf = torch.zeros((), device=f"emu:{index}", requires_grad=True)
            root = leaf * 1
            root.backward()
            held += [leaf, root]
        time.sleep(SETTLE_SECONDS)
        del held
    except Exception:  # never turn a clean exit into a traceback
        pass


def install() -> None:
    atexit.register(_settle_autograd_threads)
