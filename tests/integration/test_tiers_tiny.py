"""Test tiers end to end on the tiny project: the deep tier runs once per build, on the cell the rule picks, the quick
suite on every cell; a deep failure fails every cell of the build; a deep tier whose tests all skip is "not run".

Real uv environments, a real compiler and real Pythons (3.11 and 3.12); torch is a stand-in wheel per Python
(fake_wheels.fake_torch), and the one build of the Python-independent shape serves both cells in seconds.
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
python: ["3.12", "3.11"]
torch:
  - {{version: "2.13.0", variant: cpu, wheels: {{find-links: {links}}}}}
runner: local
"""
TIERS = """\
smoke:
  args: ["--tiny-features-json={features}"]
  tiers: {quick: ["-m", "not deep"], deep: ["-m", "deep"]}
"""
# The deep suite: one test, marked; it fails or skips when the project asks.
DEEP_TESTS = """\
import os

import pytest

HERE = os.path.dirname(__file__)
pytestmark = pytest.mark.deep


def test_deep_check():
    if os.path.exists(os.path.join(HERE, "SKIP_DEEP")):
        pytest.skip("asked to skip")
    assert not os.path.exists(os.path.join(HERE, "FAIL_DEEP"))
"""
BUILD = "torch2.13-cpu"
DEEP, OTHER = "torch2.13-cpu-cp311", "torch2.13-cpu-cp312"  # the oldest Python with the GIL runs the deep tier


def _missing_pythons() -> list[str]:
    missing = []
    for python in PYTHONS:
        try:
            find_interpreter(Python.parse(python))
        except InterpreterNotFound:
            missing.append(python)
    return missing


needs_pythons = pytest.mark.skipif(bool(_missing_pythons()), reason=f"needs CPython {' and '.join(PYTHONS)}")


def project(tmp_path: Path, tiers: bool = True) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    links = tmp_path / "torch-wheels"
    fake_torch(links, "2.13.0+cpu", PYTHONS)
    (root / "plugin" / "ANY_PYTHON").write_text("")
    (root / "plugin" / "tests" / "test_deep.py").write_text(DEEP_TESTS)
    (root / "README.md").write_text("# tiny\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")
    # The project's own pytest settings are its tests', never the smoke suite's (a local cell's scratch is inside
    # the project): a plugin the smoke environment lacks and strict options would stop every smoke run.
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "--strict-config"\ntimeout = 5\n')
    contract = TINY_CONTRACT.replace("build: {", "build: {per-python: false, ")
    if tiers:
        contract = "\n".join(line for line in contract.splitlines() if not line.startswith("smoke:")) + "\n" + TIERS
    (root / "matrix.yaml").write_text(MATRIX.format(links=links) + contract)
    return root


