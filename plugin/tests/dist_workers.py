"""Ranks for test_distributed*.py, in a module of their own: a spawned child imports its target by module name
(sys.path comes from the parent, which conftest.py extended with this directory). Each rank puts one result on the
queue: ("ok", rank, payload) or ("error", rank, message)."""

from __future__ import annotations

import contextlib
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

import torch_emu  # noqa: F401  (torch < 2.5 loads no backend by itself)

STEPS = 3
IN, HIDDEN, OUT, BATCH = 8, 16, 4, 8


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


def rank_main(target: str, rank: int, world: int, port: int, results: Any, *args: Any) -> None:
    """Entry point of each spawned rank: the job's environment as torchrun sets it, then the named scenario."""
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
    dist.init_process_group(device_id=device, timeout=timedelta(seconds=timeout_s))
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
    module = _WithUnused().to(device)
    model = DDP(module, device_ids=[device], bucket_cap_mb=0.0005, find_unused_parameters=True)
    model.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(module.net.parameters(), lr=0.1, momentum=0.9)
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
    return {"state": {k: v.cpu().flatten().tolist() for k, v in module.net.state_dict().items()}}


def _fsdp2_model(device: torch.device, seed: int = 0) -> torch.nn.Module:
    """The model sharded per layer and at the root (seed 0: the reference's weights, else random ones)."""
    from torch.distributed.fsdp import fully_shard

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
    from torch.distributed.fsdp import fully_shard

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
    return {"state": {k: v.full_tensor().flatten().tolist() for k, v in model.state_dict().items()}}


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
    if hasattr(dist, "_make_nccl_premul_sum"):  # premul_sum: every rank's input times the factor, then summed
        t = torch.full((2,), float(rank + 1), device=device)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        seen["premul_sum"] = t.cpu().tolist()
        a, r = torch.arange(2.0 * world, device=device), torch.empty(2, device=device)
        dist.reduce_scatter_tensor(r, a, op=dist._make_nccl_premul_sum(torch.tensor(2.0)))
        seen["premul_sum_reduce_scatter"] = (r.cpu().tolist(), a.cpu().tolist())
    t = torch.full((3,), float(rank), device=device)
    dist.broadcast(t, world - 1)
    seen["broadcast"] = t.cpu().tolist()
    outs = [torch.empty(2, device=device) for _ in range(world)]
    dist.all_gather(outs, torch.full((2,), float(rank), device=device))
    seen["all_gather"] = [o.cpu().tolist() for o in outs]
    out = torch.empty(2 * world, device=device)
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank), device=device))
    seen["all_gather_into_tensor"] = out.cpu().tolist()
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


def dtensor(rank: int, world: int) -> dict[str, Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    device = _init(rank)
    mesh = init_device_mesh("emu", (world,))
    torch.manual_seed(0)
    a, b = torch.randn(8, 6), torch.randn(6, 4)
    da = distribute_tensor(a.to(device), mesh, [Shard(0)])
    db = distribute_tensor(b.to(device), mesh, [Replicate()])
    product = (da @ db).redistribute(mesh, [Replicate()]).full_tensor().cpu()
    moved = da.redistribute(mesh, [Replicate()]).redistribute(mesh, [Shard(1)])
    return {
        "matmul_error": float((product - a @ b).abs().max()),
        "redistribute_exact": bool(torch.equal(moved.full_tensor().cpu(), a)),
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
    return {k: v.full_tensor().cpu().flatten().tolist() for k, v in model.state_dict().items()}


def mesh_2d(rank: int, world: int) -> dict[str, Any]:
    """A 2-D DeviceMesh (replicate x shard, new_group subgroups of eccl): each dimension's group sums its own ranks,
    and HSDP (fully_shard on the 2-D mesh: all_reduce across replicas, reduce_scatter within one) matches the
    reference."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device = _init(rank)
    mesh = init_device_mesh("emu", (2, world // 2), mesh_dim_names=("replicate", "shard"))
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
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    device = _init(rank)
    model = FSDP(make_model(), device_id=device, auto_wrap_policy=ModuleWrapPolicy({torch.nn.Linear}))
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, torch.nn.Linear))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = batches()
    for step in range(STEPS):
        opt.zero_grad()
        for x, y in data[2 * step : 2 * step + 2]:
            out = model(_rows(x, rank, world).to(device))
            torch.nn.functional.mse_loss(out, _rows(y, rank, world).to(device)).backward()
        opt.step()
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
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
    "dtensor": dtensor,
    "ddp": ddp,
    "fsdp2": fsdp2,
    "fsdp2_cpu_gloo": fsdp2_cpu_gloo,
    "collectives": collectives,
}
