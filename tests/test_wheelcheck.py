"""The built-wheel check: the plugin wheel pins torch to its release line (==X.Y.*) and the driver to its API major."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_wheels import make_wheel
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from buildmatrix.builder.wheelcheck import check_plugin_wheel
from buildmatrix.errors import StepFailed
from buildmatrix.model.cells import Cell, expand
from buildmatrix.model.matrix import load_matrix

from conftest import WriteMatrix

V010 = Version("0.1.0")
BUILD_INFO = "TORCH_VERSION = '2.4.1'\nDRIVER_API = '2.1'\n"


def cell_2_4(write_matrix: WriteMatrix) -> Cell:
    matrix = load_matrix(write_matrix())
    cells = expand(matrix, {r: {Version("3.11")} for r in matrix.torch})
    return next(c for c in cells if c.id == "torch2.4-cuda-cp311-drv2")


def plugin_wheel(directory: Path, cell: Cell, torch_pin: str) -> Path:
    return make_wheel(
        directory,
        "torch-emu",
        f"0.1.0+{cell.local_version_label}",
        requires=[torch_pin, "emu-driver>=2.1,<3"],
        extra_files={"torch_emu/_build_info.py": BUILD_INFO},
    )


def test_release_line_pin_passes(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    cell = cell_2_4(write_matrix)
    facts = check_plugin_wheel(
        plugin_wheel(tmp_path, cell, "torch==2.4.*"), cell, "torch-emu", "emu-driver", plugin_version=V010
    )
    assert facts["TORCH_VERSION"] == "2.4.1"


@pytest.mark.parametrize("pin", ["torch>=2.4,<2.5", "torch==2.4.1", "torch==2.*", "torch"])
def test_any_other_torch_pin_fails_the_cell(write_matrix: WriteMatrix, tmp_path: Path, pin: str) -> None:
    cell = cell_2_4(write_matrix)
    wheel = plugin_wheel(tmp_path, cell, pin)
    with pytest.raises(StepFailed, match=r"expected 'torch==2\.4\.\*'"):
        check_plugin_wheel(wheel, cell, "torch-emu", "emu-driver", plugin_version=V010)
    assert wheel.is_file()  # the check reads, never deletes: the engine decides what happens to a failed wheel


@pytest.mark.parametrize("vendor", ["2.4.0a0+nv24.07", "2.4.0a0+git3f2e1a4", "2.4.1+cu121"])
def test_vendor_builds_satisfy_the_release_line_pin_but_not_a_range(vendor: str) -> None:
    assert SpecifierSet("==2.4.*").contains(Version(vendor), prereleases=None)
    if Version(vendor).is_prerelease:
        assert not SpecifierSet(">=2.4,<2.5").contains(Version(vendor), prereleases=True)
    assert not SpecifierSet("==2.4.*").contains(Version("2.5.0.dev20240801"), prereleases=True)


def test_wheel_of_another_version_than_the_matrix_fails(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    """plugin.version in matrix.yaml is the plugin's version: a 0.1.0 wheel for a 0.2.0 matrix is not published."""
    cell = cell_2_4(write_matrix)
    wheel = plugin_wheel(tmp_path, cell, "torch==2.4.*")
    with pytest.raises(StepFailed) as info:
        check_plugin_wheel(wheel, cell, "torch-emu", "emu-driver", plugin_version=Version("0.2.0"))
    assert info.value.step == "check"
    assert "version is 0.1.0, matrix.yaml's plugin.version is 0.2.0" in info.value.message
    assert wheel.is_file()
