"""Builds the driver library at each API version once per test session (real compiler)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

DRIVER = Path(__file__).resolve().parents[1]
VERSIONS = {"1.4": (1, 4), "2.1": (2, 1)}


def build_library(out: Path, major: int, minor: int) -> Path:
    include = out / "include"
    include.mkdir(parents=True)
    template = (DRIVER / "include" / "emu_driver_version.h.in").read_text()
    (include / "emu_driver_version.h").write_text(template.replace("@MAJOR@", str(major)).replace("@MINOR@", str(minor)))
    lib = out / "libemu_driver.so"
    sources = sorted(str(p) for p in (DRIVER / "src").glob("*.cpp"))
    command = ["g++", "-std=c++17", "-O1", "-fPIC", "-shared", "-fvisibility=hidden", "-pthread",
               f"-I{include}", f"-I{DRIVER / 'include'}", *sources, "-o", str(lib)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, shlex.join(command) + "\n" + done.stderr
    return lib


@pytest.fixture(scope="session", params=sorted(VERSIONS))
def driver_lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[int, int]]:
    version = VERSIONS[request.param]
    return build_library(tmp_path_factory.mktemp(f"driver{request.param}"), *version), version


@pytest.fixture(scope="session")
def driver_v2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("driver2"), 2, 1)
