"""Training on the emu collective backend (deep tier: each test runs a job of two processes, the 2-D mesh four): DDP,
FSDP2 (HSDP on a 2-D mesh too), FSDP1 and DTensor on emu devices match one CPU process, FSDP2's state goes through
torch.distributed.checkpoint, CPU FSDP2 over gloo still works with torch_emu installed, faults fail the
job instead of hanging it, and a CUDA-written DDP script runs under torchrun after one import."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dist_workers
import pytest
import torch
from packaging.specifiers import SpecifierSet
from smoke_gates import TORCH
from test_distributed import requires_collectives

pytestmark = [pytest.mark.feature("distributed"), pytest.mark.deep]


# Checked when a test runs, not when the module is collected: finding FSDP2 and DTensor imports torch.distributed.fsdp
# and .tensor (1.6 s), which the quick tier, collecting this module only to deselect it, would pay on every cell.
def skip_without_fsdp2() -> None:
    if not dist_workers.fsdp2_off_cuda():
        pytest.skip(
            f"not available: FSDP2 (fully_shard) off CUDA needs torch >=2.6, this is {torch.__version__}"
            + (" (its FSDP2 makes torch.cuda streams)" if dist_workers.fully_shard_api() else " (no fully_shard)")
        )


def skip_without_dtensor() -> None:
    if dist_workers.dtensor_api() is None or dist_workers.init_device_mesh_api() is None:
        pytest.skip(f"not available: this torch {torch.__version__} has no DTensor with init_device_mesh")


def assert_matches_reference(state: dict[str, list[float]]) -> None:
    reference = dist_workers.reference()
    assert state.keys() == reference.keys()
    for name, values in reference.items():
        torch.testing.assert_close(torch.tensor(state[name]), torch.tensor(values), rtol=1e-5, atol=1e-6, msg=name)


@requires_collectives
def test_ddp_on_two_emu_processes_matches_one_cpu_process() -> None:
    """Buckets (a tiny bucket_cap_mb), no_sync, a communication hook and find_unused_parameters (but on torch 2.3
    and 2.4: see dist_workers.ddp_finds_unused_parameters), 3 SGD steps."""
    for seen in dist_workers.run_job("ddp", 2):
        assert_matches_reference(seen["state"])


@requires_collectives
def test_fsdp2_on_two_emu_processes_matches_one_cpu_process_and_checkpoints(tmp_path: Path) -> None:
    """fully_shard per layer and at the root, activation checkpointing, 3 SGD steps; then the model's and the
    optimizer's state saved with torch.distributed.checkpoint and loaded into a model of another seed."""
    skip_without_fsdp2()
    for seen in dist_workers.run_job("fsdp2", 2, str(tmp_path / "checkpoint")):
        assert seen["placements"] == "(Shard(dim=0),)"
        assert_matches_reference(seen["state"])
        assert seen["differed_before"] and seen["loaded_equal"] and seen["next_step_equal"]
        assert seen["shard_device"].startswith("emu:")
    assert (tmp_path / "checkpoint" / ".metadata").is_file()


