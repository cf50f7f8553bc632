"""Interpreter discovery: real interpreters on PATH or under pyenv; a clear error when none exists."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torch_buildmatrix.builder.interpreters import find_interpreter
from torch_buildmatrix.errors import InterpreterNotFound
from torch_buildmatrix.model.pythons import Python


def test_finds_the_running_interpreter_series() -> None:
    series = Python.parse(f"{sys.version_info.major}.{sys.version_info.minor}")
    found = find_interpreter(series)
    assert (found.version.major, found.version.minor) == (series.major, series.minor)
    assert found.executable.is_file()


def test_missing_interpreter_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(InterpreterNotFound) as info:
        find_interpreter(Python.parse("3.7"), path_env=str(tmp_path), pyenv_root=tmp_path)
    message = str(info.value)
    assert "no CPython 3.7 interpreter found" in message and "pyenv install 3.7" in message


def test_broken_candidate_is_skipped(tmp_path: Path) -> None:
    fake = tmp_path / "python3.7"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(InterpreterNotFound):
        find_interpreter(Python.parse("3.7"), path_env=str(tmp_path), pyenv_root=None)


def test_a_virtual_environment_is_never_chosen(tmp_path: Path) -> None:
    """nox puts its session's environment first on PATH: the interpreter found must be the same without it."""
    import subprocess

    series = Python.parse(f"{sys.version_info.major}.{sys.version_info.minor}")
    plain = find_interpreter(series)
    venv = tmp_path / "venv"
    subprocess.run([str(plain.executable), "-m", "venv", "--without-pip", str(venv)], check=True)
    assert (venv / "bin" / f"python{series}").exists()
    import os

    path = os.pathsep.join([str(venv / "bin"), os.environ.get("PATH", "")])
    found = find_interpreter(series, path_env=path)
    assert found == plain
    assert not found.executable.is_relative_to(venv)


def _counting_python(directory: Path, name: str, version: str, calls: Path) -> None:
    """A stand-in interpreter that answers the probe as CPython `version` and counts how often it is asked."""
    fake = directory / name
    answer = f'["{version}", "cpython", "{fake}", false, false]'
    fake.write_text(f"#!/bin/sh\necho {name} >> {calls}\necho '{answer}'\n")
    fake.chmod(0o755)


def test_a_runner_probes_each_python_once_also_when_missing(tmp_path: Path) -> None:
    """A no-op build asks every Python's interpreter many times: each candidate is probed once per run, the Pythons
    at once, and a Python without one is not searched again (it was: pyenv's root, a process, for each ask)."""
    from torch_buildmatrix.builder.runners.local import LocalRunner

    calls = tmp_path / "calls"
    _counting_python(tmp_path, "python3.11", "3.11.9", calls)
    _counting_python(tmp_path, "python3.12", "3.12.4", calls)
    broken = tmp_path / "python3.7"  # a candidate that does not answer: 3.7 has no interpreter
    broken.write_text(f"#!/bin/sh\necho python3.7 >> {calls}\nexit 1\n")
    broken.chmod(0o755)
    runner = LocalRunner(search_path=str(tmp_path), pyenv_root=None)
    pythons = [Python.parse(p) for p in ("3.11", "3.12", "3.7")]
    runner.look_up(pythons * 3)
    for _ in range(3):
        assert str(runner.interpreter(pythons[0]).version) == "3.11.9"
        assert str(runner.interpreter(pythons[1]).version) == "3.12.4"
        with pytest.raises(InterpreterNotFound, match=r"no CPython 3\.7 interpreter found"):
            runner.interpreter(pythons[2])
    assert sorted(calls.read_text().split()) == ["python3.11", "python3.12", "python3.7"]
