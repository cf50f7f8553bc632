"""A CPU variant's build sees no CUDA toolkit unless matrix.yaml asks for one: the tiny project is built for real on
the torch 2.13 CPU cell with a CUDA compiler on PATH and CUDA_HOME and CUDA_PATH set (a stand-in toolkit, and this
machine's own nvcc where it has one); its setup.py prints what it sees into the build's log. Then build.env gives the
build that toolkit back, extending PATH with `${PATH}`."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from conftest import TINY_CONTRACT, run_cli

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "tiny"
MATRIX = """\
schema-version: 2
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["2.1"]}
python: ["3.11"]
torch:
  - {version: "2.13.0", variant: cpu, wheels: pip-find-links}
runner: local
"""
BUILD_LOG = Path("wheels/logs/builds/torch2.13-cpu-cp311-drv2.log")


def sees(log: str) -> str:
    [line] = [line for line in log.splitlines() if line.startswith("tiny build sees: ")]
    return line


def test_a_cpu_build_sees_no_cuda_toolkit_unless_build_env_gives_one(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    nvcc = toolkit / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'stand-in nvcc' >&2\nexit 1\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX + TINY_CONTRACT)
    host_nvcc = shutil.which("nvcc")  # this machine's, when it has one (/usr/local/bin here)
    env = {
        **os.environ,
        "PATH": f"{toolkit / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "CUDA_HOME": str(toolkit),
        "CUDA_PATH": str(toolkit),
        "PYTHONPATH": str(REPO),
    }
    built = run_cli(root, "build", "--matrix", str(root / "matrix.yaml"), timeout=900, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    log = (root / BUILD_LOG).read_text()
    assert sees(log) == "tiny build sees: nvcc= CUDA_HOME= CUDA_PATH="
    note = next(line for line in log.splitlines() if line.startswith("# CPU variant: the CUDA toolkit is hidden"))
    assert f"nvcc in {toolkit / 'bin'}" in note and f"CUDA_HOME={toolkit}" in note and f"CUDA_PATH={toolkit}" in note
    if host_nvcc is not None:
        assert str(Path(host_nvcc).parent) in note

    # The project asks for the toolkit: build.env sets CUDA_HOME and extends PATH (the build is made again).
    given = f'env: {{CUDA_HOME: "{toolkit}", PATH: "{toolkit / "bin"}:${{PATH}}"}}, '
    contract = TINY_CONTRACT.replace("build: {", "build: {" + given, 1)
    assert contract != TINY_CONTRACT
    (root / "matrix.yaml").write_text(MATRIX + contract)
    again = run_cli(root, "build", "--matrix", str(root / "matrix.yaml"), timeout=900, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    log = (root / BUILD_LOG).read_text()
    assert sees(log) == f"tiny build sees: nvcc={nvcc} CUDA_HOME={toolkit} CUDA_PATH="
