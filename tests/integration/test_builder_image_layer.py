"""A project's layer on the package's real bookworm builder image, built in a real Docker engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_buildmatrix.docker.images import plan_image
from torch_buildmatrix.model.matrix import BuildImage
from torch_buildmatrix.model.pythons import Python


@pytest.mark.docker
@pytest.mark.integration
def test_a_layer_installs_a_package_built_here_on_the_real_builder_image(tmp_path: Path) -> None:
    """A project's layer on the package's bookworm builder: it builds a .deb with dpkg-deb and installs it with dpkg,
    as the system-SDK example does; the layer image has it, the builder image does not."""
    from torch_buildmatrix.docker import oci
    from torch_buildmatrix.docker.images import HOST_CA_BUNDLE, ImageBuilder

    if not oci.server_version(timeout=10):
        pytest.skip("no Docker engine answers `docker info` (start one: torch-buildmatrix engine)")
    project = tmp_path / "project"
    (project / "pkg" / "DEBIAN").mkdir(parents=True)
    (project / "pkg" / "opt" / "toolkit").mkdir(parents=True)
    (project / "pkg" / "opt" / "toolkit" / "VERSION").write_text("7.1\n")
    (project / "pkg" / "DEBIAN" / "control").write_text(
        "Package: toolkit\nVersion: 7.1\nArchitecture: all\nMaintainer: t <t@example.invalid>\nDescription: t\n"
    )
    (project / "layer.Dockerfile").write_text(
        "ARG BUILDER\nFROM ${BUILDER}\nARG SDK_VERSION\nCOPY pkg /tmp/pkg\n"
        "RUN dpkg-deb --root-owner-group --build /tmp/pkg /tmp/toolkit.deb && dpkg -i /tmp/toolkit.deb \\\n"
        '    && test "$(cat /opt/toolkit/VERSION)" = "$SDK_VERSION"\n'
    )
    image = BuildImage(
        "bookworm",
        "debootstrap:bookworm",
        (Python.parse("3.11"),),
        layer=project / "layer.Dockerfile",
        context=project,
        build_args=(("SDK_VERSION", "7.1"),),
    )
    import os

    plan = plan_image(image, HOST_CA_BUNDLE, os.environ)  # as the runner plans it: the builder image may exist
    log = tmp_path / "image.log"
    tag = ImageBuilder(tmp_path / "cache").ensure(plan, log)
    try:
        assert tag == plan.tag != plan.builder_tag
        import subprocess

        inside = subprocess.run(
            ["docker", "run", "--rm", tag, "dpkg-query", "-W", "-f", "${Version}", "toolkit"],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert inside.returncode == 0 and inside.stdout == "7.1", inside.stderr
        below = subprocess.run(
            ["docker", "run", "--rm", plan.builder_tag, "dpkg-query", "-W", "toolkit"],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert below.returncode != 0  # the builder image itself stays as the package made it
    finally:
        oci.remove_image(tag)
