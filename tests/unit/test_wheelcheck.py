"""The built-wheel check: the plugin wheel pins torch to its release line (==X.Y.*) and the driver to its API major."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_wheels import make_wheel
from packaging.specifiers import SpecifierSet
from packaging.tags import parse_tag
from packaging.version import Version

from torch_buildmatrix.builder.verdicts import symbols_line
from torch_buildmatrix.builder.wheelcheck import SymbolCheck, check_cell_pin, check_installed, check_plugin_wheel
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.builds import Build, plan_builds
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.contract import CheckContract, TorchPin
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python, installs_on

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
    checked = check_plugin_wheel(
        plugin_wheel(tmp_path, cell, "torch==2.4.*"), cell, "torch-emu", "emu-driver", plugin_version=V010, check=CHECK
    )
    assert checked.build_info["TORCH_VERSION"] == "2.4.1"
    # What the check step's lines say of the pins comes from here: the wheel's Requires-Dist, parsed, in order.
    assert [str(r) for r in checked.requires_dist] == ["torch==2.4.*", "emu-driver<3,>=2.1"]


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
        checked = check_plugin_wheel(wheel, cell, "torch-emu", "emu-driver", plugin_version=V010, check=CHECK)
        assert checked.build_info["TORCH_VERSION"]


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


# ---- a stable-ABI build (build.stable-abi): one wheel for several releases ----------------------------------------
SEGOPS = Path(__file__).resolve().parents[2] / "examples" / "segment-ops" / "matrix.yaml"
SEGOPS_CHECK = CheckContract(TorchPin.RELEASE_LINE, "segops/_build_info.py")


def segops_builds() -> dict[str, Build]:
    """The example's builds: 2.4 and 2.7 ordinary, one stable-ABI build against 2.10 for 2.10, 2.13 and 2.15."""
    matrix = load_matrix(SEGOPS)
    available = {r: set(r.python or matrix.python) for r in matrix.torch}
    return plan_builds(matrix, expand(matrix, available))


def segops_wheel(directory: Path, build: Build, pin: str, built_against: str = "2.10.0+cu128") -> Path:
    return make_wheel(
        directory,
        "segops",
        f"0.1.0+{build.local_version_label}",
        tag="cp311-cp311-linux_x86_64",
        requires=[pin],
        extra_files={"segops/_build_info.py": f"TORCH_VERSION = {built_against!r}\nSTABLE_ABI = True\n"},
    )


def check_segops(wheel: Path, build: Build) -> dict[str, object]:
    return check_plugin_wheel(wheel, build, "segops", None, plugin_version=V010, check=SEGOPS_CHECK).build_info


def test_the_stable_build_serves_every_later_release() -> None:
    stable = segops_builds()["torch2.10-cuda-stable-cp311"]
    assert stable.key.stable and stable.release.version == Version("2.10.0")
    assert stable.torch_releases == (Version("2.10.0"), Version("2.13.0"), Version("2.15.0"))
    assert segops_builds()["torch2.7-cuda-cp313"].torch_releases == (Version("2.7.1"),)


@pytest.mark.parametrize("pin", ["torch>=2.10", "torch>=2.10,<3", "torch>=2.10.0"])
def test_a_stable_builds_pin_from_its_release_line_passes(tmp_path: Path, pin: str) -> None:
    stable = segops_builds()["torch2.10-cuda-stable-cp311"]
    facts = check_segops(segops_wheel(tmp_path, stable, pin), stable)
    assert facts["TORCH_VERSION"] == "2.10.0+cu128"  # the build's torch, not any of its cells'


@pytest.mark.parametrize(
    ("pin", "says"),
    [
        ("torch==2.10.*", r"excludes torch 2\.13\.0, 2\.15\.0 that this build serves"),
        ("torch>=2.10,<2.14", r"excludes torch 2\.15\.0 that this build serves"),
        ("torch>=2.9", r"from torch 2\.10 on"),  # claims a release it was never built for nor tested on
        ("torch", r"from torch 2\.10 on"),
        ("torch>=2.11", r"excludes torch 2\.10\.0"),
        ("numpy", r"Requires-Dist for torch is 'None'"),
    ],
)
def test_a_stable_builds_pin_must_admit_what_it_serves_and_nothing_older(tmp_path: Path, pin: str, says: str) -> None:
    stable = segops_builds()["torch2.10-cuda-stable-cp311"]
    wheel = segops_wheel(tmp_path, stable, pin)
    with pytest.raises(StepFailed, match=says) as failed:
        check_segops(wheel, stable)
    assert "expected 'torch>=2.10 (a stable-ABI build for torch 2.10.0, 2.13.0, 2.15.0)'" in failed.value.message
    assert wheel.is_file()  # the check reads; the engine keeps the failed build's wheel out of wheels/


def test_an_ordinary_build_of_the_same_project_still_pins_its_release_line(tmp_path: Path) -> None:
    ordinary = segops_builds()["torch2.7-cuda-cp313"]
    wheel = make_wheel(
        tmp_path,
        "segops",
        f"0.1.0+{ordinary.local_version_label}",
        tag="cp313-cp313-linux_x86_64",
        requires=["torch>=2.7"],
        extra_files={"segops/_build_info.py": "TORCH_VERSION = '2.7.1'\n"},
    )
    with pytest.raises(StepFailed, match=r"expected 'torch==2\.7\.\*'"):
        check_segops(wheel, ordinary)


