"""Environment for compiling in a cell: compiler cache and parallelism, the same for every runner."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CCACHE_WRAPPERS = Path("/usr/lib/ccache")


def compile_env(workdir: Path, jobs: int | None = None) -> dict[str, str]:
    env = {"MAX_JOBS": str(jobs or os.cpu_count() or 1)}
    if CCACHE_WRAPPERS.is_dir() and shutil.which("ccache"):
        # Cells build copies in different directories: hash relative paths so copies share cache entries.
        env["PATH"] = f"{CCACHE_WRAPPERS}{os.pathsep}{os.environ.get('PATH', '')}"
        env["CCACHE_BASEDIR"] = str(workdir)
        env["CCACHE_NOHASHDIR"] = "1"
    return env


def find_uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        from buildmatrix.errors import UserError

        raise UserError("uv is not on PATH; install it with `python -m pip install uv` (nox sessions do this)")
    return uv
