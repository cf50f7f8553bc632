"""Chooses the runner of each cell (auto: local where an interpreter is found, Docker where only an image serves it)."""

from __future__ import annotations

import logging
import os
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from torch_buildmatrix.builder.runners.base import CellRunners, Runner
from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.docker import oci
from torch_buildmatrix.docker.arch import machine_architecture
from torch_buildmatrix.errors import EngineUnavailable, InterpreterNotFound
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.model.matrix import BuildImage, Matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerChoice:
    """The runner one cell gets and why ("local: /usr/bin/python3.13"); runner None: no runner can build it."""

    runner: RunnerName | None
    reason: str

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class RunnerPlan:
    """Which runner builds each cell of a run, and why; problems are the cells no runner can build."""

    asked: RunnerName
    choices: Mapping[str, RunnerChoice]  # by cell id
    by_python: Mapping[Python, RunnerChoice]  # every Python of the run: its cells' and its builds'

    problems: tuple[str, ...] = ()  # one per Python, e.g. "no interpreter for 3.14: build it with --runner docker ..."
    local: LocalRunner = field(default_factory=LocalRunner, compare=False)  # the interpreters it found, for the run

    def choice(self, cell: Cell) -> RunnerChoice:
        return self.choices[cell.id]

    def choice_for(self, python: Python) -> RunnerChoice:
        """The runner of a Python (a build's): the one its cells get."""
        return self.by_python[python]

    @property
    def runners(self) -> tuple[RunnerName, ...]:
        """The runners the plan uses, local first."""
        used = {c.runner for c in self.by_python.values() if c.runner is not None}
        return tuple(name for name in (RunnerName.LOCAL, RunnerName.DOCKER) if name in used)

    def check(self) -> None:
        """Raise InterpreterNotFound (exit code 4) naming every Python no runner can build; before anything is
        written, so such a cell is never silently dropped nor half built."""
        if self.problems:
            raise InterpreterNotFound("; ".join(self.problems))


def serving_image(python: Python, matrix: Matrix) -> BuildImage | None:
    """The first image of matrix.yaml that lists the Python (the Docker runner builds it there)."""
    return next((image for image in matrix.images if python in image.python), None)


def _images(matrix: Matrix) -> str:
    listed = ", ".join(f"{i.name} ({', '.join(str(v) for v in i.python)})" for i in matrix.images)
    return f"images: {listed}" if listed else f"no images in {matrix.path.name}"


def _choose(python: Python, asked: RunnerName, matrix: Matrix, local: LocalRunner) -> RunnerChoice:
    """The runner for every build and cell of a Python: what was asked, else where an interpreter or an image is."""
    image = serving_image(python, matrix)
    if asked == RunnerName.DOCKER:
        if image is None:
            return RunnerChoice(
                None, f"no image serves Python {python} ({_images(matrix)}): add it to an image's python list"
            )
        return RunnerChoice(RunnerName.DOCKER, f"docker: asked for; image {image.name} serves {python}")
    try:
        found = local.interpreter(python)
    except InterpreterNotFound as exc:
        if image is not None and asked == RunnerName.LOCAL:
            return RunnerChoice(
                None, f"no interpreter for {python}: build it with --runner docker (image {image.name} serves it)"
            )
        if image is not None:
            return RunnerChoice(RunnerName.DOCKER, f"docker: no local {python}; image {image.name} serves it")
        return RunnerChoice(None, f"{exc}; and no image serves Python {python} ({_images(matrix)})")
    return RunnerChoice(RunnerName.LOCAL, f"local: {found.executable}")


def plan_runners(
    cells: Iterable[Cell],
    matrix: Matrix,
    asked: RunnerName,
    local: LocalRunner,
    build_pythons: Iterable[Python] = (),
) -> RunnerPlan:
    """Each cell's runner and why, and each Python's (build_pythons: the Pythons the cells' builds run on); local
    interpreters are looked up once per Python (through `local`, which the run then uses, so the plan and the run see
    the same interpreter). Writes nothing; never raises for a cell."""
    by_python: dict[Python, RunnerChoice] = {}
    choices = {}
    cells, build_pythons = list(cells), list(build_pythons)
    if asked != RunnerName.DOCKER:
        local.look_up([*(c.python for c in cells), *build_pythons])
    for python in [*(c.python for c in cells), *build_pythons]:
        if python not in by_python:
            by_python[python] = _choose(python, asked, matrix, local)
    for cell in cells:
        choices[cell.id] = by_python[cell.python]
    problems = tuple(c.reason for c in by_python.values() if c.runner is None)
    return RunnerPlan(asked, choices, by_python, problems, local)


def runners_for(plan: RunnerPlan, matrix: Matrix) -> tuple[dict[RunnerName, Runner], str]:
    """The runners the plan needs, ready to build, and a line saying so; raises UserError (InterpreterNotFound,
    EngineUnavailable) before any cell starts when the plan cannot be carried out."""
    docker = _docker(plan, matrix) if plan.asked == RunnerName.DOCKER else None  # asked for: the engine first
    plan.check()
    if docker is None and RunnerName.DOCKER in plan.runners:
        docker = _docker(plan, matrix)
    runners: dict[RunnerName, Runner] = {}
    notes = []
    if RunnerName.LOCAL in plan.runners:
        runners[RunnerName.LOCAL] = plan.local
        notes.append("local runner")
    if docker is not None and RunnerName.DOCKER in plan.runners:
        runners[RunnerName.DOCKER] = docker[0]
        notes.append(docker[1])
    return runners, " and ".join(notes)


