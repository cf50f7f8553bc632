"""The built-wheel check: the plugin wheel pins torch to its release line (==X.Y.*) and the driver to its API major."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_wheels import make_wheel
from packaging.specifiers import SpecifierSet
from packaging.tags import parse_tag
from packaging.version import Version

from buildmatrix.builder.wheelcheck import check_plugin_wheel, installs_on
from buildmatrix.errors import StepFailed
from buildmatrix.model.builds import Build, plan_builds
from buildmatrix.model.cells import expand
from buildmatrix.model.contract import CheckContract, TorchPin
from buildmatrix.model.matrix import load_matrix
from buildmatrix.model.pythons import Python

from conftest import WriteMatrix

V010 = Version("0.1.0")
CHECK = CheckContract(TorchPin.RELEASE_LINE, "torch_emu/_build_info.py")
BUILD_INFO = "TORCH_VERSION = '2.4.1'\nDRIVER_API = '2.1'\n"


def cell_2_4(write_matrix: WriteMatrix) -> Build:
    """The build of the cell torch2.4-cuda-cp311-drv2 (the wheel check is a build's)."""
    matrix = load_matrix(write_matrix())
    cells = expand(matrix, {r: {Python.parse("3.11")} for r in matrix.torch})
    cell = next(c for c in cells if c.id == "torch2.4-cuda-cp311-drv2")
    return plan_builds(matrix, [cell])[cell.build.id]


def plugin_wheel(directory: Path, cell: Build, torch_pin: str) -> Path:
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
        plugin_wheel(tmp_path, cell, "torch==2.4.*"), cell, "torch-emu", "emu-driver", plugin_version=V010, check=CHECK
    )
    assert facts["TORCH_VERSION"] == "2.4.1"


@pytest.mark.parametrize("pin", ["torch>=2.4,<2.5", "torch==2.4.1", "torch==2.*", "torch"])
def test_any_other_torch_pin_fails_the_cell(write_matrix: WriteMatrix, tmp_path: Path, pin: str) -> None:
    cell = cell_2_4(write_matrix)
    wheel = plugin_wheel(tmp_path, cell, pin)
    with pytest.raises(StepFailed, match=r"expected 'torch==2\.4\.\*'"):
        check_plugin_wheel(wheel, cell, "torch-emu", "emu-driver", plugin_version=V010, check=CHECK)
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
        check_plugin_wheel(wheel, cell, "torch-emu", "emu-driver", plugin_version=Version("0.2.0"), check=CHECK)
    assert info.value.step == "check"
    assert "version is 0.1.0, matrix.yaml's plugin.version is 0.2.0" in info.value.message
    assert wheel.is_file()


def test_a_py3_none_wheel_serves_the_cell_like_its_own_cpython_tag(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    """A plugin without CPython API ships py3-none-<platform>: one file for every Python of the release."""
    cell = cell_2_4(write_matrix)
    for tag in ("py3-none-linux_x86_64", "cp311-cp311-manylinux_2_28_x86_64", "cp39-abi3-linux_x86_64"):
        wheel = make_wheel(
            tmp_path / tag,
            "torch-emu",
            f"0.1.0+{cell.local_version_label}",
            tag=tag,
            requires=["torch==2.4.*", "emu-driver>=2.1,<3"],
            extra_files={"torch_emu/_build_info.py": BUILD_INFO},
        )
        assert check_plugin_wheel(wheel, cell, "torch-emu", "emu-driver", plugin_version=V010, check=CHECK)[
            "TORCH_VERSION"
        ]


@pytest.mark.parametrize("tag", ["cp312-cp312-linux_x86_64", "cp311-cp311t-linux_x86_64", "py2-none-linux_x86_64"])
def test_a_wheel_the_builds_python_cannot_install_fails(write_matrix: WriteMatrix, tmp_path: Path, tag: str) -> None:
    cell = cell_2_4(write_matrix)
    wheel = make_wheel(
        tmp_path,
        "torch-emu",
        f"0.1.0+{cell.local_version_label}",
        tag=tag,
        requires=["torch==2.4.*", "emu-driver>=2.1,<3"],
        extra_files={"torch_emu/_build_info.py": BUILD_INFO},
    )
    with pytest.raises(StepFailed) as info:
        check_plugin_wheel(wheel, cell, "torch-emu", "emu-driver", plugin_version=V010, check=CHECK)
    assert f"its tags ({tag}) do not install on the Python it was built with, 3.11 (cp311)" in info.value.message
    assert wheel.is_file()


@pytest.mark.parametrize(
    ("tag", "python", "abi", "accepted"),
    [
        ("py3-none-linux_x86_64", "3.14", "cp314t", True),  # no CPython API: free-threaded builds too
        ("cp39-abi3-linux_x86_64", "3.14", "cp314", True),
        ("cp39-abi3-linux_x86_64", "3.14", "cp314t", False),  # the limited API does not exist there
        ("cp314-cp314-linux_x86_64", "3.14", "cp314t", False),
        ("cp314-cp314t-linux_x86_64", "3.14", "cp314t", True),
        ("cp314-cp314t-linux_x86_64", "3.14", "cp314", False),
        ("cp315-abi3-linux_x86_64", "3.14", "cp314", False),  # abi3 of a newer Python
    ],
)
def test_installs_on_follows_the_interpreters_tags(tag: str, python: str, abi: str, accepted: bool) -> None:
    assert installs_on(parse_tag(tag), Python(Version(python), abi.endswith("t"))) is accepted
