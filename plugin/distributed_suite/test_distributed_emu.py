"""PyTorch's own DistributedTest suite (torch.testing._internal.distributed.distributed_test, shipped in the torch
wheel) on a backend named by BACKEND: "gloo" on CPU tensors, the baseline, or "eccl" on emu tensors.

For eccl, torch_emu's CUDA migration is imported before torch's test helpers read torch.cuda, so the suite's CUDA
cases (`.cuda(rank)`, `rank_to_GPU`, DDP on devices) run on emu devices, and eccl is entered in the suite's tables of
what a backend supports (as a plugin with GPU, DDP and subgroup support, the sets NCCL and gloo are in). The test
class is what PyTorch's test/distributed/test_distributed_spawn.py defines (a few lines, written here, not copied).
run_suite.py runs this file once per backend and compares the outcomes.
"""

from __future__ import annotations

import os

BACKEND = os.environ["BACKEND"]
if BACKEND == "eccl":
    import torch_emu.contrib.transfer_to_emu  # noqa: F401  (before torch.testing reads torch.cuda)

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if BACKEND == "eccl":  # before distributed_test is imported: its decorators read these tables
    for feature in ("gpu", "cuda", "ddp", "subgroup", "plugin"):
        DistTestCases.backend_feature[feature].add("eccl")

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):  # type: ignore[misc]
    def setUp(self) -> None:
        super().setUp()
        self._spawn_processes()
