"""The example projects (examples/) built by torch-buildmatrix as their authors would: each one's cheap torch 2.13 CPU
cell, from a copy of the example, with its own matrix.yaml, through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from torch_buildmatrix.docker import oci

from conftest import REPO, run_cli

EXAMPLES = REPO / "examples"


def copy_example(name: str, dest: Path) -> Path:
    root = dest / name
    shutil.copytree(
        EXAMPLES / name, root, ignore=shutil.ignore_patterns("build", "wheels", "*.egg-info", "__pycache__", "*.so")
    )
    return root


def record(root: Path, cell: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((root / "wheels" / "results" / "cells" / f"{cell}.json").read_text())
    return data


def build_record(root: Path, build: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((root / "wheels" / "results" / "builds" / f"{build}.json").read_text())
    return data


STABLE_FROM_2_10 = 'stable-abi: "2.10"'
PIN = 'install_requires=[f"torch>={torch_minor}" if stable else f"torch=={torch_minor}.*"],'
BUILD_INFO = 'f"TORCH_VERSION = {torch.__version__!r}\\n"'


def stable_from_2_13(tmp_path: Path, *, releases_after: bool = True, pin: str = PIN, info: str = BUILD_INFO) -> Path:
    """segops laid out as most projects are (its source in src/, matrix.yaml beside it), built against the stable ABI
    from 2.13 on: the 2.13 CPU cell's build is then a stable-ABI build against the cheap torch, serving 2.15 too
    (releases_after=False: 2.15 left out). pin, info: setup.py's Requires-Dist line and build-info text."""
    src = copy_example("segment-ops", tmp_path / "project")
    root = src.parent
    src = src.rename(root / "src")
    text = (src / "matrix.yaml").read_text()
    assert STABLE_FROM_2_10 in text and "source: ." in text and "smoke-tests: tests" in text
    text = text.replace(STABLE_FROM_2_10, 'stable-abi: "2.13"').replace("source: .", "source: src")
    text = text.replace("smoke-tests: tests", "smoke-tests: src/tests")
    later = '  - version: "2.15.0"\n    python: ["3.11"]\n'
    assert later in text
    (root / "matrix.yaml").write_text(text if releases_after else text.replace(later, ""))
    (src / "matrix.yaml").unlink()
    setup = (src / "setup.py").read_text()
    assert PIN in setup and BUILD_INFO in setup
    (src / "setup.py").write_text(setup.replace(PIN, pin).replace(BUILD_INFO, info))
    (root / "README.md").write_text("# segops\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")
    return root


def served(root: Path, release: str) -> list[str]:
    """The segops wheels the site's index of a torch release links to (after `compat-table`)."""
    page = root / "wheels" / "site" / f"torch{release}" / "simple" / "segops" / "index.html"
    if not page.is_file():
        return []
    return sorted(part.split("#")[0].rsplit("/", 1)[-1] for part in page.read_text().split('href="')[1:])


def wheel_requirements(wheel: Path) -> list[str]:
    from torch_buildmatrix.builder.wheelcheck import read_metadata

    return read_metadata(wheel).get("Requires-Dist", [])


