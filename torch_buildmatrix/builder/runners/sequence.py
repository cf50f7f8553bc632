"""The steps of a build and of a cell's environment, declared once for every runner: each runner does the work of a
step, and this module runs them in order through the StepRecorder, which records each step's time and outcome as it
ends, so a failed or interrupted run names the step it was in, whichever runner ran it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol

from torch_buildmatrix.builder.runners.base import BuildJob, BuildOutput, CellJob
from torch_buildmatrix.builder.steps import StepRecorder
from torch_buildmatrix.model.matrix import SdkVersion
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import Step


class RunnerSteps(Protocol):
    """What a runner does in each step; run_build and prepare_cell decide which steps run, and in which order."""

    # The step that provides a build's or cell's Python: this machine's interpreter, or the image that has it.
    python_step: ClassVar[Step]

    def provide_python(self, python: Python, sdk: SdkVersion | None, job: BuildJob | CellJob) -> str:
        """Where the Python runs: an interpreter's path, or the tag of the image serving it (and the system SDK
        version); raises StepFailed."""

    def sdk_wheel(self, job: BuildJob, where: str) -> Path | None:
        """The build's wheel SDK's wheel, made for where the build runs (once per version, then cached)."""

    def build_env(self, job: BuildJob, where: str, sdk_wheel: Path | None) -> dict[str, Any]:
        """The build's environment (its torch, the SDK wheel, the build requirements); returns torch's build facts."""

    def build_wheel(self, job: BuildJob, where: str) -> Path:
        """The plugin's wheel, built in the build's environment (and repaired, by a runner whose images repair)."""

    def smoke_env(self, job: CellJob, where: str) -> None:
        """A cell's clean environment: its torch, its build's wheels and the smoke requirements, checked."""


def run_build(runner: RunnerSteps, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
    """A build's steps: its Python, a wheel SDK's wheel, the build environment, the wheel; filling output as each
    step ends, so a failed build still reports what it got."""
    build, sdk = job.build, job.matrix.sdk
    with steps.step(runner.python_step):
        where = runner.provide_python(build.python, build.sdk, job)
    if sdk is not None and sdk.builds_wheel:
        with steps.step(Step.SDK):
            output.sdk_wheel = runner.sdk_wheel(job, where)
    with steps.step(Step.BUILD_ENV):
        output.torch_build = runner.build_env(job, where, output.sdk_wheel)
    with steps.step(Step.BUILD):
        output.plugin_wheel = runner.build_wheel(job, where)


def prepare_cell(runner: RunnerSteps, job: CellJob, steps: StepRecorder) -> None:
    """A cell's steps before its smoke run: its Python, then its clean environment."""
    with steps.step(runner.python_step):
        where = runner.provide_python(job.cell.python, job.cell.sdk, job)
    with steps.step(Step.SMOKE_ENV):
        runner.smoke_env(job, where)
