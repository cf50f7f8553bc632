"""Runs the selected cells through their runners: skips unchanged ones, isolates failures, records every result."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from buildmatrix.builder.buildcode import ENGINE_MODULES, PACKAGE_DIR, build_code
from buildmatrix.builder.recordparse import RecordRules
from buildmatrix.builder.relabel import relabel_wheel
from buildmatrix.builder.results import CellResult, ResultStore, WheelRecord
from buildmatrix.builder.runners.base import CellJob, CellRunners, Runner, RunnerOutput, SmokeRun
from buildmatrix.builder.smoke import read_features, read_junit
from buildmatrix.builder.sourcetree import (
    PatchSeries,
    apply_series,
    copy_pristine,
    release_series,
    write_plugin_version,
)
from buildmatrix.builder.steps import StepRecorder
from buildmatrix.builder.wheelcheck import check_plugin_wheel, unresolved_against
from buildmatrix.builder.workspace import Workspace
from buildmatrix.errors import Interrupted, RecordError, ResourceError, StepFailed, UserError
from buildmatrix.model.cells import Cell
from buildmatrix.model.matrix import Matrix
from buildmatrix.model.registry import Registry
from buildmatrix.model.vocab import Cause, FailureClass, Status
from buildmatrix.util.atomic import copy_file_atomic
from buildmatrix.util.failures import DISK_FULL_ERRNOS, is_resource_error, resource_message
from buildmatrix.util.fingerprint import file_sha256, files_hash, inputs_hash, tree_hash
from buildmatrix.util.paths import regular_file
from buildmatrix.util.process import CHILDREN, kill_orphans

log = logging.getLogger(__name__)

# Events for whoever displays progress: (cell id, what) with what in
# "queued" | "up-to-date" | "<step name>" | "retry <n>" | "passed" | "failed" | "interrupted".
ProgressCallback = Callable[[str, str], None]


@dataclass(frozen=True)
class RunOptions:
    jobs: int = 1
    fail_fast: bool = False
    force: bool = False  # rebuild even when inputs are unchanged, and the shared caches the cells use
    retries: int = 1  # extra tries within the run for a cell that fails transiently (network, timeout, ...)


@dataclass
class PlannedCell:
    cell: Cell
    inputs: dict[str, Any]
    inputs_hash: str
    reusable: CellResult | None  # a stored result for the same inputs
    problem: str | None = None  # why the cell cannot even be planned (e.g. no interpreter)


class Engine:
    def __init__(
        self,
        matrix: Matrix,
        workspace: Workspace,
        runner: Runner | CellRunners,
        registry: Registry,
        progress: ProgressCallback | None = None,
    ) -> None:
        """runner: one runner for every cell, or each cell's (CellRunners: one run drives several runners)."""
        self.matrix = matrix
        self.workspace = workspace
        self.runners = runner if isinstance(runner, CellRunners) else CellRunners(runner)
        self.registry = registry
        self.progress = progress or (lambda cell_id, what: None)
        self.store = ResultStore(workspace.results_dir, RecordRules.of(matrix))
        self._shared_hashes: dict[str, dict[str, str]] = {}  # by runner name
        self.damaged: dict[str, RecordError] = {}  # cells rebuilt because their record was damaged
        self.orphans_ended = 0  # processes (and containers) an earlier, SIGKILLed run left behind, ended by this one
        self._stop = threading.Event()

    @property
    def runner(self) -> Runner:
        """The run's runner when it has one (the default of CellRunners otherwise)."""
        return self.runners.default

    @runner.setter
    def runner(self, runner: Runner) -> None:
        self.runners = CellRunners(runner)

    # ---- planning ---------------------------------------------------------
    def shared_inputs(self, runner: Runner | None = None) -> dict[str, str]:
        """The inputs every cell of a runner shares: the sources, and the engine's and that runner's build code."""
        runner = runner or self.runner
        if runner.name not in self._shared_hashes:
            sdk = self.matrix.sdk
            self._shared_hashes[runner.name] = {
                "plugin_tree": tree_hash(self.matrix.plugin.source, generated=self.matrix.contract.build.generated),
                **(
                    {"sdk_tree": tree_hash(sdk.source, generated=self.matrix.contract.build.generated)}
                    if sdk is not None and sdk.source is not None
                    else {}
                ),
                "build_code": tree_hash(PACKAGE_DIR, include=build_code((*ENGINE_MODULES, *runner.build_modules))),
            }
        return self._shared_hashes[runner.name]

    def series(self, cell: Cell) -> list[PatchSeries]:
        return release_series(self.matrix, cell.torch)

    def plan(self, cells: list[Cell], force: bool = False) -> list[PlannedCell]:
        planned = []
        for cell in cells:
            problem = None
            runner = self.runners.of(cell)
            try:
                python = runner.python_identity(cell)
            except UserError as exc:
                python, problem = "missing", str(exc)
            patch_files = [p for s in self.series(cell) for p in sorted(s.directory.iterdir()) if p.is_file()]
            inputs: dict[str, Any] = {
                "cell": cell.as_dict(),
                "plugin_version": str(self.matrix.plugin.version),
                "torch_requirement": cell.torch.requirement_version,
                "wheel_source": cell.torch.wheels.describe(),
                "python": python,
                "runner": runner.name,
                "patches": files_hash(patch_files),
                "smoke_requires": list(self.matrix.contract.smoke.requirements_for(cell.torch.version)),
                **self.shared_inputs(runner),
            }
            digest = inputs_hash(inputs)
            try:
                stored = None if force or problem else self.store.load(cell.id)
            except RecordError as exc:
                stored = None  # rebuilt, and the CLI's summary says why
                self.damaged[cell.id] = exc
            if stored is not None and not self._reusable(stored, digest):
                stored = None
            planned.append(PlannedCell(cell, inputs, digest, stored, problem))
        return planned

    def _reusable(self, stored: CellResult, digest: str) -> bool:
        if stored.inputs_hash != digest:
            return False
        if stored.status == Status.PASSED:
            # A passed cell is only up to date if every file its record names is still there: its wheels unchanged
            # (the plugin's and a wheel SDK's, each against its sha256), its log a regular file.
            return self._files_intact(stored)
        # The same inputs fail the same way (--force retries); a network blip, a timeout or a stop says nothing
        # about the inputs, so those cells are tried again.
        return stored.status != Status.INTERRUPTED and stored.failure_class != FailureClass.TRANSIENT

    def _files_intact(self, stored: CellResult) -> bool:
        needs_sdk_wheel = self.matrix.sdk is not None and self.matrix.sdk.builds_wheel
        if stored.wheel is None or (needs_sdk_wheel and stored.sdk_wheel is None):
            return False
        for wheel in (w for w in (stored.wheel, stored.sdk_wheel) if w is not None):
            try:
                path = regular_file(self.workspace.wheels_dir, wheel.path)
            except ValueError:
                return False
            if file_sha256(path) != wheel.sha256:
                return False
        if stored.log is not None:
            try:
                regular_file(self.workspace.wheels_dir, stored.log)
            except ValueError:
                return False
        return True

    # ---- running ----------------------------------------------------------
    def interrupt(self, reason: str) -> None:
        """Stop the run (Ctrl-C, SIGTERM): no new cell or step starts, every child process tree is killed now."""
        self._stop.set()
        CHILDREN.stop(reason)

    def _sweep(self) -> int:
        ended = 0
        for runner in self.runners.all():
            sweep = getattr(runner, "sweep", None)  # test doubles need none
            ended += int(sweep(CHILDREN.owner)) if sweep is not None and CHILDREN.owner else 0
        return ended

    def preflight(self) -> None:
        """Raise ResourceError, before any cell starts, when a directory the run writes cannot be written."""
        for directory in (
            self.workspace.results_dir / "cells",
            self.workspace.logs_dir,
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

    def run(self, cells: list[Cell], options: RunOptions) -> list[CellResult]:
        """Run the cells; raises ResourceError (after stopping the others) when results can no longer be written."""
        self.preflight()
        CHILDREN.owner = str(self.workspace.build_dir.resolve())
        # The run lock is held: anything still carrying our owner mark was left by a run that was SIGKILLed.
        self.orphans_ended = len(kill_orphans(CHILDREN.owner)) + self._sweep()
        try:
            return self._run(cells, options)
        finally:
            self._sweep()  # containers whose clients were killed (timeout, stop) outlive them
            CHILDREN.owner = None
            CHILDREN.reset()  # every child is gone by now; a later run in this process may start its own

    def _run(self, cells: list[Cell], options: RunOptions) -> list[CellResult]:
        planned = self.plan(cells, force=options.force)
        results: dict[str, CellResult] = {}
        todo = []
        for item in planned:
            if item.reusable is not None:
                results[item.cell.id] = item.reusable
                self.progress(item.cell.id, "up-to-date")
            else:
                todo.append(item)
                self.progress(item.cell.id, "queued")
        fatal: ResourceError | None = None
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            pending: dict[Future[CellResult], tuple[PlannedCell, int]] = {}
            queue = [(item, 1) for item in todo]
            while queue or pending:
                while queue and len(pending) < max(1, options.jobs) and not self._stop.is_set():
                    item, attempt = queue.pop(0)
                    pending[pool.submit(self.run_cell, item, attempt, options.force)] = (item, attempt)
                if not pending:
                    break
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    item, attempt = pending.pop(future)
                    try:
                        result = future.result()
                    except ResourceError as exc:
                        fatal = fatal or exc
                        self.interrupt("a resource fault")
                        continue
                    results[item.cell.id] = result
                    retry = result.status == Status.FAILED and result.failure_class == FailureClass.TRANSIENT
                    if retry and attempt <= options.retries and not self._stop.is_set():
                        queue.insert(0, (item, attempt + 1))
                        self.progress(item.cell.id, f"retry {attempt + 1}")
                    elif result.status == Status.FAILED and options.fail_fast:
                        self._stop.set()
                        queue.clear()
        if fatal is not None:
            raise fatal
        ordered = [results[p.cell.id] for p in planned if p.cell.id in results]
        try:
            self.store.write_summary(*self.store.scan())
        except OSError as exc:
            raise ResourceError(resource_message(exc, self.store.directory)) from None
        return ordered

    def _start_log(self, cell: Cell, attempt: int) -> Path:
        log_file = self.workspace.logs_dir / f"{cell.id}.log"
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            with log_file.open("a" if attempt > 1 else "w") as handle:  # a retry keeps the failed attempt's log
                handle.write(
                    f"# {cell.id}: {self.runners.of(cell).name} runner, attempt {attempt}, started {started}\n"
                )
        except OSError as exc:
            raise ResourceError(resource_message(exc, log_file)) from None
        return log_file

    def run_cell(self, item: PlannedCell, attempt: int = 1, force: bool = False) -> CellResult:
        """Build one cell and record it; raises ResourceError only when its log or record cannot be written."""
        cell = item.cell
        runner = self.runners.of(cell)
        result = CellResult(
            cell=cell.key,
            inputs_hash=item.inputs_hash,
            inputs=item.inputs,
            runner=runner.name,
            attempts=attempt,
            patches=cell.torch.patches,
        )
        log_file = self._start_log(cell, attempt)
        result.log = str(log_file.relative_to(self.workspace.wheels_dir))
        steps = StepRecorder(result, self.progress)
        output = RunnerOutput()
        workdir = self.workspace.cell_dir(cell.id)
        try:
            if item.problem:
                with steps.step("interpreter"):
                    raise StepFailed("interpreter", item.problem)
            if workdir.exists():
                shutil.rmtree(workdir)  # scratch from an earlier or interrupted run
            workdir.mkdir(parents=True)
            with steps.step("source"):
                tree_root = workdir / "tree"
                plugin_tree = copy_pristine(self.matrix.plugin.source, tree_root, self.matrix.contract.build.generated)
                applied = apply_series(self.series(cell), tree_root, self.matrix.plugin.source.name)
                result.inputs["applied_patches"] = applied
                version = Version(f"{self.matrix.plugin.version}+{cell.local_version_label}")
                if self.matrix.contract.build.version_file:
                    write_plugin_version(plugin_tree, self.matrix.contract.build.version_file, version)
            smoke_tests = plugin_tree / self.matrix.plugin.smoke_tests.relative_to(self.matrix.plugin.source)
            source = self.registry.source(cell.torch)
            job = CellJob(
                cell,
                self.matrix,
                self.workspace,
                workdir,
                plugin_tree,
                smoke_tests,
                log_file,
                source.find_links,
                source.index_urls,
                force=force,
                build_env=self.matrix.contract.build.environment(version, str(cell.sdk.version) if cell.sdk else None),
            )
            build_and_smoke(runner, job, steps, output)
            with steps.step("publish"):
                self._publish_wheels(cell, output, result)
            result.status = Status.PASSED
            # The wheel, log and record are published; the environments (GBs of hard links into the uv cache,
            # which keep pruned cache entries alive) are scratch. A failed cell keeps its directory for inspection.
            shutil.rmtree(workdir, ignore_errors=True)
        except Exception as exc:  # a failed step, or anything outside one: only this cell fails
            _record_failure(result, exc, log_file, workdir)
            if result.error:
                # Published on the page: paths inside the project as the project names them, so the same failure
                # reads the same from any checkout (a CI job's workspace, a clone).
                result.error = result.error.replace(f"{self.workspace.root}{os.sep}", "")
        finally:
            result.smoke = output.smoke
            result.features = output.features
            result.torch_build = output.torch_build
            result.variants_claimed = output.variants_claimed
            result.finished = time.time()
            try:
                self.store.save(result)
            except OSError as exc:
                raise ResourceError(resource_message(exc, self.store.directory)) from None
            self.progress(cell.id, result.status)
        return result

    def _publish_wheels(self, cell: Cell, output: RunnerOutput, result: CellResult) -> None:
        """The plugin wheel into wheels/torch<minor>/, a wheel SDK's into wheels/<sdk name>/."""
        assert output.plugin_wheel is not None
        result.wheel = self._publish(output.plugin_wheel, self.workspace.plugin_wheel_dir(cell.torch.minor))
        sdk = self.matrix.sdk
        if sdk is not None and sdk.builds_wheel:
            assert output.sdk_wheel is not None
            result.sdk_wheel = self._publish(output.sdk_wheel, self.workspace.sdk_wheel_dir(sdk.name))

    def _publish(self, built: Path, directory: Path) -> WheelRecord:
        dest = directory / built.name
        copy_file_atomic(built, dest)
        return WheelRecord(built.name, file_sha256(dest), str(dest.relative_to(self.workspace.wheels_dir)))


def _record_failure(result: CellResult, exc: Exception, log_file: Path, workdir: Path) -> None:
    """Fill in how a cell failed: its step, message, class and cause (interrupted cells are not failures)."""
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
        log.debug("cell %s failed outside a step", result.id, exc_info=exc)
        result.error = f"{type(exc).__name__}: {exc}"
    _append(log_file, f"\n# {result.status.upper()} in step {result.failed_step}: {result.error}\n")


def _append(log_file: Path, text: str) -> None:
    """Best effort: the cell's record says the same, and a full disk must not hide the real failure."""
    try:
        with log_file.open("a") as handle:
            handle.write(text)
    except OSError:
        pass


def build_and_smoke(runner: Runner, job: CellJob, steps: StepRecorder, output: RunnerOutput) -> None:
    """The runner builds, the engine checks the wheel, the runner runs the smoke suite and the engine judges it."""
    runner.build(job, steps, output)
    with steps.step("check"):
        check_built_wheel(job, output, runner)
    runner.prepare_smoke(job, steps, output)
    with steps.step("smoke"):
        judge_smoke(runner.run_smoke(job, output), output)


def check_built_wheel(job: CellJob, output: RunnerOutput, runner: Runner) -> None:
    """The plugin wheel is the cell's (name, version and label, pins, the torch it was built against) and every
    symbol it leaves undefined is provided by the cell's torch or SDK; raises StepFailed("check", ...)."""
    assert output.plugin_wheel is not None
    matrix = job.matrix
    if matrix.contract.build.relabel:  # the project's build fixed its own version: give the wheel the cell's
        version = Version(f"{matrix.plugin.version}+{job.cell.local_version_label}")
        output.plugin_wheel = relabel_wheel(output.plugin_wheel, version, job.workdir / "relabeled")
    facts = check_plugin_wheel(
        output.plugin_wheel,
        job.cell,
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
    output.variants_claimed = [job.cell.torch.variant]
    output.torch_build["built_with"] = facts


def judge_smoke(run: SmokeRun, output: RunnerOutput) -> None:
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
