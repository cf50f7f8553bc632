"""torch-buildmatrix's package layout: the runner finds its recipes inside the package, the version is written once (the
built sdist and wheel: test_package.py)."""

from __future__ import annotations

from pathlib import Path

import torch_buildmatrix
from torch_buildmatrix.docker.images import CELL_HELPER, DATA_DIR

REPO = Path(__file__).parents[2]
# What the installed package must hold beside its modules: the Docker runner's recipes and in-container helper.
PACKAGE_DATA = (
    "torch_buildmatrix/docker/data/debian.Dockerfile",
    "torch_buildmatrix/docker/data/manylinux.Dockerfile",
    "torch_buildmatrix/docker/data/cell.py",
)


def test_the_runner_finds_its_recipes_inside_the_package() -> None:
    package = Path(torch_buildmatrix.__file__).parent
    assert DATA_DIR.parent.parent == package and CELL_HELPER.parent == DATA_DIR
    for name in PACKAGE_DATA:
        assert (package.parent / name).is_file(), name


def test_the_version_is_written_once() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text and 'version = {attr = "torch_buildmatrix.__version__"}' in text
    assert "\nversion =" not in text.split("[tool.setuptools.dynamic]")[0]
