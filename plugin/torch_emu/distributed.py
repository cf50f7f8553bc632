"""The collective backend of the emu device, "eccl": a c10d process group over the driver's interconnect.

`import torch_emu` registers it for the device, so `init_process_group(device_id=torch.device("emu", local_rank))`
picks it with no backend named, and `backend="eccl"` or `"cpu:gloo,emu:eccl"` name it. Each process uses one emu
device (its LOCAL_RANK); processes exchange data only through the driver's communicators (shared memory between the
processes of one host, driver API 2.3). Every collective is one driver call queued on the current emu stream of its
tensors: no CPU tensor is made and nothing is copied through torch, the call returns at once, and the returned
Work's wait() makes the caller's current stream wait for it (as ProcessGroupNCCL does).

It is a Python process group (a `torch.distributed.ProcessGroup` subclass, as PyTorch's test_c10d_pypg shows) over
compiled operators (torch.ops.torch_emu.comm_*), because a C++ c10d::Backend can only be handed to Python through
pybind11, that is through the CPython API, and the compiled library has none (one py3-none wheel serves every
Python). CPU tensors in the same group (object collectives, "cpu:gloo,emu:eccl") go to a gloo group it owns.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist

from torch_emu._after_import import after_import
from torch_emu._library import ops as _ops

BACKEND = "eccl"
DEVICE = "emu"
# The NCCL release whose collective features eccl offers, for code that checks torch.cuda.nccl.version() after
# transfer_to_emu: send/recv (NCCL 2.7), bfloat16 and ReduceOp.AVG (2.10), PREMUL_SUM (2.11). Not communicator
# splitting (2.18) or shrinking (2.27), which eccl lacks.
NCCL_EQUIVALENT = (2, 11, 0)


def available() -> tuple[bool, str]:
    """Whether this build can run collectives, and why not."""
    if not dist.is_available():
        return False, "torch.distributed is not available in this torch build"
    if not _ops.comm_available():
        api = "{}.{}".format(*divmod(_ops.driver_version(), 1000))
        return False, f"needs driver API 2.3 (the interconnect); this torch_emu was built against driver API {api}"
    return True, ""


def one_host_problem(environ: Any = None) -> str | None:
    """Why this job cannot use eccl (its ranks span hosts, as torchrun --nnodes 2 makes them), or None."""
    env = os.environ if environ is None else environ
    world, local = env.get("WORLD_SIZE"), env.get("LOCAL_WORLD_SIZE")
    if world is None or local is None or int(world) == int(local):
        return None
    return (
        f"eccl connects the processes of one host only (shared memory), but this job has WORLD_SIZE={world} "
        f"processes with LOCAL_WORLD_SIZE={local} per host (torchrun --nnodes > 1). Run the job on one host "
        "(--nnodes 1), or use gloo on CPU tensors across hosts."
    )


def _create(dist_opts: Any, pg_options: Any) -> Any:
    problem = one_host_problem()
    if problem is not None:
        raise RuntimeError(problem)
    from torch_emu._eccl_group import ProcessGroupECCL

    return ProcessGroupECCL(dist_opts.store, dist_opts.group_rank, dist_opts.group_size, dist_opts.timeout)


# Where FSDP2 makes its default mesh (the module paths moved between releases); each defines one or both functions.
_MESH_MODULES = (
    "torch.distributed.fsdp._fully_shard._fsdp_init",
    "torch.distributed.fsdp._fully_shard._fully_shard",
    "torch.distributed._composable.fsdp._fsdp_init",
    "torch.distributed._composable.fsdp.fully_shard",
    "torch.distributed._composable.replicate_with_fsdp",
)
_MESH_FUNCTIONS = ("_init_default_mesh", "_init_default_fully_shard_mesh")
_PATCHED = "__emu_default_mesh__"


def _mesh_follows_group(original: Any) -> Any:
    """FSDP2's default mesh takes the current accelerator's device type, and with torch_emu loaded that is emu even
    for a job whose default group is gloo only: CPU training that worked without torch_emu then failed with "No
    backend type associated with device type emu". Such a group gets the CPU mesh it got before."""
    if getattr(original, _PATCHED, False):
        return original

    @functools.wraps(original)
    def default_mesh(*args: Any, **kwargs: Any) -> Any:
        if dist.is_initialized():
            group = dist.distributed_c10d._get_default_group()
            served = {d.type for d in getattr(group, "_device_types", [])}
            accelerator = torch._C._get_accelerator().type
            if served and accelerator not in served and "cpu" in served:
                from torch.distributed.device_mesh import init_device_mesh

                names = kwargs.get("mesh_dim_names", args[0] if args else None)
                return init_device_mesh("cpu", mesh_shape=(group.size(),), mesh_dim_names=names)
        return original(*args, **kwargs)

    setattr(default_mesh, _PATCHED, True)
    return default_mesh


def _patch_default_mesh(module: ModuleType) -> None:
    for name in _MESH_FUNCTIONS:
        if hasattr(module, name):
            setattr(module, name, _mesh_follows_group(getattr(module, name)))


def register() -> None:
    """Registers eccl with c10d for the emu device (once; on torch releases that take a device list), and keeps
    FSDP2's default mesh on CPU for groups without an emu backend."""
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:  # type: ignore[attr-defined]
        return
    for module in _MESH_MODULES:
        after_import(module, _patch_default_mesh)
    try:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=[DEVICE])
    except TypeError:  # torch < 2.2: no devices argument
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)
