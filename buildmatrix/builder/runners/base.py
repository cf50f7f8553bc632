"""The interface every runner implements, and what it gets and gives back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from buildmatrix.builder.results import SmokeCounts
from buildmatrix.builder.steps import StepRecorder
from buildmatrix.builder.workspace import Workspace
from buildmatrix.model.cells import Cell
from buildmatrix.model.matrix import Matrix
from buildmatrix.model.vocab import RunnerName


@dataclass(frozen=True)
class CellJob:
    """Everything a runner needs for one cell; the patched source is prepared before the runner starts."""

    cell: Cell
    matrix: Matrix
    workspace: Workspace
    workdir: Path  # scratch directory of this cell, empty at start
    plugin_tree: Path  # patched copy of plugin/
    smoke_tests: Path  # the patched copy's smoke tests
    log_file: Path
    find_links: tuple[str, ...]  # where the cell's torch wheel is found, beyond the registry
    index_urls: tuple[str, ...] = ()  # extra indexes holding the cell's torch (PyTorch's own, for its CPU builds)
    force: bool = False  # --force: rebuild the shared caches this cell uses (driver wheel) rather than trust them


@dataclass
class RunnerOutput:
    """Filled in by the runner as steps complete, so a failed cell still reports what it got."""

    plugin_wheel: Path | None = None
    driver_wheel: Path | None = None
    smoke: SmokeCounts | None = None
    features: dict[str, str] = field(default_factory=dict)
    torch_build: dict[str, Any] = field(default_factory=dict)
    variants_claimed: list[str] = field(default_factory=list)


class Runner(Protocol):
    name: RunnerName

    def python_identity(self, cell: Cell) -> str:
        """The exact interpreter a cell would use (part of the cell's inputs); raises UserError when there is none."""

    def sweep(self, owner: str) -> int:
        """End what runs over `owner` left running outside their process trees (containers); returns how many."""

    def run(self, job: CellJob, steps: StepRecorder, output: RunnerOutput) -> None:
        """Build, check and smoke-test the plugin for job.cell, filling output; raises StepFailed."""
