"""The machine's architecture as the Docker runner needs it: every spelling of a served one, a clear refusal of the
rest, and the check that a wheel made here is for it."""

from __future__ import annotations

import pytest

from torch_buildmatrix.docker.arch import Architecture, machine_architecture
from torch_buildmatrix.errors import UnsupportedArchitecture


@pytest.mark.parametrize(
    ("machine", "wheel", "platform"),
    [
        ("x86_64", "x86_64", "linux/amd64"),
        ("AMD64", "x86_64", "linux/amd64"),  # Windows' and BSD's spelling
        ("aarch64", "aarch64", "linux/arm64"),
        ("arm64", "aarch64", "linux/arm64"),  # macOS: Docker's Linux VM is aarch64
    ],
)
def test_a_served_machine_is_named_as_wheels_and_docker_name_it(machine: str, wheel: str, platform: str) -> None:
    found = machine_architecture(machine)
    assert (found.wheel, found.platform) == (wheel, platform)


@pytest.mark.parametrize("machine", ["riscv64", "ppc64le", "i686", ""])
def test_an_architecture_no_image_serves_is_refused_with_exit_13(machine: str) -> None:
    with pytest.raises(UnsupportedArchitecture) as refused:
        machine_architecture(machine)
    assert refused.value.exit_code == 13
    assert f"this machine is {machine or 'of an unknown architecture'}" in str(refused.value)
    assert "no emulation" in str(refused.value) and "--runner local" in str(refused.value)


@pytest.mark.parametrize(
    ("filename", "problem"),
    [
        ("tiny_plugin-0.1.0-cp311-cp311-manylinux_2_28_x86_64.whl", ""),
        ("tiny_plugin-0.1.0-cp311-cp311-manylinux1_x86_64.manylinux_2_5_x86_64.whl", ""),
        ("tiny_driver-2.1.0-py3-none-any.whl", ""),
        (
            "tiny_plugin-0.1.0-cp311-cp311-manylinux_2_28_aarch64.whl",
            "is tagged cp311-cp311-manylinux_2_28_aarch64, not for x86_64",
        ),
    ],
)
def test_a_wheel_made_here_must_be_for_this_machine(filename: str, problem: str) -> None:
    found = Architecture("x86_64", "amd64").wheel_problem(filename)
    assert found.endswith(problem) and bool(found) == bool(problem)
