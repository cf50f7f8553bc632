"""Ranks for test_distributed*.py, in a module of their own: a spawned child imports its target by module name
(sys.path comes from the parent, which conftest.py extended with this directory). Each rank puts one result on the
queue: ("ok", rank, payload) or ("error", rank, message)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import multiprocessing
import os
import queue
import socket
import time
import traceback
import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from packaging.version import Version

# A rank imports torch_emu itself (torch < 2.5 loads no backend by itself), unless the job runs without it: with
# WITHOUT_TORCH_EMU set and torch's autoloading off, a rank is what it would be if torch_emu were not installed.
WITHOUT_TORCH_EMU = "EMU_TEST_WITHOUT_TORCH_EMU"

STEPS = 3
IN, HIDDEN, OUT, BATCH = 8, 16, 4, 8


def first_api(*names: str) -> Any:
    """The first of "module:attribute" names this torch has (public paths moved between releases), or None."""
    for name in names:
        module, attribute = name.split(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError):
            continue
    return None


def _release() -> tuple[int, ...]:
    return Version(torch.__version__.split("+")[0]).release[:2]


def fully_shard_api() -> Any:
    """FSDP2's fully_shard: public from torch 2.6, under _composable in 2.4 and 2.5, absent before."""
    return first_api("torch.distributed.fsdp:fully_shard", "torch.distributed._composable.fsdp:fully_shard")


def fsdp2_off_cuda() -> bool:
    """Whether FSDP2 runs on a device other than CUDA: torch 2.4 and 2.5 make its streams with torch.cuda.Stream
    (2.5 refuses with "FSDP requires CUDA for streams", on a CPU model too); 2.6 takes the device's own module."""
    return fully_shard_api() is not None and _release() >= (2, 6)


def ddp_finds_unused_parameters() -> bool:
    """Whether DDP's find_unused_parameters works off CUDA: torch 2.3 and 2.4's reducer pins its map of used
    parameters and asserts is_pinned(), which cannot see PrivateUse1 pinned memory before 2.5 (2.1 and 2.2 do not
    pin it)."""
    return _release() not in ((2, 3), (2, 4))


def dtensor_api() -> Any:
    """The DTensor module (Shard, Replicate, distribute_tensor): torch.distributed.tensor from torch 2.5,
    torch.distributed._tensor before; None where neither has them."""
    for name in ("torch.distributed.tensor", "torch.distributed._tensor"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "distribute_tensor"):
            return module
    return None


def init_device_mesh_api() -> Any:
    """init_device_mesh: torch.distributed.device_mesh from torch 2.2, under DTensor's package in 2.1."""
    return first_api(
        "torch.distributed.device_mesh:init_device_mesh", "torch.distributed._tensor.device_mesh:init_device_mesh"
    )


def full_tensor(t: Any) -> torch.Tensor:
    """A DTensor's whole value on every rank (DTensor.full_tensor from torch 2.2; a redistribution before)."""
    if hasattr(t, "full_tensor"):
        return t.full_tensor()  # type: ignore[no-any-return]
    replicate = dtensor_api().Replicate
    return t.redistribute(t.device_mesh, [replicate()] * t.device_mesh.ndim).to_local()  # type: ignore[no-any-return]


def premul_sum_has_factor() -> bool:
    """Whether c10d's ReduceOp hands premul_sum's factor to Python (from torch 2.9 or so): a Python process group
    cannot run premul_sum without it."""
    make = getattr(dist, "_make_nccl_premul_sum", None)
    return make is not None and hasattr(make(1.0), "factor")


