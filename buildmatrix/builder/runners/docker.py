"""The Docker runner: cibuildwheel builds and repairs each build's wheel inside a locally made builder image; each cell
is tested in a clean environment of its own, in a container of the image that serves its Python."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from packaging.version import Version

from buildmatrix.builder.runners.base import BuildJob, BuildOutput, CellJob, SmokeRun, site_packages, the_one_wheel
from buildmatrix.builder.sdkwheels import SdkBuild, SdkWheels
from buildmatrix.builder.smoke import pytest_args, smoke_threads, stage_tests
from buildmatrix.builder.steps import StepRecorder
from buildmatrix.builder.toolenv import (
    PARALLEL_CONFIG,
    build_requirements,
    parallel_config,
    parallel_env,
    reproducible_env,
    torch_constraints,
    uv_cache_dir,
)
from buildmatrix.builder.wheelcheck import check_installed
from buildmatrix.builder.workspace import Workspace
from buildmatrix.docker import oci
from buildmatrix.docker.images import CELL_HELPER, DATA_DIR, HOST_CA_BUNDLE, ImageBuilder, ImagePlan, plan_image
from buildmatrix.errors import InterpreterNotFound, StepFailed, UserError
from buildmatrix.model.matrix import BuildImage, Matrix, SdkVersion
from buildmatrix.model.pythons import Python
from buildmatrix.util.fingerprint import file_sha256, tree_hash
from buildmatrix.util.process import run_logged
from buildmatrix.vocab import RunnerName

# Where the runner's mounts appear inside the container.
FIND_LINKS, SDK, OUT, CACHE, HELPER = "/find-links", "/sdk", "/out", "/cache", "/buildmatrix"
WHEELS = "/wheels"  # the project's wheels/ (read-only): a cell installs its build's wheels from there
UV_CACHE = "/uv-cache"  # the host's uv cache (the local runner's), shared by every cell
# cibuildwheel's progress lines, mapped to our step names: the last one seen before a failure names the failed step.
CIBW_PHASES = (
    ("Running before_build", "build-env"),
    ("Building wheel", "build"),
    ("Repairing wheel", "repair"),
    ("Testing wheel", "smoke-env"),
)
TORCH_LIBRARIES = ("libtorch*.so", "libc10*.so")


@dataclass(frozen=True)
class CellContainer:
    """What one cell's container gets: mounts, environment and cibuildwheel's options (pure data, built per cell)."""

    create_args: tuple[str, ...]
    cibw_env: dict[str, str]
    secret_env: dict[str, str] = field(default_factory=dict)  # for cibuildwheel's environment, never its arguments


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
    """Where a builder image has the interpreter, as cibuildwheel expects it: /opt/python/cp311-cp311,
    /opt/python/cp313-cp313t."""
    return f"/opt/python/{python.with_gil.tag}-{python.tag}"


def build_container(
    job: BuildJob, image_tag: str, sdk_wheel: Path | None, cache: Path, helper: Path, *, uv_cache: Path
) -> CellContainer:
    """Mounts (find-links and a wheel SDK's wheel read-only, caches and /out writable) and cibuildwheel's CIBW_*
    settings for one build (cibuildwheel builds and repairs; the cells test the wheel, each in its own container).

    uv_cache is the host's uv cache: uv in the container copies out of it (UV_LINK_MODE=copy, since hardlinks cannot
    cross the bind mount), so a release's wheels downloaded by any cell, local or in any image, serve all of them."""
    build, out = job.build, job.workdir / "out"
    find_links = [location.removeprefix("file://") for location in job.find_links]
    mounts = [(Path(p), f"{FIND_LINKS}/{i}", "ro") for i, p in enumerate(find_links)]
    mounts += [(sdk_wheel.parent, SDK, "ro")] if sdk_wheel is not None else []
    mounts += [
        (out, OUT, "rw"),
        (cache, CACHE, "rw"),
        (uv_cache, UV_CACHE, "rw"),
        (helper.parent, HELPER, "ro"),
    ]
    links = [f"{FIND_LINKS}/{i}" for i in range(len(find_links))] + ([SDK] if sdk_wheel is not None else [])
    env = {
        "PIP_FIND_LINKS": " ".join(links),
        "UV_FIND_LINKS": ",".join(links),
        # Installing the plugin wheel must resolve to the cell's torch and SDK wheel, never a newer one from the index.
        "PIP_CONSTRAINT": f"{OUT}/constraints.txt",
        "UV_CONSTRAINT": f"{OUT}/constraints.txt",
        "PIP_CACHE_DIR": f"{CACHE}/pip",
        "UV_CACHE_DIR": UV_CACHE,
        "UV_LINK_MODE": "copy",
        "CCACHE_DIR": f"{CACHE}/ccache",
        "CCACHE_BASEDIR": "/project",
        "CCACHE_NOHASHDIR": "1",
        # the build's share of the cores; build.parallel-extensions: the config file DockerRunner.build writes to /out
        **parallel_env(
            job.compilers, f"{OUT}/{PARALLEL_CONFIG}" if job.matrix.contract.build.parallel_extensions else None
        ),
        **reproducible_env(),
        **job.build_env,  # matrix.yaml's build.env, build.version-env, build.sdk-version-env
    }
    if job.index_urls:
        env["PIP_EXTRA_INDEX_URL"] = env["UV_EXTRA_INDEX_URL"] = " ".join(job.index_urls)
    from buildmatrix.docker.images import passed_env

    env.update(passed_env(os.environ))
    create_args = [f"--volume={host}:{inside}:{mode}" for host, inside, mode in mounts]
    # cibuildwheel's test venv (torch: ~1 GB, ~15k files) lives under /tmp; deleting it from overlayfs takes half a
    # minute.
    create_args.append("--tmpfs=/tmp:exec,size=8g")
    create_args += oci.owner_label()  # cibuildwheel's container, found by the run's sweep if it outlives its client
    env_args, secret_env = oci.env_options(env)  # secrets by name: cibuildwheel's docker reads them from its env
    create_args += env_args
    sdk = job.matrix.sdk
    sdk_package = sdk.distribution.replace("-", "_").replace(".", "_") if sdk is not None and sdk.builds_wheel else ""
    torch_req = f"torch=={build.release.requirement_version}"
    before_build = [
        "python",
        f"{HELPER}/{helper.name}",
        "before-build",
        "--out",
        OUT,
        *(("--sdk-package", sdk_package) if sdk_package else ()),
        # a system SDK's libraries, where its image installs them: their symbols count as provided
        *(a for d in (sdk.library_dirs if sdk is not None else ()) for a in ("--library-dir", d)),
        "--",
        torch_req,
        *((f"{SDK}/{sdk_wheel.name}",) if sdk_wheel is not None else ()),
        *build_requirements(job.matrix),
    ]
    excludes = [*TORCH_LIBRARIES, *(sdk.libraries if sdk is not None else ())]
    repair = [
        "python",
        f"{HELPER}/{helper.name}",
        "repair",
        "{wheel}",
        "{dest_dir}",
        *[a for p in excludes for a in ("--exclude", p)],
    ]
    engine = "docker; create_args: " + " ".join(shlex.quote(a) for a in create_args) + "; disable_host_mount: true"
    cibw = {
        "CIBW_PLATFORM": "linux",
        "CIBW_ARCHS_LINUX": "x86_64",
        "CIBW_BUILD": f"{build.python.tag}-manylinux_x86_64",
        "CIBW_MANYLINUX_X86_64_IMAGE": image_tag,
        "CIBW_CONTAINER_ENGINE": engine,
        # No isolation: the plugin's setup.py imports the cell's torch, installed by before_build.
        "CIBW_BUILD_FRONTEND": "build[uv]; args: --no-isolation",
        "CIBW_BEFORE_BUILD": shlex.join(before_build),
        "CIBW_REPAIR_WHEEL_COMMAND": " ".join(_quote_keep_braces(repair)),
        "CIBW_BUILD_VERBOSITY": "1",
    }
    if build.python.free_threaded:  # cibuildwheel builds free-threaded identifiers only when enabled (3.13t)
        cibw["CIBW_ENABLE"] = "cpython-freethreading"
    return CellContainer(tuple(create_args), cibw, secret_env)


