"""Interpreter discovery: real interpreters on PATH or under pyenv; a clear error when none exists."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from buildmatrix.builder.interpreters import find_interpreter
from buildmatrix.errors import InterpreterNotFound
from buildmatrix.model.pythons import Python


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