# The command a not-built cell's record gives: it makes an engine answer where one can be started (Debian, as root).
# This very interpreter, by its path: on a fresh machine the tool is installed in a virtual environment (the nox
# session's, the README's main command), never in the system python3 that `sudo python3` would run.
ENGINE_COMMAND = f"sudo {shlex.quote(sys.executable)} -m torch_buildmatrix engine"


@dataclass(frozen=True)
class RunRunners:
    """The runners a run builds with, a line saying so, and the Pythons it leaves unbuilt (no Docker engine answers
    and none could be started here), each with the reason its cells' records give."""

    runners: Mapping[RunnerName, Runner]
    why: str
    unbuilt: Mapping[Python, str] = field(default_factory=dict)
    engine_actions: tuple[str, ...] = ()  # what was done to start an engine (installed, started dockerd)

    def cell_runners(self, plan: RunnerPlan) -> CellRunners:
        """Each Python's runner for the engine (the Pythons left unbuilt have none)."""
        by_python = {p: self.runners[r] for p, c in plan.by_python.items() if (r := c.runner) and r in self.runners}
        return CellRunners(next(iter(self.runners.values())), by_python)


def runners_or_unbuilt(plan: RunnerPlan, matrix: Matrix, engine_log: Path) -> RunRunners:
    """runners_for, but under runner auto a missing Docker engine stops no cell that can build locally: the engine is
    started where that is possible (as `torch-buildmatrix engine` does: Debian, as root, no DOCKER_HOST elsewhere), and
    where it is not, the Pythons only an image serves are left unbuilt, each with the command that starts one.
    --runner docker still refuses before anything is written (EngineUnavailable)."""
    if plan.asked == RunnerName.DOCKER or RunnerName.DOCKER not in plan.runners:
        runners, why = runners_for(plan, matrix)
        return RunRunners(runners, why)
    plan.check()
    problem = oci.engine_problem()
    actions: tuple[str, ...] = ()
    if problem:
        from torch_buildmatrix.docker.engine import ensure_engine

        try:
            actions = tuple(ensure_engine(engine_log).actions)
        except EngineUnavailable as exc:
            return _without_docker(plan, problem, str(exc))
    runners, why = runners_for(plan, matrix)
    return RunRunners(runners, why, engine_actions=actions)


def _without_docker(plan: RunnerPlan, problem: str, not_started: str) -> RunRunners:
    where = os.environ.get("DOCKER_HOST", "the default socket")
    unbuilt = {
        python: (
            f"not built: {choice.reason}, but no Docker engine answers `docker info` at {where}: {problem}; "
            f"none could be started here: {not_started}. Start one with `{ENGINE_COMMAND}` (Debian), or start "
            "Docker your own way, then run the build again"
        )
        for python, choice in plan.by_python.items()
        if choice.runner == RunnerName.DOCKER
    }
    runners: dict[RunnerName, Runner] = {}
    why = "no runner"
    if RunnerName.LOCAL in plan.runners:
        runners[RunnerName.LOCAL] = plan.local
        why = "local runner"
    return RunRunners(runners, f"{why}; no Docker engine: {len(unbuilt)} Python(s) left unbuilt", unbuilt)


def _docker(plan: RunnerPlan, matrix: Matrix) -> tuple[Runner, str]:
    from torch_buildmatrix.builder.runners.docker import DockerRunner

    architecture = machine_architecture()  # raises UnsupportedArchitecture: no image serves this machine
    problem = oci.engine_problem()
    if problem and plan.asked == RunnerName.DOCKER:
        raise _no_engine("--runner docker", problem, "or use --runner local")
    if problem:
        wanted = "; ".join(sorted({c.reason for c in plan.by_python.values() if c.runner == RunnerName.DOCKER}))
        raise _no_engine(wanted, problem, "or leave those Pythons out (--python)")
    asked = "asked for; " if plan.asked == RunnerName.DOCKER else ""
    runner = DockerRunner(matrix, architecture=architecture)
    return runner, f"docker runner ({asked}engine {oci.server_version()}, {architecture.platform})"


def _no_engine(what: str, problem: str, otherwise: str) -> EngineUnavailable:
    where = os.environ.get("DOCKER_HOST", "the default socket")
    return EngineUnavailable(
        f"{what}, but no Docker engine answers `docker info` at {where}: {problem}. "
        f"Start one with `{ENGINE_COMMAND}` (Debian), {otherwise}"
    )


def runner_for_cell(cell: Cell, matrix: Matrix, asked: RunnerName) -> tuple[Runner, str]:
    """One cell's runner, chosen as a build chooses it (probe, outdated), and why; raises UserError like runners_for."""
    plan = plan_runners([cell], matrix, asked, LocalRunner())
    runners, _ = runners_for(plan, matrix)
    choice = plan.choice(cell)
    assert choice.runner is not None  # runners_for refused a cell without one
    return runners[choice.runner], choice.reason
