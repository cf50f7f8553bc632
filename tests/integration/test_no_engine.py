"""The README's main command (`nox -s build-matrix`, i.e. `torch-buildmatrix build` under runner auto) on a machine
where no Docker engine answers and none can be started: every cell a local interpreter serves is built and tested, each
cell only an image serves is recorded as not built with the command that starts an engine, and the run exits non-zero.

The tiny project's real torch 2.13 CPU cell builds here on Python 3.11; its 3.14 cell has only an image (the find-links
directory lists a cp314 torch by name: it is never installed)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from torch_buildmatrix.builder.runners.select import ENGINE_COMMAND
from torch_buildmatrix.errors import EngineUnavailable

from conftest import TINY_CONTRACT, run_cli

REPO = Path(__file__).parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "tiny"
TORCH = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
MATRIX = """\
schema-version: 2
plugin: {{distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{{torch_minor}}.drv.{{sdk_major}}"}}
sdk: {{kind: wheel, name: driver, id: "drv{{sdk_major}}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["2.1"]}}
python: ["3.11", "3.14"]
torch:
  - {{version: "2.13.0", variant: cpu, wheels: {{find-links: {links}}}}}
images:
  forky: {{base: "debootstrap:forky", python: ["3.14"]}}
runner: auto
"""
LOCAL, IMAGE = "torch2.13-cpu-cp311-drv2", "torch2.13-cpu-cp314-drv2"


@pytest.mark.integration
@pytest.mark.skipif(not TORCH.is_file(), reason=f"needs the local torch 2.13 CPU wheel {TORCH}")
def test_main_command_without_an_engine_builds_the_local_cells_and_records_the_others(tmp_path: Path) -> None:
    links = tmp_path / "find-links"
    links.mkdir()
    (links / TORCH.name).symlink_to(TORCH)
    (links / "torch-2.13.0+cpu-cp314-cp314-manylinux_2_28_x86_64.whl").write_bytes(b"")  # listed, never installed
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX.format(links=links) + TINY_CONTRACT)
    dead = f"unix://{tmp_path / 'dead.sock'}"  # nothing listens: `docker info` fails, and no engine may be started
    env = {**os.environ, "DOCKER_HOST": dead, "PYTHONPATH": str(REPO), "COLUMNS": "250"}

    run = run_cli(root, "build", "--matrix", str(root / "matrix.yaml"), timeout=900, env=env)
    said = run.stdout + run.stderr
    assert run.returncode == EngineUnavailable.exit_code, said
    assert "Traceback" not in said

    records = root / "wheels" / "results" / "cells"
    local = json.loads((records / f"{LOCAL}.json").read_text())
    assert local["status"] == "passed" and local["runner"] == "local", local
    assert local["smoke"]["passed"] > 0 and local["smoke"]["failed"] == 0
    assert (root / "wheels" / local["wheel"]["path"]).is_file()

    image = json.loads((records / f"{IMAGE}.json").read_text())
    assert image["status"] == "not built" and image["wheel"] is None and image["steps"] == []
    assert f"no Docker engine answers `docker info` at {dead}" in image["error"]
    assert f"Start one with `{ENGINE_COMMAND}`" in image["error"]
    assert not (root / "build" / "matrix" / "cells" / IMAGE).exists()  # nothing was tried for it
    assert not list((root / "wheels").glob("**/*cp314*.whl"))

    summary = json.loads((root / "wheels" / "results" / "summary.json").read_text())
    assert summary["counts"] == {"passed": 1, "failed": 0, "not built": 1}
    assert f"{IMAGE} not built: " in said.replace("\n", "") and ENGINE_COMMAND in said

    # The next run (still no engine) keeps the passed cell as it is and still leaves the other one unbuilt.
    again = run_cli(root, "build", "--matrix", str(root / "matrix.yaml"), timeout=900, env=env)
    assert again.returncode == EngineUnavailable.exit_code, again.stdout + again.stderr
    assert json.loads((records / f"{LOCAL}.json").read_text()) == local
    rows = [line for line in again.stdout.splitlines() if LOCAL in line and "passed" in line]
    [build_row] = [row for row in rows if f"build {LOCAL}" in row]  # the build and the cell share the id here
    [cell_row] = [row for row in rows if row is not build_row]
    for row in (build_row, cell_row):  # the summary says nothing ran for them
        assert "passed, up to date" in row and " s earlier" in row, again.stdout
    assert json.loads((records / f"{IMAGE}.json").read_text())["status"] == "not built"