def sdk_cache_dir(cache_dir: Path, image_tag: str) -> Path:
    """SDK wheels are built in each builder image (linked against its libstdc++), so each image has its own cache
    ("driver-wheels": the directory's name from before the SDK was general; kept, so caches stay valid)."""
    return cache_dir / "driver-wheels" / "docker" / re.sub(r"[^A-Za-z0-9_.-]", "-", image_tag)


def container_sdk_build(image_tag: str, cache: Path, helper: Path, uv_cache: Path) -> SdkBuild:
    """Builds the SDK's tree inside image_tag with cell.py (uv build, then auditwheel repair), sharing cell caches."""

    def build(tree: Path, out_dir: Path, env: Mapping[str, str], log_file: Path) -> None:
        from buildmatrix.docker.images import passed_env

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


def _quote_keep_braces(parts: list[str]) -> list[str]:
    # cibuildwheel substitutes {wheel} and {dest_dir} itself (already shell-quoted); leave them bare.
    return [p if re.fullmatch(r"\{\w+\}", p) else shlex.quote(p) for p in parts]


def failed_phase(log_text: str) -> str:
    """Our step name for the last cibuildwheel phase the log reached ('build' when none)."""
    phase, position = "build", -1
    for marker, name in CIBW_PHASES:
        found = log_text.rfind(marker)
        if found > position:
            phase, position = name, found
    return phase


