"""Runs the selected cells: makes each build they need once, then tests each cell's wheel in its own clean
environment; skips what is up to date, isolates failures, records every build and cell."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from buildmatrix.builder.planning import Inputs, PlannedBuild, PlannedCell, digest, up_to_date
from buildmatrix.builder.records.model import BuildResult, CellResult, WheelRecord
from buildmatrix.builder.records.parse import RecordRules
from buildmatrix.builder.records.store import ResultStore
from buildmatrix.builder.relabel import relabel_wheel
from buildmatrix.builder.runners.base import (
    BuildJob,
    BuildOutput,
    CellJob,
    CellOutput,
    CellRunners,
    Runner,
    SmokeRun,
)
from buildmatrix.builder.smoke import read_features, read_junit
from buildmatrix.builder.sourcetree import apply_series, copy_pristine, release_series, write_plugin_version
from buildmatrix.builder.steps import StepRecorder
from buildmatrix.builder.tiers import judge_deep, settle
from buildmatrix.builder.wheelcheck import check_cell_pin, check_plugin_wheel, unresolved_against
from buildmatrix.builder.workspace import Workspace
from buildmatrix.errors import Interrupted, RecordError, ResourceError, StepFailed, UserError
from buildmatrix.model.builds import Build, plan_builds
from buildmatrix.model.cells import Cell
from buildmatrix.model.contract import Tier
from buildmatrix.model.matrix import Matrix, TorchRelease
from buildmatrix.model.pythons import installs_on
from buildmatrix.model.registry import Registry
from buildmatrix.util.atomic import copy_file_atomic
from buildmatrix.util.failures import DISK_FULL_ERRNOS, is_resource_error, resource_message
from buildmatrix.util.fingerprint import file_sha256
from buildmatrix.util.paths import regular_file
from buildmatrix.util.process import CHILDREN, kill_orphans
from buildmatrix.vocab import Cause, FailureClass, RunnerName, Status, Step, TierStatus

log = logging.getLogger(__name__)

# Events for whoever displays progress: (what, event). `what` is a cell id, or "build <build id>"; event is
# "queued" | "up-to-date" | "<step name>" | "retry <n>" | "passed" | "failed" | "interrupted".
ProgressCallback = Callable[[str, str], None]
BUILD = "build "  # the prefix of a build's name in progress events


@dataclass(frozen=True)
class RunOptions:
    jobs: int = 1
    fail_fast: bool = False
    force: bool = False  # rebuild and retest even when inputs are unchanged, and the shared caches they use
    retries: int = 1  # extra tries within the run for a build or cell that fails transiently (network, timeout...)
    prebuilt: bool = False  # test with the builds already in wheels/ (a CI cell job), never build


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
        self.inputs = Inputs(matrix)
        self.damaged: dict[str, RecordError] = {}  # builds ("build <id>") and cells rebuilt: their record was damaged
        self.build_results: dict[str, BuildResult] = {}  # the run's builds, made or up to date
        self.orphans_ended = 0  # processes (and containers) an earlier, SIGKILLed run left behind, ended by this one
        self._stop = threading.Event()

    @property
    def runner(self) -> Runner:
        """The run's runner when it has one (the default of CellRunners otherwise)."""
        return self.runners.default

    @runner.setter
    def runner(self, runner: Runner) -> None:
        self.runners = CellRunners(runner)
        self.inputs = Inputs(self.matrix)

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
        if prebuilt:  # made by another job of the same checkout: its record is the build, whatever this machine has
            reusable = stored if stored is not None and self._usable_prebuilt(stored) else None
        else:
            reusable = (
                stored
                if stored is not None and up_to_date(stored, wanted, self._wheels, self.needs_sdk_wheel)
                else None
            )
        return PlannedBuild(build, inputs, wanted, reusable, problem)

    def _usable_prebuilt(self, stored: BuildResult) -> bool:
        from buildmatrix.builder.planning import files_intact

        return stored.status != Status.PASSED or files_intact(stored, self._wheels, self.needs_sdk_wheel)

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
        ok = stored is not None and up_to_date(stored, wanted, self._wheels, self.needs_sdk_wheel)
        return PlannedCell(cell, build, inputs, wanted, stored if ok else None, problem)

    @property
    def _wheels(self) -> Path:
        return self.workspace.wheels_dir

    # ---- running ----------------------------------------------------------
    def interrupt(self, reason: str) -> None:
        """Stop the run (Ctrl-C, SIGTERM): no new build, cell or step starts, every child process tree is killed."""
        self._stop.set()
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
            return _Run(self, cells, options, builds_only).go()
        finally:
            self._sweep()  # containers whose clients were killed (timeout, stop) outlive them
            CHILDREN.owner = None
            CHILDREN.reset()  # every child is gone by now; a later run in this process may start its own

    def _start_log(self, log_file: Path, header: str, attempt: int) -> None:
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            with log_file.open("a" if attempt > 1 else "w") as handle:  # a retry keeps the failed attempt's log
                handle.write(f"# {header}, attempt {attempt}, started {started}\n")
        except OSError as exc:
            raise ResourceError(resource_message(exc, log_file)) from None

    def build_log(self, build_id: str) -> Path:
        return self.workspace.logs_dir / "builds" / f"{build_id}.log"

    def run_build(self, item: PlannedBuild, attempt: int = 1, force: bool = False) -> BuildResult:
        """Make one build and record it; raises ResourceError only when its log or record cannot be written."""
        build = item.build
        runner = self.runners.of(build.python)
        result = BuildResult(
            build=build.key,
            inputs_hash=item.inputs_hash,
            inputs=item.inputs,
            runner=runner.name,
            python=str(build.python),
            attempts=attempt,
            patches=build.release.patches,
        )
        log_file = self.build_log(build.id)
        self._start_log(log_file, f"build {build.id} for {len(build.cells)} cell(s): {runner.name} runner", attempt)
        result.log = str(log_file.relative_to(self._wheels))
        steps = StepRecorder(result, self.progress, f"{BUILD}{build.id}")
        output = BuildOutput()
        workdir = self.workspace.build_dir / "builds" / build.id
        try:
            if item.problem:
                with steps.step("interpreter"):
                    raise StepFailed("interpreter", item.problem)
            _fresh(workdir)
            with steps.step("source"):
                plugin_tree, result.inputs["applied_patches"] = self._patched_source(build.release, workdir)
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
            )
            runner.build(job, steps, output)
            with steps.step("check"):
                check_built_wheel(job, output, runner)
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
            _record_failure(result, exc, log_file, workdir, self.workspace.root)
        finally:
            result.torch_build = output.torch_build
            result.finished = time.time()
            try:
                self.store.save_build(result)
            except OSError as exc:
                raise ResourceError(resource_message(exc, self.store.directory)) from None
            self.progress(f"{BUILD}{build.id}", result.status)
        return result

    def _patched_source(self, release: TorchRelease, workdir: Path) -> tuple[Path, list[str]]:
        """The pristine source copied to workdir/tree with the release's shim series: the copy, and the patches."""
        tree_root = workdir / "tree"
        tree = copy_pristine(self.matrix.plugin.source, tree_root, self.matrix.contract.build.generated)
        applied = apply_series(release_series(self.matrix, release), tree_root, self.matrix.plugin.source.name)
        return tree, applied

    def run_cell(self, item: PlannedCell, made: BuildResult, attempt: int = 1) -> CellResult:
        """Test one cell with its build's wheel (or fail it with its build's failure) and record it; raises
        ResourceError only when its log or record cannot be written."""
        cell = item.cell
        runner = self.runners.of(cell.python)
        result = CellResult(
            cell=cell.key,
            inputs_hash=item.inputs_hash,
            inputs=item.inputs,
            runner=runner.name,
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
                _fail_with_build(result, made, log_file, build_log)
            else:
                self._test_cell(
                    item=item, made=made, runner=runner, steps=steps, output=output, workdir=workdir, log_file=log_file
                )
                result.status = Status.PASSED
                shutil.rmtree(workdir, ignore_errors=True)
        except Exception as exc:  # a failed step, or anything outside one: only this cell fails
            _record_failure(result, exc, log_file, workdir, self.workspace.root)
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
            tree, _ = self._patched_source(cell.torch, workdir)
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


class _Run:
    """One run's scheduling: builds first in the queue; as a build ends, its cells go to the front (a release's
    cells are tested while its torch is fresh in the caches); `jobs` builds and cells at a time, each build once."""

    def __init__(self, engine: Engine, cells: list[Cell], options: RunOptions, builds_only: bool = False) -> None:
        self.engine, self.cells, self.options, self.builds_only = engine, cells, options, builds_only
        self.results: dict[str, CellResult] = {}
        self.queue: deque[tuple[PlannedBuild | PlannedCell, int]] = deque()
        self.by_build: dict[str, list[Cell]] = {}
        self.builds: dict[str, Build] = {}
        self.fatal: ResourceError | None = None

    def go(self) -> list[CellResult]:
        engine, options = self.engine, self.options
        for build in engine.builds_of(self.cells):
            self.builds[build.id] = build
        for cell in self.cells:
            self.by_build.setdefault(cell.build.id, []).append(cell)
        for build in self.builds.values():
            planned = engine.plan_build(build, force=options.force, prebuilt=options.prebuilt)
            if planned.reusable is not None:
                engine.build_results[build.id] = planned.reusable
                engine.progress(f"{BUILD}{build.id}", "up-to-date")
                self.build_ready(build.id, front=False)
            elif options.prebuilt:
                engine.build_results[build.id] = _not_prebuilt(planned)
                self.build_ready(build.id, front=False)
            else:
                self.queue.append((planned, 1))
                engine.progress(f"{BUILD}{build.id}", "queued")
        self.schedule()
        if self.fatal is not None:
            raise self.fatal
        store = engine.store
        try:
            self.settle_tiers()
            cells, damaged = store.scan()
            builds, damaged_builds = store.scan_builds()
            store.write_summary(cells, damaged + damaged_builds, builds)
        except OSError as exc:
            raise ResourceError(resource_message(exc, store.directory)) from None
        return [self.results[c.id] for c in self.cells if c.id in self.results]

    def settle_tiers(self) -> None:
        """Give every cell of each build this run tested its build's deep tier, as its deep cell recorded it for the
        build's current wheel (tiers.settle): a deep tier that failed fails them all, in this run's results and in
        the records of the build's cells this run did not test. The build's record carries it too, but in a CI
        cell job (--prebuilt), whose build record is the build job's: merge-results settles those."""
        engine, store = self.engine, self.engine.store
        for build in self.builds.values():
            made = engine.build_results.get(build.id)
            if build.deep_cell is None or made is None or made.status != Status.PASSED or made.wheel is None:
                continue
            current = []
            for cell_id in build.cells:
                try:
                    record = self.results.get(cell_id) or store.load(cell_id)
                except RecordError:
                    continue
                if record is not None and record.wheel == made.wheel:
                    current.append(record)
            deep_record = next((r for r in current if r.id == build.deep_cell), None)
            deep = deep_record.deep if deep_record is not None else None
            for changed in settle(build.id, deep, current):
                store.save(changed)
                if changed.id in self.results:
                    self.results[changed.id] = changed
            if made.deep != deep and not self.options.prebuilt:
                made.deep = deep
                store.save_build(made)

    def build_ready(self, build_id: str, front: bool) -> None:
        """Plan the build's cells now that it is made (or failed): up-to-date ones are done, the others queued."""
        engine, made = self.engine, self.engine.build_results[build_id]
        if self.builds_only:
            return
        todo = []
        for cell in self.by_build.get(build_id, []):
            planned = engine.plan_cell(cell, self.builds[build_id], made, force=self.options.force)
            if planned.reusable is not None:
                self.results[cell.id] = planned.reusable
                engine.progress(cell.id, "up-to-date")
            elif made.status != Status.PASSED:
                # Nothing to test: the cell is recorded as its build ended (failed or interrupted) at once, also in a
                # run that is stopping, so every cell of a failed build says why.
                try:
                    self.results[cell.id] = engine.run_cell(planned, made)
                except ResourceError as exc:
                    self.fatal = self.fatal or exc
                    engine.interrupt("a resource fault")
            else:
                todo.append((planned, 1))
                engine.progress(cell.id, "queued")
        if front:
            self.queue.extendleft(reversed(todo))
        else:
            self.queue.extend(todo)

    def schedule(self) -> None:
        engine, options = self.engine, self.options
        jobs = max(1, options.jobs)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            pending: dict[Future[BuildResult | CellResult], tuple[PlannedBuild | PlannedCell, int]] = {}
            while self.queue or pending:
                while self.queue and len(pending) < jobs and not engine._stop.is_set():
                    item, attempt = self.queue.popleft()
                    pending[self.submit(pool, item, attempt)] = (item, attempt)
                if not pending:
                    break
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    item, attempt = pending.pop(future)
                    try:
                        result = future.result()
                    except ResourceError as exc:
                        self.fatal = self.fatal or exc
                        engine.interrupt("a resource fault")
                        continue
                    self.finished(item, attempt, result)

    def submit(
        self, pool: ThreadPoolExecutor, item: PlannedBuild | PlannedCell, attempt: int
    ) -> Future[BuildResult | CellResult]:
        engine = self.engine
        if isinstance(item, PlannedBuild):
            return pool.submit(engine.run_build, item, attempt, self.options.force)
        return pool.submit(engine.run_cell, item, engine.build_results[item.build.id], attempt)

    def finished(self, item: PlannedBuild | PlannedCell, attempt: int, result: BuildResult | CellResult) -> None:
        engine, options = self.engine, self.options
        retry = result.status == Status.FAILED and result.failure_class == FailureClass.TRANSIENT
        name = f"{BUILD}{result.id}" if isinstance(item, PlannedBuild) else result.id
        if retry and attempt <= options.retries and not engine._stop.is_set():
            self.queue.appendleft((item, attempt + 1))
            engine.progress(name, f"retry {attempt + 1}")
            return
        if result.status == Status.FAILED and options.fail_fast:
            engine._stop.set()
            self.queue.clear()
        if isinstance(result, BuildResult):
            engine.build_results[result.id] = result
            self.build_ready(result.id, front=True)
        else:
            self.results[result.id] = result


def _fresh(workdir: Path) -> None:
    if workdir.exists():
        shutil.rmtree(workdir)  # scratch from an earlier or interrupted run
    workdir.mkdir(parents=True)


def _not_prebuilt(planned: PlannedBuild) -> BuildResult:
    """What a cell job is told when the build it tests is not in wheels/ (never saved: the build's own job makes it)."""
    build = planned.build
    return BuildResult(
        build.key,
        planned.inputs_hash,
        planned.inputs,
        RunnerName(planned.inputs["runner"]),
        status=Status.FAILED,
        failed_step="setup",
        error=f"build {build.id} is not in wheels/results/builds/ (--prebuilt tests the builds another job made; "
        "download its artifact into wheels/ first, or build without --prebuilt)",
        failure_class=FailureClass.DETERMINISTIC,
    )


def _fail_with_build(result: CellResult, made: BuildResult, log_file: Path, build_log: Path) -> None:
    """The cell fails as its build did: the build's step, message, class and cause, and its log copied into the
    cell's (so the cell's own log says why, wherever it is read)."""
    result.status = Status.INTERRUPTED if made.status == Status.INTERRUPTED else Status.FAILED
    result.failed_step = made.failed_step or "build"
    result.error = f"build {made.id} failed in step {result.failed_step}: {made.error or 'no error recorded'}"
    result.error_tail = made.error_tail
    result.failure_class = made.failure_class or FailureClass.DETERMINISTIC
    result.cause = made.cause
    text = build_log.read_text(errors="replace") if build_log.is_file() else "(the build's log is missing)\n"
    _append(log_file, f"# build {made.id} failed; its log follows\n{text}\n# FAILED: {result.error}\n")


def _record_failure(
    result: CellResult | BuildResult, exc: Exception, log_file: Path, workdir: Path, project: Path
) -> None:
    """Fill in how a build or cell failed: its step, message, class and cause (interrupted ones are not failures)."""
    result.status = Status.FAILED
    result.failed_step = result.steps[-1].name if result.steps else "setup"
    result.failure_class = FailureClass.DETERMINISTIC
    if isinstance(exc, StepFailed):
        result.status = Status.INTERRUPTED if isinstance(exc, Interrupted) else Status.FAILED
        result.failed_step, result.error, result.error_tail = exc.step, exc.message, exc.log_tail or None
        result.failure_class, result.cause = exc.failure_class, exc.cause
        if exc.cause == Cause.DISK_FULL and not exc.message.startswith("cannot write"):
            result.error = f"no space left on the device of {workdir}; free space there and rerun ({exc.message})"
    elif isinstance(exc, UserError):
        result.error = str(exc)
    elif isinstance(exc, OSError) and is_resource_error(exc):  # the machine's fault (full disk...): retried
        result.error = resource_message(exc)
        result.failure_class = FailureClass.TRANSIENT
        result.cause = Cause.DISK_FULL if exc.errno in DISK_FULL_ERRNOS else Cause.NOT_WRITABLE
    else:  # a bug or a bad path outside any step
        log.debug("%s failed outside a step", result.id, exc_info=exc)
        result.error = f"{type(exc).__name__}: {exc}"
    if result.error:
        # Published on the page: paths inside the project as the project names them, so the same failure reads the
        # same from any checkout (a CI job's workspace, a clone).
        result.error = result.error.replace(f"{project}{os.sep}", "")
    _append(log_file, f"\n# {result.status.upper()} in step {result.failed_step}: {result.error}\n")


def _append(log_file: Path, text: str) -> None:
    """Best effort: the record says the same, and a full disk must not hide the real failure."""
    try:
        with log_file.open("a") as handle:
            handle.write(text)
    except OSError:
        pass


def check_built_wheel(job: BuildJob, output: BuildOutput, runner: Runner) -> None:
    """The plugin wheel is the build's (name, version and label, pins, the torch it was built against) and every
    symbol it leaves undefined is provided by the build's torch or SDK; raises StepFailed("check", ...)."""
    assert output.plugin_wheel is not None
    matrix = job.matrix
    if matrix.contract.build.relabel:  # the project's build fixed its own version: give the wheel the build's
        version = Version(f"{matrix.plugin.version}+{job.build.key.label}")
        output.plugin_wheel = relabel_wheel(output.plugin_wheel, version, job.workdir / "relabeled")
    facts = check_plugin_wheel(
        output.plugin_wheel,
        job.build,
        matrix.plugin.distribution,
        matrix.sdk.distribution if matrix.sdk is not None and matrix.sdk.builds_wheel else None,
        plugin_version=matrix.plugin.version,
        check=matrix.contract.check,
    )
    missing = unresolved_against(output.plugin_wheel, runner.provided_symbols(job))
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise StepFailed(
            "check", f"{len(missing)} symbol(s) not provided by torch {output.torch_build.get('version')}: {shown}"
        )
    output.torch_build["built_with"] = facts


def judge_smoke(run: SmokeRun, output: CellOutput) -> None:
    """Record the smoke counts and features; a failed run fails the cell with its counts (a transient failure, a
    timeout or a signal, is raised as it is: the counts so far say nothing about the plugin)."""
    output.smoke = read_junit(run.junit)
    output.features = read_features(run.features)
    if run.failure is None:
        return
    if run.failure.failure_class == FailureClass.TRANSIENT:
        raise run.failure
    counts = output.smoke
    detail = f" ({run.detail})" if run.detail else ""
    raise StepFailed(
        "smoke",
        f"{counts.failed} failed, {counts.errors} errors, {counts.passed} passed{detail}",
        run.failure.log_tail,
    )
