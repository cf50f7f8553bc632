"""Real environments with a real torch installed, made once per torch version and reused by every later run.

Installing torch 2.4.1 (CUDA build, ~5 GB with its nvidia packages) takes minutes; it is done once into
~/.cache/buildmatrix-test-envs/<key>/ (BUILDMATRIX_TEST_ENVS overrides) with uv and uv's shared cache. A test gets
a hard-linked clone (seconds, no extra space), so what it installs or removes never reaches the cached one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from torch_buildmatrix.model.registry import pip_configured_find_links

READY = ".ready"  # written last, holding the torch version: a half-made environment is rebuilt


def cache_root() -> Path:
    return Path(os.environ.get("BUILDMATRIX_TEST_ENVS") or Path.home() / ".cache" / "buildmatrix-test-envs")


def python_of(env: Path) -> Path:
    return env / "bin" / "python"


def torch_version(python: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('torch'))"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def cached_torch_env(requirement: str) -> Path:
    """The cached environment with `torch==<requirement>` for this interpreter's Python; made on first use."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    env = cache_root() / f"torch-{requirement}-py{python}"
    env.parent.mkdir(parents=True, exist_ok=True)
    with (env.parent / f".{env.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs at once: one makes it, the other waits
        ready = env / READY
        if ready.is_file():
            return env
        if env.exists():
            shutil.rmtree(env)
        base = Path(sys.base_prefix) / "bin" / f"python{python}"
        subprocess.run(["uv", "venv", "-q", "--seed", "--python", str(base), str(env)], check=True, timeout=300)
        links = [arg for location in pip_configured_find_links() for arg in ("--find-links", location)]
        subprocess.run(
            ["uv", "pip", "install", "-q", "--python", str(python_of(env)), *links, f"torch=={requirement}"],
            check=True,
            timeout=3600,
        )
        ready.write_text(torch_version(python_of(env)) + "\n")
        return env


@contextlib.contextmanager
def clone(env: Path) -> Iterator[Path]:
    """A hard-linked copy of a cached venv, removed afterwards: its own directory entries, the cached files' bytes
    shared (pip and uv replace files, never write into them). It lives beside the cache, because hard links cannot
    cross file systems (/tmp is often another one); the interpreter finds its prefix from pyvenv.cfg, so the copy
    works where it is."""
    clones = cache_root() / ".clones"
    clones.mkdir(parents=True, exist_ok=True)
    dest = Path(tempfile.mkdtemp(prefix=f"{env.name}-", dir=clones)) / "env"
    try:
        subprocess.run(["cp", "-al", str(env), str(dest)], check=True, timeout=600)
        (dest / READY).unlink(missing_ok=True)
        yield dest
    finally:
        shutil.rmtree(dest.parent, ignore_errors=True)
