"""Environment for compiling in a cell: compiler cache and parallelism, the same for every runner."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from torch_buildmatrix.model.matrix import Matrix

CCACHE_WRAPPERS = Path("/usr/lib/ccache")
NINJA = "ninja"
# 1980-01-01, the earliest time a zip entry can carry.
DEFAULT_SOURCE_DATE_EPOCH = "315532800"


def reproducible_env() -> dict[str, str]:
    """Wheels are zips stamped with their files' mtimes, which differ between checkouts; a fixed stamp makes the same
    inputs give the same bytes on every machine, so trees built apart merge without conflicts. A set one wins."""
    return {"SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", DEFAULT_SOURCE_DATE_EPOCH)}


# setuptools reads this file last (DIST_EXTRA_CONFIG), after the project's setup.cfg.
PARALLEL_CONFIG = "build-parallel.cfg"


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity (a container's or `taskset`'s share), else the machine's."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def compiler_share(jobs: int, cores: int | None = None) -> int:
    """The compiler processes one build may run while `jobs` builds and cells run at once on `cores` cores (this
    process's by default): an equal share, at least one, so `jobs` up to the cores never run more compilers than
    cores, and one build alone uses them all."""
    return max(1, (cores if cores is not None else available_cores()) // max(1, jobs))


def parallel_env(compilers: int, extensions_config: str | None = None) -> dict[str, str]:
    """What makes a build system run `compilers` compiler processes: MAX_JOBS (torch's cpp_extension passes it to
    ninja as -j), CMAKE_BUILD_PARALLEL_LEVEL (cmake --build), and, given extensions_config (the path, as the build
    sees it, of a file holding parallel_config's text), setuptools' build_ext building that many extensions at once."""
    env = {"MAX_JOBS": str(compilers), "CMAKE_BUILD_PARALLEL_LEVEL": str(compilers)}
    if extensions_config is not None:
        env["DIST_EXTRA_CONFIG"] = extensions_config
    return env


def parallel_config(compilers: int) -> str:
    """setuptools' build_ext --parallel as a config file: extensions built `compilers` at a time. Only for a build
    without ninja: torch's ninja build writes one build.ninja per build directory, which extensions built at once
    would overwrite under each other."""
    return f"[build_ext]\nparallel = {compilers}\n"


def compile_env(workdir: Path, compilers: int, *, parallel_extensions: bool = False) -> dict[str, str]:
    """The build's environment: `compilers` compiler processes (parallel_env; with parallel_extensions, its config
    file written to workdir), a fixed SOURCE_DATE_EPOCH and source paths, and ccache when this machine has it."""
    config = None
    if parallel_extensions:
        path = workdir / PARALLEL_CONFIG
        path.write_text(parallel_config(compilers))
        config = str(path)
    env = {**parallel_env(compilers, config), **reproducible_env()}
    # The build directory differs between machines (a CI job's workspace, a checkout, a clone): without this map the
    # compiler writes it into debug information and __FILE__ strings, so the same inputs gave different wheel bytes.
    prefix_map = f"-ffile-prefix-map={workdir}=."
    for flags in ("CFLAGS", "CXXFLAGS"):
        env[flags] = f"{os.environ.get(flags, '')} {prefix_map}".strip()
    if CCACHE_WRAPPERS.is_dir() and shutil.which("ccache"):
        # Cells build copies in different directories: hash relative paths so copies share cache entries.
        env["PATH"] = f"{CCACHE_WRAPPERS}{os.pathsep}{os.environ.get('PATH', '')}"
        env["CCACHE_BASEDIR"] = str(workdir)
        env["CCACHE_NOHASHDIR"] = "1"
    return env


def torch_constraints(torch_version: Version) -> tuple[str, ...]:
    """What a torch release cannot work with, as constraints on whatever the project's environments install.

    Facts about torch, not about a project: torch < 2.2's cpp_extension imports pkg_resources, which setuptools 80
    no longer ships; releases before 2.4 were built against NumPy 1.x and cannot use NumPy 2."""
    out = []
    if torch_version < Version("2.2"):
        out.append("setuptools<80")
    if torch_version < Version("2.4"):
        out.append("numpy<2")
    return tuple(out)


def project_build_requires(source: Path) -> tuple[str, ...]:
    """The project's own [build-system].requires (PEP 518), or setuptools' defaults without a pyproject.toml or
    a build-system table; raises UserError naming the file when it cannot be read."""
    import tomllib

    from torch_buildmatrix.errors import UserError

    pyproject = source / "pyproject.toml"
    if not pyproject.is_file():
        return ("setuptools>=40.8.0", "wheel")
    try:
        data = tomllib.loads(pyproject.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{pyproject}: cannot read [build-system].requires: {exc}") from None
    system = data.get("build-system", {})
    requires = system.get("requires", ["setuptools>=40.8.0", "wheel"]) if isinstance(system, dict) else None
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise UserError(f"{pyproject}: [build-system].requires is not a list of requirements")
    return tuple(requires)


def build_requirements(matrix: Matrix) -> tuple[str, ...]:
    """What a cell's build environment installs besides torch and the SDK wheel: matrix.yaml's build.requires and,
    unless build.project-requires is false, the project's [build-system].requires without torch and the SDK (the
    cell provides those: the build runs without isolation, in that environment), and ninja unless build.ninja is
    false."""
    contract = matrix.contract.build
    sdk = matrix.sdk
    provided = {canonicalize_name("torch")}
    if sdk is not None and sdk.builds_wheel:
        provided.add(canonicalize_name(sdk.distribution))
    own = project_build_requires(matrix.plugin.source) if contract.project_requires else ()
    out: list[str] = list(contract.requires)
    for text in own:
        try:
            name = canonicalize_name(Requirement(text).name)
        except InvalidRequirement:
            from torch_buildmatrix.errors import UserError

            raise UserError(f"{matrix.plugin.source / 'pyproject.toml'}: '{text}' is not a requirement") from None
        if name not in provided and text not in out:
            out.append(text)
    # ninja, unless the project opts out (build.ninja: false) or names it itself: torch's cpp_extension then compiles
    # an extension's translation units MAX_JOBS at a time; without it, setuptools compiles them one after another.
    if contract.ninja and NINJA not in {canonicalize_name(Requirement(r).name) for r in out}:
        out.append(NINJA)
    return tuple(out)


def find_uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        from torch_buildmatrix.errors import UserError

        raise UserError("uv is not on PATH; install it with `python -m pip install uv`")
    return uv


def uv_cache_dir() -> Path:
    """The uv cache the local runner's uv uses (UV_CACHE_DIR, else uv's default): the Docker runner mounts the same one,
    so a torch release's ~3 GB of wheels is downloaded once for every cell, local or in a container."""
    from torch_buildmatrix.errors import UserError
    from torch_buildmatrix.util.process import run_captured

    answer = run_captured([find_uv(), "cache", "dir"], step="build", timeout=60)
    lines = answer.stdout.strip().splitlines()
    if answer.returncode != 0 or not lines:
        raise UserError(f"`uv cache dir` failed (exit code {answer.returncode}): {answer.stderr.strip()[-300:]}")
    return Path(lines[-1])
