"""emu tensors sent through torch.multiprocessing: refused in the receiving process, with the reason and the way out.

torch.multiprocessing moves a CPU tensor's storage into shared memory and a CUDA tensor's through CUDA IPC handles; any
other device's storage reaches `reduce_storage`, which tries the CPU's file-descriptor sharing and raises. That raise
happens in the sending process's queue feeder thread, where it is only printed, so the receiver waited in
`queue.get()` forever. The emu driver has no inter-process memory handles (emu memory is mapped into one process), so
an emu tensor cannot be shared: its storage now travels as a refusal that raises in the receiver, naming the fix
(send `tensor.cpu()`, or create the tensor in the process that uses it).
"""

from __future__ import annotations

import warnings
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable

import torch
import torch.multiprocessing.reductions  # registers torch's own reducers first

REFUSAL = (
    "emu tensors cannot be shared between processes: the emu driver has no inter-process memory handles (as CUDA "
    "has), so torch.multiprocessing cannot hand an emu storage to another process. Send tensor.cpu() and move it "
    "to emu in the receiving process, or create the tensor there."
)


def refuse_shared_emu_storage(message: str) -> None:
    """Runs in the receiving process when it unpickles an emu storage (module level, so spawn can find it)."""
    raise RuntimeError(message)


def _storage_reducer(torch_reducer: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def reduce_storage(storage: Any) -> Any:
        if storage.device.type != "emu":
            return torch_reducer(storage)
        warnings.warn(f"torch_emu: {REFUSAL}", RuntimeWarning, stacklevel=2)  # the sender's side, printed
        return (refuse_shared_emu_storage, (REFUSAL,))

    return reduce_storage


def install() -> None:
    """Puts emu's storage reducer in front of torch's; every other storage still goes through torch's."""
    torch_reducer = ForkingPickler._extra_reducers.get(torch.UntypedStorage)
    if torch_reducer is None or getattr(torch_reducer, "__module__", "") == __name__:
        return
    ForkingPickler.register(torch.UntypedStorage, _storage_reducer(torch_reducer))
