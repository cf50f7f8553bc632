"""Runs the selected cells: makes each build they need once, then tests each cell's wheel in its own clean
environment; skips what is up to date, isolates failures, records every build and cell."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from packaging.version import Version

from torch_buildmatrix.builder.planning import Inputs, PlannedBuild, PlannedCell, digest, up_to_date
from torch_buildmatrix.builder.records.model import BuildResult, CellResult, WheelRecord
from torch_buildmatrix.builder.records.parse import RecordRules
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.builder.runners.base import (
    BuildJob,
    BuildOutput,
    CellJob,
    CellOutput,
    CellRunners,
    Runner,
)
from torch_buildmatrix.builder.scheduler import RunOptions, Scheduler
from torch_buildmatrix.builder.sourcetree import (
    apply_series,
    copy_pristine,
    patches_line,
    release_series,
    write_plugin_version,
)
from torch_buildmatrix.builder.steps import BUILD, Note, ProgressCallback, StepRecorder
from torch_buildmatrix.builder.tiers import judge_deep
from torch_buildmatrix.builder.toolenv import compiler_share
from torch_buildmatrix.builder.verdicts import (
    append_log,
    check_built_wheel,
    fail_with_build,
    judge_smoke,
    record_failure,
)
from torch_buildmatrix.builder.wheelcheck import check_cell_pin
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import Interrupted, RecordError, ResourceError, StepFailed, UserError
from torch_buildmatrix.model.builds import Build, plan_builds
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.model.contract import Tier
from torch_buildmatrix.model.matrix import Matrix, TorchRelease
from torch_buildmatrix.model.pythons import installs_on
from torch_buildmatrix.model.registry import Registry
from torch_buildmatrix.util.atomic import copy_file_atomic
from torch_buildmatrix.util.failures import resource_message
from torch_buildmatrix.util.fingerprint import FileHashes, file_sha256
from torch_buildmatrix.util.paths import regular_file
from torch_buildmatrix.util.process import CHILDREN, kill_orphans
from torch_buildmatrix.vocab import FailureClass, Status, Step, TierStatus

log = logging.getLogger(__name__)


class Engine:
    def __init__(
        self,
        matrix: Matrix,
        workspace: Workspace,
        runner: Runner | CellRunners,
        registry: Registry,
        progress: ProgressCallback | None = None,
        *,
        builds: Mapping[str, Build] | None = None,
    ) -> None:
        """runner: one runner for everything, or one per Python (CellRunners). builds: the matrix's builds
        (model.builds.plan_builds of the whole expansion); None: planned from the cells given to run."""
        self.matrix = matrix
        self.workspace = workspace
        self.runners = runner if isinstance(runner, CellRunners) else CellRunners(runner)
        self.registry = registry
        self.progress = progress or (lambda what, event: None)
        self.builds = builds
        self.store = ResultStore(workspace.results_dir, RecordRules.of(matrix))
        self.inputs = Inputs(matrix, self._code_cache)
        self.wheel_hashes = FileHashes()  # the run's: a build's wheel is hashed once, not once per cell
        self.started_work = False  # a build or cell ran (not only reused records): the end of the run sweeps
        self.other_code: list[str] = []  # up to date by the build epoch, but made by other build code
        self.damaged: dict[str, RecordError] = {}  # builds ("build <id>") and cells rebuilt: their record was damaged
        self.build_results: dict[str, BuildResult] = {}  # the run's builds, made or up to date
        self.orphans_ended = 0  # processes (and containers) an earlier, SIGKILLed run left behind, ended by this one
        self.stopping = threading.Event()

    @property
    def runner(self) -> Runner:
        """The run's runner when it has one (the default of CellRunners otherwise)."""
        return self.runners.default

    @runner.setter
    def runner(self, runner: Runner) -> None:
        self.runners = CellRunners(runner)
        self.inputs = Inputs(self.matrix, self._code_cache)

    @property
    def _code_cache(self) -> Path:
        return self.workspace.cache_dir / "build-code.json"

    @property
    def needs_sdk_wheel(self) -> bool:
        return self.matrix.sdk is not None and self.matrix.sdk.builds_wheel

    # ---- planning ---------------------------------------------------------
    def builds_of(self, cells: list[Cell]) -> list[Build]:
        """The builds the cells test, each once, in the order of their first cell."""
        known = self.builds if self.builds is not None else plan_builds(self.matrix, cells)
        out: dict[str, Build] = {}
        for cell in cells:
            build = known.get(cell.build.id)
            if build is None:  # given a plan of another matrix: plan this cell's build alone
                build = plan_builds(self.matrix, [cell])[cell.build.id]
            out.setdefault(build.id, build)
        return list(out.values())

    def plan_build(self, build: Build, force: bool = False, prebuilt: bool = False) -> PlannedBuild:
        runner = self.runners.of(build.python)
        problem = None
        try:
            python = runner.python_identity(build.python)
        except UserError as exc:
            python, problem = "missing", str(exc)
        inputs = self.inputs.of_build(build, runner, python)
        wanted = digest(inputs)
        try:
            stored = None if force or (problem and not prebuilt) else self.store.load_build(build.id)
        except RecordError as exc:
            stored = None
            self.damaged[f"{BUILD}{build.id}"] = exc
        unusable = ""
        if prebuilt:  # made by another job of the same checkout: its record is the build, whatever this machine has
            unusable = self._prebuilt_problem(stored) if stored is not None else ""
            reusable = stored if stored is not None and not unusable else None
        else:
            reusable = stored if stored is not None and self._current(stored, wanted) else None
            self._note_other_code(reusable, runner, f"{BUILD}{build.id}")
        return PlannedBuild(build, inputs, wanted, reusable, problem, unusable)

    def _prebuilt_problem(self, stored: BuildResult) -> str:
        from torch_buildmatrix.builder.planning import files_problem

        if stored.status != Status.PASSED:
            return ""
        return files_problem(stored, self._wheels, self.needs_sdk_wheel, self.wheel_hashes)

    def plan_cell(self, cell: Cell, build: Build, made: BuildResult, force: bool = False) -> PlannedCell:
        runner = self.runners.of(cell.python)
        problem = None
        try:
            python = runner.python_identity(cell.python)
        except UserError as exc:
            python, problem = "missing", str(exc)
        inputs = self.inputs.of_cell(cell, made, runner, python, deep=build.deep_cell == cell.id)
        wanted = digest(inputs)
        try:
            stored = None if force or problem else self.store.load(cell.id)
        except RecordError as exc:
            stored = None
            self.damaged[cell.id] = exc
        ok = stored is not None and self._current(stored, wanted)
        self._note_other_code(stored if ok else None, runner, cell.id)
        return PlannedCell(cell, build, inputs, wanted, stored if ok else None, problem)

    def _current(self, stored: CellResult | BuildResult, wanted: str) -> bool:
        return up_to_date(stored, wanted, self._wheels, self.needs_sdk_wheel, self.wheel_hashes)

    def _note_other_code(self, reused: CellResult | BuildResult | None, runner: Runner, what: str) -> None:
        """A record kept by the build epoch that other build code made (records made before they carried the code's
        hash say nothing)."""
        if reused is not None and reused.build_code is not None and reused.build_code != self.inputs.code_hash(runner):
            self.other_code.append(what)

    @property
    def _wheels(self) -> Path:
        return self.workspace.wheels_dir

    # ---- running ----------------------------------------------------------
    def interrupt(self, reason: str) -> None:
        """Stop the run (Ctrl-C, SIGTERM): no new build, cell or step starts, every child process tree is killed."""
        self.stopping.set()
        CHILDREN.stop(reason)

    def _sweep(self) -> int:
        ended = 0
        for runner in self.runners.all():
            sweep = getattr(runner, "sweep", None)  # test doubles need none
            ended += int(sweep(CHILDREN.owner)) if sweep is not None and CHILDREN.owner else 0
        return ended

    def preflight(self) -> None:
        """Raise ResourceError, before anything starts, when a directory the run writes cannot be written."""
        for directory in (
            self.workspace.results_dir / "cells",
            self.workspace.results_dir / "builds",
            self.workspace.logs_dir / "builds",
            self.workspace.build_dir,
            self.workspace.cache_dir,
        ):
            try:
                directory.mkdir(parents=True, exist_ok=True)
                fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=directory)
                os.close(fd)
                Path(probe).unlink()
            except OSError as exc:
                raise ResourceError(resource_message(exc, directory)) from None

    def run(self, cells: list[Cell], options: RunOptions, builds_only: bool = False) -> list[CellResult]:
        """Run the cells (and their builds; builds_only: the builds alone, returning no cell); raises ResourceError
        (after stopping the others) when results can no longer be written."""
        self.preflight()
        CHILDREN.owner = str(self.workspace.build_dir.resolve())
        # The run lock is held: anything still carrying our owner mark was left by a run that was SIGKILLed.
        self.orphans_ended = len(kill_orphans(CHILDREN.owner)) + self._sweep()
        try:
            return Scheduler(self, cells, options, builds_only).go()
        finally:
            if CHILDREN.stopping:
                # Interrupted: what left its step's process group (a tool that calls setsid, a fork racing the
                # group's kill) still carries our owner mark; it is ended, and gone, before the run returns.
                kill_orphans(CHILDREN.owner)
            # Every child is gone by now: children are allowed again, for the sweep below (a stopped run refuses to
            # start any, and its sweep's `docker info` and `docker rm` are children) and for a later run.
            CHILDREN.reset()
            if self.started_work:  # containers whose clients were killed (timeout, stop) outlive them
                self._sweep()
            CHILDREN.owner = None

    def _start_log(self, log_file: Path, header: str, attempt: int) -> None:
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            with log_file.open("a" if attempt > 1 else "w") as handle:  # a retry keeps the failed attempt's log
                handle.write(f"# {header}, attempt {attempt}, started {started}\n")
        except OSError as exc:
            raise ResourceError(resource_message(exc, log_file)) from None

    def _say(self, name: str, log_file: Path, console: bool = True) -> Callable[[str], None]:
        """What tells of a step's doings ("check: relabelled ..."): a comment line of the log, and a progress note
        (console=False: the log's line alone)."""

        def say(line: str) -> None:
            append_log(log_file, f"# {line}\n")
            if console:
                self.progress(name, Note(line))

        return say

    def build_log(self, build_id: str) -> Path:
        return self.workspace.logs_dir / "builds" / f"{build_id}.log"

    def run_build(
        self, item: PlannedBuild, attempt: int = 1, force: bool = False, compilers: int | None = None
    ) -> BuildResult:
        """Make one build and record it, running `compilers` compiler processes (default: every core this process
        may use); raises ResourceError only when its log or record cannot be written."""
        build = item.build
        self.started_work = True
        runner = self.runners.of(build.python)
        result = BuildResult(
            build=build.key,
            inputs_hash=item.inputs_hash,
            inputs=item.inputs,
            runner=runner.name,
            build_code=self.inputs.code_hash(runner),
            python=str(build.python),
            attempts=attempt,
            patches=build.release.patches,
        )
        log_file = self.build_log(build.id)
        self._start_log(log_file, f"build {build.id} for {len(build.cells)} cell(s): {runner.name} runner", attempt)
        result.log = str(log_file.relative_to(self._wheels))
        steps = StepRecorder(result, self.progress, f"{BUILD}{build.id}")
        say = self._say(f"{BUILD}{build.id}", log_file)
        output = BuildOutput()
        workdir = self.workspace.build_dir / "builds" / build.id
        try:
            if item.problem:
                with steps.step("interpreter"):
                    raise StepFailed("interpreter", item.problem)
            _fresh(workdir)
            with steps.step("source"):
                plugin_tree, result.inputs["applied_patches"] = self._patched_source(build.release, workdir, say)
                version = Version(f"{self.matrix.plugin.version}+{build.key.label}")
                if self.matrix.contract.build.version_file:
                    write_plugin_version(plugin_tree, self.matrix.contract.build.version_file, version)
            source = self.registry.source(build.release)
            sdk_version = str(build.sdk.version) if build.sdk is not None else None
            job = BuildJob(
                build,
                self.matrix,
                self.workspace,
                workdir,
                plugin_tree,
                log_file,
                source.find_links,
                source.index_urls,
                force=force,
                build_env=self.matrix.contract.build.environment(version, sdk_version),
                compilers=compilers if compilers is not None else compiler_share(1),
            )
            runner.build(job, steps, output)
            output.torch_build["wheel_source"] = source.describe()  # the one used here (a local mirror's find-links)
            with steps.step("check"):
                check_built_wheel(job, output, runner, say)
            with steps.step("publish"):
                assert output.plugin_wheel is not None
                result.wheel = self._publish(
                    output.plugin_wheel, self.workspace.plugin_wheel_dir(build.key.torch_minor)
                )
                sdk = self.matrix.sdk
                if sdk is not None and sdk.builds_wheel:
                    assert output.sdk_wheel is not None
                    result.sdk_wheel = self._publish(output.sdk_wheel, self.workspace.sdk_wheel_dir(sdk.name))
            result.status = Status.PASSED
            shutil.rmtree(workdir, ignore_errors=True)  # environments are scratch; a failed build's stays to inspect
        except Exception as exc:  # a failed step, or anything outside one: only this build (and its cells) fails
            record_failure(result, exc, log_file, workdir, self.workspace.root)
        finally:
            result.torch_build = output.torch_build
            result.finished = time.time()
            try:
                self.store.save_build(result)
            except OSError as exc:
                raise ResourceError(resource_message(exc, self.store.directory)) from None
            self.progress(f"{BUILD}{build.id}", result.status)
        return result

    def _patched_source(
        self, release: TorchRelease, workdir: Path, say: Callable[[str], None]
    ) -> tuple[Path, list[str]]:
        """The pristine source copied to workdir/tree with the release's shim series: the copy, and the patches
        (which `say` is told)."""
        tree_root = workdir / "tree"
        tree = copy_pristine(self.matrix.plugin.source, tree_root, self.matrix.contract.build.generated)
        applied = apply_series(release_series(self.matrix, release), tree_root, self.matrix.plugin.source.name)
        say(patches_line(release, applied))
        return tree, applied

    def run_cell(self, item: PlannedCell, made: BuildResult, attempt: int = 1) -> CellResult:
        """Test one cell with its build's wheel (or fail it with its build's failure) and record it; raises
        ResourceError only when its log or record cannot be written."""
        cell = item.cell
        self.started_work = True
        runner = self.runners.of(cell.python)
        result = CellResult(
            cell=cell.key,
            inputs_hash=item.inputs_hash,
            inputs=item.inputs,
            runner=runner.name,
            build_code=self.inputs.code_hash(runner),
            attempts=attempt,
            patches=cell.torch.patches,
        )
        log_file = self.workspace.logs_dir / f"{cell.id}.log"
        build_log = self.build_log(made.id)
        self._start_log(
            log_file,
            f"{cell.id}: {runner.name} runner, testing build {made.id} (log: {build_log.relative_to(self._wheels)})",
            attempt,
        )
        result.log = str(log_file.relative_to(self._wheels))
        result.torch_build = dict(made.torch_build)
        steps = StepRecorder(result, self.progress)
        output = CellOutput()
        workdir = self.workspace.cell_dir(cell.id)
        try:
            if made.status != Status.PASSED or made.wheel is None:
                fail_with_build(result, made, log_file, build_log)
            else:
                self._test_cell(
                    item=item, made=made, runner=runner, steps=steps, output=output, workdir=workdir, log_file=log_file
                )
                result.status = Status.PASSED
                shutil.rmtree(workdir, ignore_errors=True)
        except Exception as exc:  # a failed step, or anything outside one: only this cell fails
            record_failure(result, exc, log_file, workdir, self.workspace.root)
        finally:
            result.smoke = output.smoke
            result.features = output.features
            result.deep = output.deep
            result.finished = time.time()
            try:
                self.store.save(result)
            except OSError as exc:
                raise ResourceError(resource_message(exc, self.store.directory)) from None
            self.progress(cell.id, result.status)
        return result

    def _test_cell(
        self,
        *,
        item: PlannedCell,
        made: BuildResult,
        runner: Runner,
        steps: StepRecorder,
        output: CellOutput,
        workdir: Path,
        log_file: Path,
    ) -> None:
        cell, result = item.cell, steps.result
        assert made.wheel is not None and isinstance(result, CellResult)
        if item.problem:
            with steps.step("interpreter"):
                raise StepFailed("interpreter", item.problem)
        _fresh(workdir)
        with steps.step("source"):  # the cell's own release's patched copy: its smoke tests
            # The cell's own copy: said in its log only (the console shows the build's line).
            tree, _ = self._patched_source(cell.torch, workdir, self._say(cell.id, log_file, console=False))
            smoke_tests = tree / self.matrix.plugin.smoke_tests.relative_to(self.matrix.plugin.source)
        with steps.step("check"):
            wheel = regular_file(self._wheels, made.wheel.path)
            if file_sha256(wheel) != made.wheel.sha256:
                raise StepFailed("check", f"{made.wheel.path} is not the wheel build {made.id} recorded (sha256)")
            from packaging.utils import parse_wheel_filename

            tags = parse_wheel_filename(made.wheel.filename)[3]
            if not installs_on(tags, cell.python):
                shown = ", ".join(sorted(map(str, tags)))
                raise StepFailed(
                    "check",
                    f"{made.wheel.filename} ({shown}), the wheel of build {made.id}, does not install on Python "
                    f"{cell.python} ({cell.python_tag}): pip and uv refuse it there; build this Python apart "
                    "(build.per-python) or leave it out of the matrix",
                )
            check_cell_pin(wheel, cell.torch.version, made.id)
            result.wheel, result.sdk_wheel = made.wheel, made.sdk_wheel
        sdk_wheel = regular_file(self._wheels, made.sdk_wheel.path) if made.sdk_wheel is not None else None
        source = self.registry.source(cell.torch)
        result.torch_build["wheel_source"] = source.describe()  # the cell's own torch, from here on this machine
        job = CellJob(
            cell,
            self.matrix,
            self.workspace,
            workdir,
            smoke_tests,
            log_file,
            source.find_links,
            wheel,
            sdk_wheel,
            source.index_urls,
        )
        tiers = self.matrix.contract.smoke.tiers
        if tiers is not None:
            job = replace(job, tier=Tier.QUICK)
        runner.prepare_smoke(job, steps)
        deep = tiers is not None and item.build.deep_cell == cell.id
        quick_failure = None
        try:
            with steps.step("smoke"):
                judge_smoke(runner.run_smoke(job), output)
        except StepFailed as exc:
            if not deep or exc.failure_class == FailureClass.TRANSIENT or isinstance(exc, Interrupted):
                raise
            quick_failure = exc  # the build's other cells need the deep tier's verdict all the same
        if deep:
            self._run_deep(replace(job, tier=Tier.DEEP), runner, steps, output)
        if quick_failure is not None:
            raise quick_failure
        result.variants_claimed = [cell.torch.variant]

    def _run_deep(self, job: CellJob, runner: Runner, steps: StepRecorder, output: CellOutput) -> None:
        """The build's deep tier, on its deep cell (in the cell's smoke environment, after its quick suite)."""
        start = time.monotonic()
        with steps.step(Step.DEEP):
            run = runner.run_smoke(job)
            output.deep = judge_deep(run, job.cell.id, round(time.monotonic() - start, 3))
            if output.deep.status == TierStatus.FAILED:
                tail = run.failure.log_tail if run.failure is not None else ""
                raise StepFailed(Step.DEEP, f"deep tier: {output.deep.error}", tail)

    def _publish(self, built: Path, directory: Path) -> WheelRecord:
        dest = directory / built.name
        copy_file_atomic(built, dest)
        return WheelRecord(built.name, file_sha256(dest), str(dest.relative_to(self._wheels)))


def _fresh(workdir: Path) -> None:
    if workdir.exists():
        shutil.rmtree(workdir)  # scratch from an earlier or interrupted run
    workdir.mkdir(parents=True)
