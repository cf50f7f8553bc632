"""Chooses the runner for a run (auto: Docker when an engine answers, else local); never runs during a build."""

from __future__ import annotations

import logging
import os

from buildmatrix.builder.runners.base import Runner
from buildmatrix.builder.runners.local import LocalRunner
from buildmatrix.docker import oci
from buildmatrix.errors import EngineUnavailable, UserError
from buildmatrix.model.matrix import Matrix
from buildmatrix.model.vocab import RunnerName

log = logging.getLogger(__name__)


def select_runner(name: RunnerName, matrix: Matrix | None = None) -> tuple[Runner, str]:
    """The runner to use and why it was chosen (auto: Docker when an engine answers `docker info`, else local)."""
    from buildmatrix.builder.runners.docker import DockerRunner, cibuildwheel_command

    if name == RunnerName.LOCAL:
        return LocalRunner(), "local runner (asked for)"
    problem = oci.engine_problem()
    where = os.environ.get("DOCKER_HOST", "the default socket")
    if name == RunnerName.DOCKER:
        if problem:
            raise EngineUnavailable(
                f"--runner docker, but no Docker engine answers `docker info` at {where}: {problem}. "
                "Start one with `nox -s docker-engine` (Debian, as root), or use --runner local"
            )
        cibuildwheel_command()  # raises UserError with the install command
        return DockerRunner(matrix), f"docker runner (asked for; engine {oci.server_version()})"
    if problem:
        return LocalRunner(), f"local runner (auto: no Docker engine answers `docker info` at {where}: {problem})"
    try:
        cibuildwheel_command()
    except UserError as exc:
        return LocalRunner(), f"local runner (auto: an engine answers but {exc})"
    return DockerRunner(matrix), f"docker runner (auto: engine {oci.server_version()} answers `docker info`)"
