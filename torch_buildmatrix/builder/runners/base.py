"""The interface every runner implements, and what it gets and gives back.

A runner does only what differs between runners: it builds a build's wheels, says which symbols the build's torch
and SDK provide, and makes a cell's clean environment and runs the smoke suite there. The engine checks the wheel and
judges the smoke run, for every runner. A build and the cells testing its wheel may run on different runners (a
build on this machine's Python 3.11, a cell in the image that serves 3.14).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from torch_buildmatrix.builder.records.model import SmokeCounts, TierResult
from torch_buildmatrix.builder.steps import StepRecorder
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.builds import Build
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.model.contract import Tier
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName


@dataclass(frozen=True)
class BuildJob:
    """Everything a runner needs for one build; the patched source is prepared before the runner starts."""

    build: Build
    matrix: Matrix
    workspace: Workspace
    workdir: Path  # scratch directory of this build, empty at start
    plugin_tree: Path  # patched copy of plugin/
    log_file: Path
    find_links: tuple[str, ...]  # where the build's torch wheel is found, beyond the registry
    index_urls: tuple[str, ...] = ()  # extra indexes holding its torch (PyTorch's own, for its CPU builds)
    force: bool = False  # --force: rebuild the shared caches this build uses (SDK wheel) rather than trust them
    # What the build gets in its environment (matrix.yaml's build.env, build.version-env, build.sdk-version-env).
    build_env: Mapping[str, str] = field(default_factory=dict)
    compilers: int = 1  # compiler processes the build may run: its share of the cores (toolenv.compiler_share)


@dataclass(frozen=True)
class CellJob:
    """Everything a runner needs to test one cell: its build's wheels, and the cell's own copy of the smoke tests."""

    cell: Cell
    matrix: Matrix
    workspace: Workspace
    workdir: Path  # scratch directory of this cell, empty at start
    smoke_tests: Path  # the smoke tests of the cell's patched copy of the source
    log_file: Path
    find_links: tuple[str, ...]  # where the cell's torch wheel is found, beyond the registry
    plugin_wheel: Path  # the build's wheel, as published in wheels/
    sdk_wheel: Path | None = None  # the wheel SDK's wheel the build was made against
    index_urls: tuple[str, ...] = ()
    # With smoke.tiers: the part of the suite this run selects (its pytest selection, its own report directory).
    tier: Tier | None = None

    @property
    def run_name(self) -> str:
        """The directory of a smoke run's reports: `smoke`, or `deep` for the deep tier."""
        return "deep" if self.tier == Tier.DEEP else "smoke"


@dataclass
class BuildOutput:
    """Filled in by the runner as a build's steps complete, so a failed build still reports what it got."""

    plugin_wheel: Path | None = None
    sdk_wheel: Path | None = None  # a wheel SDK's wheel the build was made against
    torch_build: dict[str, Any] = field(default_factory=dict)


@dataclass
class CellOutput:
    """What a cell's test left: the smoke counts and features."""

    smoke: SmokeCounts | None = None
    features: dict[str, str] = field(default_factory=dict)
    deep: TierResult | None = None  # the build's deep tier, on its deep cell


def the_one_wheel(dist: Path) -> Path:
    """The wheel a build left in dist; a build that left none or several failed."""
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise StepFailed("build", f"expected one wheel in {dist}, found {[w.name for w in wheels]}")
    return wheels[0]


def site_packages(env: Path, step: str) -> Path:
    """The site-packages of a virtual environment (lib/python3.X/site-packages, python3.Xt when free-threaded), made
    on this machine or in a container's scratch; raises StepFailed(step) when it has none."""
    found = sorted((env / "lib").glob("python3.*/site-packages"))
    if not found:
        raise StepFailed(step, f"no site-packages in {env}")
    return found[0]


@dataclass(frozen=True)
class SmokeRun:
    """What a runner's smoke run left for the engine's verdict: pytest's reports, and whether pytest passed."""

    junit: Path  # pytest's JUnit XML (may be missing when pytest never started)
    features: Path  # the smoke suite's per-feature outcomes (may be missing too)
    failure: StepFailed | None = None  # how pytest failed (its log tail; transient: a timeout, a signal); None: passed
    detail: str = ""  # how pytest ended, when the runner knows more than failed/passed ("pytest exit code 2")


class Runner(Protocol):
    name: RunnerName
    # The modules of this package that only this runner runs, by name ("torch_buildmatrix.builder.runners.local"): with
    # what they import, and what the engine imports, they are the build code (an input of builds and cells).
    build_modules: ClassVar[tuple[str, ...]]

    def python_identity(self, python: Python) -> str:
        """The interpreter a build or cell of this Python would use, as its inputs name it (its minor and ABI, and
        what provides it: never a path); raises UserError when there is none."""

    def sweep(self, owner: str) -> int:
        """End what runs over `owner` left running outside their process trees (containers); returns how many."""

    def build(self, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
        """Build the plugin wheel (and a wheel SDK's) in the runner's own steps, filling output (plugin_wheel,
        sdk_wheel, torch_build); raises StepFailed."""

    def provided_symbols(self, job: BuildJob) -> set[str]:
        """The dynamic symbols the build's torch and SDK libraries define: what the plugin may leave undefined.
        Called by the engine's check step, after build."""

    def prepare_smoke(self, job: CellJob, steps: StepRecorder) -> None:
        """A clean environment with the cell's torch, the build's wheels and the smoke requirements, in the runner's
        own steps."""

    def run_smoke(self, job: CellJob) -> SmokeRun:
        """Run the smoke suite against the installed wheels, inside the engine's smoke step, which judges the run."""


@dataclass(frozen=True)
class CellRunners:
    """Which runner makes each build and tests each cell of one engine run: by Python (the plan chooses per Python),
    the default for the Pythons `by_python` does not name."""

    default: Runner
    by_python: Mapping[Python, Runner] = field(default_factory=dict)

    def of(self, python: Python) -> Runner:
        return self.by_python.get(python, self.default)

    def all(self) -> list[Runner]:
        """Every runner of the run, each once."""
        out: list[Runner] = []
        for runner in (self.default, *self.by_python.values()):
            if not any(runner is known for known in out):
                out.append(runner)
        return out
