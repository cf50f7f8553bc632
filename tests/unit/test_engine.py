"""Engine behaviour a user can hit without building anything: missing interpreter, stale records, planning."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from torch_buildmatrix.builder.engine import Engine
from torch_buildmatrix.builder.planning import PlannedBuild
from torch_buildmatrix.builder.runners.base import BuildJob, BuildOutput, CellJob, CellOutput, CellRunners, SmokeRun
from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.builder.scheduler import RunOptions
from torch_buildmatrix.builder.steps import Note, ProgressEvent, StepRecorder
from torch_buildmatrix.builder.verdicts import judge_smoke
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.cells import Cell, expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.registry import Registry
from torch_buildmatrix.vocab import Cause, FailureClass, RunnerName, Status

from conftest import TINY_CONTRACT

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
MATRIX = """\
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["2.1"]}
python: ["3.11"]
torch:
  - {version: "2.13.0", variant: cpu, wheels: {find-links: wheelhouse}}
"""


def setup_project(tmp_path: Path) -> tuple[Engine, list]:  # type: ignore[type-arg]
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "wheelhouse").mkdir()
    (root / "wheelhouse" / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (root / "matrix.yaml").write_text(MATRIX.replace("wheelhouse", str(root / "wheelhouse")) + TINY_CONTRACT)
    matrix = load_matrix(root / "matrix.yaml")
    registry = Registry(tmp_path / "cache")
    registry.machine = "x86_64"
    cells = expand(matrix, {r: registry.pythons(r) for r in matrix.torch})
    empty = tmp_path / "no-interpreters"
    empty.mkdir()
    engine = Engine(matrix, Workspace.for_root(root), LocalRunner(search_path=str(empty), pyenv_root=empty), registry)
    return engine, cells


def planned(engine: Engine, cells: list[Cell], force: bool = False) -> PlannedBuild:
    """The plan of the (one) build the cells test."""
    [build] = engine.builds_of(cells)
    return engine.plan_build(build, force=force)


def test_missing_interpreter_fails_the_build_and_its_cell_with_advice(tmp_path: Path) -> None:
    engine, cells = setup_project(tmp_path)
    [result] = engine.run(cells, RunOptions())
    assert result.status == "failed" and result.failed_step == "interpreter"
    assert "no CPython 3.11 interpreter found" in (result.error or "")
    assert engine.store.load(result.id) is not None
    made = engine.store.load_build(cells[0].build.id)
    assert made is not None and made.failed_step == "interpreter" and made.wheel is None


def test_plan_reuses_only_matching_records(tmp_path: Path) -> None:
    engine, cells = setup_project(tmp_path)
    engine.runner = LocalRunner()  # a real interpreter, so the build can be planned
    first = planned(engine, cells)
    assert first.reusable is None and first.problem is None
    from torch_buildmatrix.builder.records.model import BuildResult

    engine.store.save_build(
        BuildResult(cells[0].build, inputs_hash=first.inputs_hash, inputs=first.inputs, runner=RunnerName.LOCAL)
    )
    assert planned(engine, cells).reusable is not None  # a failure with the same inputs is reused
    assert planned(engine, cells, force=True).reusable is None
    (engine.matrix.plugin.source / "new_file.py").write_text("")
    engine.runner = LocalRunner()  # a new run: the sources are hashed again
    assert planned(engine, cells).reusable is None  # changed sources: rebuilt


def test_plugin_version_is_a_build_input(tmp_path: Path) -> None:
    engine, cells = setup_project(tmp_path)
    engine.runner = LocalRunner()
    first = planned(engine, cells)
    from torch_buildmatrix.builder.records.model import BuildResult

    engine.store.save_build(
        BuildResult(cells[0].build, inputs_hash=first.inputs_hash, inputs=first.inputs, runner=RunnerName.LOCAL)
    )
    path = engine.matrix.path
    path.write_text(path.read_text().replace("version: 0.1.0", "version: 0.2.0"))
    engine.matrix = load_matrix(path)
    engine.runner = LocalRunner()
    again = planned(engine, cells)
    assert again.inputs["plugin_version"] == "0.2.0" and first.inputs["plugin_version"] == "0.1.0"
    assert again.inputs_hash != first.inputs_hash and again.reusable is None


class FailingBuild:
    """A runner double whose build never gets past its build step (the engine is what is tested): the rest of the
    runner interface is never reached, and says so if it is."""

    name = RunnerName.LOCAL
    build_modules: ClassVar[tuple[str, ...]] = (__name__,)

    def python_identity(self, python: Python) -> str:
        return "cpython-3.11"

    def sweep(self, owner: str) -> int:
        return 0

    def build(self, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
        raise NotImplementedError

    def provided_symbols(self, job: BuildJob) -> set[str]:
        raise AssertionError("the engine checked a wheel that was never built")

    def prepare_smoke(self, job: CellJob, steps: StepRecorder) -> None:
        raise AssertionError("the engine smoke-tested a wheel that was never built")

    def run_smoke(self, job: CellJob) -> SmokeRun:
        raise AssertionError("the engine smoke-tested a wheel that was never built")


class TreeReader(FailingBuild):
    """Reads the version file the engine prepared for setup.py, then fails its build."""

    def __init__(self) -> None:
        self.seen: str | None = None

    def build(self, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
        self.seen = (job.plugin_tree / "PLUGIN_VERSION").read_text()
        raise StepFailed("build", "stopped by the test")


def test_the_patched_copy_carries_the_matrix_plugin_version(tmp_path: Path) -> None:
    """setup.py reads PLUGIN_VERSION (plugin.version + the build's label) from the patched copy; plugin/ gets none."""
    engine, cells = setup_project(tmp_path)
    runner = TreeReader()
    engine.runner = runner
    [result] = engine.run(cells, RunOptions())
    assert result.status == "failed" and result.failed_step == "build"
    assert runner.seen == f"0.1.0+{cells[0].local_version_label}\n"  # the wheel's whole version, label included
    assert not (engine.matrix.plugin.source / "PLUGIN_VERSION").exists()


def test_a_steps_line_goes_to_the_log_and_the_console_or_to_the_log_alone(tmp_path: Path) -> None:
    """The source step's patch line: a build says it in its log and on the console; a cell, of its own patched copy,
    in its log alone (the console shows the build's). The log's line is written one way for both."""
    engine, cells = setup_project(tmp_path)
    events: list[tuple[str, ProgressEvent]] = []
    engine.progress = lambda what, event: events.append((what, event))
    release, build_log, cell_log = engine.matrix.torch[0], tmp_path / "build.log", tmp_path / "cell.log"
    engine._patched_source(release, tmp_path / "build", engine._say("build torch2.13-cpu-drv2", build_log))
    engine._patched_source(release, tmp_path / "cell", engine._say(cells[0].id, cell_log, console=False))
    line = "source: no patch applied: torch 2.13.0 lists no patch series"
    assert build_log.read_text() == cell_log.read_text() == f"# {line}\n"
    assert events == [("build torch2.13-cpu-drv2", Note(line))]  # a note: the build's state is left alone


class ScriptedRunner(FailingBuild):
    """Its build step fails the way the test says, counting its calls."""

    def __init__(self, failure: Callable[[BuildJob], None]) -> None:
        self.failure = failure
        self.calls = 0

    def build(self, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
        self.calls += 1
        with steps.step("build"):
            self.failure(job)


def test_transient_failure_is_retried_in_the_run_and_not_remembered(tmp_path: Path) -> None:
    from torch_buildmatrix.errors import StepFailed
    from torch_buildmatrix.vocab import Cause, FailureClass

    def blip(job) -> None:  # type: ignore[no-untyped-def]
        raise StepFailed("build", "HTTP Error 503", "", FailureClass.TRANSIENT, Cause.NETWORK)

    engine, cells = setup_project(tmp_path)
    engine.runner = runner = ScriptedRunner(blip)
    [result] = engine.run(cells, RunOptions(retries=2))
    assert runner.calls == 3 and result.attempts == 1  # the build was tried 3 times, its cell judged once
    stored = engine.store.load_build(cells[0].build.id)
    assert stored is not None and (stored.failure_class, stored.cause) == ("transient", "network")
    assert stored.attempts == 3 and result.cause == "network"  # the cell fails as its build did
    assert planned(engine, cells).reusable is None  # the next run tries again
    log = (engine.workspace.logs_dir / "builds" / f"{cells[0].build.id}.log").read_text()
    assert "attempt 1" in log and "attempt 3" in log


def test_deterministic_failure_is_tried_once_and_remembered(tmp_path: Path) -> None:
    from torch_buildmatrix.util.process import run_logged

    def compile_error(job) -> None:  # type: ignore[no-untyped-def]
        run_logged("build", ["bash", "-c", "echo 'x.c:1: error: expected ;'; exit 1"], job.log_file)

    engine, cells = setup_project(tmp_path)
    engine.runner = runner = ScriptedRunner(compile_error)
    [result] = engine.run(cells, RunOptions(retries=3))
    assert runner.calls == 1 and result.failure_class == "deterministic" and result.cause is None
    assert planned(engine, cells).reusable is not None


def test_error_outside_any_step_fails_only_the_build(tmp_path: Path) -> None:
    engine, cells = setup_project(tmp_path)

    class Broken(FailingBuild):
        def build(self, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
            raise ValueError(f"{job.plugin_tree} is not inside the plugin")

    engine.runner = Broken()
    [result] = engine.run(cells, RunOptions())
    assert result.status == "failed" and result.failure_class == "deterministic"
    assert "failed in step source: ValueError: " in (result.error or "") and "is not inside" in (result.error or "")
    stored = engine.store.load(result.id)
    assert stored is not None and stored.status == "failed"


def test_interrupt_records_the_running_build_as_interrupted(tmp_path: Path) -> None:
    from torch_buildmatrix.util.process import run_logged

    engine, cells = setup_project(tmp_path)

    def stopped(job) -> None:  # type: ignore[no-untyped-def]
        engine.interrupt("SIGTERM")  # as the CLI's signal handler does, mid-step
        run_logged("build", ["sleep", "30"], job.log_file)

    engine.runner = runner = ScriptedRunner(stopped)
    [cell] = engine.run(cells, RunOptions(retries=3))  # a stopped run tests no cell of an unfinished build:
    assert cell.status == "interrupted" and cell.failed_step == "build"  # it is recorded as its build ended
    assert runner.calls == 1  # no retry once the run is stopping
    result = engine.build_results[cells[0].build.id]
    assert result.status == "interrupted" and result.cause == "interrupted" and result.failed_step == "build"
    assert planned(engine, cells).reusable is None  # rebuilt next run
    log = engine.workspace.logs_dir / "builds" / f"{result.id}.log"
    assert "# INTERRUPTED in step build" in log.read_text()


JUNIT = '<testsuite tests="5" failures="{failed}" errors="0" skipped="1"></testsuite>'


def smoke_run(tmp_path: Path, failed: int, failure: StepFailed | None, detail: str = "") -> SmokeRun:
    (tmp_path / "junit.xml").write_text(JUNIT.format(failed=failed))
    (tmp_path / "features.json").write_text(json.dumps({"events": "passed"}))
    return SmokeRun(tmp_path / "junit.xml", tmp_path / "features.json", failure, detail)


def test_the_engine_judges_every_runners_smoke_run_the_same_way(tmp_path: Path) -> None:
    output = CellOutput()
    judge_smoke(smoke_run(tmp_path, 0, None), output)
    assert output.smoke is not None and (output.smoke.passed, output.smoke.skipped) == (4, 1)
    assert output.features == {"events": "passed"}

    failed = StepFailed("smoke", "exit code 1: python -m pytest", "FAILED test_x")
    output = CellOutput()
    with pytest.raises(StepFailed) as caught:
        judge_smoke(smoke_run(tmp_path, 2, failed, detail="pytest exit code 1"), output)
    assert caught.value.step == "smoke" and caught.value.log_tail == "FAILED test_x"
    assert caught.value.message == "2 failed, 0 errors, 2 passed (pytest exit code 1)"
    assert output.smoke is not None and output.smoke.failed == 2  # the counts are kept for the record


def test_a_transient_smoke_failure_is_raised_as_it_is_with_the_counts_so_far(tmp_path: Path) -> None:
    timeout = StepFailed("smoke", "timed out after 60 s", "", FailureClass.TRANSIENT, Cause.TIMEOUT)
    output = CellOutput()
    with pytest.raises(StepFailed) as caught:
        judge_smoke(smoke_run(tmp_path, 1, timeout), output)
    assert caught.value is timeout and output.smoke is not None and output.smoke.failed == 1


class NamedReader(FailingBuild):
    """A runner double with a name of its own that notes which cells it was handed, then fails their build."""

    def __init__(self, name: RunnerName) -> None:
        self.name = name
        self.cells: list[str] = []
        self.swept = 0

    def python_identity(self, python: Python) -> str:
        return f"cpython-{python} by {self.name}"

    def sweep(self, owner: str) -> int:
        self.swept += 1
        return 0

    def build(self, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
        self.cells.append(job.build.id)
        with steps.step("build"):
            raise StepFailed("build", f"stopped by the test in the {self.name} double")


def test_one_run_drives_each_cell_through_its_own_runner(tmp_path: Path) -> None:
    """runner: auto's plan in one engine run: each cell goes to its runner, and its record and inputs say which."""
    from torch_buildmatrix.builder.runners.base import CellRunners

    engine, _ = setup_project(tmp_path)
    (engine.matrix.root / "wheelhouse" / "torch-2.13.0+cpu-cp314-cp314-manylinux_2_28_x86_64.whl").write_bytes(b"")
    path = engine.matrix.path
    path.write_text(path.read_text().replace('python: ["3.11"]', 'python: ["3.11", "3.14"]'))
    engine.matrix = load_matrix(path)
    engine.registry = Registry(tmp_path / "cache")  # a new command: it lists the find-links directory again
    engine.registry.machine = "x86_64"
    cells = expand(engine.matrix, {r: engine.registry.pythons(r) for r in engine.matrix.torch})
    local, docker = NamedReader(RunnerName.LOCAL), NamedReader(RunnerName.DOCKER)
    engine.runners = CellRunners(local, {Python.parse("3.14"): docker})
    results = engine.run(cells, RunOptions())
    assert [r.id for r in results] == ["torch2.13-cpu-cp311-drv2", "torch2.13-cpu-cp314-drv2"]
    # the tiny project is per Python: one build per Python, each on its Python's runner
    assert local.cells == ["torch2.13-cpu-cp311-drv2"] and docker.cells == ["torch2.13-cpu-cp314-drv2"]
    assert local.swept == docker.swept == 2  # every runner's leftovers are swept, before and after the run
    for result, runner in zip(results, ("local", "docker"), strict=True):
        stored = engine.store.load_build(result.cell.build.id)
        assert stored is not None and stored.runner == runner and stored.inputs["runner"] == runner
        assert stored.inputs["python"] == f"cpython-{result.cell.python_minor} by {runner}"
        assert f"stopped by the test in the {runner} double" in (stored.error or "")
        assert f"stopped by the test in the {runner} double" in (result.error or "")
        log = (engine.workspace.logs_dir / "builds" / f"{stored.id}.log").read_text()
        assert log.startswith(f"# build {stored.id} for 1 cell(s): {runner} runner, attempt 1")


def test_up_to_date_means_every_file_the_record_names_is_there_unchanged(tmp_path: Path) -> None:
    """A passed cell with its driver wheel missing was once called up to date; compat-table then refused forever.
    A build is up to date only when every file its record names is there, unchanged."""
    from fake_wheels import make_wheel, record

    from torch_buildmatrix.builder.records.model import BuildResult

    engine, [cell] = setup_project(tmp_path)
    engine.runners = CellRunners(LocalRunner(), {})
    first = planned(engine, [cell])
    wheels = engine.workspace.wheels_dir
    plugin = make_wheel(wheels / "torch2.13", "tiny-plugin", "0.1.0+torch.2.13.drv.2", tag="cp311-cp311-linux_x86_64")
    driver = make_wheel(wheels / "driver", "tiny-driver", "2.1.0+emu")
    log = wheels / "logs" / "builds" / f"{cell.build.id}.log"
    log.parent.mkdir(parents=True)
    log.write_text("# log\n")
    engine.store.save_build(
        BuildResult(
            cell.build,
            first.inputs_hash,
            first.inputs,
            RunnerName.LOCAL,
            "3.11",
            Status.PASSED,
            wheel=record(wheels, plugin),
            sdk_wheel=record(wheels, driver),
            log=f"logs/builds/{cell.build.id}.log",
        )
    )
    assert planned(engine, [cell]).reusable is not None

    def relink(path: Path, target: Path) -> None:
        """The file moved to target, a symlink to it in its place."""
        path.replace(target)
        path.symlink_to(target)

    damages: dict[str, Callable[[], object]] = {
        "driver wheel missing": driver.unlink,
        "driver wheel changed": lambda: driver.write_bytes(driver.read_bytes() + b"\0"),
        "plugin wheel missing": plugin.unlink,
        "log missing": log.unlink,
        "log a symlink": lambda: relink(log, tmp_path / "log"),
        "driver wheel a symlink": lambda: relink(driver, tmp_path / "d.whl"),
    }
    for name, damage in damages.items():
        kept = {p: p.read_bytes() for p in (plugin, driver, log) if p.is_file() and not p.is_symlink()}
        damage()
        assert planned(engine, [cell]).reusable is None, name
        for path, data in kept.items():
            path.unlink(missing_ok=True)
            path.write_bytes(data)
        assert planned(engine, [cell]).reusable is not None, name
