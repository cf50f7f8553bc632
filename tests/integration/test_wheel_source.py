"""A record names where torch really came from: an index source served by its local mirror (`local-find-links`) is
installed from those find-links, and the build's and the cell's records say so (matrix.yaml's index stays in the
inputs, which are what the record was made for, not where the bytes came from). The index here answers nothing: the
build can only have used the mirror."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from torch_buildmatrix.model.registry import pip_configured_find_links

from conftest import TINY_CONTRACT, run_cli

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "tiny"
INDEX = "http://127.0.0.1:9/whl/cpu"  # a closed port


def test_records_name_the_local_find_links_an_index_source_was_served_from(tmp_path: Path) -> None:
    mirror = pip_configured_find_links()
    if not any(Path(m.removeprefix("file://")).glob("torch-2.13.0+cpu-cp311-*.whl") for m in mirror):
        pytest.skip("pip's configured find-links hold no torch 2.13.0+cpu wheel for Python 3.11")
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(
        "schema-version: 2\n"  # the tiny project's no-SDK shape
        "plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests}\n"
        'python: ["3.11"]\n'
        f'torch:\n  - {{version: "2.13.0", variant: cpu, wheels: {{index: "{INDEX}", local-find-links: pip-config}}}}\n'
        "runner: local\n" + TINY_CONTRACT
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = run_cli(root, "build", "--matrix", str(root / "matrix.yaml"), timeout=900, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    used = "find-links " + " ".join(mirror)
    results = root / "wheels" / "results"
    cell = json.loads((results / "cells" / "torch2.13-cpu-cp311.json").read_text())
    build = json.loads((results / "builds" / f"{cell['cell']['build']['id']}.json").read_text())
    for record in (cell, build):
        assert record["status"] == "passed" and record["torch_build"]["wheel_source"] == used, record["torch_build"]
    assert cell["inputs"]["wheel_source"] == f"index {INDEX}"  # what matrix.yaml says, as before
