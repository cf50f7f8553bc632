"""The local runner: isolated uv environments on this machine, one for building and a clean one for smoke tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from buildmatrix.builder.drivers import DriverWheels
from buildmatrix.builder.interpreters import Interpreter, find_interpreter
from buildmatrix.builder.runners.base import CellJob, RunnerOutput
from buildmatrix.builder.smoke import pytest_args, read_features, read_junit, stage_tests
from buildmatrix.builder.steps import StepRecorder
from buildmatrix.builder.toolenv import build_tools, compile_env, find_uv, smoke_tools
from buildmatrix.builder.wheelcheck import check_plugin_wheel, unresolved_symbols
from buildmatrix.errors import StepFailed
from buildmatrix.model.cells import Cell
from buildmatrix.model.vocab import FailureClass, RunnerName
from buildmatrix.util.process import run_logged

TORCH_FACTS = (
    "import json, sys, torch; print('TORCH-FACTS ' + json.dumps({'version': torch.__version__, "
    "'cuda': torch.version.cuda, 'cxx11_abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI), "
    "'python': '%d.%d.%d' % sys.version_info[:3]}))"
)


class LocalRunner:
    name = RunnerName.LOCAL

    def __init__(self, search_path: str | None = None, pyenv_root: Path | str | None = "auto") -> None:
        """search_path and pyenv_root narrow interpreter discovery (default: PATH and the user's pyenv)."""
        self._search_path = search_path
        self._pyenv_root = pyenv_root
        self._interpreters: dict[str, Interpreter] = {}
        self._driver_wheels: DriverWheels | None = None

    def interpreter(self, cell: Cell) -> Interpreter:
        key = str(cell.python)
        if key not in self._interpreters:
            self._interpreters[key] = find_interpreter(cell.python, self._search_path, self._pyenv_root)
        return self._interpreters[key]

    def sweep(self, owner: str) -> int:
        """Nothing of a local cell lives outside its process tree."""
        return 0

    def python_identity(self, cell: Cell) -> str:
        found = self.interpreter(cell)
        return f"cpython-{found.version}"

    def _drivers(self, job: CellJob, uv: str) -> DriverWheels:
        if self._driver_wheels is None:
            self._driver_wheels = DriverWheels(
                job.matrix.driver_source,
                job.matrix.driver_distribution,
                job.workspace.cache_dir / "driver-wheels",
                uv,
                timeout=job.matrix.timeouts["driver"],
            )
        return self._driver_wheels

    def run(self, job: CellJob, steps: StepRecorder, output: RunnerOutput) -> None:
        uv = find_uv()
        cell = job.cell
        log = job.log_file
        torch_req = f"torch=={cell.torch.requirement_version}"
        links: list[str] = [arg for location in job.find_links for arg in ("--find-links", location)]
        # uv's default first-index strategy takes torch from the first index that has it: the extra one, never a
        # look-alike on the registry.
        links += [arg for url in job.index_urls for arg in ("--extra-index-url", url)]

        with steps.step("interpreter"):
            interpreter = self.interpreter(cell)
        with steps.step("driver"):
            output.driver_wheel = self._drivers(job, uv).wheel(cell.driver, log, force=job.force)
        driver_wheel = output.driver_wheel

        build_env = job.workdir / "build-env"
        with steps.step("build-env"):
            run_logged(
                "build-env",
                [uv, "venv", "--quiet", "--python", interpreter.executable, build_env],
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
                    *links,
                    torch_req,
                    str(driver_wheel),
                    *build_tools(cell.torch.version),
                ],
                log,
                timeout=job.matrix.timeouts["build-env"],
            )
            output.torch_build = _torch_facts(_python(build_env), log)

        dist = job.workdir / "dist"
        with steps.step("build"):
            run_logged(
                "build",
                [
                    uv,
                    "build",
                    "--wheel",
                    "--no-build-isolation",
                    "--python",
                    _python(build_env),
                    "--out-dir",
                    dist,
                    job.plugin_tree,
                ],
                log,
                env=compile_env(job.workdir),
                timeout=job.matrix.timeouts["build"],
            )
            wheels = sorted(dist.glob("*.whl"))
            if len(wheels) != 1:
                raise StepFailed("build", f"expected one wheel in {dist}, found {[w.name for w in wheels]}")
            output.plugin_wheel = wheels[0]

        with steps.step("check"):
            facts = check_plugin_wheel(
                wheels[0],
                cell,
                job.matrix.plugin.distribution,
                job.matrix.driver_distribution,
                plugin_version=job.matrix.plugin.version,
            )
            site = _site_packages(build_env)
            driver_libs = sorted({p.parent for p in (site / _package(job.matrix.driver_distribution)).rglob("*.so*")})
            missing = unresolved_symbols(wheels[0], [site / "torch" / "lib", *driver_libs])
            if missing:
                shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
                raise StepFailed(
                    "check",
                    f"{len(missing)} symbol(s) not provided by torch {output.torch_build.get('version')}: {shown}",
                )
            output.variants_claimed = [cell.torch.variant]
            output.torch_build["built_with"] = facts

        smoke_env = job.workdir / "smoke-env"
        with steps.step("smoke-env"):
            if smoke_env.exists():
                shutil.rmtree(smoke_env)
            run_logged(
                "smoke-env",
                [uv, "venv", "--quiet", "--python", interpreter.executable, smoke_env],
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
                    *links,
                    torch_req,
                    str(wheels[0]),
                    str(driver_wheel),
                    *smoke_tools(cell.torch.version),
                ],
                log,
                timeout=job.matrix.timeouts["smoke-env"],
            )

        with steps.step("smoke"):
            run_dir = job.workdir / "smoke"
            run_dir.mkdir(parents=True, exist_ok=True)
            tests = stage_tests(job.smoke_tests, run_dir)
            junit, features = run_dir / "junit.xml", run_dir / "features.json"
            failure: StepFailed | None = None
            try:
                run_logged(
                    "smoke",
                    [_python(smoke_env), *pytest_args(tests, junit, features)],
                    log,
                    cwd=run_dir,
                    timeout=job.matrix.timeouts["smoke"],
                )
            except StepFailed as exc:
                failure = exc
            output.smoke = read_junit(junit)
            output.features = read_features(features)
            if failure is not None and failure.failure_class == FailureClass.TRANSIENT:
                raise failure  # a timeout, a signal, a stop: the counts so far say nothing about the plugin
            if failure is not None:
                counts = output.smoke
                raise StepFailed(
                    "smoke", f"{counts.failed} failed, {counts.errors} errors, {counts.passed} passed", failure.log_tail
                )


def _python(env: Path) -> Path:
    return env / "bin" / "python"


def _site_packages(env: Path) -> Path:
    found = sorted((env / "lib").glob("python3.*/site-packages"))
    if not found:
        raise StepFailed("check", f"no site-packages in {env}")
    return found[0]


def _package(distribution: str) -> str:
    return distribution.replace("-", "_")


def _torch_facts(python: Path, log: Path) -> dict[str, object]:
    tail = run_logged("build-env", [python, "-c", TORCH_FACTS], log, timeout=600)
    for line in tail.splitlines():
        if line.startswith("TORCH-FACTS "):
            facts: dict[str, object] = json.loads(line.removeprefix("TORCH-FACTS "))
            return facts
    raise StepFailed("build-env", "could not read the installed torch's build facts")
