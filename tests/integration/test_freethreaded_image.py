"""Free-threaded interpreters in the builder image: an "X.Yt" entry of its Pythons is built from the suite's own
python3.X source package with --disable-gil and served as /opt/python/cpXY-cpXYt, cibuildwheel's name for it.

matrix.yaml cannot list "3.13t" yet (the model's Pythons are X.Y versions), so these tests hand debian.Dockerfile
its PYTHONS directly, through the same image builder the Docker runner uses.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from torch_buildmatrix.docker import oci
from torch_buildmatrix.docker.images import BUILDER_REPOSITORY, HOST_CA_BUNDLE, ImageBuilder, ImagePlan, plan_image
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.matrix import BuildImage
from torch_buildmatrix.model.pythons import Python

needs_engine = pytest.mark.skipif(
    not oci.server_version(), reason="no Docker engine answers `docker info` (start one: nox -s docker-engine)"
)
pytestmark = [pytest.mark.docker, pytest.mark.integration, needs_engine]


def free_threaded_plan(suite: str, pythons: str, name: str) -> ImagePlan:
    image = BuildImage(name, f"debootstrap:{suite}", tuple(Python.parse(p) for p in pythons.split()))
    plan = plan_image(image, HOST_CA_BUNDLE, os.environ)  # the package's own debian.Dockerfile
    tag = plan.tag.replace(f"{BUILDER_REPOSITORY}:{name}-", f"{BUILDER_REPOSITORY}:{name}-ft-")
    return dataclasses.replace(plan, build_args={**plan.build_args, "PYTHONS": pythons}, tag=tag)


@pytest.mark.slow
def test_a_free_threaded_python_without_a_source_package_fails_the_image(tmp_path: Path) -> None:
    plan = free_threaded_plan("bookworm", "3.99t", "bookworm-nosource")
    log = tmp_path / "image.log"
    with pytest.raises(StepFailed) as info:
        ImageBuilder(tmp_path / "cache").ensure(plan, log)
    assert info.value.step == "image"
    expected = "error: Debian bookworm has no source package python3.99, so this image cannot build free-threaded"
    assert expected in info.value.message, info.value.message
    assert not oci.image_exists(plan.tag)


@pytest.mark.slow
def test_trixie_serves_a_free_threaded_313_beside_its_own(tmp_path: Path) -> None:
    """About 20 minutes on two cores: CPython 3.13 is compiled from Debian's python3.13 source package."""
    plan = free_threaded_plan("trixie", "3.13 3.13t", "trixie")
    tag = ImageBuilder(tmp_path / "cache").ensure(plan, tmp_path / "image.log")
    check = (
        "import sys, sysconfig, pip; "
        "print(sys.prefix, sysconfig.get_config_var('Py_GIL_DISABLED'), sys._is_gil_enabled(), sys.abiflags)"
    )
    out = oci.run_in_image(tag, ["/opt/python/cp313-cp313t/bin/python", "-c", check], "image", tmp_path / "run.log")
    assert out.split() == ["/opt/python/cp313-cp313t", "1", "False", "t"], out
    out = oci.run_in_image(tag, ["/opt/python/cp313-cp313/bin/python", "-c", check], "image", tmp_path / "run.log")
    assert out.split() == ["/opt/python/cp313-cp313", "0", "True"], out  # Debian's own python3.13, abiflags ""