def device_id_takes_emu() -> bool:
    """Whether init_process_group(device_id=emu:N) works: torch 2.1 and 2.2 have no device_id, and 2.3 to 2.6 refuse
    any device but CUDA's (and only after their store is up, so trying it first leaves a job that cannot start)."""
    return _release() >= (2, 7)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_job(target: str, world: int, *args: Any, answers: int | None = None, timeout_s: float = 240.0) -> list[Any]:
    """Spawns `world` ranks of a scenario and returns their payloads in rank order (`answers` of them: a rank that
    dies on purpose sends none); raises AssertionError with a rank's traceback if it failed."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    processes = [
        ctx.Process(target=rank_main, args=(target, rank, world, port, results, *args), daemon=True)
        for rank in range(world)
    ]
    for process in processes:
        process.start()
    got = []
    deadline = time.monotonic() + timeout_s
    try:
        for _ in range(world if answers is None else answers):
            got.append(results.get(timeout=max(1.0, deadline - time.monotonic())))
    except queue.Empty:
        raise AssertionError(f"{target}: only {len(got)} of {world} ranks answered within {timeout_s:.0f} s") from None
    finally:
        for process in processes:
            process.join(max(1.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(10)
    failed = [f"rank {rank}: {payload}" for status, rank, payload in got if status != "ok"]
    assert not failed, "\n".join(failed)
    return [payload for _, _, payload in sorted(got, key=lambda r: r[1])]


def without_torch_emu() -> dict[str, str]:
    """The environment of a job whose ranks run as if torch_emu were not installed (see run_job)."""
    return {WITHOUT_TORCH_EMU: "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def rank_main(target: str, rank: int, world: int, port: int, results: Any, *args: Any) -> None:
    """Entry point of each spawned rank: the job's environment as torchrun sets it, then the named scenario."""
    if not os.environ.get(WITHOUT_TORCH_EMU):
        import torch_emu  # noqa: F401
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=os.environ.get("TEST_LOCAL_WORLD_SIZE", str(world)),
    )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            payload = SCENARIOS[target](rank, world, *args)
        if isinstance(payload, dict):
            payload["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        results.put(("ok", rank, payload))
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(("error", rank, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    finally:
        if dist.is_initialized():
            with contextlib.suppress(Exception):  # a failed group: nothing left to free
                dist.destroy_process_group()


def _init(rank: int, timeout_s: float = 120.0) -> torch.device:
    device = torch.device("emu", rank)
    torch.emu.set_device(device)  # type: ignore[attr-defined]
    timeout = timedelta(seconds=timeout_s)
    if device_id_takes_emu():
        dist.init_process_group(device_id=device, timeout=timeout)
        return device
    dist.init_process_group("eccl", timeout=timeout)  # this torch takes no emu device_id: the backend is named
    return device


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, OUT),
    )


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Two micro-batches per step, each the whole batch of the job (every rank takes its rows)."""
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, IN, generator=g), torch.randn(BATCH, OUT, generator=g)) for _ in range(2 * STEPS)]


def reference() -> dict[str, list[float]]:
    """One CPU process on the whole batch: what every distributed run must reproduce."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = batches()
    for step in range(STEPS):
        opt.zero_grad()
        for x, y in data[2 * step : 2 * step + 2]:
            torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return {k: v.flatten().tolist() for k, v in model.state_dict().items()}


def _rows(t: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    return t.chunk(world)[rank]


class _WithUnused(torch.nn.Module):
    """The model plus a layer no forward uses: DDP needs find_unused_parameters for it."""

    def __init__(self) -> None:
        super().__init__()
        self.net = make_model()
        self.unused = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def ddp(rank: int, world: int) -> dict[str, Any]:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _init(rank)
    find_unused = ddp_finds_unused_parameters()
    with_unused = _WithUnused()
    net = with_unused.net
    module = (with_unused if find_unused else net).to(device)  # Module.to moves in place: net is on the device
    model = DDP(module, device_ids=[device], bucket_cap_mb=0.0005, find_unused_parameters=find_unused)
    model.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    data = batches()
    for step in range(STEPS):
        opt.zero_grad()
        (x1, y1), (x2, y2) = data[2 * step : 2 * step + 2]
        with model.no_sync():  # gradient accumulation: the first micro-batch does not communicate
            torch.nn.functional.mse_loss(
                model(_rows(x1, rank, world).to(device)), _rows(y1, rank, world).to(device)
            ).backward()
        torch.nn.functional.mse_loss(
            model(_rows(x2, rank, world).to(device)), _rows(y2, rank, world).to(device)
        ).backward()
        opt.step()
    return {"state": {k: v.cpu().flatten().tolist() for k, v in net.state_dict().items()}}


def _fsdp2_model(device: torch.device, seed: int = 0) -> torch.nn.Module:
    """The model sharded per layer and at the root (seed 0: the reference's weights, else random ones)."""
    fully_shard = fully_shard_api()

    model = make_model()
    if seed:
        torch.manual_seed(seed)
        for p in model.parameters():
            torch.nn.init.normal_(p)
    model = model.to(device)
    for index in (0, 2):
        fully_shard(model[index])
    fully_shard(model)
    return model


def fsdp2(rank: int, world: int, checkpoint_path: str) -> dict[str, Any]:
    """Activation checkpointing and 3 steps, then the state through torch.distributed.checkpoint (in the same job:
    a job of its own would cost the deep tier another ~30 s of process start-up)."""
    from torch.utils.checkpoint import checkpoint

    device = _init(rank)
    model = _fsdp2_model(device)

    class Checkpointed(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return checkpoint(self.inner, x, use_reentrant=False)

    wrapped = Checkpointed(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = batches()
    for step in range(STEPS):
        opt.zero_grad()
        for x, y in data[2 * step : 2 * step + 2]:
            loss = torch.nn.functional.mse_loss(
                wrapped(_rows(x, rank, world).to(device)), _rows(y, rank, world).to(device)
            )
            loss.backward()
        opt.step()
    seen = {"state": _full_state(model), "placements": str(next(iter(model.parameters())).placements)}
    return {**seen, **_checkpoint_round_trip(model, opt, device, rank, world, path=checkpoint_path)}


def fsdp2_cpu_gloo(rank: int, world: int) -> dict[str, Any]:
    """CPU training over gloo with torch_emu installed: the default mesh must stay on CPU."""
    fully_shard = fully_shard_api()

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    model = make_model()
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = batches()
    for step in range(STEPS):
        opt.zero_grad()
        for x, y in data[2 * step : 2 * step + 2]:
            torch.nn.functional.mse_loss(model(_rows(x, rank, world)), _rows(y, rank, world)).backward()
        opt.step()
    return {"state": {k: full_tensor(v).flatten().tolist() for k, v in model.state_dict().items()}}


def _premul_sum(device: torch.device, world: int) -> dict[str, Any]:
    """premul_sum: every rank's input times the factor, then summed; refused where the factor is out of reach."""
    seen: dict[str, Any] = {}
    rank = dist.get_rank()
    if premul_sum_has_factor():
        t = torch.full((2,), float(rank + 1), device=device)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        seen["premul_sum"] = t.cpu().tolist()
        a, r = torch.arange(2.0 * world, device=device), torch.empty(2, device=device)
        dist.reduce_scatter_tensor(r, a, op=dist._make_nccl_premul_sum(torch.tensor(2.0)))
        seen["premul_sum_reduce_scatter"] = (r.cpu().tolist(), a.cpu().tolist())
    elif hasattr(dist, "_make_nccl_premul_sum"):
        try:
            dist.all_reduce(torch.ones(2, device=device), op=dist._make_nccl_premul_sum(0.5))
        except ValueError as exc:
            seen["premul_sum_refused"] = str(exc)
    return seen


def collectives(rank: int, world: int) -> dict[str, Any]:
    """A small tour of the collectives on emu tensors; each answer is checked by the parent."""
    device = _init(rank)
    seen: dict[str, Any] = {"backend": dist.get_backend()}
    t = torch.full((5,), float(rank + 1), device=device)
    dist.all_reduce(t)
    seen["all_reduce"] = t.cpu().tolist()
    for name, op in (("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN), ("avg", dist.ReduceOp.AVG)):
        t = torch.tensor([float(rank), 10.0 - rank], device=device)
        dist.all_reduce(t, op=op)
        seen[name] = t.cpu().tolist()
    seen.update(_premul_sum(device, world))
    t = torch.full((3,), float(rank), device=device)
    dist.broadcast(t, world - 1)
    seen["broadcast"] = t.cpu().tolist()
    outs = [torch.empty(2, device=device) for _ in range(world)]
    dist.all_gather(outs, torch.full((2,), float(rank), device=device))
    seen["all_gather"] = [o.cpu().tolist() for o in outs]
    out = torch.empty(2 * world, device=device)
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank), device=device))
    seen["all_gather_into_tensor"] = out.cpu().tolist()
    coalesced = [[torch.empty(2, device=device), torch.empty(1, device=device)] for _ in range(world)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch deprecates it for all_gather_into_tensor
        inputs = [torch.full((2,), float(rank), device=device), torch.full((1,), 10.0 + rank, device=device)]
        dist.all_gather_coalesced(coalesced, inputs)
    seen["all_gather_coalesced"] = [[t.cpu().tolist() for t in outs] for outs in coalesced]
    r = torch.empty(2, device=device)
    dist.reduce_scatter_tensor(r, torch.arange(2.0 * world, device=device))
    seen["reduce_scatter_tensor"] = r.cpu().tolist()
    a = torch.arange(2.0 * world, device=device) + 100 * rank
    b = torch.empty(2 * world, device=device)
    dist.all_to_all_single(b, a)
    seen["all_to_all_single"] = b.cpu().tolist()
    x, y = torch.full((3,), float(rank), device=device), torch.empty(3, device=device)
    peer = (rank + 1) % world
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer), dist.P2POp(dist.irecv, y, (rank - 1) % world)])
    for w in works:
        w.wait()
    seen["batch_isend_irecv"] = y.cpu().tolist()
    objects: list[Any] = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    seen["all_gather_object"] = objects
    listed = [f"from {rank}"]
    dist.broadcast_object_list(listed, 0)
    seen["broadcast_object_list"] = listed
    start = time.monotonic()
    work = dist.all_reduce(torch.ones(1 << 16, device=device), async_op=True)
    seen["async_returned_s"] = time.monotonic() - start
    work.wait()
    dist.barrier()
    seen["profiled"] = _profile_all_reduce(device)
    return seen


def _profile_all_reduce(device: torch.device) -> dict[str, Any]:
    """What torch sees of one all_reduce: the ops the profiler records, and whether any CPU memory was allocated."""
    from torch.profiler import ProfilerActivity, profile

    tensor = torch.ones(1 << 12, device=device)
    dist.all_reduce(tensor)
    torch.emu.synchronize()  # type: ignore[attr-defined]
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        dist.all_reduce(tensor)
        torch.emu.synchronize()  # type: ignore[attr-defined]
    events = list(prof.events())
    return {
        "ops": sorted({e.name for e in events if e.name.startswith("aten::")}),
        "cpu_bytes": sum(max(0, e.cpu_memory_usage) for e in events),
    }


def dead_rank(rank: int, world: int, timeout_s: float) -> dict[str, Any]:
    """Rank 1 dies after a first collective; rank 0's next one must fail, well before the group's timeout."""
    device = _init(rank, timeout_s)
    t = torch.ones(4, device=device)
    dist.all_reduce(t)
    t.cpu()
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        t.cpu()
    except RuntimeError as exc:
        return {"error": str(exc), "after_s": time.monotonic() - start}
    return {"error": None, "after_s": time.monotonic() - start}


def mismatch(rank: int, world: int) -> dict[str, Any]:
    """Ranks disagree on the shape (rank 0) or the dtype (the others) of one all_reduce."""
    device = _init(rank)
    t = torch.ones(4, device=device) if rank == 0 else torch.ones(8, device=device, dtype=torch.float64)
    try:
        dist.all_reduce(t)
        t.cpu()
    except RuntimeError as exc:
        return {"error": str(exc)}
    return {"error": None}


def regroup(rank: int, world: int, second_port: int) -> dict[str, Any]:
    """A destroyed group frees its communicator; a new group in the same processes works, and so does a subgroup."""
    device = _init(rank)
    t = torch.ones(2, device=device)
    dist.all_reduce(t)
    first = t.cpu().tolist()
    dist.destroy_process_group()
    os.environ["MASTER_PORT"] = str(second_port)
    _init(rank)
    sub = dist.new_group(list(range(world)))
    t = torch.full((2,), float(rank), device=device)
    dist.all_reduce(t, group=sub)
    return {"first": first, "subgroup": t.cpu().tolist()}


def barrier_on_the_used_device(rank: int, world: int) -> dict[str, Any]:
    """A process that never sets its current device (emu:0 for every rank) and works on emu:<rank>: its barrier meets
    its peers on the device the group already uses (as ProcessGroupNCCL's), instead of waiting on another one."""
    dist.init_process_group("eccl", timeout=timedelta(seconds=60))
    t = torch.full((1,), float(rank), dtype=torch.float64, device=torch.device("emu", rank))
    dist.broadcast(t, 0)
    dist.barrier()
    dist.barrier(device_ids=[rank])
    return {"current": torch.emu.current_device(), "broadcast": t.cpu().tolist()}  # type: ignore[attr-defined]


def dtensor(rank: int, world: int) -> dict[str, Any]:
    api = dtensor_api()
    Replicate, Shard, distribute_tensor = api.Replicate, api.Shard, api.distribute_tensor

    device = _init(rank)
    mesh = init_device_mesh_api()("emu", (world,))
    torch.manual_seed(0)
    a, b = torch.randn(8, 6), torch.randn(6, 4)
    da = distribute_tensor(a.to(device), mesh, [Shard(0)])
    db = distribute_tensor(b.to(device), mesh, [Replicate()])
    product = full_tensor((da @ db).redistribute(mesh, [Replicate()])).cpu()
    moved = da.redistribute(mesh, [Replicate()]).redistribute(mesh, [Shard(1)])
    return {
        "matmul_error": float((product - a @ b).abs().max()),
        "redistribute_exact": bool(torch.equal(full_tensor(moved).cpu(), a)),
        "local_shape": list(moved.to_local().shape),
    }


def _train_fsdp2(
    model: torch.nn.Module, opt: torch.optim.Optimizer, device: torch.device, rank: int, world: int
) -> None:
    """The reference's steps on this rank's rows (no activation checkpointing: fsdp2 above has it)."""
    data = batches()
    for step in range(STEPS):
        opt.zero_grad()
        for x, y in data[2 * step : 2 * step + 2]:
            out = model(_rows(x, rank, world).to(device))
            torch.nn.functional.mse_loss(out, _rows(y, rank, world).to(device)).backward()
        opt.step()


def _full_state(model: torch.nn.Module) -> dict[str, list[float]]:
    return {k: full_tensor(v).cpu().flatten().tolist() for k, v in model.state_dict().items()}


def mesh_2d(rank: int, world: int) -> dict[str, Any]:
    """A 2-D DeviceMesh (replicate x shard, new_group subgroups of eccl): each dimension's group sums its own ranks,
    and HSDP (fully_shard on the 2-D mesh: all_reduce across replicas, reduce_scatter within one) matches the
    reference."""
    fully_shard = fully_shard_api()

    device = _init(rank)
    mesh = init_device_mesh_api()("emu", (2, world // 2), mesh_dim_names=("replicate", "shard"))
    sums = {}
    for name in ("replicate", "shard"):
        group = mesh[name].get_group()
        t = torch.full((2,), float(rank), device=device)
        dist.all_reduce(t, group=group)
        sums[name] = (dist.get_backend(group), dist.get_process_group_ranks(group), t.cpu().tolist())
    model = make_model().to(device)
    for index in (0, 2):
        fully_shard(model[index], mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _train_fsdp2(model, opt, device, rank, world)
    return {"sums": sums, "state": _full_state(model), "placements": str(next(iter(model.parameters())).placements)}


def _checkpoint_round_trip(
    model: torch.nn.Module, opt: torch.optim.Optimizer, device: torch.device, rank: int, world: int, *, path: str
) -> dict[str, Any]:
    """The FSDP2 model and its optimizer saved with torch.distributed.checkpoint, loaded into a model made from another
    seed: the loaded model equals the saved one, and one more step keeps them equal (momentum came back too)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, opt_state = get_state_dict(model, opt)
    dcp.save({"model": model_state, "optim": opt_state}, checkpoint_id=path)
    saved = _full_state(model)
    other = _fsdp2_model(device, seed=7)
    other_opt = torch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)
    before = _full_state(other)
    model_state, opt_state = get_state_dict(other, other_opt)
    state = {"model": model_state, "optim": opt_state}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(other, other_opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    loaded = _full_state(other)
    x, y = batches()[0]
    for m, o in ((model, opt), (other, other_opt)):
        o.zero_grad()
        torch.nn.functional.mse_loss(m(_rows(x, rank, world).to(device)), _rows(y, rank, world).to(device)).backward()
        o.step()
    return {
        "loaded_equal": loaded == saved,
        "differed_before": before != saved,
        "next_step_equal": _full_state(model) == _full_state(other),
        "shard_device": str(next(iter(other.parameters())).to_local().device),
    }


def fsdp1(rank: int, world: int) -> dict[str, Any]:
    """FullyShardedDataParallel (FSDP1, where the release still has it) per Linear, with activation checkpointing."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )
    from torch.distributed.fsdp import FullStateDictConfig, StateDictType
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    device = _init(rank)
    model = FSDP(make_model(), device_id=device, auto_wrap_policy=ModuleWrapPolicy({torch.nn.Linear}))
    # Non-reentrant, as the newer releases default to (torch 2.1's reentrant default drops the graph for inputs that
    # do not require grad).
    apply_activation_checkpointing(
        model,
        checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, torch.nn.Linear),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = batches()
    for step in range(STEPS):
        opt.zero_grad()
        for x, y in data[2 * step : 2 * step + 2]:
            out = model(_rows(x, rank, world).to(device))
            torch.nn.functional.mse_loss(out, _rows(y, rank, world).to(device)).backward()
        opt.step()
    config = FullStateDictConfig(offload_to_cpu=False, rank0_only=False)  # every release with FSDP1 has it
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, config):
        full = model.state_dict()
    return {
        "state": {k: v.cpu().flatten().tolist() for k, v in full.items()},
        "flat_device": str(next(iter(model.parameters())).device),
    }


SCENARIOS: dict[str, Callable[..., Any]] = {
    "mesh_2d": mesh_2d,
    "fsdp1": fsdp1,
    "dead_rank": dead_rank,
    "mismatch": mismatch,
    "regroup": regroup,
    "barrier_on_the_used_device": barrier_on_the_used_device,
    "dtensor": dtensor,
    "ddp": ddp,
    "fsdp2": fsdp2,
    "fsdp2_cpu_gloo": fsdp2_cpu_gloo,
    "collectives": collectives,
}