@requires_collectives
def test_hsdp_on_a_2d_device_mesh_of_four_emu_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """init_device_mesh("emu", (2, 2)): its groups are eccl subgroups of the ranks of each mesh dimension."""
    skip_without_fsdp2()
    monkeypatch.setenv("EMU_DEVICE_COUNT", "4")  # one device per rank (the spawned ranks inherit it)
    for rank, seen in enumerate(dist_workers.run_job("mesh_2d", 4)):
        replicas, shards = [rank % 2, rank % 2 + 2], [rank // 2 * 2, rank // 2 * 2 + 1]
        assert seen["sums"]["replicate"] == ("eccl", replicas, [float(sum(replicas))] * 2)
        assert seen["sums"]["shard"] == ("eccl", shards, [float(sum(shards))] * 2)
        assert seen["placements"] == "(Replicate(), Shard(dim=0))"
        assert_matches_reference(seen["state"])


def _has_fsdp1() -> bool:
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel  # noqa: F401
    except ImportError:
        return False
    return True


@requires_collectives
def test_fsdp1_on_two_emu_processes_matches_one_cpu_process() -> None:
    if not _has_fsdp1():
        pytest.skip("not available: this torch has no FSDP1 (FullyShardedDataParallel)")
    for seen in dist_workers.run_job("fsdp1", 2):
        assert seen["flat_device"].startswith("emu:")
        assert_matches_reference(seen["state"])


@requires_collectives
def test_dtensor_matmul_and_redistribute_on_emu() -> None:
    skip_without_dtensor()
    for seen in dist_workers.run_job("dtensor", 2):
        assert seen["matmul_error"] < 1e-5
        assert seen["redistribute_exact"] and seen["local_shape"] == [8, 3]


@requires_collectives
def test_cpu_fsdp2_over_gloo_still_works_with_torch_emu_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default mesh followed the current accelerator (emu) even for a gloo-only job, which then failed. The job
    must end as it ends without torch_emu: the same weights bit for bit (on torch 2.8, FSDP2 over gloo itself differs
    from one CPU process; from 2.13 on it matches the reference too), or the same error on every rank where torch
    itself cannot run it (torch 2.6's FSDP2 asks the CPU stream for record_event, which it lacks)."""
    skip_without_fsdp2()
    with_emu = _cpu_fsdp2_outcome()
    for name, value in dist_workers.without_torch_emu().items():
        monkeypatch.setenv(name, value)
    without = _cpu_fsdp2_outcome()
    assert with_emu == without
    assert with_emu, "no rank reported an error: the job hung or died"  # a failure is only alike if it says what
    if TORCH in SpecifierSet(">=2.13"):
        assert isinstance(with_emu, list)
        for state in with_emu:
            assert_matches_reference(state)


def _cpu_fsdp2_outcome() -> list[dict[str, list[float]]] | set[str]:
    """Each rank's weights after the job, or, if it failed, each rank's error line ("rank N: Type: message")."""
    try:
        return [seen["state"] for seen in dist_workers.run_job("fsdp2_cpu_gloo", 2)]
    except AssertionError as exc:
        return {line for line in str(exc).splitlines() if line.startswith("rank ")}


@requires_collectives
def test_a_dead_rank_fails_its_peer_well_within_the_timeout() -> None:
    [seen] = dist_workers.run_job("dead_rank", 2, 60.0, answers=1)
    assert "rank 1 (pid" in seen["error"] and "exited" in seen["error"]
    assert seen["after_s"] < 30.0  # found by the driver's liveness check, not by the 60 s group timeout


@requires_collectives
def test_mismatched_shapes_and_dtypes_raise_on_every_rank() -> None:
    for seen in dist_workers.run_job("mismatch", 2):
        assert seen["error"] is not None and "does not match across ranks" in seen["error"]
        assert "all_reduce of 4 float32" in seen["error"] and "all_reduce of 8 float64" in seen["error"]


@requires_collectives
def test_a_destroyed_group_frees_its_communicator_and_a_new_one_works() -> None:
    for seen in dist_workers.run_job("regroup", 2, dist_workers.free_port()):
        assert seen["first"] == [2.0, 2.0] and seen["subgroup"] == [1.0, 1.0]


@requires_collectives
def test_a_barrier_meets_on_the_device_the_group_uses() -> None:
    # Found by PyTorch's own test_barrier_cuda: a rank working on emu:1 without setting it hung in its barrier.
    for seen in dist_workers.run_job("barrier_on_the_used_device", 2):
        assert seen["current"] == 0 and seen["broadcast"] == [0.0] and seen["warnings"] == []


@requires_collectives
def test_a_job_on_several_hosts_is_refused_at_init(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LOCAL_WORLD_SIZE", "1")  # what torchrun --nnodes 2 --nproc-per-node 1 sets
    with pytest.raises(AssertionError, match=r"one host only.*--nnodes"):
        dist_workers.run_job("collectives", 2)


CUDA_DDP_SCRIPT = """\
    import torch_emu.contrib.transfer_to_emu  # the one line the CUDA script gains
    import os
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from torch.distributed.optim import ZeroRedundancyOptimizer

    assert dist.is_nccl_available() and torch.cuda.nccl.version() >= (2, 7)
    dist.init_process_group(backend="nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 2).cuda(), device_ids=[local_rank])
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(8, 4, device="cuda")).square().mean().backward()
        opt.step()
    weights = [torch.zeros_like(model.module.weight) for _ in range(dist.get_world_size())]
    dist.all_gather(weights, model.module.weight.detach())
    assert all(torch.equal(w, weights[0]) for w in weights)
    print(f"rank {dist.get_rank()}: {dist.get_backend()} on {model.module.weight.device}", flush=True)
    dist.destroy_process_group()
"""


@requires_collectives
def test_torchrun_runs_a_cuda_ddp_script_after_one_import(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(CUDA_DDP_SCRIPT))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(dist_workers.free_port()),
        str(script),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=os.environ.copy(), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0: eccl on emu:0" in done.stdout and "rank 1: eccl on emu:1" in done.stdout
