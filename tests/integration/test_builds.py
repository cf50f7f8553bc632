"""Builds apart from cells, end to end on the tiny project: one build per wheel, made once, tested by every cell.

Real uv environments, a real compiler and real Pythons (3.11 and 3.12); torch is a stand-in wheel per Python
(fake_wheels.fake_torch), so a build shared by two Pythons takes seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_wheels import fake_torch

from torch_buildmatrix.builder.interpreters import find_interpreter
from torch_buildmatrix.errors import InterpreterNotFound
from torch_buildmatrix.model.pythons import Python

from conftest import TINY_CONTRACT

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
REPO = Path(__file__).parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
PYTHONS = ("3.11", "3.12")
MATRIX = """\
schema-version: 2
plugin: {{distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{{torch_minor}}"}}
python: ["3.11", "3.12"]
torch:
  - {{version: "2.13.0", variant: cpu, wheels: {{find-links: {links}}}}}
runner: local
"""
SHARED = "torch2.13-cpu"  # the one build of the Python-independent shape
CELLS = ["torch2.13-cpu-cp311", "torch2.13-cpu-cp312"]


def _missing_pythons() -> list[str]:
    missing = []
    for python in PYTHONS:
        try:
            find_interpreter(Python.parse(python))
        except InterpreterNotFound:
            missing.append(python)
    return missing


needs_pythons = pytest.mark.skipif(bool(_missing_pythons()), reason=f"needs CPython {' and '.join(PYTHONS)}")


def project(tmp_path: Path, per_python: bool) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    links = tmp_path / "torch-wheels"
    fake_torch(links, "2.13.0+cpu", PYTHONS)
    if not per_python:
        (root / "plugin" / "ANY_PYTHON").write_text("")
    contract = TINY_CONTRACT.replace("build: {", f"build: {{per-python: {str(per_python).lower()}, ")
    (root / "matrix.yaml").write_text(MATRIX.format(links=links) + contract)
    return root


def build(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", "build", "--matrix", str(root / "matrix.yaml"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=root,
        env=ENV,
    )


def record(root: Path, kind: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "wheels" / "results" / kind / f"{name}.json").read_text())
    return data


def wheel_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root / "wheels")) for p in (root / "wheels").rglob("*.whl"))


@needs_pythons
def test_one_build_made_once_serves_every_python(tmp_path: Path) -> None:
    root = project(tmp_path, per_python=False)
    first = build(root, "--jobs", "2")
    assert first.returncode == 0, first.stdout + first.stderr
    made = record(root, "builds", SHARED)
    assert made["status"] == "passed" and made["build"]["id"] == SHARED and "python" not in made["build"]
    assert made["python"] == "3.11"  # the oldest Python of its cells: the matrix's choice, not the machine's
    assert made["wheel"]["filename"].endswith("-py3-none-linux_x86_64.whl")
    assert wheel_files(root) == [f"torch2.13/{made['wheel']['filename']}"]
    # Two cells needing one build waited on it: made once, at --jobs 2.
    assert first.stdout.count(f"build {SHARED}: build\n") == 1
    assert (root / "wheels" / "logs" / "builds" / f"{SHARED}.log").read_text().count("attempt 1") == 1
    for cell in CELLS:
        tested = record(root, "cells", cell)
        assert tested["status"] == "passed" and tested["smoke"]["failed"] == 0
        assert tested["wheel"] == made["wheel"] and tested["cell"]["build"]["id"] == SHARED
        assert [s["name"] for s in tested["steps"]] == ["source", "check", "interpreter", "smoke-env", "smoke"]
    summary = json.loads((root / "wheels" / "results" / "summary.json").read_text())
    assert set(summary["builds"]) == {SHARED} and set(summary["cells"]) == set(CELLS)

    again = build(root, "--jobs", "2")
    assert again.returncode == 0 and again.stdout.count("up-to-date") == 3, again.stdout
    # A rebuild with the same bytes leaves its cells up to date: only the build's inputs changed.
    (root / "plugin" / "tiny_plugin" / "notes.txt").write_text("not in the wheel\n")
    third = build(root, "--python", "3.12")
    assert third.returncode == 0, third.stdout + third.stderr
    assert f"build {SHARED}: passed" in third.stdout
    assert "torch2.13-cpu-cp312: passed" in third.stdout  # its tests live in the changed tree: tested again


@needs_pythons
def test_a_selection_never_changes_a_build(tmp_path: Path) -> None:
    """Selecting the 3.12 cell alone builds on 3.11, as the whole matrix does: one build, one record, either way."""
    root = project(tmp_path, per_python=False)
    alone = build(root, "--python", "3.12")
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert record(root, "builds", SHARED)["python"] == "3.11"
    everything = build(root)
    assert everything.returncode == 0 and f"build {SHARED}: up-to-date" in everything.stdout
    assert "torch2.13-cpu-cp311: passed" in everything.stdout


@needs_pythons
def test_per_python_projects_build_each_python(tmp_path: Path) -> None:
    root = project(tmp_path, per_python=True)
    result = build(root, "--jobs", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert wheel_files(root) == [
        "torch2.13/tiny_plugin-0.1.0+torch.2.13-cp311-cp311-linux_x86_64.whl",
        "torch2.13/tiny_plugin-0.1.0+torch.2.13-cp312-cp312-linux_x86_64.whl",
    ]
    for cell in CELLS:
        assert record(root, "builds", cell)["build"]["python"] == cell[-5:].replace("cp3", "3.")
        assert record(root, "cells", cell)["cell"]["build"]["id"] == cell


@needs_pythons
def test_a_failed_build_fails_its_cells_with_its_log(tmp_path: Path) -> None:
    root = project(tmp_path, per_python=False)
    (root / "plugin" / "BREAK_BUILD").write_text("")
    result = build(root, "--jobs", "2")
    assert result.returncode == 1
    made = record(root, "builds", SHARED)
    assert made["status"] == "failed" and made["failed_step"] == "build" and made["wheel"] is None
    assert result.stdout.count(f"build {SHARED}: build\n") == 1  # failed once, not once per cell
    for cell in CELLS:
        failed = record(root, "cells", cell)
        assert failed["status"] == "failed" and failed["failed_step"] == "build" and failed["wheel"] is None
        assert failed["error"].startswith(f"build {SHARED} failed in step build: ")
        assert failed["failure_class"] == "deterministic"
        assert "broken on purpose" in (root / "wheels" / failed["log"]).read_text()
    assert wheel_files(root) == []
    again = build(root)  # the same inputs fail the same way: nothing is tried again
    assert again.returncode == 1 and again.stdout.count("up-to-date") == 3, again.stdout


@needs_pythons
def test_a_failed_cell_does_not_fail_its_siblings(tmp_path: Path) -> None:
    root = project(tmp_path, per_python=False)
    (root / "plugin" / "tests" / "FAIL_SMOKE_ON_3.12").write_text("")
    result = build(root)
    assert result.returncode == 1
    assert record(root, "builds", SHARED)["status"] == "passed"
    passed, failed = record(root, "cells", CELLS[0]), record(root, "cells", CELLS[1])
    assert passed["status"] == "passed"
    assert failed["status"] == "failed" and failed["failed_step"] == "smoke" and failed["smoke"]["failed"] == 1
    assert failed["wheel"] == passed["wheel"]  # it tested the same wheel, which stays published
    assert f"{CELLS[1]} failed in smoke" in result.stdout
    (root / "plugin" / "tests" / "FAIL_SMOKE_ON_3.12").unlink()
    fixed = build(root)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


@needs_pythons
def test_prebuilt_tests_the_build_another_job_made(tmp_path: Path) -> None:
    """A CI build job makes the build (--builds-only); a cell job tests it from the downloaded wheels/ (--prebuilt),
    never building; without the build's artifact the cell fails saying so."""
    root = project(tmp_path, per_python=False)
    made = build(root, "--build", SHARED, "--builds-only")
    assert made.returncode == 0, made.stdout + made.stderr
    assert not (root / "wheels" / "results" / "cells").exists() or not any(
        (root / "wheels" / "results" / "cells").iterdir()
    )
    tested = build(root, "--python", "3.12", "--prebuilt")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert f"build {SHARED}: build\n" not in tested.stdout and record(root, "cells", CELLS[1])["status"] == "passed"
    # The build's record is there but its wheel is not what it says: the message names that, not a missing record.
    wheel = root / "wheels" / record(root, "builds", SHARED)["wheel"]["path"]
    wheel.write_bytes(wheel.read_bytes() + b"another build")
    changed = build(root, "--python", "3.12", "--prebuilt")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    error = record(root, "cells", CELLS[1])["error"]
    assert f"build {SHARED} is in wheels/results/builds/, but its wheel" in error and "sha256" in error, error

    elsewhere = project(tmp_path / "elsewhere", per_python=False)
    missing = build(elsewhere, "--python", "3.11", "--prebuilt")
    assert missing.returncode == 1
    failed = record(elsewhere, "cells", CELLS[0])
    assert failed["failed_step"] == "setup" and "is not in wheels/results/builds/" in failed["error"]
    assert not (elsewhere / "wheels" / "results" / "builds").exists() or not any(
        (elsewhere / "wheels" / "results" / "builds").iterdir()
    )
