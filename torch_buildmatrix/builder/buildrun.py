"""`torch-buildmatrix build` as a library call: plan the run (the selected cells, each one's runner, the cells left
unbuilt when no runner can start for them), then run it (under the workspace's lock, Ctrl-C and SIGTERM stopping it
cleanly) and say what became of every build and cell. `build` is the command: the command line parses, calls it and
renders (the plan and the runners as `build` reports them, before anything is built)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from torch_buildmatrix.builder.engine import Engine
from torch_buildmatrix.builder.records.model import BuildResult, CellResult
from torch_buildmatrix.builder.records.parse import RecordRules
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.builder.runners.select import RunnerPlan, RunRunners, runners_or_unbuilt
from torch_buildmatrix.builder.scheduler import RunOptions
from torch_buildmatrix.builder.selection import Loaded, SelectOptions, load_cells, runner_plan
from torch_buildmatrix.builder.steps import ProgressCallback
from torch_buildmatrix.builder.unbuilt import record_not_built
from torch_buildmatrix.builder.workspace import RunLock, Workspace
from torch_buildmatrix.errors import EXIT_CELLS_FAILED, EngineUnavailable, ResourceError, UserError
from torch_buildmatrix.model.builds import Build
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.util.failures import resource_message
from torch_buildmatrix.util.signals import exit_code_of, stop_on_signals
from torch_buildmatrix.vocab import Status

# What shows the run's progress while it goes on: given the cells and builds it will show, a context whose value
# receives the engine's progress events (the command line's live table).
Display = Callable[[list[Cell], list[Build]], AbstractContextManager[ProgressCallback]]


@dataclass(frozen=True)
class BuildOptions:
    select: SelectOptions
    run: RunOptions
    runner: str | None = None  # local, docker or auto; None: matrix.yaml's runner
    builds_only: bool = False  # make the selected cells' builds, test no cell (a CI build job)


@dataclass(frozen=True)
class RunPlan:
    """The run as first planned: the selected cells and their builds, and each one's runner and why."""

    loaded: Loaded
    workspace: Workspace
    plan: RunnerPlan
    cells: list[Cell]  # every selected cell
    planned_cells: list[Cell]  # the cells the plan shows (none with builds_only)
    planned_builds: list[Build]  # the builds the plan shows (none with prebuilt: it makes none)

    @property
    def reasons(self) -> dict[str, str]:
        """Each planned cell's and build's ("build <id>") runner and why."""
        reasons = {c.id: self.plan.choice(c).reason for c in self.planned_cells}
        return reasons | {f"build {b.id}": self.plan.choice_for(b.python).reason for b in self.planned_builds}


@dataclass(frozen=True)
class BuildPlan:
    """The run before anything is written: its runners, the cells and builds it runs, and the cells it leaves
    unbuilt (no runner can start for them) with the reason."""

    planned: RunPlan
    chosen: RunRunners
    cells: list[Cell]  # the cells the run tests (builds_only: their builds are made, none is tested)
    builds: list[Build]  # the builds the run makes
    unbuilt: list[tuple[Cell, str]]


@dataclass
class BuildOutcome:
    """What the run did. exit_code: 0, EXIT_CELLS_FAILED, EngineUnavailable's (cells left unbuilt), or 128 + the
    signal that stopped it."""

    workspace: Workspace
    results: list[CellResult] = field(default_factory=list)
    builds: list[BuildResult] = field(default_factory=list)
    failed: list[CellResult | BuildResult] = field(default_factory=list)
    not_built: list[CellResult] = field(default_factory=list)
    damaged: Mapping[str, object] = field(default_factory=dict)  # rebuilt: its record was damaged
    orphans_ended: int = 0  # processes an earlier, killed run left behind, ended by this one
    other_code: list[str] = field(default_factory=list)  # kept by the build epoch, made by other build code
    stopped_by: str | None = None  # the signal that stopped the run
    ran: bool = True  # False: every cell needed the engine that is missing; only records were written

    @property
    def exit_code(self) -> int:
        if not self.ran:
            return EngineUnavailable.exit_code
        if self.stopped_by:
            return exit_code_of(self.stopped_by)
        if self.failed:
            return EXIT_CELLS_FAILED
        return EngineUnavailable.exit_code if self.not_built else 0


