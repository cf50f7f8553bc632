"""What the Docker runner's containers get, as pure data: each step's mounts, environment and in-container command
(`docker/data/cell.py`), and what a smoke container left for the engine."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from torch_buildmatrix.builder.runners.base import BuildJob, CellJob, SmokeRun
from torch_buildmatrix.builder.smoke import pytest_args, smoke_env
from torch_buildmatrix.builder.toolenv import (
    PARALLEL_CONFIG,
    build_requirements,
    parallel_env,
    reproducible_env,
    torch_constraints,
)
from torch_buildmatrix.docker.images import CELL_HELPER, passed_env
from torch_buildmatrix.errors import InterpreterNotFound, StepFailed
from torch_buildmatrix.model.matrix import BuildImage, Matrix, SdkVersion
from torch_buildmatrix.model.pythons import Python

# Where the runner's mounts appear inside the container.
FIND_LINKS, SDK, OUT, CACHE, HELPER = "/find-links", "/sdk", "/out", "/cache", "/buildmatrix"
PROJECT = "/project"  # the build's patched copy of the source (CCACHE_BASEDIR: the same path in every build)
WHEELS = "/wheels"  # the project's wheels/ (read-only): a cell installs its build's wheels from there
UV_CACHE = "/uv-cache"  # the host's uv cache (the local runner's), shared by every cell
BUILD_ENV = f"{OUT}/build-env"  # the build's environment, kept in its scratch between the build's containers
# A compile's temporary files stay off the overlay filesystem.
BUILD_TMPFS = "/tmp:exec,size=8g"
TORCH_LIBRARIES = ("libtorch*.so", "libc10*.so")
Mount = tuple[Path, str, str]  # (host path, path inside, "ro" | "rw")


@dataclass(frozen=True)
class Container:
    """One step's container: its mounts and environment (secrets are passed by name by oci.run_container)."""

    mounts: tuple[Mount, ...]
    env: dict[str, str]


def image_for(python: Python, sdk: SdkVersion | None, matrix: Matrix) -> BuildImage:
    """The image that provides the cell's system SDK version (sdk.versions[].provided-by), else the first image of
    matrix.yaml that lists the cell's Python (3.13t is not 3.13: a free-threaded interpreter is an image's own
    entry); raises InterpreterNotFound naming them all."""
    provider = sdk.provided_by if sdk is not None else ""
    for image in matrix.images:
        if image.name == provider and python in image.python:
            return image
    for image in matrix.images:
        if python in image.python and not (provider and any(i.name == provider for i in matrix.images)):
            return image
    listed = ", ".join(f"{i.name} ({', '.join(str(v) for v in i.python)})" for i in matrix.images) or "none"
    raise InterpreterNotFound(
        f"no image in {matrix.path.name} serves Python {python} (images: {listed}); "
        f"add it to an image's python list or add an image, e.g. "
        f'`trixie: {{base: "debootstrap:trixie", python: ["3.13"]}}`'
    )


def python_dir(python: Python) -> str:
    """Where a builder image has the interpreter: /opt/python/cp311-cp311, /opt/python/cp313-cp313t (the manylinux
    layout)."""
    return f"/opt/python/{python.with_gil.tag}-{python.tag}"


def _find_links(find_links: tuple[str, ...]) -> tuple[list[Mount], list[str]]:
    """The find-links directories, mounted read-only, and where the container sees them."""
    paths = [location.removeprefix("file://") for location in find_links]
    return [(Path(p), f"{FIND_LINKS}/{i}", "ro") for i, p in enumerate(paths)], [
        f"{FIND_LINKS}/{i}" for i in range(len(paths))
    ]


