"""Runners build and smoke-test one cell each; they share the Cell model and return the same results."""

from __future__ import annotations

import logging
import shutil

from buildmatrix.runners.base import Runner
from buildmatrix.runners.local import LocalRunner

log = logging.getLogger(__name__)

RUNNER_NAMES = ("auto", "local", "docker")


def select_runner(name: str) -> tuple[Runner, str]:
    """The runner to use and why it was chosen (auto: Docker when an engine answers, else local)."""
    if name == "local":
        return LocalRunner(), "local runner (asked for)"
    if name == "docker":
        from buildmatrix.errors import EngineUnavailable

        raise EngineUnavailable("the Docker runner is not available yet in this version; use --runner local")
    if shutil.which("docker") is None:
        return LocalRunner(), "local runner (auto: no docker client on PATH)"
    return LocalRunner(), "local runner (auto: the Docker runner is not available yet)"
