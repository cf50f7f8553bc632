"""torch-buildmatrix as a package other projects install: its sdist and wheel carry what the runners need at run
time."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import torch_buildmatrix

REPO = Path(__file__).parents[2]
# What the installed package must hold beside its modules: the Docker runner's recipes and in-container helper.
PACKAGE_DATA = (
    "torch_buildmatrix/docker/data/debian.Dockerfile",
    "torch_buildmatrix/docker/data/manylinux.Dockerfile",
    "torch_buildmatrix/docker/data/cell.py",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`uv build` of this repository: an sdist, and a wheel built from that sdist (uv's default)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("needs uv")
    out = tmp_path_factory.mktemp("dist")
    source = tmp_path_factory.mktemp("src") / "torch-buildmatrix"
    # A copy of the files git tracks: the checkout's build outputs must not leak into the sdist.
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run([uv, "build", "--quiet", "--out-dir", str(out), str(source)], check=True)
    return out


@pytest.mark.integration
def test_sdist_and_wheel_carry_the_recipes_and_the_helper(built: Path) -> None:
    version = torch_buildmatrix.__version__
    (sdist,) = built.glob("torch_buildmatrix-*.tar.gz")
    (wheel,) = built.glob("torch_buildmatrix-*.whl")
    assert sdist.name == f"torch_buildmatrix-{version}.tar.gz" and wheel.name.startswith(
        f"torch_buildmatrix-{version}-py3-none"
    )
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for name in PACKAGE_DATA:
            assert name in names, name
            assert archive.read(name) == (REPO / name).read_bytes()
        assert f"torch_buildmatrix-{version}.dist-info/entry_points.txt" in names
        assert not [n for n in names if n.startswith(("plugin/", "driver/", "examples/", "tests/"))]
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    assert set(PACKAGE_DATA) <= members


@pytest.mark.integration
def test_the_installed_package_plans_images_from_its_own_recipes(built: Path, tmp_path: Path) -> None:
    """Installed outside this repository, in a project without any Docker file: the recipes come from the package."""
    uv = shutil.which("uv")
    assert uv is not None
    (wheel,) = built.glob("torch_buildmatrix-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheel)], check=True)
    project = tmp_path / "project"
    project.mkdir()
    probe = (
        "import torch_buildmatrix, pathlib\n"
        "from torch_buildmatrix.docker.images import CELL_HELPER, plan_image\n"
        "from torch_buildmatrix.model.matrix import BuildImage\n"
        "from packaging.version import Version\n"
        "image = BuildImage('b', 'debootstrap:bookworm', (Version('3.11'),))\n"
        "plan = plan_image(image, pathlib.Path('/nonexistent'), {})\n"
        "print(plan.dockerfile, plan.dockerfile.is_file(), CELL_HELPER.is_file(), torch_buildmatrix.__version__)\n"
    )
    answer = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], cwd=project, capture_output=True, text=True, check=True
    )
    dockerfile, exists, helper, version = answer.stdout.split()
    assert Path(dockerfile).is_relative_to(venv) and exists == "True" and helper == "True"
    assert version == torch_buildmatrix.__version__
    cli = subprocess.run(
        [str(venv / "bin" / "torch-buildmatrix"), "--help"], cwd=project, capture_output=True, text=True, check=False
    )
    assert cli.returncode == 0 and "build" in cli.stdout
