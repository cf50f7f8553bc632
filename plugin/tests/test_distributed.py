"""The emu collective backend (quick tier): registration for the device, one job of two processes through the
collectives c10d offers, and what a job on several hosts is told. The training runs are in
test_distributed_training.py (deep tier)."""

from __future__ import annotations

import dist_workers
import pytest
import torch

import torch_emu
from torch_emu import distributed as emu_dist

distributed = pytest.mark.feature("distributed")


def _unavailable() -> str | None:
    ok, why = emu_dist.available()
    return None if ok else f"not available: {why}"


requires_collectives = pytest.mark.skipif(_unavailable() is not None, reason=_unavailable() or "")


# No feature mark: this passes on every build, and the feature's outcome must come from the collectives themselves
# (a pass here made "distributed: passed" on driver 1.x cells, where every collective test skipped).
def test_unavailable_builds_say_why() -> None:
    ok, why = emu_dist.available()
    api = torch_emu.driver_api_version()
    assert ok == (api >= (2, 3))
    if not ok:
        assert "needs driver API 2.3" in why


@distributed
@requires_collectives
def test_backend_is_registered_for_the_emu_device() -> None:
    backend = torch.distributed.Backend
    assert emu_dist.BACKEND.upper() in backend._plugins
    if hasattr(backend, "default_device_backend_map"):  # torch >= 2.2: what device_id alone consults
        assert backend.default_device_backend_map["emu"] == emu_dist.BACKEND


@distributed
@requires_collectives
def test_collectives_between_two_processes() -> None:
    world = 2
    for rank, seen in enumerate(dist_workers.run_job("collectives", world)):
        assert seen["backend"] == "eccl"  # picked from device_id alone
        assert seen["all_reduce"] == [3.0] * 5
        assert seen["all_gather_coalesced"] == [[[0.0, 0.0], [10.0]], [[1.0, 1.0], [11.0]]]  # [rank][input]
        assert seen["max"] == [1.0, 10.0] and seen["min"] == [0.0, 9.0] and seen["avg"] == [0.5, 9.5]
        if dist_workers.premul_sum_has_factor():
            assert seen["premul_sum"] == [1.5, 1.5]  # (1 + 2) * 0.5
            assert seen["premul_sum_reduce_scatter"] == ([[0.0, 4.0], [8.0, 12.0]][rank], [0.0, 1.0, 2.0, 3.0])
        elif hasattr(torch.distributed, "_make_nccl_premul_sum"):
            assert "does not expose premul_sum's factor" in seen["premul_sum_refused"]
        assert seen["broadcast"] == [1.0] * 3
        assert seen["all_gather"] == [[0.0, 0.0], [1.0, 1.0]]
        assert seen["all_gather_into_tensor"] == [0.0, 0.0, 1.0, 1.0]
        assert seen["reduce_scatter_tensor"] == [[0.0, 2.0], [4.0, 6.0]][rank]
        assert seen["all_to_all_single"] == [[0.0, 1.0, 100.0, 101.0], [2.0, 3.0, 102.0, 103.0]][rank]
        assert seen["batch_isend_irecv"] == [float((rank - 1) % world)] * 3
        assert seen["all_gather_object"] == [{"rank": 0}, {"rank": 1}]
        assert seen["broadcast_object_list"] == ["from 0"]
        assert seen["async_returned_s"] < 1.0  # queued on the stream, not waited for
        # The transfer is the driver's: torch neither copies (copy_, _to_copy, to) nor allocates CPU memory for it.
        copies = [op for op in seen["profiled"]["ops"] if "copy" in op or op == "aten::to"]
        assert copies == [] and seen["profiled"]["cpu_bytes"] == 0, seen["profiled"]


@distributed
@requires_collectives
def test_a_job_on_several_hosts_is_refused_with_the_reason() -> None:
    assert emu_dist.one_host_problem({"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}) is None
    assert emu_dist.one_host_problem({}) is None
    problem = emu_dist.one_host_problem({"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"})
    assert problem is not None and "--nnodes" in problem and "one host only" in problem


class _FakeWork(torch.distributed.Work if torch.distributed.is_available() else object):  # type: ignore[misc]
    def __init__(self, done: bool) -> None:
        super().__init__()
        self.done = done

    def is_completed(self) -> bool:
        return self.done


@pytest.mark.skipif(not torch.distributed.is_available(), reason="not available: torch.distributed")
def test_work_keeper_lets_go_of_finished_works_past_its_limit_never_of_running_ones() -> None:
    from torch_emu._eccl_work import WorkKeeper

    keeper = WorkKeeper()
    keeper.LIMIT = 4  # type: ignore[misc]
    running = [_FakeWork(done=False) for _ in range(3)]
    finished = [_FakeWork(done=True) for _ in range(3)]
    for work in [running[0], finished[0], finished[1], running[1], finished[2]]:
        keeper.keep(work)
    # Five kept, one past the limit: finished works go, oldest first, down to half the limit; running ones stay.
    assert set(keeper._works.values()) == {running[0], running[1]}
    for _ in range(3):
        keeper.keep(_FakeWork(done=False))
    keeper.keep(running[2])  # six kept, none finished: past the limit, but nothing running is let go
    assert len(keeper._works) == 6 and running[2] in keeper._works.values()
    keeper.release(running[0])
    keeper.release(running[0])  # releasing twice is harmless
    assert running[0] not in keeper._works.values()
