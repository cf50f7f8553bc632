"""One interpreter per Python however the tool is started: `torch-buildmatrix matrix` from a shell whose PATH finds the
system's python3.11 first, and the README's way, the nox session (whose environment, and pyenv's shim when nox is
started through one, come first on PATH), choose the same interpreter and plan the same builds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torch_buildmatrix.builder.interpreters import find_interpreter
from torch_buildmatrix.model.pythons import Python

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
CHOSEN = re.compile(r"local: (\S+python3\.11)")
BUILD = re.compile(r"\btorch2\.13-cpu-cp311-drv2\b")


def plan(output: str) -> tuple[set[str], int]:
    """The interpreters the plan names and how often the build's key appears."""
    return set(CHOSEN.findall(output)), len(BUILD.findall(output))


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the tiny matrix is of Python 3.11, this interpreter's")
def test_the_command_line_and_the_nox_session_choose_the_same_interpreter(tmp_path: Path) -> None:
    nox = shutil.which("nox")
    if nox is None:
        pytest.skip("nox is not on PATH (the README's command installs it: python3 -m pip install nox uv)")
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX + TINY_CONTRACT)
    matrix = str(root / "matrix.yaml")

    # A shell whose PATH has the system's bin directories first (where Debian's python3.11 is).
    system_first = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin", os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": system_first, "PYTHONPATH": str(REPO), "COLUMNS": "250"}
    shell = run_cli(root, "matrix", "--matrix", matrix, timeout=300, env=env)
    assert shell.returncode == 0, shell.stdout + shell.stderr

    # The nox session (as the README runs it), from this checkout's noxfile, in an environment of its own, started
    # the way pyenv's shim starts it: the bin directory of the Python it runs on first on PATH (pyenv's 3.11.7 here,
    # where the shell above finds Debian's 3.11.2 first).
    base_bin = Path(sys.base_prefix) / "bin"
    shim_first = os.pathsep.join([str(base_bin), os.environ.get("PATH", "")])
    session = subprocess.run(
        [
            nox,
            "-f",
            str(REPO / "noxfile.py"),
            "-s",
            "matrix",
            "--envdir",
            str(tmp_path / "nox"),
            "--",
            "--matrix",
            matrix,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "PATH": shim_first, "COLUMNS": "250"},
    )
    assert session.returncode == 0, session.stdout + session.stderr

    chosen, builds = plan(shell.stdout)
    assert (chosen, builds) == plan(session.stdout + session.stderr), (shell.stdout, session.stdout)
    assert len(chosen) == 1 and builds >= 1
    # ... and it is the newest 3.11 there is, whatever came first on either PATH.
    [path] = chosen
    here = find_interpreter(Python.parse("3.11"))
    assert Path(path) == here.executable
    system = Path("/usr/bin/python3.11")
    if system.is_file():
        version = subprocess.run(
            [system, "-c", "import platform; print(platform.python_version())"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert here.version >= type(here.version)(version)