def build_container(job: BuildJob, sdk_wheel: Path | None, cache: Path, *, uv_cache: Path) -> Container:
    """The mounts and environment of a build's containers (its environment, then its wheel): find-links and a wheel
    SDK's wheel read-only, the patched source at /project, the build's scratch /out, the caches.

    uv_cache is the host's uv cache: uv in the container copies out of it (UV_LINK_MODE=copy, since hardlinks cannot
    cross the bind mount), so a release's wheels downloaded by any cell, local or in any image, serve all of them."""
    mounts, links = _find_links(job.find_links)
    if sdk_wheel is not None:
        mounts.append((sdk_wheel.parent, SDK, "ro"))
        links.append(SDK)
    mounts += [
        (job.plugin_tree, PROJECT, "rw"),
        (job.workdir / "out", OUT, "rw"),
        (cache, CACHE, "rw"),
        (uv_cache, UV_CACHE, "rw"),
        (CELL_HELPER.parent, HELPER, "ro"),
    ]
    env = {
        "PIP_FIND_LINKS": " ".join(links),
        "UV_FIND_LINKS": ",".join(links),
        "PIP_CACHE_DIR": f"{CACHE}/pip",
        "UV_CACHE_DIR": UV_CACHE,
        "UV_LINK_MODE": "copy",
        "CCACHE_DIR": f"{CACHE}/ccache",
        "CCACHE_BASEDIR": PROJECT,
        "CCACHE_NOHASHDIR": "1",
        # the build's share of the cores; build.parallel-extensions: the config file DockerRunner writes to /out
        **parallel_env(
            job.compilers, f"{OUT}/{PARALLEL_CONFIG}" if job.matrix.contract.build.parallel_extensions else None
        ),
        **reproducible_env(),
        **job.build_env,  # matrix.yaml's build.env, build.version-env, build.sdk-version-env
    }
    if job.index_urls:
        env["PIP_EXTRA_INDEX_URL"] = env["UV_EXTRA_INDEX_URL"] = " ".join(job.index_urls)
    env.update(passed_env(os.environ))
    return Container(tuple(mounts), env)


def build_env_command(job: BuildJob, sdk_wheel: Path | None) -> list[str]:
    """cell.py build-env, on the build's interpreter: a venv at /out/build-env with the build's torch, the SDK wheel
    and the build requirements; torch's facts and the symbols torch and the SDK provide, to /out."""
    sdk = job.matrix.sdk
    sdk_package = sdk.distribution.replace("-", "_").replace(".", "_") if sdk is not None and sdk.builds_wheel else ""
    return [
        f"{python_dir(job.build.python)}/bin/python",
        f"{HELPER}/{CELL_HELPER.name}",
        "build-env",
        "--python",
        f"{python_dir(job.build.python)}/bin/python",
        "--env",
        BUILD_ENV,
        "--constraints",
        f"{OUT}/constraints.txt",
        "--out",
        OUT,
        *(("--sdk-package", sdk_package) if sdk_package else ()),
        # a system SDK's libraries, where its image installs them: their symbols count as provided
        *(a for d in (sdk.library_dirs if sdk is not None else ()) for a in ("--library-dir", d)),
        "--",
        f"torch=={job.build.release.requirement_version}",
        *((f"{SDK}/{sdk_wheel.name}",) if sdk_wheel is not None else ()),
        *build_requirements(job.matrix),
    ]


def wheel_command(job: BuildJob) -> list[str]:
    """cell.py wheel, on the build environment's interpreter in /project: the wheel, then auditwheel repair to
    /out/dist, leaving torch's and the SDK's libraries out of it."""
    sdk = job.matrix.sdk
    excludes = [*TORCH_LIBRARIES, *(sdk.libraries if sdk is not None else ())]
    command = [f"{BUILD_ENV}/bin/python", f"{HELPER}/{CELL_HELPER.name}", "wheel", f"{OUT}/dist"]
    return [*command, *(a for pattern in excludes for a in ("--exclude", pattern))]


