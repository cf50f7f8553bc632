"""The Docker runner: each step of a build and of a cell (sequence.py, as for the local runner) runs in a container of
the locally made builder image that serves its Python, through `docker/oci.py`, for this machine's architecture."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from torch_buildmatrix.builder.runners.base import (
    BuildJob,
    BuildOutput,
    CellJob,
    SmokeRun,
    site_packages,
    the_one_wheel,
)
from torch_buildmatrix.builder.runners.containers import (
    BUILD_TMPFS,
    CACHE,
    HELPER,
    PROJECT,
    UV_CACHE,
    Container,
    build_container,
    build_env_command,
    cell_mounts,
    constraints,
    image_for,
    smoke_command,
    smoke_env_command,
    smoke_result,
    wheel_command,
)
from torch_buildmatrix.builder.runners.sequence import prepare_cell, run_build
from torch_buildmatrix.builder.sdkwheels import SdkBuild, SdkWheels
from torch_buildmatrix.builder.smoke import stage_tests
from torch_buildmatrix.builder.steps import StepRecorder
from torch_buildmatrix.builder.toolenv import PARALLEL_CONFIG, parallel_config, uv_cache_dir
from torch_buildmatrix.builder.wheelcheck import check_installed
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.docker import oci
from torch_buildmatrix.docker.arch import Architecture, machine_architecture
from torch_buildmatrix.docker.images import (
    CELL_HELPER,
    DATA_DIR,
    HOST_CA_BUNDLE,
    ImageBuilder,
    ImagePlan,
    passed_env,
    plan_image,
)
from torch_buildmatrix.errors import InterpreterNotFound, StepFailed
from torch_buildmatrix.model.matrix import Matrix, SdkVersion
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.util.fingerprint import file_sha256, tree_hash
from torch_buildmatrix.vocab import RunnerName, Step


class DockerRunner:
    name = RunnerName.DOCKER
    build_modules: ClassVar[tuple[str, ...]] = (__name__, "torch_buildmatrix.builder.runners.containers")
    python_step: ClassVar[Step] = Step.IMAGE

    def __init__(
        self,
        matrix: Matrix | None = None,
        ca_bundle: Path = HOST_CA_BUNDLE,
        architecture: Architecture | None = None,
    ) -> None:
        """matrix, when known before planning, lets a cell's identity name its exact builder image; architecture:
        what images are made for and run (default: this machine's; raises UnsupportedArchitecture where none is)."""
        self.matrix = matrix
        self.ca_bundle = ca_bundle
        self.architecture = architecture or machine_architecture()
        self._builders: dict[Path, ImageBuilder] = {}
        self._sdk_wheels: dict[str, SdkWheels] = {}
        self._guard = threading.Lock()
        self._plans: dict[tuple[str, str], ImagePlan] = {}
        self._uv_cache: Path | None = None
        self._tags: dict[str, str] = {}  # the image each cell's environment was made in, by cell id

    def uv_cache(self) -> Path:
        """The host's uv cache (asked of uv once per run), created if missing so Docker does not make it root-only."""
        with self._guard:
            if self._uv_cache is None:
                self._uv_cache = uv_cache_dir()
                self._uv_cache.mkdir(parents=True, exist_ok=True)
            return self._uv_cache

    def sweep(self, owner: str) -> int:
        """Remove the containers runs over `owner` left behind (a killed client leaves its container running)."""
        return oci.remove_owned_containers(owner) if oci.server_version(timeout=10) else 0

    def plan(self, python: Python, sdk: SdkVersion | None, matrix: Matrix) -> ImagePlan:
        image = image_for(python, sdk, matrix)
        key = (str(matrix.path), image.name)
        with self._guard:
            if key not in self._plans:
                self._plans[key] = plan_image(image, self.ca_bundle, os.environ)
            return self._plans[key]

    def python_identity(self, python: Python, sdk: SdkVersion | None = None) -> str:
        """Part of a build's or cell's inputs: the Python and, by content, the image and in-container helper."""
        if self.matrix is None:
            # Without the matrix (the CLI does not hand it over yet) the recipes' content stands for the image.
            return f"cpython-{python} in buildmatrix images {tree_hash(DATA_DIR)[:12]}"
        helper_hash = file_sha256(CELL_HELPER)[:12] if CELL_HELPER.is_file() else "missing"
        return f"cpython-{python} in {self.plan(python, sdk, self.matrix).tag} (cell.py {helper_hash})"

    def _builder(self, workspace: Workspace) -> ImageBuilder:
        cache = workspace.cache_dir / "docker"
        with self._guard:
            return self._builders.setdefault(cache, ImageBuilder(cache, self.ca_bundle, self.architecture))

    def provide_python(self, python: Python, sdk: SdkVersion | None, job: BuildJob | CellJob) -> str:
        """The image serving this Python (and system SDK version), made if missing (rebuilt once with --force, for a
        build); raises StepFailed("image")."""
        try:
            plan = self.plan(python, sdk, job.matrix)
        except InterpreterNotFound as exc:
            raise StepFailed("image", str(exc)) from None
        force = isinstance(job, BuildJob) and job.force
        tag = self._builder(job.workspace).ensure(plan, job.log_file, force=force)
        found = oci.image_platform(tag)
        if found != self.architecture.platform:  # docker would run it under emulation, or pull another
            raise StepFailed(
                "image",
                f"{tag} is {found or 'missing'}, not {self.architecture.platform} (this machine's); "
                "the Docker runner never emulates another architecture",
            )
        if isinstance(job, CellJob):
            self._tags[job.cell.id] = tag
        return tag

    def sdk_wheel(self, job: BuildJob, where: str) -> Path | None:
        """The build's SDK wheel built in its image, `where` (one built on the host may need a newer libstdc++ than
        the image has); None for a system SDK or none."""
        sdk = job.matrix.sdk
        if sdk is None or not sdk.builds_wheel or job.build.sdk is None:
            return None
        uv_cache = self.uv_cache()
        with self._guard:
            if where not in self._sdk_wheels:
                cache = job.workspace.cache_dir / "docker" / "cache"
                cache.mkdir(parents=True, exist_ok=True)
                build = container_sdk_build(where, cache, CELL_HELPER, uv_cache)
                directory = sdk_cache_dir(job.workspace.cache_dir, where)
                self._sdk_wheels[where] = SdkWheels(
                    sdk, directory, build=build, generated=job.matrix.contract.build.generated
                )
            wheels = self._sdk_wheels[where]
        return wheels.wheel(job.build.sdk, job.log_file, force=job.force)

    def build(self, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
        """The build's steps as every runner runs them (sequence.run_build), each in a container of its image."""
        run_build(self, job, steps, output)

    def _build_container(self, job: BuildJob, sdk_wheel: Path | None) -> Container:
        cache = job.workspace.cache_dir / "docker" / "cache"
        cache.mkdir(parents=True, exist_ok=True)
        return build_container(job, sdk_wheel, cache, uv_cache=self.uv_cache())

    def build_env(self, job: BuildJob, where: str, sdk_wheel: Path | None) -> dict[str, Any]:
        """cell.py build-env in the build's image: the environment in the build's scratch (/out/build-env), torch's
        facts and the symbols its libraries (and the SDK's) define."""
        out = job.workdir / "out"
        out.mkdir(parents=True, exist_ok=True)
        build = job.build
        (out / "constraints.txt").write_text(
            constraints(job.matrix, build.release.requirement_version, build.release.version, sdk_wheel)
        )
        if job.matrix.contract.build.parallel_extensions:
            (out / PARALLEL_CONFIG).write_text(parallel_config(job.compilers))
        container = self._build_container(job, sdk_wheel)
        oci.run_container(
            where,
            build_env_command(job, sdk_wheel),
            "build-env",
            job.log_file,
            mounts=container.mounts,
            env=container.env,
            timeout=job.matrix.timeouts["build-env"],
            tmpfs=BUILD_TMPFS,
        )
        facts: dict[str, Any] = json.loads((out / "torch-facts.json").read_text())
        facts["image"] = where
        return facts

    def build_wheel(self, job: BuildJob, where: str) -> Path:
        """cell.py wheel in the build's image, in /project: the wheel built without isolation in the build
        environment, then auditwheel repair (torch's and the SDK's libraries left out); it must be for this machine."""
        container = self._build_container(job, None)  # the SDK wheel is in the build environment by now
        oci.run_container(
            where,
            wheel_command(job),
            "build",
            job.log_file,
            mounts=container.mounts,
            env=container.env,
            timeout=job.matrix.timeouts["build"],
            workdir=PROJECT,
            tmpfs=BUILD_TMPFS,
        )
        wheel = the_one_wheel(job.workdir / "out" / "dist")
        problem = self.architecture.wheel_problem(wheel.name)
        if problem:
            raise StepFailed("build", problem)
        return wheel

    def provided_symbols(self, job: BuildJob) -> set[str]:
        """Listed by cell.py inside the container, where the build's torch and SDK were installed."""
        return set((job.workdir / "out" / "provided-symbols.txt").read_text().split())

    def prepare_smoke(self, job: CellJob, steps: StepRecorder) -> None:
        """The cell's steps before its smoke run as every runner runs them (sequence.prepare_cell)."""
        prepare_cell(self, job, steps)

    def smoke_env(self, job: CellJob, where: str) -> None:
        """A clean environment of the cell's Python in its image (kept in the cell's scratch, so the smoke run's
        container finds it) with the cell's torch and its build's wheels, as a user installs them."""
        cell = job.cell
        out = job.workdir / "out"
        out.mkdir(parents=True, exist_ok=True)
        (out / "constraints.txt").write_text(
            constraints(job.matrix, cell.torch.requirement_version, cell.torch.version, job.sdk_wheel)
        )
        stage_tests(job.smoke_tests, out / "smoke")
        mounts, env = cell_mounts(job, self.uv_cache())
        oci.run_container(
            where,
            smoke_env_command(job),
            "smoke-env",
            job.log_file,
            mounts=mounts,
            env=env,
            timeout=job.matrix.timeouts["smoke-env"],
        )
        check_installed(
            site_packages(out / "smoke-env", "smoke-env"),
            cell.torch.requirement_version,
            job.matrix.plugin.distribution,
            job.plugin_wheel,
        )

    def run_smoke(self, job: CellJob) -> SmokeRun:
        """pytest in the cell's environment, in its image; the exit code is read back, never raised."""
        mounts, env = cell_mounts(job, self.uv_cache())
        (job.workdir / "out" / job.run_name).mkdir(parents=True, exist_ok=True)  # the deep tier's reports
        try:
            oci.run_container(
                self._tags[job.cell.id],
                smoke_command(job),
                "smoke",
                job.log_file,
                mounts=mounts,
                env=env,
                timeout=job.matrix.timeouts["smoke"],
            )
        except StepFailed as exc:  # the container itself failed (a timeout, a signal): not pytest's verdict
            smoke = job.workdir / "out" / job.run_name
            return SmokeRun(smoke / "junit.xml", smoke / "features.json", exc)
        return smoke_result(job)


def sdk_cache_dir(cache_dir: Path, image_tag: str) -> Path:
    """SDK wheels are built in each builder image (linked against its libstdc++), so each image has its own cache
    ("driver-wheels": the directory's name from before the SDK was general; kept, so caches stay valid)."""
    return cache_dir / "driver-wheels" / "docker" / re.sub(r"[^A-Za-z0-9_.-]", "-", image_tag)


def container_sdk_build(image_tag: str, cache: Path, helper: Path, uv_cache: Path) -> SdkBuild:
    """Builds the SDK's tree inside image_tag with cell.py (uv build, then auditwheel repair), sharing cell caches."""

    def build(tree: Path, out_dir: Path, env: Mapping[str, str], log_file: Path) -> None:
        mounts = [
            (tree, "/src", "rw"),
            (out_dir, "/dist", "rw"),
            (cache, CACHE, "rw"),
            (uv_cache, UV_CACHE, "rw"),
            (helper.parent, HELPER, "ro"),
        ]
        inside = {
            **passed_env(os.environ),
            "UV_CACHE_DIR": UV_CACHE,
            "PIP_CACHE_DIR": f"{CACHE}/pip",
            "UV_LINK_MODE": "copy",
            **env,
        }
        oci.run_container(
            image_tag,
            ["python3", f"{HELPER}/{helper.name}", "sdk-wheel", "/src", "/dist"],
            "sdk",
            log_file,
            mounts=mounts,
            env=inside,
            timeout=1800,
        )

    return build