def run(root: Path, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", command, "--matrix", str(root / "matrix.yaml"), *args],
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


def published(root: Path) -> tuple[str, str, dict[str, Any]]:
    """compat-table from the records: docs/compatibility.md, the site's page, docs/compatibility.json."""
    result = run(root, "compat-table", "--offline")
    assert result.returncode == 0, result.stdout + result.stderr
    table: dict[str, Any] = json.loads((root / "docs" / "compatibility.json").read_text())
    page = (root / "wheels" / "site" / "index.html").read_text()
    return (root / "docs" / "compatibility.md").read_text(), page, table


def steps(cell: dict[str, Any]) -> list[str]:
    return [s["name"] for s in cell["steps"]]


@needs_pythons
def test_deep_once_per_build_quick_on_every_cell(tmp_path: Path) -> None:
    root = project(tmp_path)
    first = run(root, "build", "--jobs", "2")
    assert first.returncode == 0, first.stdout + first.stderr
    made = record(root, "builds", BUILD)
    deep, other = record(root, "cells", DEEP), record(root, "cells", OTHER)
    # The deep tier ran once, on its cell, after that cell's quick suite; the other cell ran the quick suite only.
    assert steps(deep) == ["source", "check", "interpreter", "smoke-env", "smoke", "deep"]
    assert steps(other) == ["source", "check", "interpreter", "smoke-env", "smoke"]
    assert first.stdout.count(": deep\n") == 1, first.stdout
    for cell in (deep, other):
        assert cell["status"] == "passed"
        assert cell["smoke"] == {"passed": 3, "failed": 0, "skipped": 0, "errors": 0}  # quick: the deep test left out
        assert cell["deep"]["cell"] == DEEP and cell["deep"]["status"] == "passed"
        assert cell["deep"]["smoke"] == {"passed": 1, "failed": 0, "skipped": 0, "errors": 0}
    assert made["deep"] == deep["deep"]  # recorded with the build

    again = run(root, "build")
    assert again.returncode == 0 and again.stdout.count("up-to-date") == 3, again.stdout

    # The table and the page show it with each cell of the build: which cell ran it, with what result.
    grid, page, table = published(root)
    # (columns in matrix.yaml's order: 3.12, then 3.11)
    assert "| 2.13.0 (cpu) | ✓ 3, deep ✓ 1 on Python 3.11 | ✓ 3, deep ✓ 1 |" in grid
    assert "deep: the build's deep suite, run once per build" in grid
    assert page.count('<span class="deep deep-passed">deep ✓ 1') == 2 and "deep ✓ 1 on Python 3.11" in page
    assert {c["id"]: c["deep"] for c in table["cells"]} == {
        name: {"cell": DEEP, "status": "passed", "smoke": {"passed": 1, "failed": 0, "skipped": 0, "errors": 0}}
        for name in (DEEP, OTHER)
    }


@needs_pythons
def test_a_deep_failure_fails_every_cell_of_the_build(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "plugin" / "tests" / "FAIL_DEEP").write_text("")
    result = run(root, "build", "--jobs", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    made = record(root, "builds", BUILD)
    assert made["status"] == "passed" and made["deep"]["status"] == "failed" and made["deep"]["cell"] == DEEP
    deep, other = record(root, "cells", DEEP), record(root, "cells", OTHER)
    assert deep["status"] == "failed" and deep["failed_step"] == "deep"
    assert deep["smoke"]["failed"] == 0 and deep["deep"]["smoke"]["failed"] == 1  # its quick suite passed
    assert deep["error"].startswith("deep tier: 1 failed, 0 errors, 0 passed")
    # The other cell's own suite passed; its build's deep tier did not, so it fails too, saying where.
    assert other["status"] == "failed" and other["failed_step"] == "deep" and other["smoke"]["failed"] == 0
    assert other["error"].startswith(f"the deep tier of build {BUILD} failed on cell {DEEP}: 1 failed")
    assert other["failure_class"] == "deterministic" and "deep" not in steps(other)
    summary = json.loads((root / "wheels" / "results" / "summary.json").read_text())
    assert {summary["cells"][c]["status"] for c in (DEEP, OTHER)} == {"failed"}
    grid, page, _ = published(root)
    assert "| ✗ deep (deterministic), deep ✗ on Python 3.11 | ✗ deep (deterministic), deep ✗ |" in grid
    assert page.count('<td class="failed"') == 2 and "deep ✗ on Python 3.11" in page
    # The same inputs fail the same way: nothing is tried again.
    again = run(root, "build")
    assert again.returncode == 1 and again.stdout.count("up-to-date") == 3, again.stdout

    # Fixed: the deep tier passes again and gives the other cell its pass back.
    (root / "plugin" / "tests" / "FAIL_DEEP").unlink()
    fixed = run(root, "build")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert record(root, "cells", OTHER)["status"] == "passed"
    assert record(root, "builds", BUILD)["deep"]["status"] == "passed"


@needs_pythons
def test_a_deep_tier_that_only_skipped_is_not_run(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "plugin" / "tests" / "SKIP_DEEP").write_text("")
    result = run(root, "build", "--jobs", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (DEEP, OTHER):
        cell = record(root, "cells", name)
        assert cell["status"] == "passed" and cell["deep"]["status"] == "not run"
        assert cell["deep"]["smoke"] == {"passed": 0, "failed": 0, "skipped": 1, "errors": 0}
    assert record(root, "builds", BUILD)["deep"]["status"] == "not run"
    grid, page, _ = published(root)
    assert "| ✓ 3, deep not run on Python 3.11 | ✓ 3, deep not run |" in grid
    assert page.count('class="deep deep-not-run"') == 2


@needs_pythons
def test_without_tiers_every_cell_runs_everything(tmp_path: Path) -> None:
    root = project(tmp_path, tiers=False)
    result = run(root, "build", "--jobs", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (DEEP, OTHER):
        cell = record(root, "cells", name)
        assert "deep" not in cell and "tiers" not in cell["inputs"] and steps(cell)[-1] == "smoke"
        assert cell["smoke"]["passed"] == 4
    assert "deep" not in record(root, "builds", BUILD)
    grid, page, table = published(root)
    assert "| ✓ 4 | ✓ 4 |" in grid and "deep" not in grid and 'class="deep' not in page
    assert all("deep" not in c for c in table["cells"])


@needs_pythons
def test_fan_out_runs_the_deep_tier_in_the_deep_cells_job_and_merge_settles(tmp_path: Path) -> None:
    """The fan-out's shape on one machine: a build job, one --prebuilt job per cell (each with the build's tree
    only), then merge-results: the other cell's job ran no deep tier, and the merge fails it by the deep cell's."""
    root = project(tmp_path)
    (root / "plugin" / "tests" / "FAIL_DEEP").write_text("")
    plan = run(root, "matrix", "--offline", "--github")
    assert plan.returncode == 0, plan.stderr
    entries = {e["cell"]: e for e in json.loads(plan.stdout)["cells"]["include"]}
    assert {c: e["deep"] for c, e in entries.items()} == {DEEP: True, OTHER: False}
    assert run(root, "build", "--build", BUILD, "--builds-only").returncode == 0
    wheels = root / "wheels"
    build_tree = tmp_path / "build-tree"
    shutil.copytree(wheels, build_tree)
    trees = {}
    for cell, entry in entries.items():
        shutil.rmtree(wheels)
        shutil.copytree(build_tree, wheels)  # the job downloads its build's artifact
        job = run(root, "build", *entry["args"].split())
        assert job.returncode == (1 if cell == DEEP else 0), job.stdout + job.stderr
        trees[cell] = tmp_path / f"tree-{cell}"
        shutil.copytree(wheels, trees[cell])
    # Each job tested its own cell; the deep tier ran in the deep cell's job only.
    other_job = json.loads((trees[OTHER] / "results" / "cells" / f"{OTHER}.json").read_text())
    assert other_job["status"] == "passed" and "deep" not in other_job and "deep" not in steps(other_job)
    deep_job = json.loads((trees[DEEP] / "results" / "cells" / f"{DEEP}.json").read_text())
    assert deep_job["failed_step"] == "deep" and deep_job["deep"]["status"] == "failed"
    # A cell job leaves its build's record as the build job made it (every cell job's copy must agree).
    for tree in trees.values():
        assert (tree / "results" / "builds" / f"{BUILD}.json").read_bytes() == (
            build_tree / "results" / "builds" / f"{BUILD}.json"
        ).read_bytes()

    merged = tmp_path / "merged"
    for _ in range(2):  # merging again agrees with what is merged (settled records and the jobs' own)
        result = run(root, "merge-results", *(str(t) for t in trees.values()), "--into", str(merged))
        assert result.returncode == 0, result.stdout + result.stderr
        other = json.loads((merged / "results" / "cells" / f"{OTHER}.json").read_text())
        assert other["status"] == "failed" and other["failed_step"] == "deep" and other["deep"]["cell"] == DEEP
        made = json.loads((merged / "results" / "builds" / f"{BUILD}.json").read_text())
        assert made["deep"]["status"] == "failed" and made["deep"]["cell"] == DEEP
        summary = json.loads((merged / "results" / "summary.json").read_text())
        assert summary["cells"][OTHER]["status"] == "failed"
