"""Builds apart from cells, as pure functions of the matrix: which build each cell tests, and how many builds a plan
makes (per Python or not, per variant or not, the stable ABI from a release on)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from torch_buildmatrix.errors import MatrixError
from torch_buildmatrix.model.builds import plan_builds
from torch_buildmatrix.model.cells import Cell, expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix, TorchRelease
from torch_buildmatrix.model.pythons import Python

from conftest import WriteMatrix

P = Python.parse
MATRIX = """\
schema-version: 2
plugin: {{distribution: torch-emu, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{{torch_minor}}{label}"}}
python: ["3.11", "3.12", "3.13", "3.13t"]
torch:
  - {{version: "2.9.1", variant: cuda}}
  - {{version: "2.10.0", variant: cuda}}
  - {{version: "2.11.0", variant: cuda}}
  - {{version: "2.13.0", variant: cuda, python: ["3.13"]}}
  - {{version: "2.13.0", variant: cpu, python: ["3.12"], wheels: pip-find-links}}
build: {{{build}}}
"""
PUBLISHED = {"2.9.1": {P("3.11"), P("3.12"), P("3.13"), P("3.13t")}, "2.13.0": {P("3.12"), P("3.13")}}


def load(write_matrix: WriteMatrix, build: str = "", label: str = "") -> tuple[Matrix, list[Cell]]:
    matrix = load_matrix(write_matrix(MATRIX.format(build=build, label=label)))
    available: dict[TorchRelease, set[Python]] = {
        r: PUBLISHED.get(str(r.version), {P("3.11"), P("3.12"), P("3.13")}) for r in matrix.torch
    }
    return matrix, expand(matrix, available)


def builds_of(matrix: Matrix, cells: list[Cell]) -> dict[str, list[str]]:
    return {b.id: list(b.cells) for b in plan_builds(matrix, cells).values()}


def test_per_python_is_the_default_one_build_per_cell(write_matrix: WriteMatrix) -> None:
    matrix, cells = load(write_matrix, label=".{variant}")
    builds = plan_builds(matrix, cells)
    assert len(builds) == len(cells) == 12
    assert all(b.cells == (b.id,) and b.python == b.key.python for b in builds.values())


def test_one_wheel_for_every_python_makes_one_build_per_release_and_variant(write_matrix: WriteMatrix) -> None:
    matrix, cells = load(write_matrix, "per-python: false", label=".{variant}")
    builds = plan_builds(matrix, cells)
    assert list(builds) == [
        "torch2.9-cuda",
        "torch2.10-cuda",
        "torch2.11-cuda",
        "torch2.13-cuda",
        "torch2.13-cpu",
    ]
    made = builds["torch2.9-cuda"]
    assert made.cells == (
        "torch2.9-cuda-cp311",
        "torch2.9-cuda-cp312",
        "torch2.9-cuda-cp313",
        "torch2.9-cuda-cp313t",
    )
    # Built with the oldest Python with the GIL of its cells, never the free-threaded one while another is there.
    assert made.python == P("3.11") and made.key.python is None
    assert {c.build.id for c in cells if c.torch.version == Version("2.9.1")} == {"torch2.9-cuda"}


def test_variants_share_a_build_when_the_wheel_does_not_depend_on_them(write_matrix: WriteMatrix) -> None:
    matrix, cells = load(write_matrix, "per-python: false, per-variant: false")
    builds = builds_of(matrix, cells)
    # 2.13's cpu cells test the wheel built against its first entry (cuda).
    assert builds["torch2.13-cuda"] == ["torch2.13-cuda-cp313", "torch2.13-cpu-cp312"]
    assert len(builds) == 4


def test_two_builds_one_file_name_is_refused_with_the_way_out(write_matrix: WriteMatrix) -> None:
    with pytest.raises(MatrixError, match=r"build\.per-variant: false can make them one build"):
        load(write_matrix, "per-python: false")  # the label lacks {variant}: cpu and cuda 2.13 builds collide


def test_stable_abi_makes_one_build_from_its_release_on(write_matrix: WriteMatrix) -> None:
    matrix, cells = load(write_matrix, 'per-python: false, per-variant: false, stable-abi: "2.10"')
    builds = plan_builds(matrix, cells)
    assert list(builds) == ["torch2.9-cuda", "torch2.10-cuda-stable"]
    stable = builds["torch2.10-cuda-stable"]
    assert stable.release.version == Version("2.10.0") and stable.key.stable
    # Every later release still has its own test cells, all testing the one stable-ABI wheel.
    tested = {c.torch.version for c in cells if c.id in stable.cells}
    assert tested == {Version("2.10.0"), Version("2.11.0"), Version("2.13.0")}
    assert all(c.build == stable.key for c in cells if c.torch.version >= Version("2.10"))
    assert all(c.key.label == "torch.2.10" for c in cells if c.id in stable.cells)  # the wheel is the 2.10 build's


def test_stable_abi_per_python_keeps_one_build_per_python(write_matrix: WriteMatrix) -> None:
    matrix, cells = load(write_matrix, 'per-variant: false, stable-abi: "2.10"')
    builds = builds_of(matrix, cells)
    assert builds["torch2.10-cuda-stable-cp312"] == [
        "torch2.10-cuda-cp312",
        "torch2.11-cuda-cp312",
        "torch2.13-cpu-cp312",
    ]


def test_a_build_without_a_python_its_release_publishes_is_an_error(write_matrix: WriteMatrix) -> None:
    matrix, cells = load(write_matrix, 'per-python: false, per-variant: false, stable-abi: "2.10"')
    later = [c for c in cells if c.torch.version == Version("2.13.0")]  # 2.13's cells are 3.12 and 3.13
    no_python = {r: {P("3.11")} for r in matrix.torch}
    with pytest.raises(MatrixError, match=r"build torch2\.10-cuda-stable is made against torch 2\.10\.0"):
        plan_builds(matrix, later, no_python)
