"""The Docker runner's pure pieces: mounts, commands and the smoke verdict, without an engine."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from torch_buildmatrix.builder.runners.base import BuildJob, CellJob, CellOutput
from torch_buildmatrix.builder.runners.containers import (
    UV_CACHE,
    build_container,
    build_env_command,
    cell_mounts,
    smoke_command,
    smoke_env_command,
    smoke_result,
    wheel_command,
)
from torch_buildmatrix.builder.runners.docker import DockerRunner, sdk_cache_dir
from torch_buildmatrix.builder.sdkwheels import SdkWheels
from torch_buildmatrix.builder.toolenv import PARALLEL_CONFIG, reproducible_env
from torch_buildmatrix.builder.verdicts import judge_smoke
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.builds import plan_builds
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import SdkVersion
from torch_buildmatrix.model.pythons import Python

from conftest import VALID, WriteMatrix, wheel_sdk

# ---- pure pieces -------------------------------------------------------------


def test_driver_wheels_are_built_per_image_by_the_given_build(tmp_path: Path) -> None:
    # A driver built on the host links the host's libstdc++ (bookworm: GLIBCXX_3.4.30) and fails to load in bullseye.
    source = tmp_path / "driver"
    source.mkdir()
    (source / "setup.py").write_text("")
    calls: list[tuple[Path, dict[str, str]]] = []

    def build(tree: Path, out_dir: Path, env: object, log_file: Path) -> None:
        assert (tree / "setup.py").is_file() and tree != source  # a scratch copy, never the pristine tree
        calls.append((out_dir, dict(env)))  # type: ignore[call-overload]
        # A whole wheel (a zip with a RECORD): the cache verifies what it keeps.
        with zipfile.ZipFile(out_dir / "tiny_driver-2.1.0+tiny-py3-none-manylinux_2_17_x86_64.whl", "w") as whl:
            whl.writestr("tiny_driver-2.1.0+tiny.dist-info/RECORD", "")

    bullseye, trixie = (
        sdk_cache_dir(tmp_path, "buildmatrix-builder:bullseye-aaa"),
        sdk_cache_dir(tmp_path, "buildmatrix-builder:trixie-bbb"),
    )
    assert bullseye != trixie and bullseye.parent == trixie.parent
    wheels = SdkWheels(wheel_sdk(source, "tiny-driver"), bullseye, build=build)
    first = wheels.wheel(SdkVersion(Version("2.1"), "drv2"), tmp_path / "log")
    again = wheels.wheel(SdkVersion(Version("2.1"), "drv2"), tmp_path / "log")
    assert (
        first == again
        and first.parent.parent == bullseye
        and zipfile.ZipFile(first).namelist() == ["tiny_driver-2.1.0+tiny.dist-info/RECORD"]
    )
    assert len(calls) == 1 and calls[0][1] == {"TINY_DRIVER_VERSION": "2.1", **reproducible_env()}
    with pytest.raises(ValueError):
        SdkWheels(wheel_sdk(source, "tiny-driver"), trixie)


def docker_jobs(write_matrix: WriteMatrix, tmp_path: Path, extra: str = "") -> tuple[BuildJob, CellJob]:
    """The last cell's build job and its cell job, as the engine hands them to the Docker runner."""
    matrix = load_matrix(write_matrix(VALID + extra))
    cells = expand(matrix, {r: {Python.parse("3.11")} for r in matrix.torch})
    cell = cells[-1]
    build = plan_builds(matrix, cells)[cell.build.id]
    work = tmp_path / "work"
    (work / "out" / "smoke").mkdir(parents=True)
    log = tmp_path / "cell.log"
    log.write_text("# build\n$ python cell.py smoke\nFAILED tests/test_x.py::test_y\n")
    workspace = Workspace.for_root(matrix.root)
    wheel = workspace.wheels_dir / "torch2.13" / "torch_emu-0.1.0+torch.2.13.drv.2-py3-none-linux_x86_64.whl"
    sdk_wheel = workspace.wheels_dir / "driver" / "emu_driver-2.1.0-py3-none-any.whl"
    return (
        BuildJob(build, matrix, workspace, work, tmp_path, log, ()),
        CellJob(cell, matrix, workspace, work, tmp_path, log, ("/links",), wheel, sdk_wheel),
    )


