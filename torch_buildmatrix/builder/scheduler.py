"""One run's scheduling: the queue of builds and cells, the pool of `jobs` workers, retries of transient failures and
fail-fast. It drives the engine (builder/engine.py) through the Scheduled protocol: planning, running a build or a
cell, and the run's shared state (the builds made, the stop event)."""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol

from torch_buildmatrix.builder.planning import PlannedBuild, PlannedCell
from torch_buildmatrix.builder.records.model import BuildResult, CellResult
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.builder.steps import BUILD
from torch_buildmatrix.builder.tiers import settle
from torch_buildmatrix.builder.toolenv import compiler_share
from torch_buildmatrix.errors import RecordError, ResourceError
from torch_buildmatrix.model.builds import Build
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.util.failures import resource_message
from torch_buildmatrix.vocab import FailureClass, RunnerName, Status


@dataclass(frozen=True)
class RunOptions:
    jobs: int = 1
    fail_fast: bool = False
    force: bool = False  # rebuild and retest even when inputs are unchanged, and the shared caches they use
    retries: int = 1  # extra tries within the run for a build or cell that fails transiently (network, timeout...)
    prebuilt: bool = False  # test with the builds already in wheels/ (a CI cell job), never build


class Scheduled(Protocol):
    """What the scheduler drives: builder/engine.Engine, which imports this module."""

    store: ResultStore
    build_results: dict[str, BuildResult]  # the run's builds, made or up to date: the scheduler fills it in
    stopping: threading.Event  # set: no new build or cell starts (fail-fast, Ctrl-C, a resource fault)

    def progress(self, what: str, event: str) -> None: ...

    def builds_of(self, cells: list[Cell]) -> list[Build]: ...

    def plan_build(self, build: Build, force: bool = False, prebuilt: bool = False) -> PlannedBuild: ...

    def plan_cell(self, cell: Cell, build: Build, made: BuildResult, force: bool = False) -> PlannedCell: ...

    def run_build(
        self, item: PlannedBuild, attempt: int = 1, force: bool = False, compilers: int | None = None
    ) -> BuildResult: ...

    def run_cell(self, item: PlannedCell, made: BuildResult, attempt: int = 1) -> CellResult: ...

    def interrupt(self, reason: str) -> None: ...


class Scheduler:
    """One run's scheduling: builds first in the queue; as a build ends, its cells go to the front (a release's
    cells are tested while its torch is fresh in the caches); `jobs` builds and cells at a time, each build once."""

    def __init__(self, engine: Scheduled, cells: list[Cell], options: RunOptions, builds_only: bool = False) -> None:
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
                engine.build_results[build.id] = not_prebuilt(planned)
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
                while self.queue and len(pending) < jobs and not engine.stopping.is_set():
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
            # each of the `jobs` builds and cells running at once gets its share of the cores
            return pool.submit(engine.run_build, item, attempt, self.options.force, compiler_share(self.options.jobs))
        return pool.submit(engine.run_cell, item, engine.build_results[item.build.id], attempt)

    def finished(self, item: PlannedBuild | PlannedCell, attempt: int, result: BuildResult | CellResult) -> None:
        engine, options = self.engine, self.options
        retry = result.status == Status.FAILED and result.failure_class == FailureClass.TRANSIENT
        name = f"{BUILD}{result.id}" if isinstance(item, PlannedBuild) else result.id
        if retry and attempt <= options.retries and not engine.stopping.is_set():
            self.queue.appendleft((item, attempt + 1))
            engine.progress(name, f"retry {attempt + 1}")
            return
        if result.status == Status.FAILED and options.fail_fast:
            engine.stopping.set()
            self.queue.clear()
        if isinstance(result, BuildResult):
            engine.build_results[result.id] = result
            self.build_ready(result.id, front=True)
        else:
            self.results[result.id] = result


def not_prebuilt(planned: PlannedBuild) -> BuildResult:
    """What a cell job is told when the build it tests is not in wheels/ (never saved: the build's own job makes it)."""
    build = planned.build
    return BuildResult(
        build.key,
        planned.inputs_hash,
        planned.inputs,
        RunnerName(planned.inputs["runner"]),
        status=Status.FAILED,
        failed_step="setup",
        error=(
            f"build {build.id} is in wheels/results/builds/, but {planned.unusable} (--prebuilt tests the build "
            "another job made as its record says: download that job's whole artifact into wheels/ again, or build "
            "without --prebuilt)"
            if planned.unusable
            else f"build {build.id} is not in wheels/results/builds/ (--prebuilt tests the builds another job made; "
            "download its artifact into wheels/ first, or build without --prebuilt)"
        ),
        failure_class=FailureClass.DETERMINISTIC,
    )