@pytest.mark.parametrize("recorded", ["2.13.0+cpu", "2.15.0", "unknown"])
def test_a_stable_builds_build_info_must_name_the_builds_torch_not_a_cells(tmp_path: Path, recorded: str) -> None:
    stable = segops_builds()["torch2.10-cuda-stable-cp311"]
    wheel = segops_wheel(tmp_path, stable, "torch>=2.10", built_against=recorded)
    with pytest.raises(StepFailed, match=r"the build's torch is 2\.10\.0 \(the stable-ABI build for torch 2\.10\.0"):
        check_segops(wheel, stable)


@pytest.mark.parametrize(
    ("pin", "torch", "admitted"),
    [
        ("torch>=2.10", "2.15.0", True),
        ("torch>=2.10,<2.14", "2.15.0", False),
        ("torch==2.10.*", "2.13.0", False),
        ("torch==2.13.*", "2.13.0", True),
    ],
)
def test_a_cell_refuses_a_wheel_whose_pin_excludes_its_torch(
    tmp_path: Path, pin: str, torch: str, admitted: bool
) -> None:
    stable = segops_builds()["torch2.10-cuda-stable-cp311"]
    wheel = segops_wheel(tmp_path, stable, pin)
    if admitted:
        check_cell_pin(wheel, Version(torch), stable.id)
        return
    with pytest.raises(
        StepFailed, match=rf"requires 'torch[^']*', which excludes this cell's torch {re.escape(torch)}"
    ):
        check_cell_pin(wheel, Version(torch), stable.id)


def test_every_unmarked_torch_pin_of_a_wheel_is_judged(tmp_path: Path) -> None:
    """A wheel naming torch twice: the excluding unmarked pin refuses the cell even when a marked entry comes last."""
    stable = segops_builds()["torch2.10-cuda-stable-cp311"]
    wheel = make_wheel(
        tmp_path,
        "segops",
        f"0.1.0+{stable.local_version_label}",
        tag="cp311-cp311-linux_x86_64",
        requires=["torch>=2.10,<2.14", "torch>=2.10; python_version >= '3.12'"],
    )
    with pytest.raises(StepFailed, match=r"requires 'torch<2\.14,>=2\.10', which excludes this cell's torch 2\.15\.0"):
        check_cell_pin(wheel, Version("2.15.0"), stable.id)
    check_cell_pin(wheel, Version("2.13.0"), stable.id)


def installed(site: Path, *dists: tuple[str, str]) -> Path:
    """A site-packages with these distributions' dist-info (what uv leaves after an install)."""
    for name, version in dists:
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return site


SEGOPS_WHEEL = Path("segops-0.1.0+torch.2.10-cp311-cp311-linux_x86_64.whl")


def test_the_smoke_environment_keeps_the_cells_torch_and_the_builds_wheel(tmp_path: Path) -> None:
    site = installed(tmp_path, ("torch", "2.13.0+cpu"), ("segops", "0.1.0+torch.2.10"), ("numpy", "2.3.0"))
    check_installed(site, "2.13.0+cpu", "segops", SEGOPS_WHEEL)
    # A registry release is asked for without a label: an index's labelled build of it is that release too.
    check_installed(site, "2.13.0", "segops", SEGOPS_WHEEL)


@pytest.mark.parametrize(
    ("dists", "says"),
    [
        (
            (("torch", "2.10.0"), ("segops", "0.1.0+torch.2.10")),
            r"torch 2\.10\.0 is installed, the cell's torch is 2\.13\.0\+cpu",
        ),
        (
            (("torch", "2.13.0"), ("segops", "0.1.0+torch.2.10")),
            r"torch 2\.13\.0 is installed, the cell's torch is 2\.13\.0\+cpu",
        ),
        ((("torch", "2.13.0+cpu"), ("segops", "0.1.0+torch.2.13")), r"segops 0\.1\.0\+torch\.2\.13 is installed"),
        ((("torch", "2.13.0+cpu"),), r"segops \(none\) is installed"),
    ],
)
def test_a_smoke_environment_that_is_not_the_cells_fails(
    tmp_path: Path, dists: tuple[tuple[str, str], ...], says: str
) -> None:
    site = installed(tmp_path / "site-packages", *dists)
    with pytest.raises(StepFailed, match=says) as failed:
        check_installed(site, "2.13.0+cpu", "segops", SEGOPS_WHEEL)
    assert failed.value.step == "smoke-env"


@pytest.mark.parametrize(
    ("symbols", "line"),
    [
        (SymbolCheck((), 0, ()), "check: symbols: the wheel holds no shared library (*.so), nothing to resolve"),
        (
            SymbolCheck(("ext/_C.so",), 12, ()),
            "check: symbols: 12 undefined symbol(s) of ext/_C.so resolved against torch 2.13.0's libraries; "
            "none missing",
        ),
        (
            SymbolCheck(("ext/_C.so", "ext/_D.so"), 12, ("a", "b")),
            "check: symbols: 2 of 12 undefined symbol(s) of ext/_C.so, ext/_D.so not provided by torch 2.13.0's "
            "libraries",
        ),
    ],
)
def test_the_symbol_checks_log_line(symbols: SymbolCheck, line: str) -> None:
    assert symbols_line(symbols, "torch 2.13.0's libraries") == line