@pytest.mark.integration
def test_segment_ops_cheap_cell_builds_and_passes_its_own_suite(tmp_path: Path) -> None:
    """The stable-ABI path on the cheap torch: one build against 2.13 CPU that would serve 2.15 too, its pin checked
    against both, its cell installing it with its own torch."""
    root = stable_from_2_13(tmp_path)
    result = run_cli(root, "build", "--torch", "2.13", "--jobs", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    done = record(root, "torch2.13-cpu-cp311")
    assert done["status"] == "passed", done.get("error")
    wheel = done["wheel"]
    assert isinstance(wheel, dict) and wheel["filename"].startswith("segops-0.1.0+torch.2.13-cp311-")
    smoke = done["smoke"]
    assert isinstance(smoke, dict) and smoke["failed"] == 0 and smoke["errors"] == 0 and smoke["passed"] >= 14
    assert done["cell"]["build"] == {  # type: ignore[index]
        "id": "torch2.13-cpu-stable-cp311",
        "label": "torch.2.13",
        "python": "3.11",
        "stable": "true",
        "torch": "2.13.0",
        "variant": "cpu",
    }
    made = build_record(root, "torch2.13-cpu-stable-cp311")
    assert made["status"] == "passed" and made["wheel"] == wheel
    assert wheel_requirements(root / "wheels" / wheel["path"]) == ["torch>=2.13"]  # not torch==2.13.*
    assert not (root / "wheels" / "sdk").exists()  # no SDK: nothing but the extension is published


@pytest.mark.integration
@pytest.mark.parametrize(
    ("pin", "info", "says"),
    [
        (
            'install_requires=[f"torch>={torch_minor},<2.15"],',
            BUILD_INFO,
            "which excludes torch 2.15.0 that this build serves",
        ),
        (PIN, "\"TORCH_VERSION = '2.12.0'\\n\"", "built against torch 2.12.0 (segops/_build_info.py: TORCH_VERSION)"),
    ],
    ids=["pin-excludes-a-served-release", "build-info-names-another-torch"],
)
def test_a_stable_build_that_fails_its_check_serves_nothing(tmp_path: Path, pin: str, info: str, says: str) -> None:
    root = stable_from_2_13(tmp_path, pin=pin, info=info)
    result = run_cli(root, "build", "--torch", "2.13", "--jobs", "1")
    assert result.returncode != 0
    made = build_record(root, "torch2.13-cpu-stable-cp311")
    assert made["status"] == "failed" and made["failed_step"] == "check", made.get("error")
    assert says in str(made["error"])
    done = record(root, "torch2.13-cpu-cp311")  # its cell fails as its build did, with the build's message
    assert done["status"] == "failed" and done["failed_step"] == "check" and says in str(done["error"])
    assert done.get("wheel") is None
    assert not list((root / "wheels").glob("torch*/*.whl"))  # the wheel that failed its check is not published
    table = run_cli(root, "compat-table", "--offline")
    assert table.returncode == 0, table.stdout + table.stderr
    assert served(root, "2.13") == [] and served(root, "2.15") == []


@pytest.mark.integration
def test_a_cell_refuses_a_recorded_stable_wheel_whose_pin_excludes_its_torch(tmp_path: Path) -> None:
    """A stable build made while the matrix ended at 2.13, with a pin that stops there: once 2.15 joins the matrix the
    build is still up to date (its sources did not change), and the 2.15 cell refuses the wheel before installing."""
    root = stable_from_2_13(tmp_path, releases_after=False, pin='install_requires=[f"torch>={torch_minor},<2.15"],')
    first = run_cli(root, "build", "--torch", "2.13", "--jobs", "1")
    assert first.returncode == 0, first.stdout + first.stderr
    made = build_record(root, "torch2.13-cpu-stable-cp311")
    wheel = made["wheel"]
    assert isinstance(wheel, dict) and wheel_requirements(root / "wheels" / wheel["path"]) == ["torch<2.15,>=2.13"]
    matrix = root / "matrix.yaml"
    text = matrix.read_text().replace(
        "      local-find-links: pip-config\n",
        '      local-find-links: pip-config\n  - version: "2.15.0"\n    python: ["3.11"]\n',
    )
    assert '"2.15.0"' in text
    matrix.write_text(text)
    again = run_cli(root, "build", "--torch", "2.15", "--jobs", "1")
    assert again.returncode != 0
    assert build_record(root, "torch2.13-cpu-stable-cp311")["finished"] == made["finished"]  # not rebuilt
    done = record(root, "torch2.15-cuda-cp311")
    assert done["status"] == "failed" and done["failed_step"] == "check"
    assert "which excludes this cell's torch 2.15.0" in str(done["error"])
    steps = done["steps"]
    assert isinstance(steps, list) and [s["name"] for s in steps] == ["source", "check"]  # 2.15 never downloaded
    assert done.get("wheel") is None
    assert record(root, "torch2.13-cpu-cp311")["status"] == "passed"  # the sibling it serves keeps its result
    table = run_cli(root, "compat-table", "--offline")
    assert table.returncode == 0, table.stdout + table.stderr
    assert served(root, "2.13") == [wheel["filename"]] and served(root, "2.15") == []


@pytest.mark.integration
@pytest.mark.download
def test_segment_ops_one_stable_build_serves_2_10_and_2_13(tmp_path: Path) -> None:
    """The example as committed: one build against torch 2.10 (a CUDA build, ~3 GB from the registry) tested on 2.10
    and on the cheap 2.13 CPU cell, each with its own torch; the index lists the one wheel under both releases."""
    root = copy_example("segment-ops", tmp_path)
    result = run_cli(root, "build", "--torch", "2.10", "--torch", "2.13", "--jobs", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    builds = sorted(p.stem for p in (root / "wheels" / "results" / "builds").glob("*.json"))
    assert builds == ["torch2.10-cuda-stable-cp311"]
    made = build_record(root, "torch2.10-cuda-stable-cp311")
    wheel = made["wheel"]
    assert made["status"] == "passed" and isinstance(wheel, dict)
    assert wheel["path"].startswith("torch2.10/segops-0.1.0+torch.2.10-cp311-")
    assert wheel_requirements(root / "wheels" / wheel["path"]) == ["torch>=2.10"]
    for cell in ("torch2.10-cuda-cp311", "torch2.13-cpu-cp311"):
        done = record(root, cell)
        assert done["status"] == "passed", done.get("error")
        assert done["wheel"] == wheel  # the one wheel, tested on each release
        smoke = done["smoke"]
        assert isinstance(smoke, dict) and smoke["failed"] == 0 and smoke["passed"] >= 14
    readme = root / "README.md"
    readme.write_text(readme.read_text() + "\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")
    table = run_cli(root, "compat-table", "--offline")
    assert table.returncode == 0, table.stdout + table.stderr
    assert served(root, "2.10") == served(root, "2.13") == [wheel["filename"]]
    compat = json.loads((root / "docs" / "compatibility.json").read_text())
    tested = {c["id"]: c["wheel"]["filename"] for c in compat["cells"] if c["status"] == "passed"}
    assert tested == {"torch2.10-cuda-cp311": wheel["filename"], "torch2.13-cpu-cp311": wheel["filename"]}


@pytest.mark.integration
@pytest.mark.docker
def test_tacc_backend_cheap_cell_builds_in_its_toolkit_image(tmp_path: Path) -> None:
    if not oci.server_version(timeout=10):
        pytest.skip("no Docker engine answers `docker info` (start one: torch-buildmatrix engine)")
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


@pytest.mark.integration
def test_cmake_ops_cheap_cell_builds_with_cmake_and_passes_its_suite(tmp_path: Path) -> None:
    """An extension whose setup.py drives CMake (torch's CMake config, a plain TORCH_LIBRARY library loaded with
    torch.ops.load_library): cmake comes from its [build-system].requires."""
    root = copy_example("cmake-ops", tmp_path)
    result = run_cli(root, "build", "--torch", "2.13", "--jobs", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    done = record(root, "torch2.13-cpu-cp311")
    assert done["status"] == "passed", done.get("error")
    wheel = done["wheel"]
    assert isinstance(wheel, dict) and wheel["filename"].startswith("cmake_ops-0.1.0+torch.2.13-cp311-cp311-")
    assert wheel_requirements(root / "wheels" / wheel["path"]) == ["torch==2.13.*"]
    smoke = done["smoke"]
    assert isinstance(smoke, dict) and smoke["passed"] == 4 and smoke["failed"] == 0 and smoke["errors"] == 0
    log = (root / "wheels" / "logs" / "builds" / "torch2.13-cpu-cp311.log").read_text()
    assert "-- Found Torch: " in log and "Linking CXX shared library libcmake_ops.so" in log  # CMake built it


@pytest.mark.integration
def test_property_tests_cell_installs_its_suites_own_requirements(tmp_path: Path) -> None:
    """A suite that needs hypothesis and NumPy passes with them in smoke.requires, and fails without hypothesis: the
    clean environment holds only torch, the wheel and what smoke.requires names."""
    root = copy_example("property-tests", tmp_path)
    result = run_cli(root, "build", "--torch", "2.13", "--jobs", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    done = record(root, "torch2.13-cpu-cp311")
    assert done["status"] == "passed", done.get("error")
    smoke = done["smoke"]
    assert isinstance(smoke, dict) and smoke["passed"] == 3 and smoke["failed"] == 0 and smoke["errors"] == 0
    log = (root / "wheels" / "logs" / "torch2.13-cpu-cp311.log").read_text()
    assert " + hypothesis==" in log and " + numpy==" in log

    matrix = root / "matrix.yaml"
    text = matrix.read_text()
    assert 'requires: ["pytest", "hypothesis>=6", "numpy"]' in text
    matrix.write_text(text.replace('requires: ["pytest", "hypothesis>=6", "numpy"]', 'requires: ["pytest", "numpy"]'))
    again = run_cli(root, "build", "--torch", "2.13", "--jobs", "1")
    assert again.returncode == 1, again.stdout + again.stderr
    failed = record(root, "torch2.13-cpu-cp311")
    assert failed["status"] == "failed" and failed["failed_step"] == "smoke", failed.get("error")
    log = (root / "wheels" / "logs" / "torch2.13-cpu-cp311.log").read_text()
    assert "No module named 'hypothesis'" in log and " + hypothesis==" not in log