def cibuildwheel_command() -> list[str]:
    try:
        import cibuildwheel  # noqa: F401
    except ImportError:
        raise UserError(
            "the Docker runner runs cibuildwheel; install it with `python3 -m pip install cibuildwheel` "
            "(Python >= 3.11)"
        ) from None
    return [sys.executable, "-m", "cibuildwheel"]


class DockerRunner:
    name = RunnerName.DOCKER
    build_modules: ClassVar[tuple[str, ...]] = (__name__,)

    def __init__(self, matrix: Matrix | None = None, ca_bundle: Path = HOST_CA_BUNDLE) -> None:
        """matrix, when known before planning, lets a cell's identity name its exact builder image."""
        self.matrix = matrix
        self.ca_bundle = ca_bundle
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
            return self._builders.setdefault(cache, ImageBuilder(cache, self.ca_bundle))

    def _image(self, python: Python, sdk: SdkVersion | None, job: BuildJob | CellJob, *, force: bool) -> str:
        """The image serving this Python (and system SDK version), made if missing; raises StepFailed("image")."""
        try:
            plan = self.plan(python, sdk, job.matrix)
        except InterpreterNotFound as exc:
            raise StepFailed("image", str(exc)) from None
        tag = self._builder(job.workspace).ensure(plan, job.log_file, force=force)
        if oci.image_platform(tag) != oci.PLATFORM:
            raise StepFailed(
                "image", f"{tag} is {oci.image_platform(tag) or 'missing'}, not {oci.PLATFORM}; cibuildwheel would pull"
            )
        return tag

    def _sdk_wheel(self, job: BuildJob, image_tag: str, log: Path) -> Path | None:
        """The build's SDK wheel built in image_tag (one built on the host may need a newer libstdc++ than the image
        has); None for a system SDK or none."""
        sdk = job.matrix.sdk
        if sdk is None or not sdk.builds_wheel or job.build.sdk is None:
            return None
        uv_cache = self.uv_cache()
        with self._guard:
            if image_tag not in self._sdk_wheels:
                cache = job.workspace.cache_dir / "docker" / "cache"
                cache.mkdir(parents=True, exist_ok=True)
                build = container_sdk_build(image_tag, cache, CELL_HELPER, uv_cache)
                directory = sdk_cache_dir(job.workspace.cache_dir, image_tag)
                self._sdk_wheels[image_tag] = SdkWheels(
                    sdk, directory, build=build, generated=job.matrix.contract.build.generated
                )
            wheels = self._sdk_wheels[image_tag]
        return wheels.wheel(job.build.sdk, log, force=job.force)

    def build(self, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
        """Image, SDK wheel (a wheel SDK), then cibuildwheel: it builds and repairs the wheel."""
        build, log = job.build, job.log_file
        with steps.step("image"):
            tag = self._image(build.python, build.sdk, job, force=job.force)
        if job.matrix.sdk is not None and job.matrix.sdk.builds_wheel:
            with steps.step("sdk"):
                output.sdk_wheel = self._sdk_wheel(job, tag, log)
        sdk_wheel = output.sdk_wheel

        out, dist = job.workdir / "out", job.workdir / "dist"
        with steps.step("build"):
            out.mkdir(parents=True, exist_ok=True)
            cache = job.workspace.cache_dir / "docker" / "cache"
            cache.mkdir(parents=True, exist_ok=True)
            (out / "constraints.txt").write_text(
                _constraints(job.matrix, build.release.requirement_version, build.release.version, sdk_wheel)
            )
            if job.matrix.contract.build.parallel_extensions:
                (out / PARALLEL_CONFIG).write_text(parallel_config(job.compilers))
            container = build_container(job, tag, sdk_wheel, cache, CELL_HELPER, uv_cache=self.uv_cache())
            env = {**oci.client_env(), **container.secret_env, **container.cibw_env}
            # earlier steps' output (uv's "Building wheel..." for the SDK) is not cibuildwheel's
            start = log.stat().st_size
            try:
                run_logged(
                    "build",
                    [*cibuildwheel_command(), "--output-dir", str(dist), "."],
                    log,
                    cwd=job.plugin_tree,
                    env=env,
                    timeout=sum(job.matrix.timeouts[s] for s in ("build-env", "build")),
                )
            except StepFailed as exc:
                with log.open("rb") as handle:
                    handle.seek(start)
                    phase = failed_phase(handle.read().decode(errors="replace"))
                raise StepFailed(
                    phase,
                    f"cibuildwheel failed while {phase} in {tag}: {exc.message}",
                    exc.log_tail,
                    exc.failure_class,
                    exc.cause,
                ) from None
            output.plugin_wheel = the_one_wheel(dist)
            output.torch_build = json.loads((out / "torch-facts.json").read_text())
            output.torch_build["image"] = tag

    def provided_symbols(self, job: BuildJob) -> set[str]:
        """Listed by cell.py inside the container, where the build's torch and SDK were installed."""
        return set((job.workdir / "out" / "provided-symbols.txt").read_text().split())

    def prepare_smoke(self, job: CellJob, steps: StepRecorder) -> None:
        """The cell's image, then a clean environment of the cell's Python in it (kept in the cell's scratch, so the
        smoke run's container finds it) with the cell's torch and its build's wheels, as a user installs them."""
        cell, log = job.cell, job.log_file
        with steps.step("image"):
            self._tags[cell.id] = self._image(cell.python, cell.sdk, job, force=False)
        with steps.step("smoke-env"):
            out = job.workdir / "out"
            out.mkdir(parents=True, exist_ok=True)
            (out / "constraints.txt").write_text(
                _constraints(job.matrix, cell.torch.requirement_version, cell.torch.version, job.sdk_wheel)
            )
            stage_tests(job.smoke_tests, out / "smoke")
            mounts, env = cell_mounts(job, self.uv_cache())
            oci.run_container(
                self._tags[cell.id],
                smoke_env_command(job),
                "smoke-env",
                log,
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


def cell_mounts(job: CellJob, uv_cache: Path) -> tuple[list[tuple[Path, str, str]], dict[str, str]]:
    """A cell's container: the project's wheels/ and find-links read-only, its scratch /out, the shared uv cache."""
    out = job.workdir / "out"
    find_links = [location.removeprefix("file://") for location in job.find_links]
    mounts = [(Path(p), f"{FIND_LINKS}/{i}", "ro") for i, p in enumerate(find_links)]
    mounts += [
        (job.workspace.wheels_dir.resolve(), WHEELS, "ro"),
        (out, OUT, "rw"),
        (uv_cache, UV_CACHE, "rw"),
        (CELL_HELPER.parent, HELPER, "ro"),
    ]
    links = [f"{FIND_LINKS}/{i}" for i in range(len(find_links))]
    env = {
        "UV_FIND_LINKS": ",".join(links),
        "PIP_FIND_LINKS": " ".join(links),
        "UV_CACHE_DIR": UV_CACHE,
        "UV_LINK_MODE": "copy",
        **({"UV_EXTRA_INDEX_URL": " ".join(job.index_urls)} if job.index_urls else {}),
        **smoke_threads(job.matrix.contract.smoke),
    }
    from buildmatrix.docker.images import passed_env

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
    smoke = Path(OUT) / job.run_name  # the tests are staged once, in /out/smoke (prepare_smoke)
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


def _constraints(matrix: Matrix, torch_requirement: str, torch: Version, sdk_wheel: Path | None) -> str:
    """What every install of a build or cell must keep to: its torch, its SDK wheel, torch's own constraints."""
    sdk = matrix.sdk
    sdk_pin = f"{sdk.distribution}=={_wheel_version(sdk_wheel)}\n" if sdk and sdk_wheel else ""
    return f"torch=={torch_requirement}\n" + sdk_pin + "".join(f"{line}\n" for line in torch_constraints(torch))


def _wheel_version(wheel: Path) -> str:
    from packaging.utils import parse_wheel_filename

    return str(parse_wheel_filename(wheel.name)[1])


def _pytest_tail(log: Path, lines: int = 40) -> str:
    text = log.read_text(errors="replace")
    start = text.rfind("cell.py smoke")
    return "\n".join(text[start if start >= 0 else 0 :].splitlines()[:lines])
