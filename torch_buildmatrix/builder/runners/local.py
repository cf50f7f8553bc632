"""The local runner: isolated uv environments on this machine, one for a build and a clean one for each cell."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from packaging.version import Version

from torch_buildmatrix.builder.buildenv import build_environment, log_notes
from torch_buildmatrix.builder.interpreters import Interpreter, find_interpreter, pyenv_root
from torch_buildmatrix.builder.runners.base import (
    BuildJob,
    BuildOutput,
    CellJob,
    SmokeRun,
    site_packages,
    the_one_wheel,
)
from torch_buildmatrix.builder.runners.sequence import prepare_cell, run_build
from torch_buildmatrix.builder.sdkwheels import SdkWheels
from torch_buildmatrix.builder.smoke import private_temp, pytest_args, smoke_env, stage_tests
from torch_buildmatrix.builder.steps import StepRecorder
from torch_buildmatrix.builder.toolenv import build_requirements, compile_env, find_uv, torch_constraints
from torch_buildmatrix.builder.wheelcheck import check_installed, provided_symbols
from torch_buildmatrix.errors import InterpreterNotFound, StepFailed
from torch_buildmatrix.model.matrix import SdkVersion
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.util.process import run_logged
from torch_buildmatrix.vocab import CPU_VARIANT, RunnerName, Step

TORCH_FACTS = (
    "import json, sys, torch; print('TORCH-FACTS ' + json.dumps({'version': torch.__version__, "
    "'cuda': torch.version.cuda, 'cxx11_abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI), "
    "'python': '%d.%d.%d' % sys.version_info[:3]}))"
)


class LocalRunner:
    name = RunnerName.LOCAL
    python_step: ClassVar[Step] = Step.INTERPRETER
    build_modules: ClassVar[tuple[str, ...]] = (__name__,)

    def __init__(self, search_path: str | None = None, pyenv_root: Path | str | None = "auto") -> None:
        """search_path and pyenv_root narrow interpreter discovery (default: PATH and the user's pyenv)."""
        self._search_path = search_path
        self._pyenv_root = pyenv_root
        self._interpreters: dict[str, Interpreter | InterpreterNotFound] = {}  # found, or why not, per Python
        self._sdk_wheels: SdkWheels | None = None
        self._sdk_guard = threading.Lock()

    def interpreter(self, python: Python) -> Interpreter:
        """The interpreter of a Python, looked up once (a miss too); raises InterpreterNotFound."""
        if str(python) not in self._interpreters:
            self._resolve_pyenv()
            self._find(python)
        found = self._interpreters[str(python)]
        if isinstance(found, InterpreterNotFound):
            raise InterpreterNotFound(str(found))
        return found

    def look_up(self, pythons: Iterable[Python]) -> None:
        """Look the Pythons' interpreters up at once: each probe is a process, and a run plans every Python's."""
        self._resolve_pyenv()
        todo = sorted({p for p in pythons if str(p) not in self._interpreters}, key=str)
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(todo)))) as pool:
            list(pool.map(self._find, todo))

    def _find(self, python: Python) -> None:
        try:
            self._interpreters[str(python)] = find_interpreter(python, self._search_path, self._pyenv_root)
        except InterpreterNotFound as exc:
            self._interpreters[str(python)] = exc

    def _resolve_pyenv(self) -> None:
        if self._pyenv_root == "auto":  # once per runner, not once per Python: `pyenv root` is a process
            self._pyenv_root = pyenv_root()

    def sweep(self, owner: str) -> int:
        """Nothing of a local cell lives outside its process tree."""
        return 0

    def python_identity(self, python: Python) -> str:
        """The interpreter's minor and ABI (cpython-3.11, cpython-3.13t): not its path or patch release, which differ
        between machines and between pyenv and the system's Python without changing what a build makes."""
        return f"cpython-{self.interpreter(python).python}"

    def _sdk_wheel(self, job: BuildJob, uv: str, log: Path) -> Path | None:
        """The build's SDK wheel, built once per version (a wheel SDK only; None for a system SDK or none)."""
        sdk = job.matrix.sdk
        if sdk is None or not sdk.builds_wheel or job.build.sdk is None:
            return None
        with self._sdk_guard:  # --jobs N: one cache object, so its per-version locks are shared by all cells
            if self._sdk_wheels is None:
                # "driver-wheels": the cache's directory name from before the SDK was general; kept, so caches stay
                self._sdk_wheels = SdkWheels(
                    sdk,
                    job.workspace.cache_dir / "driver-wheels",
                    uv,
                    timeout=job.matrix.timeouts["sdk"],
                    generated=job.matrix.contract.build.generated,
                )
        return self._sdk_wheels.wheel(job.build.sdk, log, force=job.force)

    def build(self, job: BuildJob, steps: StepRecorder, output: BuildOutput) -> None:
        """The build's steps as every runner runs them (sequence.run_build), on this machine."""
        run_build(self, job, steps, output)

    def provide_python(self, python: Python, sdk: SdkVersion | None, job: BuildJob | CellJob) -> str:
        """This machine's interpreter of the Python (PATH, pyenv); raises InterpreterNotFound."""
        return str(self.interpreter(python).executable)

    def sdk_wheel(self, job: BuildJob, where: str) -> Path | None:
        return self._sdk_wheel(job, find_uv(), job.log_file)

    def build_env(self, job: BuildJob, where: str, sdk_wheel: Path | None) -> dict[str, Any]:
        """A uv environment of the build's interpreter with its torch, the SDK wheel and the build requirements."""
        uv, log, build_env = find_uv(), job.log_file, job.workdir / "build-env"
        run_logged(
            "build-env",
            [uv, "venv", "--quiet", "--python", where, build_env],
            log,
            timeout=job.matrix.timeouts["build-env"],
        )
        run_logged(
            "build-env",
            [
                uv,
                "pip",
                "install",
                "--python",
                _python(build_env),
                *_torch_sources(job.find_links, job.index_urls),
                *_constraints(job.build.release.version, job.workdir),
                f"torch=={job.build.release.requirement_version}",
                *([str(sdk_wheel)] if sdk_wheel is not None else []),
                *build_requirements(job.matrix),
            ],
            log,
            timeout=job.matrix.timeouts["build-env"],
        )
        return _torch_facts(_python(build_env), log)

    def build_wheel(self, job: BuildJob, where: str) -> Path:
        """uv build without isolation in the build environment, with the build's environment variables only."""
        dist = job.workdir / "dist"
        environment = build_environment(
            os.environ,
            compile_env(job.workdir, job.compilers, parallel_extensions=job.matrix.contract.build.parallel_extensions),
            job.build_env,
            hide_cuda=job.build.release.variant == CPU_VARIANT,
            shadow_root=job.workdir / "path-without-nvcc",
        )
        log_notes(job.log_file, environment.notes)
        run_logged(
            "build",
            [
                find_uv(),
                "build",
                "--wheel",
                "--no-build-isolation",
                "--python",
                _python(job.workdir / "build-env"),
                "--out-dir",
                dist,
                job.plugin_tree,
            ],
            job.log_file,
            env=environment.env,
            inherit=False,  # the whole environment: what the CPU variant's build must not see is left out
            timeout=job.matrix.timeouts["build"],
        )
        return the_one_wheel(dist)

    def provided_symbols(self, job: BuildJob) -> set[str]:
        """What torch's libraries and the SDK's define: a wheel SDK as installed in the cell's build environment, a
        system SDK in its declared library directories."""
        site = site_packages(job.workdir / "build-env", "check")  # asked for by the engine's check step
        sdk, sdk_libs = job.matrix.sdk, []
        if sdk is not None and sdk.builds_wheel:
            sdk_libs = sorted({p.parent for p in (site / _package(sdk.distribution)).rglob("*.so*")})
        elif sdk is not None:
            sdk_libs = [Path(d) for d in sdk.library_dirs]
        return provided_symbols([site / "torch" / "lib", *sdk_libs])

    def prepare_smoke(self, job: CellJob, steps: StepRecorder) -> None:
        """The cell's steps before its smoke run as every runner runs them (sequence.prepare_cell)."""
        prepare_cell(self, job, steps)

    def smoke_env(self, job: CellJob, where: str) -> None:
        """A clean environment with the cell's torch and its build's wheels only (plugin, and a wheel SDK's), as a
        user installs them."""
        uv, log = find_uv(), job.log_file
        smoke_env = job.workdir / "smoke-env"
        if smoke_env.exists():
            shutil.rmtree(smoke_env)
        run_logged(
            "smoke-env",
            [uv, "venv", "--quiet", "--python", where, smoke_env],
            log,
            timeout=job.matrix.timeouts["smoke-env"],
        )
        run_logged(
            "smoke-env",
            [
                uv,
                "pip",
                "install",
                "--python",
                _python(smoke_env),
                *_torch_sources(job.find_links, job.index_urls),
                *_constraints(job.cell.torch.version, job.workdir),
                f"torch=={job.cell.torch.requirement_version}",
                str(job.plugin_wheel),
                *([str(job.sdk_wheel)] if job.sdk_wheel is not None else []),
                *job.matrix.contract.smoke.requirements_for(job.cell.torch.version, job.cell.python),
            ],
            log,
            timeout=job.matrix.timeouts["smoke-env"],
        )
        check_installed(
            site_packages(smoke_env, "smoke-env"),
            job.cell.torch.requirement_version,
            job.matrix.plugin.distribution,
            job.plugin_wheel,
        )

    def run_smoke(self, job: CellJob) -> SmokeRun:
        run_dir = job.workdir / job.run_name
        run_dir.mkdir(parents=True, exist_ok=True)
        tests = stage_tests(job.smoke_tests, run_dir)
        junit, features = run_dir / "junit.xml", run_dir / "features.json"
        try:
            with private_temp() as temp_env:
                run_logged(
                    "smoke",
                    [
                        _python(job.workdir / "smoke-env"),
                        *pytest_args(tests, junit, features, job.matrix.contract.smoke, job.tier),
                    ],
                    job.log_file,
                    cwd=run_dir,
                    env={**temp_env, **smoke_env(job.matrix.contract.smoke)},
                    timeout=job.matrix.timeouts["smoke"],
                )
        except StepFailed as exc:
            return SmokeRun(junit, features, exc)
        return SmokeRun(junit, features)


