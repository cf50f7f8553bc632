"""The setup-python stand-in run as a job runs it: the interpreter it puts on PATH is the one a hosted runner's
tool cache holds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from act_harness import STANDINS

# --- the setup-python stand-in's PATH, as a job sees it ---------------------------------------------------------

SETUP_PYTHON = STANDINS / "actions" / "setup-python" / "setup_python_standin.py"


@pytest.mark.act
@pytest.mark.integration
def test_setup_python_puts_the_tool_cache_interpreter_behind_its_environment(tmp_path: Path) -> None:
    """`python` and `pip` are a fresh environment's, but the interpreter `torch-buildmatrix build` chooses (never a
    virtual environment's) is the tool cache's, as on a hosted runner, hence the one a single machine chooses: with only
    the environment on PATH it went on to the host's other pythonX.Y (Debian's /usr/bin/python3.11 beside pyenv's),
    whose build flags differ, and the act run's wheels differed from a single machine's."""
    import os
    import shutil
    import subprocess

    from act_harness import fill_tool_cache

    from torch_buildmatrix.builder.interpreters import find_interpreter
    from torch_buildmatrix.model.pythons import Python

    series = f"{sys.version_info.major}.{sys.version_info.minor}"
    here = find_interpreter(Python.parse(series))
    tool_cache = tmp_path / "tool_cache"
    assert fill_tool_cache(tool_cache, (series,)) == [str(here.version)]
    files = {name: tmp_path / name for name in ("path", "env", "output")}
    for file in files.values():
        file.write_text("")
    env = {
        "PATH": "/usr/bin:/bin",
        "RUNNER_TOOL_CACHE": str(tool_cache),
        "RUNNER_TEMP": str(tmp_path / "temp"),
        "GITHUB_PATH": str(files["path"]),
        "GITHUB_ENV": str(files["env"]),
        "GITHUB_OUTPUT": str(files["output"]),
        "INPUT_PYTHON_VERSION": f"{series}\n",
        "INPUT_ALLOW_PRERELEASES": "false",
    }
    done = subprocess.run(
        [sys.executable, str(SETUP_PYTHON)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # act prepends each line of $GITHUB_PATH in turn: the last one comes first
    job_path = os.pathsep.join([*reversed(files["path"].read_text().splitlines()), "/usr/bin", "/bin"])
    environment = tmp_path / "temp" / "setup-python" / str(here.version) / "bin"
    assert Path(str(shutil.which("python", path=job_path))).parent == environment
    assert Path(str(shutil.which("pip", path=job_path))).parent == environment
    chosen = find_interpreter(Python.parse(series), path_env=job_path, pyenv_root=None)
    assert chosen.executable.parent == tool_cache / "Python" / str(here.version) / "x64" / "bin"
    assert (chosen.executable.resolve(), chosen.version) == (here.executable.resolve(), here.version)