def plan_build(options: BuildOptions) -> RunPlan:
    """Select the cells and plan each one's and each build's runner; raises when the selection matches no cell."""
    loaded = load_cells(options.select)
    matrix, cells = loaded.matrix, loaded.cells
    if not cells:
        raise UserError("the selection matches no cell of the matrix; `torch-buildmatrix matrix` lists them")
    builds = loaded.builds_of(cells)
    planned_cells = [] if options.builds_only else cells
    planned_builds = [] if options.run.prebuilt else builds  # --prebuilt makes no build: only the cells need a runner
    plan = runner_plan(matrix, planned_cells, options.runner, planned_builds)
    return RunPlan(loaded, Workspace.for_root(matrix.root), plan, cells, planned_cells, planned_builds)


def choose_runners(planned: RunPlan, options: BuildOptions) -> BuildPlan:
    """The runners, before anything is written: a cell no runner can build, or --runner docker with no engine, stops
    the run here. Under auto, a missing engine is started where it can be; else the cells only an image serves are
    left unbuilt."""
    loaded = planned.loaded
    chosen = runners_or_unbuilt(planned.plan, loaded.matrix, planned.workspace.build_dir.parent / "dockerd.log")
    cells, unbuilt = _leave_unbuilt(loaded, planned.cells, chosen.unbuilt, options.builds_only)
    return BuildPlan(planned, chosen, cells, loaded.builds_of(cells), unbuilt)


@dataclass(frozen=True)
class BuildReports:
    """What `build` tells its caller as it goes: the run planned (each cell's and build's runner, before a runner is
    made ready: starting a Docker engine takes a while), then the runners chosen; and what shows the run's progress."""

    display: Display
    planned: Callable[[RunPlan], None] = lambda _plan: None
    chosen: Callable[[BuildPlan], None] = lambda _plan: None


def build(options: BuildOptions, reports: BuildReports) -> BuildOutcome:
    """The `build` command: plan the run, choose its runners, run it."""
    planned = plan_build(options)
    reports.planned(planned)
    plan = choose_runners(planned, options)
    reports.chosen(plan)
    return run_build(plan, options, reports.display)


def run_build(plan: BuildPlan, options: BuildOptions, display: Display) -> BuildOutcome:
    """Run the plan under the workspace's lock; every build and cell is recorded, and so is each cell left unbuilt."""
    loaded, workspace = plan.planned.loaded, plan.planned.workspace
    matrix = loaded.matrix
    shown = [] if options.run.prebuilt else plan.builds
    store = ResultStore(workspace.results_dir, RecordRules.of(matrix))
    outcome = BuildOutcome(workspace)
    with RunLock(workspace), display([] if options.builds_only else plan.cells, shown) as progress:
        outcome.not_built = [r for r in record_not_built(store, plan.unbuilt) if r.status == Status.NOT_BUILT]
        if not plan.chosen.runners or not plan.builds:  # every cell needs the engine: the records and summary say so
            _write_summary(store)
            outcome.ran = False
            return outcome
        runners = plan.chosen.cell_runners(plan.planned.plan)
        engine = Engine(matrix, workspace, runners, loaded.registry, progress=progress, builds=loaded.builds)
        with stop_on_signals(engine.interrupt) as stopped_by:
            outcome.results = engine.run(plan.cells, options.run, builds_only=options.builds_only)
    outcome.orphans_ended = engine.orphans_ended
    outcome.builds = [engine.build_results[b.id] for b in plan.builds if b.id in engine.build_results]
    outcome.damaged = dict(engine.damaged)
    outcome.other_code = list(engine.other_code)
    outcome.failed = [r for r in outcome.results if r.status != Status.PASSED]
    if options.builds_only:
        outcome.failed = [b for b in outcome.builds if b.status != Status.PASSED]
    outcome.stopped_by = stopped_by[0] if stopped_by else None
    return outcome


def _leave_unbuilt(
    loaded: Loaded, cells: list[Cell], unbuilt: Mapping[Python, str], builds_only: bool
) -> tuple[list[Cell], list[tuple[Cell, str]]]:
    """The cells the run builds, and those it leaves unbuilt with the reason: a cell of an unbuilt Python, or whose
    build runs on one."""
    skipped = {b.id for b in loaded.builds_of(cells) if b.python in unbuilt}
    left = [
        (c, unbuilt.get(c.python) or unbuilt[loaded.builds[c.build.id].python])
        for c in cells
        if c.build.id in skipped or (c.python in unbuilt and not builds_only)
    ]
    out = {c.id for c, _ in left}
    return [c for c in cells if c.id not in out], left


def _write_summary(store: ResultStore) -> None:
    try:
        cells, damaged = store.scan()
        builds, damaged_builds = store.scan_builds()
        store.write_summary(cells, damaged + damaged_builds, builds)
    except OSError as exc:
        raise ResourceError(resource_message(exc, store.directory)) from None
