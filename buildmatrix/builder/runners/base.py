"""The interface every runner implements, and what it gets and gives back.

A runner does only what differs between runners: it builds the wheels, says which symbols the cell's torch and
SDK provide, and runs the smoke suite. The engine checks the wheel and judges the smoke run, for every runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from buildmatrix.builder.results import SmokeCounts
from buildmatrix.builder.steps import StepRecorder
from buildmatrix.builder.workspace import Workspace
from buildmatrix.errors import StepFailed
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
    force: bool = False  # --force: rebuild the shared caches this cell uses (SDK wheel) rather than trust them
    # What the build gets in its environment (matrix.yaml's build.env, build.version-env, build.sdk-version-env).
    build_env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class RunnerOutput:
    """Filled in by the runner as steps complete, so a failed cell still reports what it got."""

    plugin_wheel: Path | None = None
    sdk_wheel: Path | None = None  # a wheel SDK's wheel the cell was built and tested with
    smoke: SmokeCounts | None = None
    features: dict[str, str] = field(default_factory=dict)
    torch_build: dict[str, Any] = field(default_factory=dict)
    variants_claimed: list[str] = field(default_factory=list)


def the_one_wheel(dist: Path) -> Path:
    """The wheel a build left in dist; a build that left none or several failed."""
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise StepFailed("build", f"expected one wheel in {dist}, found {[w.name for w in wheels]}")
    return wheels[0]


@dataclass(frozen=True)
class SmokeRun:
    """What a runner's smoke run left for the engine's verdict: pytest's reports, and whether pytest passed."""

    junit: Path  # pytest's JUnit XML (may be missing when pytest never started)
    features: Path  # the smoke suite's per-feature outcomes (may be missing too)
    failure: StepFailed | None = None  # how pytest failed (its log tail; transient: a timeout, a signal); None: passed
    detail: str = ""  # how pytest ended, when the runner knows more than failed/passed ("pytest exit code 2")


class Runner(Protocol):
    name: RunnerName
    # The modules of this package that only this runner runs, by name ("buildmatrix.builder.runners.local"): with
    # what they import, and what the engine imports, they are the cell's build code (a cell input).
    build_modules: ClassVar[tuple[str, ...]]

    def python_identity(self, cell: Cell) -> str:
        """The exact interpreter a cell would use (part of the cell's inputs); raises UserError when there is none."""

    def sweep(self, owner: str) -> int:
        """End what runs over `owner` left running outside their process trees (containers); returns how many."""

    def build(self, job: CellJob, steps: StepRecorder, output: RunnerOutput) -> None:
        """Build the plugin wheel (and a wheel SDK's) for job.cell in the runner's own steps, filling output
        (plugin_wheel, sdk_wheel, torch_build); raises StepFailed."""

    def provided_symbols(self, job: CellJob) -> set[str]:
        """The dynamic symbols the cell's torch and SDK libraries define: what the plugin may leave undefined.
        Called by the engine's check step, after build."""

    def prepare_smoke(self, job: CellJob, steps: StepRecorder, output: RunnerOutput) -> None:
        """Whatever the smoke run needs beyond the build, in the runner's own steps (a clean environment)."""

    def run_smoke(self, job: CellJob, output: RunnerOutput) -> SmokeRun:
        """Run the smoke suite against the built wheels, inside the engine's smoke step, which judges the run."""


@dataclass(frozen=True)
class CellRunners:
    """Which runner builds each cell of one engine run: the cells by_cell names get theirs, the others the default."""

    default: Runner
    by_cell: Mapping[str, Runner] = field(default_factory=dict)

    def of(self, cell: Cell) -> Runner:
        return self.by_cell.get(cell.id, self.default)

    def all(self) -> list[Runner]:
        """Every runner of the run, each once."""
        out: list[Runner] = []
        for runner in (self.default, *self.by_cell.values()):
            if not any(runner is known for known in out):
                out.append(runner)
        return out
