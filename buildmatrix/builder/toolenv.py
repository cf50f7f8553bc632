"""Environment for compiling in a cell: compiler cache and parallelism, the same for every runner."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from packaging.version import Version

CCACHE_WRAPPERS = Path("/usr/lib/ccache")
# 1980-01-01, the earliest time a zip entry can carry.
DEFAULT_SOURCE_DATE_EPOCH = "315532800"


def reproducible_env() -> dict[str, str]:
    """Wheels are zips stamped with their files' mtimes, which differ between checkouts; a fixed stamp makes the same
    inputs give the same bytes on every machine, so trees built apart merge without conflicts. A set one wins."""
    return {"SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", DEFAULT_SOURCE_DATE_EPOCH)}


def compile_env(workdir: Path, jobs: int | None = None) -> dict[str, str]:
    env = {"MAX_JOBS": str(jobs or os.cpu_count() or 1), **reproducible_env()}
    if CCACHE_WRAPPERS.is_dir() and shutil.which("ccache"):
        # Cells build copies in different directories: hash relative paths so copies share cache entries.
        env["PATH"] = f"{CCACHE_WRAPPERS}{os.pathsep}{os.environ.get('PATH', '')}"
        env["CCACHE_BASEDIR"] = str(workdir)
        env["CCACHE_NOHASHDIR"] = "1"
    return env


def build_tools(torch_version: Version) -> tuple[str, ...]:
    """What a cell's build environment needs besides torch and the driver wheel."""
    # torch < 2.2's cpp_extension imports pkg_resources, which setuptools 80 no longer ships.
    setuptools = "setuptools>=64,<80" if torch_version < Version("2.2") else "setuptools>=64"
    return (setuptools, "wheel", "ninja", "packaging", *numpy_for(torch_version))


def smoke_tools(torch_version: Version) -> tuple[str, ...]:
    """What a cell's clean smoke environment needs besides torch and the two wheels."""
    # expecttest: torch.testing._internal (the OpInfo database of the conformance test) imports it.
    return ("pytest", "packaging", "expecttest", *numpy_for(torch_version))


def numpy_for(torch_version: Version) -> tuple[str, ...]:
    # Releases before 2.4 were built against NumPy 1.x and cannot use NumPy 2.
    return ("numpy<2",) if torch_version < Version("2.4") else ("numpy",)


def find_uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        from buildmatrix.errors import UserError

        raise UserError("uv is not on PATH; install it with `python -m pip install uv`")
    return uv


def uv_cache_dir() -> Path:
    """The uv cache the local runner's uv uses (UV_CACHE_DIR, else uv's default): the Docker runner mounts the same one,
    so a torch release's ~3 GB of wheels is downloaded once for every cell, local or in a container."""
    from buildmatrix.errors import UserError
    from buildmatrix.util.process import run_captured

    answer = run_captured([find_uv(), "cache", "dir"], step="build", timeout=60)
    lines = answer.stdout.strip().splitlines()
    if answer.returncode != 0 or not lines:
        raise UserError(f"`uv cache dir` failed (exit code {answer.returncode}): {answer.stderr.strip()[-300:]}")
    return Path(lines[-1])
