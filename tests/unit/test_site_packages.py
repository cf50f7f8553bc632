"""Both runners find an environment's site-packages with one helper; a failure names the step that asked for it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from torch_buildmatrix.builder.records.model import CellResult
from torch_buildmatrix.builder.runners.base import BuildJob, CellJob, site_packages
from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.builder.steps import StepRecorder
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.builds import plan_builds
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName, Status

from conftest import VALID, WriteMatrix

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"

# `uv venv ... ENV` that leaves an environment without lib/ (an interpreter of another layout); every other uv call
# succeeds without doing anything.
FAKE_UV = """\
#!/bin/sh
if [ "$1" = venv ]; then
    for last; do :; done
    mkdir -p "$last/bin"
fi
exit 0
"""


@pytest.mark.parametrize("lib", ["python3.11", "python3.13t"])
def test_the_environments_site_packages_is_found(tmp_path: Path, lib: str) -> None:
    (tmp_path / "env" / "lib" / lib / "site-packages").mkdir(parents=True)
    assert site_packages(tmp_path / "env", "smoke-env") == tmp_path / "env" / "lib" / lib / "site-packages"


@pytest.mark.parametrize("step", ["smoke-env", "check"])
def test_an_environment_without_site_packages_fails_the_step_that_asked(tmp_path: Path, step: str) -> None:
    (tmp_path / "env" / "lib" / "python3.11").mkdir(parents=True)  # no site-packages inside
    with pytest.raises(StepFailed) as failed:
        site_packages(tmp_path / "env", step)
    assert failed.value.step == step
    assert failed.value.message == f"no site-packages in {tmp_path / 'env'}"


def local_jobs(write_matrix: WriteMatrix, tmp_path: Path) -> tuple[BuildJob, CellJob]:
    """The last 3.11 cell's build job and cell job, as the engine hands them to the local runner."""
    matrix = load_matrix(write_matrix(VALID))
    cells = expand(matrix, {r: {Python.parse("3.11")} for r in matrix.torch})
    cell = cells[-1]
    build = plan_builds(matrix, cells)[cell.build.id]
    work, log = tmp_path / "work", tmp_path / "cell.log"
    work.mkdir()
    workspace = Workspace.for_root(matrix.root)
    wheel = workspace.wheels_dir / "torch2.13" / "torch_emu-0.1.0+torch.2.13.drv.2-py3-none-linux_x86_64.whl"
    return (
        BuildJob(build, matrix, workspace, work, tmp_path, log, ()),
        CellJob(cell, matrix, workspace, work, tmp_path, log, (), wheel),
    )


@pytest.mark.skipif(HERE != "3.11", reason="the test finds this interpreter as the cell's Python 3.11")
def test_a_local_smoke_environment_without_site_packages_fails_the_smoke_env_step(
    write_matrix: WriteMatrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3.11").symlink_to(sys.executable)
    uv = bin_dir / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), os.environ["PATH"]]))  # this uv, the system's mkdir
    empty = tmp_path / "no-pyenv"
    empty.mkdir()
    _, job = local_jobs(write_matrix, tmp_path)
    result = CellResult(cell=job.cell.key, inputs_hash="", inputs={}, runner=RunnerName.LOCAL)

    with pytest.raises(StepFailed) as failed:
        LocalRunner(search_path=str(bin_dir), pyenv_root=empty).prepare_smoke(job, StepRecorder(result))

    smoke_env = job.workdir / "smoke-env"
    assert failed.value.step == "smoke-env"  # the step that made the environment, not the engine's check
    assert failed.value.message == f"no site-packages in {smoke_env}"
    assert [(s.name, s.status) for s in result.steps] == [("interpreter", Status.PASSED), ("smoke-env", Status.FAILED)]
    assert (smoke_env / "bin").is_dir() and not (smoke_env / "lib").exists()  # what uv left, kept for the log
    assert "venv --quiet --python" in job.log_file.read_text()  # the runner made it, with the fake uv


def test_the_build_environments_symbols_are_asked_for_by_the_check_step(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    build_job, _ = local_jobs(write_matrix, tmp_path)
    with pytest.raises(StepFailed) as failed:
        LocalRunner().provided_symbols(build_job)  # its build environment was never made
    assert failed.value.step == "check"
    assert failed.value.message == f"no site-packages in {build_job.workdir / 'build-env'}"