def cell_mounts(job: CellJob, uv_cache: Path) -> tuple[list[Mount], dict[str, str]]:
    """A cell's container: the project's wheels/ and find-links read-only, its scratch /out, the shared uv cache."""
    mounts, links = _find_links(job.find_links)
    mounts += [
        (job.workspace.wheels_dir.resolve(), WHEELS, "ro"),
        (job.workdir / "out", OUT, "rw"),
        (uv_cache, UV_CACHE, "rw"),
        (CELL_HELPER.parent, HELPER, "ro"),
    ]
    env = {
        "UV_FIND_LINKS": ",".join(links),
        "PIP_FIND_LINKS": " ".join(links),
        "UV_CACHE_DIR": UV_CACHE,
        "UV_LINK_MODE": "copy",
        **({"UV_EXTRA_INDEX_URL": " ".join(job.index_urls)} if job.index_urls else {}),
        **smoke_env(job.matrix.contract.smoke),
    }
    env.update(passed_env(os.environ))
    return mounts, env


def _inside(job: CellJob, wheel: Path) -> str:
    """Where the container sees a wheel of the project's wheels/."""
    return f"{WHEELS}/{wheel.resolve().relative_to(job.workspace.wheels_dir.resolve()).as_posix()}"


def smoke_env_command(job: CellJob) -> list[str]:
    """cell.py smoke-env: the cell's interpreter, its torch, its build's wheels and its smoke requirements."""
    cell = job.cell
    return [
        "python3",
        f"{HELPER}/{CELL_HELPER.name}",
        "smoke-env",
        "--python",
        f"{python_dir(cell.python)}/bin/python",
        "--env",
        f"{OUT}/smoke-env",
        "--constraints",
        f"{OUT}/constraints.txt",
        "--",
        f"torch=={cell.torch.requirement_version}",
        *(_inside(job, w) for w in (job.plugin_wheel, job.sdk_wheel) if w is not None),
        *job.matrix.contract.smoke.requirements_for(cell.torch.version, cell.python),
    ]


def smoke_command(job: CellJob) -> list[str]:
    """cell.py smoke, on the cell's environment's Python: pytest's exit code goes to /out/smoke/exit-code."""
    smoke = Path(OUT) / job.run_name  # the tests are staged once, in /out/smoke (smoke_env)
    tests = Path(OUT) / "smoke" / "smoke-tests"
    pytest = pytest_args(tests, smoke / "junit.xml", smoke / "features.json", job.matrix.contract.smoke, job.tier)
    command = [f"{OUT}/smoke-env/bin/python", f"{HELPER}/{CELL_HELPER.name}", "smoke", "--exit-code"]
    return [*command, str(smoke / "exit-code"), "--", *pytest]


def smoke_result(job: CellJob) -> SmokeRun:
    """What the smoke container left: the reports and pytest's exit code (missing: it never ran)."""
    smoke = job.workdir / "out" / job.run_name
    code = (smoke / "exit-code").read_text().strip() if (smoke / "exit-code").is_file() else "missing"
    failure = None if code == "0" else StepFailed("smoke", f"pytest exit code {code}", _pytest_tail(job.log_file))
    return SmokeRun(smoke / "junit.xml", smoke / "features.json", failure, detail=f"pytest exit code {code}")


def constraints(matrix: Matrix, torch_requirement: str, torch: Version, sdk_wheel: Path | None) -> str:
    """What every install of a build or cell must keep to: its torch, its SDK wheel, torch's own constraints."""
    sdk = matrix.sdk
    sdk_pin = f"{sdk.distribution}=={parse_wheel_filename(sdk_wheel.name)[1]}\n" if sdk and sdk_wheel else ""
    return f"torch=={torch_requirement}\n" + sdk_pin + "".join(f"{line}\n" for line in torch_constraints(torch))


def _pytest_tail(log: Path, lines: int = 40) -> str:
    text = log.read_text(errors="replace")
    start = text.rfind("cell.py smoke")
    return "\n".join(text[start if start >= 0 else 0 :].splitlines()[:lines])
