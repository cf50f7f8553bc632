"""Gets a Docker engine answering on a Debian machine: installs docker.io and debootstrap, starts dockerd."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from torch_buildmatrix.docker.oci import server_version
from torch_buildmatrix.errors import EngineUnavailable
from torch_buildmatrix.util.process import run_captured, spawn_detached

# What the Docker runner needs on the host: the engine itself, and debootstrap for registry-free base images.
APT_PACKAGES = {"dockerd": "docker.io", "debootstrap": "debootstrap"}
START_TIMEOUT = 90.0


@dataclass
class EngineReport:
    """What ensure_engine did, step by step, for the CLI to print."""

    actions: list[str] = field(default_factory=list)
    server_version: str = ""


def engine_answers() -> bool:
    """True when `docker info` reaches a running engine (honours DOCKER_HOST)."""
    return server_version() != ""


def ensure_engine(log_file: Path, install: bool = True) -> EngineReport:
    """Leave a running engine alone; otherwise install what is missing (apt) and start dockerd, logging to log_file.

    Raises EngineUnavailable saying why and what to do when that is impossible here.
    """
    report = EngineReport()
    running = server_version()
    if running:
        report.server_version = running
        report.actions.append(f"a Docker engine already answers `docker info` (server {running}); nothing to do")
        for tool, package in APT_PACKAGES.items():
            if tool != "dockerd" and shutil.which(tool) is None:
                _install(report, [package], install)
        return report
    if os.environ.get("DOCKER_HOST"):
        raise EngineUnavailable(
            f"DOCKER_HOST={os.environ['DOCKER_HOST']} does not answer `docker info`; "
            "start that engine, or unset DOCKER_HOST to use a local dockerd"
        )
    missing = [package for tool, package in APT_PACKAGES.items() if shutil.which(tool) is None]
    if missing:
        _install(report, missing, install)
    if shutil.which("docker") is None:
        _install(report, ["docker.io"], install)
    _start_dockerd(report, log_file)
    return report


def _install(report: EngineReport, packages: list[str], install: bool) -> None:
    wanted = " ".join(packages)
    if not install:
        raise EngineUnavailable(f"{wanted} not installed; install with `apt-get install -y {wanted}` (as root)")
    if shutil.which("apt-get") is None:
        raise EngineUnavailable(
            f"{wanted} missing and this machine has no apt-get; install Docker Engine for your OS "
            "(https://docs.docker.com/engine/install/) and start it, then rerun"
        )
    if os.geteuid() != 0:
        raise EngineUnavailable(
            f"{wanted} missing and installing needs root; run `sudo apt-get install -y {wanted}` "
            "then `sudo python3 -m torch_buildmatrix engine`"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    started = time.monotonic()
    update = run_captured(["apt-get", "update", "-qq"], step="engine", env=env, timeout=900)
    if update.returncode != 0:
        raise EngineUnavailable(f"`apt-get update` failed:\n{_tail(update.stdout + update.stderr)}")
    proc = run_captured(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], step="engine", env=env, timeout=1800
    )
    if proc.returncode != 0:
        raise EngineUnavailable(f"`apt-get install -y {wanted}` failed:\n{_tail(proc.stdout + proc.stderr)}")
    report.actions.append(f"installed {wanted} with `apt-get install -y {wanted}` ({time.monotonic() - started:.0f} s)")


def _start_dockerd(report: EngineReport, log_file: Path) -> None:
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise EngineUnavailable("dockerd is not on PATH after installing docker.io; check `dpkg -L docker.io`")
    if os.geteuid() != 0:
        raise EngineUnavailable(
            "no Docker engine answers and starting dockerd needs root; run `sudo python3 -m torch_buildmatrix engine`, "
            "or start Docker yourself (e.g. `sudo systemctl start docker`) and add yourself to the docker group"
        )
    # A new session: the engine outlives this command (and the nox session that ran it).
    proc = spawn_detached([dockerd], log_file)
    report.actions.append(f"started `{dockerd}` in the background as root (pid {proc.pid}), logging to {log_file}")
    deadline = time.monotonic() + START_TIMEOUT
    started = time.monotonic()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineUnavailable(
                f"dockerd exited with code {proc.returncode} while starting; its log ({log_file}):\n"
                f"{_tail(log_file.read_text(errors='replace'))}"
            )
        version = server_version(timeout=5)
        if version:
            report.server_version = version
            report.actions.append(f"`docker info` answers after {time.monotonic() - started:.1f} s (server {version})")
            return
        time.sleep(0.5)
    raise EngineUnavailable(
        f"dockerd (pid {proc.pid}) did not answer `docker info` within {START_TIMEOUT:.0f} s; "
        f"see {log_file}:\n{_tail(log_file.read_text(errors='replace'))}"
    )


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