def test_builds_and_cells_share_the_hosts_uv_cache(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    # One uv cache for every build and cell, local or in any image: torch's ~3 GB is downloaded once. uv copies out
    # of it (UV_LINK_MODE=copy): a hardlink cannot cross the bind mount.
    build_job, cell_job = docker_jobs(write_matrix, tmp_path)
    uv_cache = tmp_path / "host-uv-cache"
    driver = tmp_path / "driver" / "tiny_driver-2.1.0-py3-none-any.whl"
    container = build_container(build_job, driver, tmp_path / "cache", uv_cache=uv_cache)
    assert (uv_cache, UV_CACHE, "rw") in container.mounts and (driver.parent, "/sdk", "ro") in container.mounts
    assert (build_job.plugin_tree, "/project", "rw") in container.mounts
    env = container.env
    assert env["UV_CACHE_DIR"] == UV_CACHE and env["UV_LINK_MODE"] == "copy", env
    mounts, cell_env = cell_mounts(cell_job, uv_cache)
    assert (uv_cache, UV_CACHE, "rw") in mounts and cell_env["UV_CACHE_DIR"] == UV_CACHE
    assert (cell_job.workspace.wheels_dir.resolve(), "/wheels", "ro") in mounts  # the build's wheels, read-only


def test_a_container_build_gets_its_share_of_the_cores_and_a_cell_one_thread(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    """The build's share of the cores reaches its containers (torch's ninja, CMake, and setuptools' parallel
    extensions when declared, through the config file the runner writes to /out); a cell's run gets smoke.threads."""

    def container_env(job: BuildJob) -> dict[str, str]:
        return build_container(job, None, tmp_path, uv_cache=tmp_path).env

    build_job, cell_job = docker_jobs(write_matrix, tmp_path)
    env = container_env(replace(build_job, compilers=3))
    assert env["MAX_JOBS"] == env["CMAKE_BUILD_PARALLEL_LEVEL"] == "3" and "DIST_EXTRA_CONFIG" not in env
    assert cell_mounts(cell_job, tmp_path)[1]["OMP_NUM_THREADS"] == "1"
    declared = tmp_path / "declared"
    declared.mkdir()
    build_job, cell_job = docker_jobs(
        write_matrix, declared, "build: {parallel-extensions: true}\nsmoke: {threads: 2}\n"
    )
    env = container_env(replace(build_job, compilers=2))
    assert env["MAX_JOBS"] == "2" and env["DIST_EXTRA_CONFIG"] == f"/out/{PARALLEL_CONFIG}"
    assert cell_mounts(cell_job, tmp_path)[1]["OMP_NUM_THREADS"] == "2"


def test_a_cell_installs_its_torch_its_builds_wheels_and_its_smoke_requirements(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    # One requirement each (a requirement with a marker stays one argument), the cell's torch picking its own.
    marker = "transformers==5.24.0; python_version >= '3.11'"
    _, job = docker_jobs(
        write_matrix,
        tmp_path,
        f'smoke:\n  requires: [pytest]\n  requires-for:\n    - {{torch: ">=2.6", requires: ["{marker}"]}}\n'
        '    - {torch: "<2.6", requires: ["transformers==4.57.6"]}\n',
    )
    command = smoke_env_command(job)
    assert command[command.index("--python") + 1] == "/opt/python/cp311-cp311/bin/python"
    requirements = command[command.index("--") + 1 :]
    expected = ["pytest", marker] if job.cell.torch.version >= Version("2.6") else ["pytest", "transformers==4.57.6"]
    assert requirements == [
        f"torch=={job.cell.torch.requirement_version}",
        "/wheels/torch2.13/torch_emu-0.1.0+torch.2.13.drv.2-py3-none-linux_x86_64.whl",
        "/wheels/driver/emu_driver-2.1.0-py3-none-any.whl",
        *expected,
    ]
    assert smoke_command(job)[:3] == ["/out/smoke-env/bin/python", "/buildmatrix/cell.py", "smoke"]


def test_a_free_threaded_cell_runs_on_its_free_threaded_interpreter(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    build_job, job = docker_jobs(write_matrix, tmp_path)
    threaded = replace(job, cell=replace(job.cell, python=Python.parse("3.13t")))
    command = smoke_env_command(threaded)
    assert command[command.index("--python") + 1] == "/opt/python/cp313-cp313t/bin/python"
    # a per-Python build of 3.13t: its environment is made of the free-threaded interpreter
    key = replace(build_job.build.key, python=Python.parse("3.13t"))
    threaded_build = replace(build_job, build=replace(build_job.build, key=key, python=Python.parse("3.13t")))
    command = build_env_command(threaded_build, None)
    assert command[0] == command[command.index("--python") + 1] == "/opt/python/cp313-cp313t/bin/python"
    plain = build_env_command(build_job, None)
    assert plain[plain.index("--python") + 1] == "/opt/python/cp311-cp311/bin/python"


def test_a_build_makes_its_environment_then_its_wheel_in_it(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    """build-env installs the build's torch and SDK wheel (from the /sdk mount) beside the build requirements, into
    /out/build-env; the wheel step runs on that environment's interpreter and leaves torch's and the SDK's libraries
    out of the repaired wheel."""
    build_job, _ = docker_jobs(write_matrix, tmp_path)
    sdk_wheel = tmp_path / "sdk" / "emu_driver-2.1.0-py3-none-any.whl"
    command = build_env_command(build_job, sdk_wheel)
    assert command[command.index("--env") + 1] == "/out/build-env" and "--sdk-package" in command
    requirements = command[command.index("--") + 1 :]
    assert requirements[:2] == [f"torch=={build_job.build.release.requirement_version}", f"/sdk/{sdk_wheel.name}"]
    wheel = wheel_command(build_job)
    assert wheel[:4] == ["/out/build-env/bin/python", "/buildmatrix/cell.py", "wheel", "/out/dist"]
    excluded = [wheel[i + 1] for i, arg in enumerate(wheel) if arg == "--exclude"]
    assert {"libtorch*.so", "libc10*.so"} <= set(excluded)


@pytest.mark.parametrize(("exit_code", "passed"), [("0", True), ("1", False), (None, False)])
def test_the_docker_runner_hands_the_engine_what_the_smoke_container_left(
    write_matrix: WriteMatrix, tmp_path: Path, exit_code: str | None, passed: bool
) -> None:
    """cell.py smoke wrote reports and pytest's exit code; the engine judges them like a local run."""
    build_job, job = docker_jobs(write_matrix, tmp_path)
    smoke = job.workdir / "out" / "smoke"
    failures = 0 if passed else 1
    (smoke / "junit.xml").write_text(f'<testsuite tests="3" failures="{failures}" errors="0" skipped="0"/>')
    (smoke / "features.json").write_text(json.dumps({"tiny": "passed"}))
    if exit_code is not None:
        (smoke / "exit-code").write_text(exit_code + "\n")
    (job.workdir / "out" / "provided-symbols.txt").write_text("emuMalloc emuFree\n_ZN3c10\n")
    assert DockerRunner().provided_symbols(build_job) == {"emuMalloc", "emuFree", "_ZN3c10"}
    output = CellOutput()
    run = smoke_result(job)
    if passed:
        judge_smoke(run, output)
        assert output.smoke is not None and output.smoke.passed == 3 and output.features == {"tiny": "passed"}
        return
    with pytest.raises(StepFailed) as caught:
        judge_smoke(run, output)
    code = exit_code or "missing"
    assert caught.value.message == f"1 failed, 0 errors, 2 passed (pytest exit code {code})"
    assert "FAILED tests/test_x.py::test_y" in caught.value.log_tail
    assert output.smoke is not None and output.smoke.failed == 1
