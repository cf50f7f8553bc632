"""The example projects (examples/) built by buildmatrix as their authors would: each one's cheap torch 2.13 CPU cell,
from a copy of the example, with its own matrix.yaml, through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from buildmatrix.docker import oci
from buildmatrix.model.cells import expand
from buildmatrix.model.matrix import load_matrix

from conftest import REPO, run_cli

EXAMPLES = REPO / "examples"


def copy_example(name: str, dest: Path) -> Path:
    root = dest / name
    shutil.copytree(
        EXAMPLES / name, root, ignore=shutil.ignore_patterns("build", "wheels", "*.egg-info", "__pycache__", "*.so")
    )
    return root


@pytest.mark.parametrize("name", ["segment-ops", "tacc-backend"])
def test_each_example_matrix_loads_and_expands(name: str) -> None:
    matrix = load_matrix(EXAMPLES / name / "matrix.yaml")
    pythons = {release: set(release.python or ()) for release in matrix.torch}
    cells = expand(matrix, pythons)
    assert cells and all(c.torch.version.release >= (2, 4) for c in cells)


def test_segment_ops_spans_three_releases_and_declares_no_sdk() -> None:
    matrix = load_matrix(EXAMPLES / "segment-ops" / "matrix.yaml")
    assert len({r.minor for r in matrix.torch}) >= 3 and matrix.sdk is None
    assert matrix.contract.build.version_env == "SEGOPS_VERSION"


def record(root: Path, cell: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((root / "wheels" / "results" / "cells" / f"{cell}.json").read_text())
    return data


@pytest.mark.integration
def test_segment_ops_cheap_cell_builds_and_passes_its_own_suite(tmp_path: Path) -> None:
    root = copy_example("segment-ops", tmp_path)
    result = run_cli(root, "build", "--matrix", str(root / "matrix.yaml"), "--torch", "2.13", "--jobs", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    done = record(root, "torch2.13-cpu-cp311")
    assert done["status"] == "passed", done.get("error")
    wheel = done["wheel"]
    assert isinstance(wheel, dict) and wheel["filename"].startswith("segops-0.1.0+torch.2.13-cp311-")
    smoke = done["smoke"]
    assert isinstance(smoke, dict) and smoke["failed"] == 0 and smoke["errors"] == 0 and smoke["passed"] >= 14
    assert not (root / "wheels" / "sdk").exists()  # no SDK: nothing but the extension is published


@pytest.mark.integration
@pytest.mark.docker
def test_tacc_backend_cheap_cell_builds_in_its_toolkit_image(tmp_path: Path) -> None:
    if not oci.server_version(timeout=10):
        pytest.skip("no Docker engine answers `docker info` (start one: buildmatrix engine)")
    root = copy_example("tacc-backend", tmp_path)
    result = run_cli(
        root, "build", "--matrix", str(root / "matrix.yaml"), "--torch", "2.13", "--sdk", "2", "--jobs", "1"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    done = record(root, "torch2.13-cpu-cp311-tacc2")
    assert done["status"] == "passed", done.get("error")
    wheel = done["wheel"]
    assert isinstance(wheel, dict) and wheel["filename"].startswith("torch_tacc-0.1.0+torch.2.13.tacc.2-cp311-")
    smoke = done["smoke"]
    assert isinstance(smoke, dict) and smoke["failed"] == 0 and smoke["passed"] >= 10
    # A system SDK is installed by its image, never published or bundled.
    assert not [p for p in (root / "wheels").rglob("*.whl") if "tacc_toolkit" in p.name]
