"""The steps of a build and of a cell's environment, declared once (runners/sequence.py): run in order, each recorded
with its outcome as it ends, whichever runner does the work, so a failure names its step."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from torch_buildmatrix.builder.records.model import BuildResult, CellResult
from torch_buildmatrix.builder.runners.base import BuildJob, BuildOutput, CellJob
from torch_buildmatrix.builder.runners.sequence import prepare_cell, run_build
from torch_buildmatrix.builder.steps import StepRecorder
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.builds import plan_builds
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import SdkVersion
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName, Status, Step

from conftest import VALID, WriteMatrix


class Steps:
    """A runner's step work that notes each call and fails where told: the sequence is what is tested."""

    python_step: ClassVar[Step] = Step.IMAGE

    def __init__(self, fail: str = "", error: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.fail, self.error = fail, error

    def _do(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail:  # as a runner fails: StepFailed naming its step, or anything else
            step = name.split(maxsplit=1)[0].replace("python", "image")
            raise self.error or StepFailed(step, f"{name} failed in the test")

    def provide_python(self, python: Python, sdk: SdkVersion | None, job: BuildJob | CellJob) -> str:
        self._do("python")
        return f"image-for-{python}"

    def sdk_wheel(self, job: BuildJob, where: str) -> Path | None:
        self._do(f"sdk in {where}")
        return job.workdir / "sdk.whl"

    def build_env(self, job: BuildJob, where: str, sdk_wheel: Path | None) -> dict[str, Any]:
        self._do(f"build-env in {where} with {sdk_wheel and sdk_wheel.name}")
        return {"version": "2.13.0+cpu"}

    def build_wheel(self, job: BuildJob, where: str) -> Path:
        self._do(f"build in {where}")
        return job.workdir / "plugin.whl"

    def smoke_env(self, job: CellJob, where: str) -> None:
        self._do(f"smoke-env in {where}")


def jobs(write_matrix: WriteMatrix, tmp_path: Path) -> tuple[BuildJob, CellJob]:
    matrix = load_matrix(write_matrix(VALID))  # a wheel SDK: its wheel is a step of each build
    cell = expand(matrix, {r: {Python.parse("3.11")} for r in matrix.torch})[-1]
    build = plan_builds(matrix, [cell])[cell.build.id]
    workspace, log = Workspace.for_root(matrix.root), tmp_path / "log"
    return (
        BuildJob(build, matrix, workspace, tmp_path, tmp_path, log, ()),
        CellJob(cell, matrix, workspace, tmp_path, tmp_path, log, (), tmp_path / "plugin.whl"),
    )


def build_result(job: BuildJob) -> BuildResult:
    return BuildResult(build=job.build.key, inputs_hash="", inputs={}, runner=RunnerName.DOCKER)


def test_a_build_runs_the_declared_steps_in_order_each_where_the_python_is(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    job, _ = jobs(write_matrix, tmp_path)
    runner, result, output = Steps(), build_result(job), BuildOutput()
    run_build(runner, job, StepRecorder(result), output)
    assert runner.calls == [
        "python",
        "sdk in image-for-3.11",
        "build-env in image-for-3.11 with sdk.whl",
        "build in image-for-3.11",
    ]
    assert [(s.name, s.status) for s in result.steps] == [
        (Step.IMAGE, Status.PASSED),
        (Step.SDK, Status.PASSED),
        (Step.BUILD_ENV, Status.PASSED),
        (Step.BUILD, Status.PASSED),
    ]
    assert (output.sdk_wheel, output.plugin_wheel) == (tmp_path / "sdk.whl", tmp_path / "plugin.whl")
    assert output.torch_build == {"version": "2.13.0+cpu"}


@pytest.mark.parametrize(
    ("fail", "error", "step"),
    [
        ("build-env in image-for-3.11 with sdk.whl", None, Step.BUILD_ENV),
        ("build in image-for-3.11", OSError("the container's mount vanished"), Step.BUILD),  # not a StepFailed
        ("python", None, Step.IMAGE),
    ],
)
def test_a_failed_step_is_recorded_as_it_ends_and_nothing_after_it_runs(
    write_matrix: WriteMatrix, tmp_path: Path, fail: str, error: Exception | None, step: Step
) -> None:
    job, _ = jobs(write_matrix, tmp_path)
    runner, result, output = Steps(fail, error), build_result(job), BuildOutput()
    with pytest.raises(StepFailed) as failed:
        run_build(runner, job, StepRecorder(result), output)
    assert failed.value.step == step and runner.calls[-1] == fail
    assert result.steps[-1].name == step and result.steps[-1].status == Status.FAILED
    assert all(s.status == Status.PASSED for s in result.steps[:-1])
    assert output.plugin_wheel is None  # what the finished steps got is kept; nothing is made up


def test_a_cell_gets_its_python_then_its_environment_there(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    _, job = jobs(write_matrix, tmp_path)
    runner = Steps()
    result = CellResult(cell=job.cell.key, inputs_hash="", inputs={}, runner=RunnerName.DOCKER)
    prepare_cell(runner, job, StepRecorder(result))
    assert runner.calls == ["python", "smoke-env in image-for-3.11"]
    assert [s.name for s in result.steps] == [Step.IMAGE, Step.SMOKE_ENV]
