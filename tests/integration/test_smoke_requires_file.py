"""A test requirement on no index, as the adopters' guide says to give it: a direct `file://` reference in
`smoke.requires` installs the project's own package into each cell's clean smoke environment.

The tiny project (no SDK) against a stand-in torch wheel (fake_wheels.fake_torch): real uv environments, a real
compiler, a real pytest run, in seconds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fake_wheels import fake_torch

from conftest import TINY_CONTRACT, run_cli

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
REPO = Path(__file__).parents[2]
GUIDE = REPO / "docs" / "guide" / "use-buildmatrix.md"
CELL = "torch2.13-cpu-cp311"
MATRIX = """\
schema-version: 2
plugin: {{distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests}}
python: ["3.11"]
torch:
  - {{version: "2.13.0", variant: cpu, wheels: {{find-links: {links}}}}}
runner: local
"""
# A test of the smoke suite that needs the project's own helper package.
HELPER_TEST = """\
import tiny_helpers


def test_the_helper_is_installed():
    assert tiny_helpers.ANSWER == 42
"""


def test_a_file_reference_in_smoke_requires_installs_a_package_of_no_index(tmp_path: Path) -> None:
    # The guide documents the form this test uses.
    assert "(`helpers @ file:///abs/path/helpers`)" in GUIDE.read_text().replace("\n  ", " ")

    helpers = tmp_path / "helpers"
    (helpers / "tiny_helpers").mkdir(parents=True)
    (helpers / "tiny_helpers" / "__init__.py").write_text("ANSWER = 42\n")
    (helpers / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "tiny-helpers"\nversion = "0.1.0"\n'
    )
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("driver"))
    (root / "plugin" / "tests" / "test_helpers.py").write_text(HELPER_TEST)
    links = tmp_path / "torch-wheels"
    fake_torch(links, "2.13.0+cpu", ["3.11"])
    requires = f'[pytest, "tiny-helpers @ {helpers.as_uri()}"]'
    smoke = f'smoke: {{args: ["--tiny-features-json={{features}}"], requires: {requires}}}'
    contract = "\n".join(line for line in TINY_CONTRACT.splitlines() if not line.startswith("smoke:"))
    (root / "matrix.yaml").write_text(MATRIX.format(links=links) + contract + "\n" + smoke + "\n")

    result = run_cli(root, "build", "--matrix", str(root / "matrix.yaml"), timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads((root / "wheels" / "results" / "cells" / f"{CELL}.json").read_text())
    # The fixture's three tests and the helper's: the helper was importable in the clean environment.
    assert record["status"] == "passed" and record["smoke"]["passed"] == 4, record
    log = (root / "wheels" / "logs" / f"{CELL}.log").read_text()
    assert f"tiny-helpers @ {helpers.as_uri()}" in log and "+ tiny-helpers==0.1.0 (from file://" in log, log
