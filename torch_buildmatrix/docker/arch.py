"""The machine's architecture, as wheel tags and Docker name it: the Docker runner builds for it natively, never
under emulation."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import parse_wheel_filename

from torch_buildmatrix.errors import UnsupportedArchitecture

# The architectures builder images serve, by their wheel-tag spelling (manylinux_2_28_<arch>): Debian bases made by
# debootstrap and manylinux bases exist for both, and torch publishes Linux wheels for both. Docker calls them by
# Go's names (amd64, arm64).
DOCKER_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64"}
# What platform.machine() says on machines whose kernel spells it otherwise (Windows and BSD: AMD64; macOS: arm64).
MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True)
class Architecture:
    """One CPU architecture: `wheel` as wheel platform tags end (x86_64, aarch64), `docker` as Docker's os/arch
    (linux/amd64)."""

    wheel: str
    docker: str

    @property
    def platform(self) -> str:
        """What `docker build --platform` and `docker import --platform` take."""
        return f"linux/{self.docker}"

    def fits(self, tag: Tag) -> bool:
        """Whether a wheel tag's platform is for this architecture (or for any: py3-none-any)."""
        return tag.platform == "any" or tag.platform.endswith(f"_{self.wheel}")

    def wheel_problem(self, filename: str) -> str:
        """Why a wheel made here is not for this architecture ('' when every tag fits)."""
        tags = parse_wheel_filename(filename)[3]
        wrong = sorted(str(tag) for tag in tags if not self.fits(tag))
        return f"{filename} is tagged {', '.join(wrong)}, not for {self.wheel}" if wrong else ""


def machine_architecture(machine: str | None = None) -> Architecture:
    """This machine's architecture (platform.machine() unless given), spelled as Linux wheel tags spell it; raises
    UnsupportedArchitecture when no builder image serves it."""
    given = machine if machine is not None else platform.machine()
    wheel = MACHINE_ALIASES.get(given.lower(), given.lower())
    if wheel not in DOCKER_ARCHITECTURES:
        served = ", ".join(sorted(DOCKER_ARCHITECTURES))
        raise UnsupportedArchitecture(
            f"this machine is {given or 'of an unknown architecture'}, and the Docker runner builds only for the "
            f"machine's own architecture (no emulation): builder images serve {served}; "
            "use --runner local, or build on one of those"
        )
    return Architecture(wheel, DOCKER_ARCHITECTURES[wheel])
