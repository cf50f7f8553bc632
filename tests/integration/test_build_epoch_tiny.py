"""The build epoch end to end on the tiny project: a reformatted util/ module rebuilds nothing, a change of build code
without a new epoch rebuilds nothing but is said, and a new epoch rebuilds every build and cell.

The tool runs from a copy of the package (PYTHONPATH), so the test edits that copy, never the checkout. Real uv
environments, a real compiler, CPython 3.11; torch is a stand-in wheel (fake_wheels.fake_torch).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_wheels import fake_torch

import torch_buildmatrix
from torch_buildmatrix.builder import epoch
from torch_buildmatrix.builder.buildcode import ENGINE_MODULES
from torch_buildmatrix.builder.interpreters import find_interpreter
from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.errors import InterpreterNotFound
from torch_buildmatrix.model.pythons import Python

from conftest import TINY_CONTRACT

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
MATRIX = """\
schema-version: 2
plugin: {{distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{{torch_minor}}"}}
python: ["3.11"]
torch:
  - {{version: "2.13.0", variant: cpu, wheels: {{find-links: {links}}}}}
runner: local
"""
BUILD, CELL = "torch2.13-cpu", "torch2.13-cpu-cp311"
RECORDS = (f"builds/{BUILD}.json", f"cells/{CELL}.json")


def _has_python() -> bool:
    try:
        find_interpreter(Python.parse("3.11"))
    except InterpreterNotFound:
        return False
    return True


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny project, and a copy of the tool's package the runs import."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    links = tmp_path / "torch-wheels"
    fake_torch(links, "2.13.0+cpu", ("3.11",))
    (root / "plugin" / "ANY_PYTHON").write_text("")
    contract = TINY_CONTRACT.replace("build: {", "build: {per-python: false, ")
    (root / "matrix.yaml").write_text(MATRIX.format(links=links) + contract)
    tool = tmp_path / "tool"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(torch_buildmatrix.__file__).parent, tool / "torch_buildmatrix", ignore=ignore)
    return root, tool / "torch_buildmatrix"


def _build(root: Path, package: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", "build", "--matrix", str(root / "matrix.yaml")],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(package.parent)},
    )


def _records(root: Path) -> dict[str, str]:
    return {name: (root / "wheels" / "results" / name).read_text() for name in RECORDS}


def _code_hash(package: Path) -> str:
    return epoch.build_code_hash((*ENGINE_MODULES, *LocalRunner.build_modules), package)


@pytest.mark.skipif(not _has_python(), reason="needs CPython 3.11")
def test_refactors_rebuild_nothing_and_a_new_epoch_rebuilds_everything(tmp_path: Path) -> None:
    root, package = _project(tmp_path)
    first = _build(root, package)
    assert first.returncode == 0, first.stdout + first.stderr
    made = _records(root)
    for text in made.values():
        record = json.loads(text)
        assert record["status"] == "passed" and record["inputs"]["build_code"] == epoch.epoch_key("local")
        assert record["build_code"] == _code_hash(package)

    # A formatter's pass over every util/ module (and a comment): the same code, nothing rebuilt, nothing said.
    for module in sorted((package / "util").glob("*.py")):
        module.write_text("# reformatted\n" + ast.unparse(ast.parse(module.read_text())) + "\n")
    again = _build(root, package)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("up-to-date") == 2 and "build code changed" not in again.stdout, again.stdout
    assert _records(root) == made

    # Build code that changed without a new epoch: nothing rebuilt, but the run says so.
    process = package / "util" / "process.py"
    process.write_text(process.read_text() + "\nREFACTORED = True\n")
    changed = _build(root, package)
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert changed.stdout.count("up-to-date") == 2, changed.stdout
    said = " ".join(changed.stdout.split())
    assert f"2 record(s) kept by the build epoch (build {BUILD}, {CELL})" in said, said
    assert "the build code changed since these records; `--force` rebuilds" in said
    assert _records(root) == made

    # The commit that changes how wheels are built bumps the epoch: every build and cell is made again.
    epoch.confirm(_code_hash(package), bump=True, package_dir=package)
    bumped = _build(root, package)
    assert bumped.returncode == 0, bumped.stdout + bumped.stderr
    assert f"build {BUILD}: passed" in bumped.stdout and f"{CELL}: passed" in bumped.stdout, bumped.stdout
    for name, text in _records(root).items():
        record = json.loads(text)
        assert record["inputs"]["build_code"] == f"epoch {epoch.BUILD_EPOCH + 1}", name
        assert record["build_code"] == _code_hash(package) != json.loads(made[name])["build_code"]
        assert record["inputs_hash"] != json.loads(made[name])["inputs_hash"]