def _constraints(torch: Version, workdir: Path) -> list[str]:
    """--constraint FILE with what this torch cannot work with (toolenv.torch_constraints), when anything."""
    lines = torch_constraints(torch)
    if not lines:
        return []
    path = workdir / "constraints.txt"
    path.write_text("".join(f"{line}\n" for line in lines))
    return ["--constraint", str(path)]


def _torch_sources(find_links: tuple[str, ...], index_urls: tuple[str, ...]) -> list[str]:
    """Where uv finds the torch beyond the registry."""
    links = [arg for location in find_links for arg in ("--find-links", location)]
    # uv's default first-index strategy takes torch from the first index that has it: the extra one, never a
    # look-alike on the registry.
    return links + [arg for url in index_urls for arg in ("--extra-index-url", url)]


def _python(env: Path) -> Path:
    return env / "bin" / "python"


def _package(distribution: str) -> str:
    return distribution.replace("-", "_").replace(".", "_")


def _torch_facts(python: Path, log: Path) -> dict[str, object]:
    tail = run_logged("build-env", [python, "-c", TORCH_FACTS], log, timeout=600)
    for line in tail.splitlines():
        if line.startswith("TORCH-FACTS "):
            facts: dict[str, object] = json.loads(line.removeprefix("TORCH-FACTS "))
            return facts
    raise StepFailed("build-env", "could not read the installed torch's build facts")
